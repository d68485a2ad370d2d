// RUN: loom-opt %s --split-input-file --loom-expand-arith-for-cpu | FileCheck %s

// --loom-expand-arith-for-cpu: what LLVM cannot lower expands (bf16
// conversions into integer arithmetic, ceiling and floor divisions into
// plain ones); max and min stay, for arith-to-llvm to make intrinsics whose
// reductions LLVM vectorizes (upstream's arith-expand turns them into
// compares and selects).

// CHECK-LABEL: func.func @max_and_min_stay
// CHECK: arith.maxnumf
// CHECK: arith.maximumf
// CHECK: arith.minnumf
// CHECK: arith.minimumf
// CHECK-NOT: arith.select
// CHECK-NOT: arith.cmpf
func.func @max_and_min_stay(%a: f32, %b: f32) -> (f32, f32, f32, f32) {
  %0 = arith.maxnumf %a, %b : f32
  %1 = arith.maximumf %a, %b : f32
  %2 = arith.minnumf %a, %b : f32
  %3 = arith.minimumf %a, %b : f32
  return %0, %1, %2, %3 : f32, f32, f32, f32
}

// -----

// bf16 widening is a shift of the bits; narrowing rounds to nearest even
// in integer arithmetic (no soft-float call).
// CHECK-LABEL: func.func @bf16_conversions
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.truncf
// CHECK: arith.bitcast %{{.+}} : bf16 to i16
// CHECK: arith.extui %{{.+}} : i16 to i32
// CHECK: arith.shli
// CHECK: arith.bitcast %{{.+}} : i32 to f32
// CHECK: arith.bitcast %{{.+}} : f32 to i32
// CHECK: arith.shrui
// CHECK: arith.trunci %{{.+}} : i32 to i16
// CHECK: arith.bitcast %{{.+}} : i16 to bf16
func.func @bf16_conversions(%x: bf16, %y: f32) -> (f32, bf16) {
  %0 = arith.extf %x : bf16 to f32
  %1 = arith.truncf %y : f32 to bf16
  return %0, %1 : f32, bf16
}

// -----

// CHECK-LABEL: func.func @divisions
// CHECK-NOT: arith.ceildivsi
// CHECK-NOT: arith.floordivsi
// CHECK: arith.divsi
func.func @divisions(%a: index, %b: index) -> (index, index) {
  %0 = arith.ceildivsi %a, %b : index
  %1 = arith.floordivsi %a, %b : index
  return %0, %1 : index, index
}
