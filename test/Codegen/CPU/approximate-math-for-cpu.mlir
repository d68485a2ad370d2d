// RUN: loom-opt %s --split-input-file --loom-approximate-math-for-cpu | FileCheck %s

// exp (a softmax's, a GELU's) becomes a polynomial: range reduction, fused
// multiply-adds and the exponent put back by bit casts; no call remains.
// CHECK-LABEL: func.func @exp
// CHECK-NOT: math.exp
// CHECK: math.fma
// CHECK: arith.bitcast
// CHECK-NOT: math.exp
// CHECK: return
func.func @exp(%x: f32) -> f32 {
  %y = math.exp %x : f32
  return %y : f32
}

// -----

// log (a cross-entropy's) and tanh too.
// CHECK-LABEL: func.func @log_tanh
// CHECK-NOT: math.log
// CHECK-NOT: math.tanh
// CHECK: return
func.func @log_tanh(%x: f32) -> (f32, f32) {
  %l = math.log %x : f32
  %t = math.tanh %x : f32
  return %l, %t : f32, f32
}

// -----

// A 16-bit operand is widened to f32 around the approximation and rounded
// back once.
// CHECK-LABEL: func.func @erf_bf16
// CHECK: arith.extf %{{.+}} : bf16 to f32
// CHECK-NOT: math.erf
// CHECK: arith.truncf %{{.+}} : f32 to bf16
func.func @erf_bf16(%x: bf16) -> bf16 {
  %y = math.erf %x : bf16
  return %y : bf16
}

// -----

// sqrt has an instruction of its own: it stays.
// CHECK-LABEL: func.func @sqrt
// CHECK: math.sqrt
func.func @sqrt(%x: f32) -> f32 {
  %y = math.sqrt %x : f32
  return %y : f32
}

// -----

// sin and cos stay libm calls: upstream's polynomial reduces the argument
// by one f32 multiple of pi/2, which loses the accuracy of a rotary
// embedding's angles of thousands of radians.
// CHECK-LABEL: func.func @sin_cos
// CHECK: math.sin
// CHECK: math.cos
func.func @sin_cos(%x: f32) -> (f32, f32) {
  %s = math.sin %x : f32
  %c = math.cos %x : f32
  return %s, %c : f32, f32
}
