// RUN: loom-opt %s --split-input-file --convert-loom-to-linalg --mlir-print-local-scope | FileCheck %s

// --convert-loom-to-linalg, loom.dropout: a keyed one is a linalg.generic
// reading the input, each dim's positions along that dim and the two keys;
// its body chains lowbias32 over the seed plus the stream's multiple of
// 0x9e3779b9, the microbatch and each position, keeps an element where
// the top 24 bits over 2^24 are >= p, and multiplies the input by
// 1 / (1 - p) or 0 (or 1 for a microbatch below 0). Without keys it is
// the input.

// CHECK-LABEL: func.func @keyed
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK: ^bb0(%[[X:.+]]: bf16, %[[R:.+]]: i32, %[[C:.+]]: i32, %[[SEED:.+]]: f32, %[[MB:.+]]: f32, %{{.+}}: bf16):
// CHECK: arith.extf %[[X]] : bf16 to f32
// CHECK: %[[BITS:.+]] = arith.bitcast %[[SEED]] : f32 to i32
// CHECK: arith.addi %[[BITS]], %{{.+}} : i32
// CHECK: arith.constant 2146121005 : i32
// CHECK: arith.muli
// CHECK: arith.fptosi %[[MB]] : f32 to i32
// CHECK: arith.addi %{{.+}}, %[[R]] : i32
// CHECK: arith.addi %{{.+}}, %[[C]] : i32
// CHECK: arith.uitofp
// CHECK: arith.cmpf oge, %{{.+}}, %{{.+}} : f32
// CHECK: arith.constant 1.33333337 : f32
// CHECK: arith.cmpi sge
// CHECK: %[[Y:.+]] = arith.mulf
// CHECK: arith.truncf %[[Y]] : f32 to bf16
func.func @keyed(%x: tensor<2x4xbf16>, %r: tensor<2xi32>, %c: tensor<4xi32>, %s: tensor<f32>, %m: tensor<f32>) -> tensor<2x4xbf16> {
  %0 = loom.dropout %x positions(%r, %c) keys(%s, %m) {probability = 0.25 : f64, stream = 1 : i64} : (tensor<2x4xbf16>, tensor<2xi32>, tensor<4xi32>, tensor<f32>, tensor<f32>) -> tensor<2x4xbf16>
  return %0 : tensor<2x4xbf16>
}

// -----

// CHECK-LABEL: func.func @keyless
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>
// CHECK-NEXT: return %[[X]]
func.func @keyless(%x: tensor<4xf32>, %r: tensor<4xi32>) -> tensor<4xf32> {
  %0 = loom.dropout %x positions(%r) {probability = 0.25 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
