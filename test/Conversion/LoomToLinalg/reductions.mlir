// RUN: loom-opt %s --split-input-file --convert-loom-to-linalg --mlir-print-local-scope | FileCheck %s

// --convert-loom-to-linalg, reductions: softmax, layernorm, rmsnorm,
// sum/mean/max and the losses. Every reduction is a linalg.generic whose
// reduced loop is a "reduction" iterator, accumulating in f32 (a filled
// f32 init) whatever the storage type; statistics are computed first and
// the normalization reads them through maps without the reduced dim.

// softmax over the last axis: row max (init -inf; maxnumf, which skips a
// NaN that exp(x - max) then spreads to the row anyway, and which LLVM
// vectorizes), sum of exp(x - max), then exp(x - max) / sum, rounded once
// to bf16.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xbf16>)
// CHECK: [[NINF:%.+]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: [[MI:%.+]] = linalg.fill ins([[NINF]] : f32) outs(%{{.+}} : tensor<4xf32>)
// CHECK-NEXT: [[MAX:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]] : tensor<4x8xbf16>) outs([[MI]] : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[M:%.+]] = arith.maxnumf %[[ACC]], [[W]] : f32
// CHECK-NEXT: linalg.yield [[M]] : f32
// CHECK: [[ZERO:%.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: [[SI:%.+]] = linalg.fill ins([[ZERO]] : f32) outs(%{{.+}} : tensor<4xf32>)
// CHECK-NEXT: [[SUM:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]], [[MAX]] : tensor<4x8xbf16>, tensor<4xf32>) outs([[SI]] : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %[[RM:[^:]+]]: f32, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[D:%.+]] = arith.subf [[W]], %[[RM]] : f32
// CHECK-NEXT: [[E:%.+]] = math.exp [[D]] : f32
// CHECK-NEXT: [[S:%.+]] = arith.addf %[[ACC]], [[E]] : f32
// CHECK-NEXT: linalg.yield [[S]] : f32
// CHECK: [[R:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[X]], [[MAX]], [[SUM]] : tensor<4x8xbf16>, tensor<4xf32>, tensor<4xf32>) outs(%{{.+}} : tensor<4x8xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %[[RM:[^:]+]]: f32, %[[RS:[^:]+]]: f32, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[D:%.+]] = arith.subf [[W]], %[[RM]] : f32
// CHECK-NEXT: [[E:%.+]] = math.exp [[D]] : f32
// CHECK-NEXT: [[Q:%.+]] = arith.divf [[E]], %[[RS]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[Q]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
// CHECK: return [[R]] : tensor<4x8xbf16>
func.func @softmax(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = loom.softmax %x axis 1 : tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// softmax over axis 0: the statistics drop d0 and d0 is the reduction.
// CHECK-LABEL: func.func @softmax_axis0
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
// CHECK-SAME: outs(%{{.+}} : tensor<8xf32>)
// CHECK: arith.maxnumf
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
// CHECK: math.exp
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.divf
func.func @softmax_axis0(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.softmax %x axis 0 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// layernorm with scale and bias: mean = sum(x) * (1/D); var = sum((x -
// mean)^2) * (1/D); y = (x - mean) * rsqrt(var + eps) * scale + bias, with
// scale and bias read along the last dim only. bf16 input and f32
// parameters give an f32 result: no rounding.
// CHECK-LABEL: func.func @layernorm
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xbf16>, %[[G:[^:]+]]: tensor<8xf32>, %[[B:[^:]+]]: tensor<8xf32>)
// CHECK: [[SUM:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]] : tensor<4x8xbf16>) outs(%{{.+}} : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: arith.addf %[[ACC]], [[W]] : f32
// CHECK: [[MEAN:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
// CHECK-SAME: ins([[SUM]] : tensor<4xf32>) outs(%{{.+}} : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[N:%.+]] = arith.constant 8.000000e+00 : f32
// CHECK-NEXT: arith.divf %[[IN]], [[N]] : f32
// CHECK: [[SQ:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]], [[MEAN]] : tensor<4x8xbf16>, tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %[[M:[^:]+]]: f32, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[D:%.+]] = arith.subf [[W]], %[[M]] : f32
// CHECK-NEXT: [[D2:%.+]] = arith.mulf [[D]], [[D]] : f32
// CHECK-NEXT: arith.addf %[[ACC]], [[D2]] : f32
// CHECK: [[VAR:%.+]] = linalg.generic
// CHECK-SAME: ins([[SQ]] : tensor<4xf32>)
// CHECK: arith.constant 8.000000e+00 : f32
// CHECK: [[R:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[X]], [[MEAN]], [[VAR]], %[[G]], %[[B]] : tensor<4x8xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<8xf32>) outs(%{{.+}} : tensor<4x8xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %[[M:[^:]+]]: f32, %[[V:[^:]+]]: f32, %[[IG:[^:]+]]: f32, %[[IB:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[C:%.+]] = arith.subf [[W]], %[[M]] : f32
// CHECK-NEXT: [[EPS:%.+]] = arith.constant 9.99999974E-6 : f32
// CHECK-NEXT: [[VE:%.+]] = arith.addf %[[V]], [[EPS]] : f32
// CHECK-NEXT: [[RS:%.+]] = math.rsqrt [[VE]] : f32
// CHECK-NEXT: [[N:%.+]] = arith.mulf [[C]], [[RS]] : f32
// CHECK-NEXT: [[S:%.+]] = arith.mulf [[N]], %[[IG]] : f32
// CHECK-NEXT: [[Y:%.+]] = arith.addf [[S]], %[[IB]] : f32
// CHECK-NEXT: linalg.yield [[Y]] : f32
// CHECK: return [[R]] : tensor<4x8xf32>
func.func @layernorm(%x: tensor<4x8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = loom.layernorm %x scale %g bias %b epsilon 1.0e-5 : (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// layernorm without parameters: the bf16 result is rounded once; the
// epsilon is the op's.
// CHECK-LABEL: func.func @layernorm_plain
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: outs(%{{.+}} : tensor<4x8xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %[[M:[^:]+]]: f32, %[[V:[^:]+]]: f32, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[C:%.+]] = arith.subf [[W]], %[[M]] : f32
// CHECK-NEXT: [[EPS:%.+]] = arith.constant 1.000000e-03 : f32
// CHECK-NEXT: [[VE:%.+]] = arith.addf %[[V]], [[EPS]] : f32
// CHECK-NEXT: [[RS:%.+]] = math.rsqrt [[VE]] : f32
// CHECK-NEXT: [[N:%.+]] = arith.mulf [[C]], [[RS]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[N]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
func.func @layernorm_plain(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = loom.layernorm %x epsilon 1.0e-3 : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// layernorm with a bias but no scale: the bias is added, nothing multiplied.
// CHECK-LABEL: func.func @layernorm_bias
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>, %[[B:[^:]+]]: tensor<8xf32>)
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[X]], %{{.+}}, %{{.+}}, %[[B]] :
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %[[M:[^:]+]]: f32, %[[V:[^:]+]]: f32, %[[IB:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[C:%.+]] = arith.subf %[[IN]], %[[M]] : f32
// CHECK-NEXT: arith.constant
// CHECK-NEXT: [[VE:%.+]] = arith.addf %[[V]],
// CHECK-NEXT: [[RS:%.+]] = math.rsqrt [[VE]] : f32
// CHECK-NEXT: [[N:%.+]] = arith.mulf [[C]], [[RS]] : f32
// CHECK-NEXT: [[Y:%.+]] = arith.addf [[N]], %[[IB]] : f32
// CHECK-NEXT: linalg.yield [[Y]] : f32
func.func @layernorm_bias(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = loom.layernorm %x bias %b epsilon 1.0e-5 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// rmsnorm: no mean; ms = sum(x^2) * (1/D); y = x * rsqrt(ms + eps) * scale.
// Rank 3, f16 storage: statistics over the last dim in f32.
// CHECK-LABEL: func.func @rmsnorm
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4x8xf16>, %[[G:[^:]+]]: tensor<8xf16>)
// CHECK: [[SQ:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]] : tensor<2x4x8xf16>) outs(%{{.+}} : tensor<2x4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f16, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: [[W2:%.+]] = arith.mulf [[W]], [[W]] : f32
// CHECK-NEXT: arith.addf %[[ACC]], [[W2]] : f32
// CHECK: [[MS:%.+]] = linalg.generic
// CHECK-SAME: ins([[SQ]] : tensor<2x4xf32>)
// CHECK: arith.constant 8.000000e+00 : f32
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[X]], [[MS]], %[[G]] : tensor<2x4x8xf16>, tensor<2x4xf32>, tensor<8xf16>) outs(%{{.+}} : tensor<2x4x8xf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f16, %[[V:[^:]+]]: f32, %[[IG:[^:]+]]: f16, %{{[^:]+}}: f16):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: [[WG:%.+]] = arith.extf %[[IG]] : f16 to f32
// CHECK-NEXT: [[EPS:%.+]] = arith.constant 9.99999974E-6 : f32
// CHECK-NEXT: [[VE:%.+]] = arith.addf %[[V]], [[EPS]] : f32
// CHECK-NEXT: [[RS:%.+]] = math.rsqrt [[VE]] : f32
// CHECK-NEXT: [[N:%.+]] = arith.mulf [[W]], [[RS]] : f32
// CHECK-NEXT: [[S:%.+]] = arith.mulf [[N]], [[WG]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[S]] : f32 to f16
// CHECK-NEXT: linalg.yield [[T]] : f16
func.func @rmsnorm(%x: tensor<2x4x8xf16>, %g: tensor<8xf16>) -> tensor<2x4x8xf16> {
  %0 = loom.rmsnorm %x scale %g epsilon 1.0e-5 : (tensor<2x4x8xf16>, tensor<8xf16>) -> tensor<2x4x8xf16>
  return %0 : tensor<2x4x8xf16>
}

// -----

// rmsnorm without a scale.
// CHECK-LABEL: func.func @rmsnorm_plain
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: arith.constant
// CHECK-NEXT: [[VE:%.+]] = arith.addf %[[V]],
// CHECK-NEXT: [[RS:%.+]] = math.rsqrt [[VE]] : f32
// CHECK-NEXT: [[N:%.+]] = arith.mulf %[[IN]], [[RS]] : f32
// CHECK-NEXT: linalg.yield [[N]] : f32
func.func @rmsnorm_plain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.rmsnorm %x epsilon 1.0e-5 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// sum over the last axis, keepdim: reduce into f32 (init 0), store, then
// restore the kept unit dim with tensor.expand_shape.
// CHECK-LABEL: func.func @sum_keepdim
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK: [[ZERO:%.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: [[I:%.+]] = linalg.fill ins([[ZERO]] : f32) outs(%{{.+}} : tensor<4xf32>)
// CHECK-NEXT: [[S:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]] : tensor<4x8xf32>) outs([[I]] : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[A:%.+]] = arith.addf %[[ACC]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield [[A]] : f32
// CHECK: [[F:%.+]] = linalg.generic
// CHECK-SAME: ins([[S]] : tensor<4xf32>) outs(%{{.+}} : tensor<4xf32>)
// CHECK: [[E:%.+]] = tensor.expand_shape [[F]] {{\[\[}}0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
// CHECK-NEXT: return [[E]] : tensor<4x1xf32>
func.func @sum_keepdim(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = loom.sum %x axis 1 keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// Reducing the leading axis with keepdim: the unit dim joins the first
// group; without keepdim no expand_shape.
// CHECK-LABEL: func.func @sum_axis0
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
// CHECK: tensor.expand_shape %{{.+}} {{\[\[}}0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
// CHECK-NOT: tensor.expand_shape
// CHECK: return
func.func @sum_axis0(%x: tensor<4x8xf32>) -> (tensor<1x8xf32>, tensor<8xf32>) {
  %0 = loom.sum %x axis 0 keepdim : tensor<4x8xf32> -> tensor<1x8xf32>
  %1 = loom.sum %x axis 0 : tensor<4x8xf32> -> tensor<8xf32>
  return %0, %1 : tensor<1x8xf32>, tensor<8xf32>
}

// -----

// mean of bf16: f32 sum, times 1/n, rounded once; keepdim of a middle axis
// joins the unit dim to the previous group.
// CHECK-LABEL: func.func @mean_middle
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x3x4xbf16>)
// CHECK: [[S:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-SAME: outs(%{{.+}} : tensor<2x4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: arith.addf %[[ACC]], [[W]] : f32
// CHECK: [[M:%.+]] = linalg.generic
// CHECK-SAME: ins([[S]] : tensor<2x4xf32>) outs(%{{.+}} : tensor<2x4xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[N:%.+]] = arith.constant 3.000000e+00 : f32
// CHECK-NEXT: [[P:%.+]] = arith.divf %[[IN]], [[N]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[P]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
// CHECK: tensor.expand_shape [[M]] {{\[\[}}0, 1], [2]] output_shape [2, 1, 4] : tensor<2x4xbf16> into tensor<2x1x4xbf16>
func.func @mean_middle(%x: tensor<2x3x4xbf16>) -> tensor<2x1x4xbf16> {
  %0 = loom.mean %x axis 1 keepdim : tensor<2x3x4xbf16> -> tensor<2x1x4xbf16>
  return %0 : tensor<2x1x4xbf16>
}

// -----

// mean over the last of three axes, keepdim.
// CHECK-LABEL: func.func @mean_last
// CHECK: arith.constant 4.000000e+00 : f32
// CHECK: tensor.expand_shape %{{.+}} {{\[\[}}0], [1, 2]] output_shape [2, 3, 1] : tensor<2x3xf32> into tensor<2x3x1xf32>
func.func @mean_last(%x: tensor<2x3x4xf32>) -> tensor<2x3x1xf32> {
  %0 = loom.mean %x axis 2 keepdim : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  return %0 : tensor<2x3x1xf32>
}

// -----

// max of f16: init -inf, maximumf in f32, rounded to f16.
// CHECK-LABEL: func.func @max
// CHECK: [[NINF:%.+]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: [[I:%.+]] = linalg.fill ins([[NINF]] : f32) outs(%{{.+}} : tensor<4xf32>)
// CHECK-NEXT: [[M:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f16, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: arith.maximumf %[[ACC]], [[W]] : f32
// CHECK: linalg.generic
// CHECK-SAME: ins([[M]] : tensor<4xf32>) outs(%{{.+}} : tensor<4xf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f16):
// CHECK-NEXT: [[T:%.+]] = arith.truncf %[[IN]] : f32 to f16
// CHECK-NEXT: linalg.yield [[T]] : f16
func.func @max(%x: tensor<4x8xf16>) -> tensor<4xf16> {
  %0 = loom.max %x axis 1 : tensor<4x8xf16> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// Down to a scalar: a 0-d accumulator (map to ()); with keepdim the scalar
// is expanded to [1] with no reassociation groups.
// CHECK-LABEL: func.func @to_scalar
// CHECK: linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<f32>)
// CHECK-NEXT: linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
// CHECK: arith.addf
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
// CHECK: arith.maximumf
// CHECK: tensor.expand_shape %{{.+}} [] output_shape [1] : tensor<f32> into tensor<1xf32>
func.func @to_scalar(%x: tensor<8xf32>) -> (tensor<f32>, tensor<1xf32>) {
  %0 = loom.sum %x axis 0 : tensor<8xf32> -> tensor<f32>
  %1 = loom.max %x axis 0 keepdim : tensor<8xf32> -> tensor<1xf32>
  return %0, %1 : tensor<f32>, tensor<1xf32>
}

// -----

// cross_entropy: per row, log(sum of exp(x - max)) minus the label's
// logit less the max (kept apart: adding the max back first rounds the
// small terms away at large logits), the logit read with tensor.extract at the label clamped to
// [0, classes - 1]; summed over all rows into a 0-d f32 tensor, then times
// 1/rows.
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[L:[^:]+]]: tensor<2x3x10xbf16>, %[[Y:[^:]+]]: tensor<2x3xi32>) -> tensor<f32>
// CHECK: [[MAX:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[L]] : tensor<2x3x10xbf16>) outs(%{{.+}} : tensor<2x3xf32>)
// CHECK: arith.maxnumf
// CHECK: [[SUM:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[L]], [[MAX]] : tensor<2x3x10xbf16>, tensor<2x3xf32>)
// CHECK: math.exp
// CHECK: [[ZERO:%.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: [[TI:%.+]] = linalg.fill ins([[ZERO]] : f32) outs(%{{.+}} : tensor<f32>)
// CHECK-NEXT: [[TOT:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
// CHECK-SAME: ins([[MAX]], [[SUM]], %[[Y]] : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi32>) outs([[TI]] : tensor<f32>)
// CHECK-NEXT: ^bb0(%[[M:[^:]+]]: f32, %[[S:[^:]+]]: f32, %[[LAB:[^:]+]]: i32, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[I0:%.+]] = linalg.index 0 : index
// CHECK-NEXT: [[I1:%.+]] = linalg.index 1 : index
// CHECK-NEXT: [[LI:%.+]] = arith.index_cast %[[LAB]] : i32 to index
// CHECK-NEXT: [[C0:%.+]] = arith.constant 0 : index
// CHECK-NEXT: [[C9:%.+]] = arith.constant 9 : index
// CHECK-NEXT: [[LO:%.+]] = arith.maxsi [[LI]], [[C0]] : index
// CHECK-NEXT: [[CL:%.+]] = arith.minsi [[LO]], [[C9]] : index
// CHECK-NEXT: [[X:%.+]] = tensor.extract %[[L]][[[I0]], [[I1]], [[CL]]] : tensor<2x3x10xbf16>
// CHECK-NEXT: [[WX:%.+]] = arith.extf [[X]] : bf16 to f32
// CHECK-NEXT: [[LOG:%.+]] = math.log %[[S]] : f32
// CHECK-NEXT: [[SHIFTED:%.+]] = arith.subf [[WX]], %[[M]] : f32
// CHECK-NEXT: [[D:%.+]] = arith.subf [[LOG]], [[SHIFTED]] : f32
// CHECK-NEXT: [[A:%.+]] = arith.addf %[[ACC]], [[D]] : f32
// CHECK-NEXT: linalg.yield [[A]] : f32
// CHECK: [[R:%.+]] = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
// CHECK-SAME: ins([[TOT]] : tensor<f32>) outs(%{{.+}} : tensor<f32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[N:%.+]] = arith.constant 6.000000e+00 : f32
// CHECK-NEXT: arith.divf %[[IN]], [[N]] : f32
// CHECK: return [[R]] : tensor<f32>
func.func @cross_entropy(%logits: tensor<2x3x10xbf16>, %labels: tensor<2x3xi32>) -> tensor<f32> {
  %0 = loom.cross_entropy %logits, %labels : (tensor<2x3x10xbf16>, tensor<2x3xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// i64 labels are index_cast the same way.
// CHECK-LABEL: func.func @cross_entropy_i64
// CHECK: ^bb0(%{{[^:]+}}: f32, %{{[^:]+}}: f32, %[[LAB:[^:]+]]: i64, %{{[^:]+}}: f32):
// CHECK: arith.index_cast %[[LAB]] : i64 to index
// CHECK: arith.constant 4 : index
// CHECK: tensor.extract
func.func @cross_entropy_i64(%logits: tensor<6x5xf32>, %labels: tensor<6xi64>) -> tensor<f32> {
  %0 = loom.cross_entropy %logits, %labels : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// mse: sum over every element of (a - b)^2, both widened, into a 0-d f32
// tensor, then times 1/n.
// CHECK-LABEL: func.func @mse
// CHECK-SAME: (%[[A:[^:]+]]: tensor<4x8xf32>, %[[B:[^:]+]]: tensor<4x8xbf16>) -> tensor<f32>
// CHECK: [[ZERO:%.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: [[TI:%.+]] = linalg.fill ins([[ZERO]] : f32) outs(%{{.+}} : tensor<f32>)
// CHECK-NEXT: [[TOT:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xbf16>) outs([[TI]] : tensor<f32>)
// CHECK-NEXT: ^bb0(%[[IA:[^:]+]]: f32, %[[IB:[^:]+]]: bf16, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT: [[WB:%.+]] = arith.extf %[[IB]] : bf16 to f32
// CHECK-NEXT: [[D:%.+]] = arith.subf %[[IA]], [[WB]] : f32
// CHECK-NEXT: [[D2:%.+]] = arith.mulf [[D]], [[D]] : f32
// CHECK-NEXT: [[S:%.+]] = arith.addf %[[ACC]], [[D2]] : f32
// CHECK-NEXT: linalg.yield [[S]] : f32
// CHECK: [[R:%.+]] = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
// CHECK-SAME: ins([[TOT]] : tensor<f32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[N:%.+]] = arith.constant 3.200000e+01 : f32
// CHECK-NEXT: arith.divf %[[IN]], [[N]] : f32
// CHECK: return [[R]] : tensor<f32>
func.func @mse(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>) -> tensor<f32> {
  %0 = loom.mse %a, %b : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<f32>
  return %0 : tensor<f32>
}
