// RUN: loom-opt %s --split-input-file --convert-loom-to-linalg --mlir-print-local-scope | FileCheck %s

// --convert-loom-to-linalg, elementwise ops: constants, the four binary
// ops with broadcasting, the unary ops and casts. Each becomes one
// linalg.generic over the result shape, all loops parallel; an operand
// broadcast along a size-1 dimension reads index 0 there, a missing leading
// dimension is dropped from its map. The body widens 16-bit floats to f32,
// computes in f32 and rounds once (arith.truncf) to a 16-bit result.

// CHECK-LABEL: func.func @constants
// CHECK-NEXT: [[B:%.+]] = arith.constant dense<1.250000e-01> : tensor<bf16>
// CHECK-NEXT: [[I:%.+]] = arith.constant dense<3> : tensor<i32>
// CHECK-NEXT: [[F:%.+]] = arith.constant dense<-2.500000e+00> : tensor<f32>
// CHECK-NEXT: return [[B]], [[I]], [[F]]
func.func @constants() -> (tensor<bf16>, tensor<i32>, tensor<f32>) {
  %0 = loom.constant 0.125 : tensor<bf16>
  %1 = loom.constant 3.0 : tensor<i32>
  %2 = loom.constant -2.5 : tensor<f32>
  return %0, %1, %2 : tensor<bf16>, tensor<i32>, tensor<f32>
}

// -----

// bf16 + f32 -> f32: trailing-dimension broadcast of the rank-1 operand;
// only the bf16 operand is widened and nothing is rounded.
// CHECK-LABEL: func.func @add_row
// CHECK-SAME: (%[[A:[^:]+]]: tensor<4x8xbf16>, %[[B:[^:]+]]: tensor<8xf32>)
// CHECK: [[INIT:%.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: [[R:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<4x8xbf16>, tensor<8xf32>) outs([[INIT]] : tensor<4x8xf32>)
// CHECK-NEXT: ^bb0(%[[IA:[^:]+]]: bf16, %[[IB:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[WA:%.+]] = arith.extf %[[IA]] : bf16 to f32
// CHECK-NEXT: [[S:%.+]] = arith.addf [[WA]], %[[IB]] : f32
// CHECK-NEXT: linalg.yield [[S]] : f32
// CHECK-NEXT: } -> tensor<4x8xf32>
// CHECK-NEXT: return [[R]]
func.func @add_row(%a: tensor<4x8xbf16>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = loom.add %a, %b : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// f16 - f16, both operands broadcast along their size-1 dimension (read
// at index 0); both are widened, and the f32 difference rounded once.
// CHECK-LABEL: func.func @sub_outer
// CHECK-SAME: (%[[C:[^:]+]]: tensor<4x1xf16>, %[[D:[^:]+]]: tensor<1x8xf16>)
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[C]], %[[D]] : tensor<4x1xf16>, tensor<1x8xf16>) outs(%{{.+}} : tensor<4x8xf16>)
// CHECK-NEXT: ^bb0(%[[IC:[^:]+]]: f16, %[[ID:[^:]+]]: f16, %{{[^:]+}}: f16):
// CHECK-NEXT: [[WC:%.+]] = arith.extf %[[IC]] : f16 to f32
// CHECK-NEXT: [[WD:%.+]] = arith.extf %[[ID]] : f16 to f32
// CHECK-NEXT: [[S:%.+]] = arith.subf [[WC]], [[WD]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[S]] : f32 to f16
// CHECK-NEXT: linalg.yield [[T]] : f16
func.func @sub_outer(%c: tensor<4x1xf16>, %d: tensor<1x8xf16>) -> tensor<4x8xf16> {
  %0 = loom.sub %c, %d : (tensor<4x1xf16>, tensor<1x8xf16>) -> tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

// A rank-0 operand is read through the empty map; bf16 * bf16 is computed
// in f32 and rounded once.
// CHECK-LABEL: func.func @mul_scalar
// CHECK-SAME: (%[[S:[^:]+]]: tensor<bf16>, %[[A:[^:]+]]: tensor<4x8xbf16>)
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[S]], %[[A]] : tensor<bf16>, tensor<4x8xbf16>)
// CHECK-NEXT: ^bb0(%[[IS:[^:]+]]: bf16, %[[IA:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[WS:%.+]] = arith.extf %[[IS]] : bf16 to f32
// CHECK-NEXT: [[WA:%.+]] = arith.extf %[[IA]] : bf16 to f32
// CHECK-NEXT: [[P:%.+]] = arith.mulf [[WS]], [[WA]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[P]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
func.func @mul_scalar(%s: tensor<bf16>, %a: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = loom.mul %s, %a : (tensor<bf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// f32 / f32: no conversion at all. A size-1 dimension against a size-1
// result dimension is an ordinary loop index, not a broadcast.
// CHECK-LABEL: func.func @div_f32
// CHECK-SAME: (%[[A:[^:]+]]: tensor<1x8xf32>, %[[B:[^:]+]]: tensor<1x8xf32>, %[[C:[^:]+]]: tensor<3x1x8xf32>)
// CHECK: [[Q:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<1x8xf32>, tensor<1x8xf32>)
// CHECK-NEXT: ^bb0(%[[IA:[^:]+]]: f32, %[[IB:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[D:%.+]] = arith.divf %[[IA]], %[[IB]] : f32
// CHECK-NEXT: linalg.yield [[D]] : f32
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[C]], [[Q]] : tensor<3x1x8xf32>, tensor<1x8xf32>)
// CHECK: arith.divf
func.func @div_f32(%a: tensor<1x8xf32>, %b: tensor<1x8xf32>, %c: tensor<3x1x8xf32>) -> tensor<3x1x8xf32> {
  %0 = loom.div %a, %b : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
  %1 = loom.div %c, %0 : (tensor<3x1x8xf32>, tensor<1x8xf32>) -> tensor<3x1x8xf32>
  return %1 : tensor<3x1x8xf32>
}

// -----

// Unary ops on bf16: identity maps, widen, the f32 formula, one rounding.
// CHECK-LABEL: func.func @neg
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[N:%.+]] = arith.negf [[W]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[N]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
func.func @neg(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = loom.neg %x : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// gelu, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// computed as x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))). A 16-bit
// result takes the approximate exp and division (fastmath<afn>).
// CHECK-LABEL: func.func @gelu
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[X:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[X2:%.+]] = arith.mulf [[X]], [[X]] : f32
// CHECK-NEXT: [[X3:%.+]] = arith.mulf [[X]], [[X2]] : f32
// CHECK-NEXT: [[C1:%.+]] = arith.constant 4.471500e-02 : f32
// CHECK-NEXT: [[T1:%.+]] = arith.mulf [[C1]], [[X3]] : f32
// CHECK-NEXT: [[IN2:%.+]] = arith.addf [[X]], [[T1]] : f32
// CHECK-NEXT: [[C2:%.+]] = arith.constant -1.59576917 : f32
// CHECK-NEXT: [[T2:%.+]] = arith.mulf [[C2]], [[IN2]] : f32
// CHECK-NEXT: [[E:%.+]] = math.exp [[T2]] fastmath<afn> : f32
// CHECK-NEXT: [[ONE:%.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: [[P:%.+]] = arith.addf [[ONE]], [[E]] : f32
// CHECK-NEXT: [[G:%.+]] = arith.divf [[X]], [[P]] fastmath<afn> : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[G]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
func.func @gelu(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = loom.gelu %x : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// An f32 gelu keeps the exact exp and division.
// CHECK-LABEL: func.func @gelu_f32
// CHECK: linalg.generic
// CHECK: [[E:%.+]] = math.exp %{{.+}} : f32
// CHECK: [[G:%.+]] = arith.divf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: linalg.yield [[G]] : f32
func.func @gelu_f32(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.gelu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// relu = max(x, 0).
// CHECK-LABEL: func.func @relu
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f16, %{{[^:]+}}: f16):
// CHECK-NEXT: [[X:%.+]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: [[Z:%.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: [[M:%.+]] = arith.maximumf [[X]], [[Z]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[M]] : f32 to f16
// CHECK-NEXT: linalg.yield [[T]] : f16
func.func @relu(%x: tensor<2x3xf16>) -> tensor<2x3xf16> {
  %0 = loom.relu %x : tensor<2x3xf16>
  return %0 : tensor<2x3xf16>
}

// -----

// silu = x / (1 + exp(-x)); approximate exp and division for bf16.
// CHECK-LABEL: func.func @silu
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[X:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[N:%.+]] = arith.negf [[X]] : f32
// CHECK-NEXT: [[E:%.+]] = math.exp [[N]] fastmath<afn> : f32
// CHECK-NEXT: [[ONE:%.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: [[D:%.+]] = arith.addf [[ONE]], [[E]] : f32
// CHECK-NEXT: [[Q:%.+]] = arith.divf [[X]], [[D]] fastmath<afn> : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[Q]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
func.func @silu(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = loom.silu %x : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// exp, tanh and sqrt map to the math dialect (a 16-bit exp approximate);
// f32 needs no conversion.
// CHECK-LABEL: func.func @math_ops
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[X:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[E:%.+]] = math.exp [[X]] fastmath<afn> : f32
// CHECK-NEXT: arith.truncf [[E]] : f32 to bf16
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[T:%.+]] = math.tanh %[[IN]] : f32
// CHECK-NEXT: linalg.yield [[T]] : f32
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f16, %{{[^:]+}}: f16):
// CHECK-NEXT: [[X:%.+]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: [[S:%.+]] = math.sqrt [[X]] : f32
// CHECK-NEXT: arith.truncf [[S]] : f32 to f16
func.func @math_ops(%a: tensor<4xbf16>, %b: tensor<4xf32>, %c: tensor<4xf16>)
    -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xf16>) {
  %0 = loom.exp %a : tensor<4xbf16>
  %1 = loom.tanh %b : tensor<4xf32>
  %2 = loom.sqrt %c : tensor<4xf16>
  return %0, %1, %2 : tensor<4xbf16>, tensor<4xf32>, tensor<4xf16>
}

// -----

// sin and cos map to math.sin and math.cos in f32, without fast-math
// flags (exact range reduction for large angles).
// CHECK-LABEL: func.func @trig
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[X:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[S:%.+]] = math.sin [[X]] : f32
// CHECK-NEXT: arith.truncf [[S]] : f32 to bf16
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[C:%.+]] = math.cos %[[IN]] : f32
// CHECK-NEXT: linalg.yield [[C]] : f32
func.func @trig(%a: tensor<4xbf16>, %b: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>) {
  %0 = loom.sin %a : tensor<4xbf16>
  %1 = loom.cos %b : tensor<4xf32>
  return %0, %1 : tensor<4xbf16>, tensor<4xf32>
}

// -----

// sigmoid: 1 / (1 + exp(-x)) in f32, rounded once to the operand type; a
// 16-bit one with approximate functions allowed (afn), as gelu and silu.
// CHECK-LABEL: func.func @sigmoid
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[X:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[N:%.+]] = arith.negf [[X]] : f32
// CHECK-NEXT: [[E:%.+]] = math.exp [[N]] fastmath<afn> : f32
// CHECK: [[D:%.+]] = arith.addf %{{.+}}, [[E]] : f32
// CHECK-NEXT: [[S:%.+]] = arith.divf %{{.+}}, [[D]] fastmath<afn> : f32
// CHECK-NEXT: arith.truncf [[S]] : f32 to bf16
// CHECK: linalg.generic
// CHECK: math.exp %{{.+}} : f32
// CHECK-NOT: fastmath
// CHECK: linalg.yield
func.func @sigmoid(%a: tensor<4xbf16>, %b: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>) {
  %0 = loom.sigmoid %a : tensor<4xbf16>
  %1 = loom.sigmoid %b : tensor<4xf32>
  return %0, %1 : tensor<4xbf16>, tensor<4xf32>
}

// -----

// Casts: f32 -> bf16 rounds once (no intermediate type); bf16 -> f16 goes
// through f32 (exact) before its one rounding; ints widen/narrow with sign;
// int <-> float convert directly, a 16-bit float source widened first.
// CHECK-LABEL: func.func @casts
// CHECK: ins(%{{.+}} : tensor<4xf32>) outs(%{{.+}} : tensor<4xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[T:%.+]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
// CHECK: ins(%{{.+}} : tensor<4xbf16>) outs(%{{.+}} : tensor<4xf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: f16):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[W]] : f32 to f16
// CHECK-NEXT: linalg.yield [[T]] : f16
// CHECK: ins(%{{.+}} : tensor<4xbf16>) outs(%{{.+}} : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: linalg.yield [[W]] : f32
// CHECK: ins(%{{.+}} : tensor<4xi32>) outs(%{{.+}} : tensor<4xi64>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: i32, %{{[^:]+}}: i64):
// CHECK-NEXT: [[E:%.+]] = arith.extsi %[[IN]] : i32 to i64
// CHECK-NEXT: linalg.yield [[E]] : i64
// CHECK: ins(%{{.+}} : tensor<4xi64>) outs(%{{.+}} : tensor<4xi32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: i64, %{{[^:]+}}: i32):
// CHECK-NEXT: [[E:%.+]] = arith.trunci %[[IN]] : i64 to i32
// CHECK-NEXT: linalg.yield [[E]] : i32
// CHECK: ins(%{{.+}} : tensor<4xi32>) outs(%{{.+}} : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: i32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[F:%.+]] = arith.sitofp %[[IN]] : i32 to f32
// CHECK-NEXT: linalg.yield [[F]] : f32
// CHECK: ins(%{{.+}} : tensor<4xf16>) outs(%{{.+}} : tensor<4xi64>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f16, %{{[^:]+}}: i64):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : f16 to f32
// A float to an integer saturates at the integer's range, NaN to 0
// (arith.fptosi alone is poison past the range).
// CHECK-NEXT: [[HI:%.+]] = arith.constant 9.22337203E+18 : f32
// CHECK-NEXT: [[LO:%.+]] = arith.constant -9.22337203E+18 : f32
// CHECK-NEXT: [[I:%.+]] = arith.fptosi [[W]] : f32 to i64
// CHECK-NEXT: [[BIG:%.+]] = arith.cmpf oge, [[W]], [[HI]] : f32
// CHECK-NEXT: [[SMALL:%.+]] = arith.cmpf olt, [[W]], [[LO]] : f32
// CHECK-NEXT: [[NAN:%.+]] = arith.cmpf uno, [[W]], [[W]] : f32
// CHECK-NEXT: [[MAX:%.+]] = arith.constant 9223372036854775807 : i64
// CHECK-NEXT: [[S1:%.+]] = arith.select [[BIG]], [[MAX]], [[I]] : i64
// CHECK-NEXT: [[MIN:%.+]] = arith.constant -9223372036854775808 : i64
// CHECK-NEXT: [[S2:%.+]] = arith.select [[SMALL]], [[MIN]], [[S1]] : i64
// CHECK-NEXT: [[ZERO:%.+]] = arith.constant 0 : i64
// CHECK-NEXT: [[S3:%.+]] = arith.select [[NAN]], [[ZERO]], [[S2]] : i64
// CHECK-NEXT: linalg.yield [[S3]] : i64
func.func @casts(%x: tensor<4xf32>, %h: tensor<4xbf16>, %i: tensor<4xi32>,
                 %l: tensor<4xi64>, %f: tensor<4xf16>)
    -> (tensor<4xbf16>, tensor<4xf16>, tensor<4xf32>, tensor<4xi64>,
        tensor<4xi32>, tensor<4xf32>, tensor<4xi64>) {
  %0 = loom.cast %x : tensor<4xf32> to tensor<4xbf16>
  %1 = loom.cast %h : tensor<4xbf16> to tensor<4xf16>
  %2 = loom.cast %h : tensor<4xbf16> to tensor<4xf32>
  %3 = loom.cast %i : tensor<4xi32> to tensor<4xi64>
  %4 = loom.cast %l : tensor<4xi64> to tensor<4xi32>
  %5 = loom.cast %i : tensor<4xi32> to tensor<4xf32>
  %6 = loom.cast %f : tensor<4xf16> to tensor<4xi64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xbf16>, tensor<4xf16>, tensor<4xf32>,
      tensor<4xi64>, tensor<4xi32>, tensor<4xf32>, tensor<4xi64>
}

// -----

// No loom op is left, and the function signature is unchanged.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%{{[^:]+}}: tensor<2x4xbf16>, %{{[^:]+}}: tensor<4xf32>) -> tensor<2x4xbf16>
// CHECK-NOT: loom.
// CHECK: return
func.func @chain(%x: tensor<2x4xbf16>, %b: tensor<4xf32>) -> tensor<2x4xbf16> {
  %c = loom.constant 2.0 : tensor<bf16>
  %0 = loom.mul %x, %c : (tensor<2x4xbf16>, tensor<bf16>) -> tensor<2x4xbf16>
  %1 = loom.add %0, %b : (tensor<2x4xbf16>, tensor<4xf32>) -> tensor<2x4xf32>
  %2 = loom.gelu %1 : tensor<2x4xf32>
  %3 = loom.cast %2 : tensor<2x4xf32> to tensor<2x4xbf16>
  return %3 : tensor<2x4xbf16>
}

// -----

// Structure ops (stages, MoE blocks) are lowered elsewhere: they stay, and
// the ops inside them are converted.
// CHECK-LABEL: func.func @in_stage
// CHECK-NEXT: [[S:%.+]] = loom.stage 0 -> tensor<4xbf16> {
// CHECK-NEXT: tensor.empty() : tensor<4xbf16>
// CHECK-NEXT: [[R:%.+]] = linalg.generic
// CHECK: arith.maximumf
// CHECK: loom.yield [[R]] : tensor<4xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: return [[S]]
func.func @in_stage(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = loom.stage 0 -> tensor<4xbf16> {
    %r = loom.relu %x : tensor<4xbf16>
    loom.yield %r : tensor<4xbf16>
  }
  return %0 : tensor<4xbf16>
}

// -----

// log maps to math.log (approximate for 16-bit types, as exp); max_mask
// (loom.max's gradient) compares with the broadcast maximum.
// CHECK-LABEL: func.func @log_and_max_mask
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[X:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[L:%.+]] = math.log [[X]] fastmath<afn> : f32
// CHECK-NEXT: arith.truncf [[L]] : f32 to bf16
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK: arith.cmpf oeq
// CHECK: arith.select
func.func @log_and_max_mask(%a: tensor<4xbf16>, %x: tensor<4x3xf32>, %m: tensor<4x1xf32>)
    -> (tensor<4xbf16>, tensor<4x3xf32>) {
  %0 = loom.log %a : tensor<4xbf16>
  %1 = loom.max_mask %x, %m : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  return %0, %1 : tensor<4xbf16>, tensor<4x3xf32>
}

// -----

// relu's derivative is 1 but where x <= 0: an unordered comparison, so that
// a NaN input passes its gradient on, as torch's threshold_backward does
// (it had been 0, which hid the NaN from the gradient norm).
// CHECK-LABEL: func.func @relu_grad
// CHECK: linalg.generic
// CHECK: arith.cmpf ugt, %{{.+}}, %{{.+}} : f32
// CHECK: arith.select
func.func @relu_grad(%x: tensor<4xf32>, %dy: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.activation_grad "relu" %x, %dy : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
