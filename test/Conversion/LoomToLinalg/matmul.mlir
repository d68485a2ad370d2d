// RUN: loom-opt %s --split-input-file --convert-loom-to-linalg --mlir-print-local-scope | FileCheck %s

// --convert-loom-to-linalg, loom.matmul: one linalg.generic over
// (batch..., m, n, k), k the only reduction loop, into a zero-filled
// tensor of the `accumulate` type; operands are converted to that type in
// the body. When the result type is narrower, one more elementwise generic
// rounds the accumulator to it (once).

// bf16 operands, f32 accumulation, bf16 result.
// CHECK-LABEL: func.func @mm_bf16
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xbf16>, %[[W:[^:]+]]: tensor<8x16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: [[ZERO:%.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: [[E:%.+]] = tensor.empty() : tensor<4x16xf32>
// CHECK-NEXT: [[ACC:%.+]] = linalg.fill ins([[ZERO]] : f32) outs([[E]] : tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: [[MM:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]], %[[W]] : tensor<4x8xbf16>, tensor<8x16xbf16>) outs([[ACC]] : tensor<4x16xf32>)
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: bf16, %[[B:[^:]+]]: bf16, %[[OUT:[^:]+]]: f32):
// CHECK-NEXT: [[WA:%.+]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: [[WB:%.+]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: [[P:%.+]] = arith.mulf [[WA]], [[WB]] fastmath<contract> : f32
// CHECK-NEXT: [[S:%.+]] = arith.addf %[[OUT]], [[P]] fastmath<contract> : f32
// CHECK-NEXT: linalg.yield [[S]] : f32
// CHECK-NEXT: } -> tensor<4x16xf32>
// CHECK-NEXT: [[E2:%.+]] = tensor.empty() : tensor<4x16xbf16>
// CHECK-NEXT: [[R:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins([[MM]] : tensor<4x16xf32>) outs([[E2]] : tensor<4x16xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[T:%.+]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
// CHECK-NEXT: } -> tensor<4x16xbf16>
// CHECK-NEXT: return [[R]] : tensor<4x16xbf16>
func.func @mm_bf16(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %0 = loom.matmul %x, %w accumulate f32 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  return %0 : tensor<4x16xbf16>
}

// -----

// f32 with f32 accumulation: no conversions, no rounding pass.
// CHECK-LABEL: func.func @mm_f32
// CHECK: [[MM:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: f32, %[[B:[^:]+]]: f32, %[[OUT:[^:]+]]: f32):
// CHECK-NEXT: [[P:%.+]] = arith.mulf %[[A]], %[[B]] fastmath<contract> : f32
// CHECK-NEXT: [[S:%.+]] = arith.addf %[[OUT]], [[P]] fastmath<contract> : f32
// CHECK-NEXT: linalg.yield [[S]] : f32
// CHECK-NEXT: } -> tensor<4x16xf32>
// CHECK-NEXT: return [[MM]] : tensor<4x16xf32>
func.func @mm_f32(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = loom.matmul %x, %w accumulate f32 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// `accumulate bf16` (precision bf16 accumulate bf16): the accumulator is a
// zero-filled bf16 tensor and the products are summed in bf16, each
// product and sum rounded (no `contract`: fused, they depended on --cpu).
// CHECK-LABEL: func.func @mm_bf16_acc
// CHECK-NEXT: [[ZERO:%.+]] = arith.constant 0.000000e+00 : bf16
// CHECK-NEXT: [[E:%.+]] = tensor.empty() : tensor<4x16xbf16>
// CHECK-NEXT: [[ACC:%.+]] = linalg.fill ins([[ZERO]] : bf16) outs([[E]] : tensor<4x16xbf16>)
// CHECK-NEXT: [[MM:%.+]] = linalg.generic
// CHECK-SAME: outs([[ACC]] : tensor<4x16xbf16>)
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: bf16, %[[B:[^:]+]]: bf16, %[[OUT:[^:]+]]: bf16):
// CHECK-NEXT: [[P:%.+]] = arith.mulf %[[A]], %[[B]] : bf16
// CHECK-NEXT: [[S:%.+]] = arith.addf %[[OUT]], [[P]] : bf16
// CHECK-NEXT: linalg.yield [[S]] : bf16
// CHECK-NEXT: } -> tensor<4x16xbf16>
// CHECK-NEXT: return [[MM]] : tensor<4x16xbf16>
func.func @mm_bf16_acc(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %0 = loom.matmul %x, %w accumulate bf16 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  return %0 : tensor<4x16xbf16>
}

// -----

// Weight form: a rank-2 rhs applies to every row of a batched lhs; its map
// uses only (k, n). f16 operands, f32 accumulation, rounded back to f16.
// CHECK-LABEL: func.func @weight
// CHECK-SAME: (%[[A:[^:]+]]: tensor<2x4x8xf16>, %[[W:[^:]+]]: tensor<8x16xf16>)
// CHECK: [[ACC:%.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<2x4x16xf32>)
// CHECK-NEXT: [[MM:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[A]], %[[W]] : tensor<2x4x8xf16>, tensor<8x16xf16>) outs([[ACC]] : tensor<2x4x16xf32>)
// CHECK-NEXT: ^bb0(%[[IA:[^:]+]]: f16, %[[IB:[^:]+]]: f16, %{{[^:]+}}: f32):
// CHECK-NEXT: arith.extf %[[IA]] : f16 to f32
// CHECK-NEXT: arith.extf %[[IB]] : f16 to f32
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins([[MM]] : tensor<2x4x16xf32>) outs(%{{.+}} : tensor<2x4x16xf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f16):
// CHECK-NEXT: arith.truncf %[[IN]] : f32 to f16
func.func @weight(%a: tensor<2x4x8xf16>, %w: tensor<8x16xf16>) -> tensor<2x4x16xf16> {
  %0 = loom.matmul %a, %w accumulate f32 : (tensor<2x4x8xf16>, tensor<8x16xf16>) -> tensor<2x4x16xf16>
  return %0 : tensor<2x4x16xf16>
}

// -----

// Batched, equal batch dims: (b0, b1, m, n, k).
// CHECK-LABEL: func.func @batched
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x3x4x8xf32>, %[[K:[^:]+]]: tensor<2x3x8x5xf32>)
// CHECK: linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<2x3x4x5xf32>)
// CHECK-NEXT: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[Q]], %[[K]] : tensor<2x3x4x8xf32>, tensor<2x3x8x5xf32>)
func.func @batched(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x8x5xf32>) -> tensor<2x3x4x5xf32> {
  %0 = loom.matmul %q, %k accumulate f32 : (tensor<2x3x4x8xf32>, tensor<2x3x8x5xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

// Batched with broadcasting: a size-1 batch dim is read at index 0.
// CHECK-LABEL: func.func @batched_broadcast
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x3x4x8xf32>, %[[P:[^:]+]]: tensor<1x3x8x5xf32>)
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[Q]], %[[P]] : tensor<2x3x4x8xf32>, tensor<1x3x8x5xf32>)
func.func @batched_broadcast(%q: tensor<2x3x4x8xf32>, %p: tensor<1x3x8x5xf32>) -> tensor<2x3x4x5xf32> {
  %0 = loom.matmul %q, %p accumulate f32 : (tensor<2x3x4x8xf32>, tensor<1x3x8x5xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

// [5, 4] @ [2, 1, 4, 5] -> [2, 1, 5, 5]: the rank-2 lhs has no batch dims
// (map (m, k)); the rhs's size-1 batch dim matches a size-1 result dim, so
// it is an ordinary index.
// CHECK-LABEL: func.func @lhs_rank2
// CHECK-SAME: (%[[A:[^:]+]]: tensor<5x4xf32>, %[[B:[^:]+]]: tensor<2x1x4x5xf32>)
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<5x4xf32>, tensor<2x1x4x5xf32>) outs(%{{.+}} : tensor<2x1x5x5xf32>)
func.func @lhs_rank2(%a: tensor<5x4xf32>, %b: tensor<2x1x4x5xf32>) -> tensor<2x1x5x5xf32> {
  %0 = loom.matmul %a, %b accumulate f32 : (tensor<5x4xf32>, tensor<2x1x4x5xf32>) -> tensor<2x1x5x5xf32>
  return %0 : tensor<2x1x5x5xf32>
}

// -----

// multiply tf32 (precision tf32): both f32 operands are rounded to tf32
// in the body before the product (Loom/IR/Tf32.h): their bits plus 0x1000
// (4096), masked with 0xFFFFE000 (-8192), unless the exponent field
// (0x7F800000, 2139095040) is all ones.
// CHECK-LABEL: func.func @mm_tf32
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: f32, %[[B:[^:]+]]: f32, %[[OUT:[^:]+]]: f32):
// CHECK-NEXT: [[BITS:%.+]] = arith.bitcast %[[A]] : f32 to i32
// CHECK-NEXT: [[HALF:%.+]] = arith.constant 4096 : i32
// CHECK-NEXT: [[PLUS:%.+]] = arith.addi [[BITS]], [[HALF]] : i32
// CHECK-NEXT: [[MASK:%.+]] = arith.constant -8192 : i32
// CHECK-NEXT: [[KEPT:%.+]] = arith.andi [[PLUS]], [[MASK]] : i32
// CHECK-NEXT: [[E1:%.+]] = arith.constant 2139095040 : i32
// CHECK-NEXT: [[EXP:%.+]] = arith.andi [[BITS]], [[E1]] : i32
// CHECK-NEXT: [[E2:%.+]] = arith.constant 2139095040 : i32
// CHECK-NEXT: [[FINITE:%.+]] = arith.cmpi ne, [[EXP]], [[E2]] : i32
// CHECK-NEXT: [[SEL:%.+]] = arith.select [[FINITE]], [[KEPT]], [[BITS]] : i32
// CHECK-NEXT: [[TA:%.+]] = arith.bitcast [[SEL]] : i32 to f32
// CHECK-NEXT: arith.bitcast %[[B]] : f32 to i32
// CHECK:      [[TB:%.+]] = arith.bitcast %{{.+}} : i32 to f32
// CHECK-NEXT: [[P:%.+]] = arith.mulf [[TA]], [[TB]] fastmath<contract> : f32
// CHECK-NEXT: [[S:%.+]] = arith.addf %[[OUT]], [[P]] fastmath<contract> : f32
// CHECK-NEXT: linalg.yield [[S]] : f32
// Without multiply tf32 an f32 matmul multiplies its operands as they are.
// CHECK-LABEL: func.func @mm_f32
// CHECK: ^bb0(%[[A:[^:]+]]: f32, %[[B:[^:]+]]: f32, %[[OUT:[^:]+]]: f32):
// CHECK-NEXT: arith.mulf %[[A]], %[[B]] fastmath<contract> : f32
func.func @mm_tf32(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = loom.matmul %x, %w multiply tf32 accumulate f32 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}
func.func @mm_f32(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = loom.matmul %x, %w accumulate f32 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// A B that is a transpose of its last two dims is read in place: the
// matmul's B map is (batch..., n, k) on the transpose's input, K
// contiguous, and the transpose is left without uses (canonicalization
// removes it).
// CHECK-LABEL: func.func @mm_transposed_b
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x4x8xbf16>, %[[K:[^:]+]]: tensor<2x16x8xbf16>)
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[Q]], %[[K]] : tensor<2x4x8xbf16>, tensor<2x16x8xbf16>)
func.func @mm_transposed_b(%q: tensor<2x4x8xbf16>, %k: tensor<2x16x8xbf16>) -> tensor<2x4x16xbf16> {
  %kt = loom.transpose %k perm [0, 2, 1] : tensor<2x16x8xbf16> -> tensor<2x8x16xbf16>
  %0 = loom.matmul %q, %kt accumulate f32 : (tensor<2x4x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x4x16xbf16>
  return %0 : tensor<2x4x16xbf16>
}

// -----

// Any other permutation is copied by its own linalg.transpose first.
// CHECK-LABEL: func.func @mm_permuted_b
// CHECK: [[T:%.+]] = linalg.transpose ins(%{{.+}} : tensor<8x2x16xbf16>) outs(%{{.+}} : tensor<2x8x16xbf16>) permutation = [1, 0, 2]
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
// CHECK-SAME: ins(%{{.+}}, [[T]] : tensor<2x4x8xbf16>, tensor<2x8x16xbf16>)
func.func @mm_permuted_b(%q: tensor<2x4x8xbf16>, %k: tensor<8x2x16xbf16>) -> tensor<2x4x16xbf16> {
  %kt = loom.transpose %k perm [1, 0, 2] : tensor<8x2x16xbf16> -> tensor<2x8x16xbf16>
  %0 = loom.matmul %q, %kt accumulate f32 : (tensor<2x4x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x4x16xbf16>
  return %0 : tensor<2x4x16xbf16>
}
