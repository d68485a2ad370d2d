// RUN: loom-opt %s --split-input-file --convert-loom-attention-to-linalg | FileCheck %s
// RUN: loom-opt %s --split-input-file --convert-loom-attention-to-linalg=bf16-operands=true | FileCheck %s --check-prefix=DOTS

// --convert-loom-attention-to-linalg: batch dims folded into one, taken a
// chunk at a time (as many as keep a chunk's score block within 4096
// elements: one here, at blocks of 64), then per block of queries (the
// largest divisor of both sequence lengths up to 64) two loops over the
// key blocks, each forming that block's scores again: the first updates
// each row's maximum and sum, the second accumulates the rounded
// probabilities times the values. No [queries, keys] tensor.

// CHECK-LABEL: func.func @causal
// CHECK: %[[SCALE:.+]] = arith.extf %{{.+}} : bf16 to f32
// CHECK: %[[Q16:.+]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2], [3]] : tensor<2x4x128x16xbf16> into tensor<8x128x16xbf16>
// The operands widened to f32 once, not per block.
// CHECK: %[[Q:.+]] = linalg.generic {{.+}} ins(%[[Q16]] : tensor<8x128x16xbf16>) outs(%{{.+}} : tensor<8x128x16xf32>)
// CHECK: scf.for %[[N:.+]] = %{{.+}} to %c8 step %c1 iter_args(%[[ALL:.+]] = %{{.+}}) -> (tensor<8x128x8xbf16>)
// CHECK: %[[QN:.+]] = tensor.extract_slice %[[Q]][%[[N]], 0, 0] [1, 128, 16] [1, 1, 1]
// CHECK: scf.for %[[QB:.+]] = %{{.+}} to %c128 step %c64 iter_args(%[[OUT:.+]] = %[[ALL]]) -> (tensor<8x128x8xbf16>)
// CHECK: tensor.extract_slice %[[QN]][0, %[[QB]], 0] [1, 64, 16] [1, 1, 1]
// A causal block of queries stops at the end of its diagonal block.
// CHECK: %[[DIAG:.+]] = arith.addi %[[QB]], %{{.+}} : index
// CHECK: %[[END:.+]] = arith.minsi %[[DIAG]], %{{.+}} : index
// Pass 1: maximum and sum.
// CHECK: %[[STATS:.+]]:2 = scf.for %[[KB:.+]] = %{{.+}} to %[[END]] step %{{.+}} iter_args(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (tensor<1x64xf32>, tensor<1x64xf32>)
// CHECK: linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins({{.+}} : tensor<1x64x16xf32>, tensor<1x64x16xf32>) outs({{.+}} : tensor<1x64x64xf32>)
// The scores rounded to bf16 after the product and after the scale, -inf
// above the diagonal.
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK: arith.mulf %{{.+}}, %[[SCALE]] : f32
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK: arith.addi %[[QB]], %{{.+}} : index
// CHECK: arith.addi %[[KB]], %{{.+}} : index
// CHECK: arith.cmpi sgt
// CHECK: arith.select
// CHECK: arith.maxnumf
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK: scf.yield
// Pass 2: probabilities rounded to bf16 (held in f32), times the values.
// CHECK: scf.for %{{.+}} = %{{.+}} to %[[END]] step %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (tensor<1x64x8xf32>)
// CHECK: ins(%{{.+}}, %[[STATS]]#0, %[[STATS]]#1 : tensor<1x64x64xf32>, tensor<1x64xf32>, tensor<1x64xf32>) outs(%{{.+}} : tensor<1x64x64xf32>)
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK: ins(%{{.+}}, %{{.+}} : tensor<1x64x64xf32>, tensor<1x64x8xf32>) outs(%{{.+}} : tensor<1x64x8xf32>)
// CHECK: tensor.insert_slice %{{.+}} into %[[OUT]][%[[N]], %[[QB]], 0] [1, 64, 8] [1, 1, 1]
// CHECK: tensor.expand_shape %{{.+}} {{\[\[}}0, 1], [2], [3]] output_shape [2, 4, 128, 8]
// CHECK-NOT: tensor<8x128x128
// With bf16-operands (a CPU whose bf16 dot products or AMX tiles multiply
// bf16 operands), every block contraction of a bf16 attention takes bf16
// operands: q, k and v as given, the rounded probabilities narrowed back
// (exactly).
// DOTS-LABEL: func.func @causal
// DOTS-NOT: tensor<8x128x16xf32>
// DOTS: ins(%{{.+}}, %{{.+}} : tensor<1x64x16xbf16>, tensor<1x64x16xbf16>) outs(%{{.+}} : tensor<1x64x64xf32>)
// DOTS: arith.truncf %{{.+}} : f32 to bf16
// DOTS: ins(%{{.+}}, %{{.+}} : tensor<1x64x64xbf16>, tensor<1x64x8xbf16>) outs(%{{.+}} : tensor<1x64x8xf32>)
func.func @causal(%q: tensor<2x4x128x16xbf16>, %k: tensor<2x4x128x16xbf16>, %v: tensor<2x4x128x8xbf16>,
                  %s: tensor<bf16>) -> tensor<2x4x128x8xbf16> {
  %0 = loom.attention %q, %k, %v scale %s causal accumulate f32
      : (tensor<2x4x128x16xbf16>, tensor<2x4x128x16xbf16>, tensor<2x4x128x8xbf16>, tensor<bf16>) -> tensor<2x4x128x8xbf16>
  return %0 : tensor<2x4x128x8xbf16>
}

// -----

// A matrix: a unit batch dim in front (one chunk: no loop over it). 48
// queries and 80 keys: blocks of 16; not causal, so every block of queries
// reads all 80 keys; f32 needs no rounding.

// CHECK-LABEL: func.func @matrix
// CHECK: tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [1, 48, 16]
// CHECK-NOT: scf.for %{{.+}} = %{{.+}} to %c1
// CHECK: scf.for %{{.+}} = %{{.+}} to %c48 step %c16
// CHECK-NOT: arith.minsi
// CHECK: scf.for %{{.+}} = %{{.+}} to %c80 step %c16
// CHECK-NOT: arith.truncf
// CHECK: scf.for %{{.+}} = %{{.+}} to %c80 step %c16
// CHECK-NOT: arith.truncf
// CHECK: tensor.collapse_shape %{{.+}} {{\[\[}}0, 1], [2]] : tensor<1x48x4xf32> into tensor<48x4xf32>
// DOTS-LABEL: func.func @matrix
// DOTS-NOT: bf16
func.func @matrix(%q: tensor<48x16xf32>, %k: tensor<80x16xf32>, %v: tensor<80x4xf32>) -> tensor<48x4xf32> {
  %0 = loom.attention %q, %k, %v accumulate f32
      : (tensor<48x16xf32>, tensor<80x16xf32>, tensor<80x4xf32>) -> tensor<48x4xf32>
  return %0 : tensor<48x4xf32>
}

// -----

// The backward, a chunk of the batch at a time: per block of queries the
// statistics, the softmax gradient's row sums, then the gradients; the
// chunk's key and value gradients accumulate over all its query blocks in
// f32 ([chunk, keys, features], zeroed per chunk) and are rounded into the
// results once at the chunk's end.

// CHECK-LABEL: func.func @grad
// CHECK: %[[ALL:.+]]:5 = scf.for %[[N:.+]] = %{{.+}} to %c2 step %c1 iter_args(%{{.+}} = %{{.+}}, %[[DK:.+]] = %{{.+}}, %[[DV:.+]] = %{{.+}}, %[[KBUF:.+]] = %{{.+}}, %[[VBUF:.+]] = %{{.+}}) -> (tensor<2x128x16xbf16>, tensor<2x128x16xbf16>, tensor<2x128x8xbf16>, tensor<1x128x16xf32>, tensor<1x128x8xf32>)
// CHECK: %[[KACC:.+]] = linalg.fill {{.+}} outs(%[[KBUF]] : tensor<1x128x16xf32>)
// CHECK: %[[VACC:.+]] = linalg.fill {{.+}} outs(%[[VBUF]] : tensor<1x128x8xf32>)
// CHECK: %[[CHUNK:.+]]:3 = scf.for %[[QB:.+]] = %{{.+}} to %c128 step %c64 iter_args(%{{.+}} = %{{.+}}, %[[K:.+]] = %[[KACC]], %[[V:.+]] = %[[VACC]]) -> (tensor<2x128x16xbf16>, tensor<1x128x16xf32>, tensor<1x128x8xf32>)
// No statistics pass (p = exp(s - lse), the forward's rows' log-sum-exp);
// the row sums of dp * p as rowsum(dO * O): no pass over the keys.
// CHECK-NOT: scf.for
// CHECK: linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.+}}, %{{.+}} : tensor<1x64x8xf32>, tensor<1x64x8xf32>) outs(%{{.+}} : tensor<1x64xf32>)
// Gradients: the query block's accumulator and the chunk's two whole ones.
// CHECK: scf.for %[[KB:.+]] = {{.+}} iter_args(%{{.+}} = %{{.+}}, %[[KIN:.+]] = %[[K]], %[[VIN:.+]] = %[[V]]) -> (tensor<1x64x16xf32>, tensor<1x128x16xf32>, tensor<1x128x8xf32>)
// CHECK: tensor.extract_slice %[[KIN]][0, %[[KB]], 0] [1, 64, 16]
// CHECK: tensor.insert_slice %{{.+}} into %[[KIN]][0, %[[KB]], 0] [1, 64, 16]
// CHECK: tensor.extract_slice %[[VIN]][0, %[[KB]], 0] [1, 64, 8]
// CHECK: tensor.insert_slice %{{.+}} into %[[VIN]][0, %[[KB]], 0] [1, 64, 8]
// CHECK: arith.truncf %{{.+}} : f32 to bf16
// CHECK: ins(%[[CHUNK]]#1 : tensor<1x128x16xf32>) outs(%{{.+}} : tensor<1x128x16xbf16>)
// CHECK: tensor.insert_slice %{{.+}} into %[[DK]][%[[N]], 0, 0] [1, 128, 16]
// CHECK: ins(%[[CHUNK]]#2 : tensor<1x128x8xf32>) outs(%{{.+}} : tensor<1x128x8xbf16>)
// CHECK: tensor.insert_slice %{{.+}} into %[[DV]][%[[N]], 0, 0] [1, 128, 8]
// CHECK: scf.yield %{{.+}}, %{{.+}}, %{{.+}}, %[[CHUNK]]#1, %[[CHUNK]]#2
// CHECK: return %[[ALL]]#0, %[[ALL]]#1, %[[ALL]]#2
// CHECK-NOT: tensor<2x128x128
// DOTS-LABEL: func.func @grad
// The score gradients narrowed for dq, dk; the probabilities for dv.
// DOTS: ins(%{{.+}}, %{{.+}} : tensor<1x64x64xbf16>, tensor<1x64x16xbf16>) outs(%{{.+}} : tensor<1x64x16xf32>)
// DOTS: ins(%{{.+}}, %{{.+}} : tensor<1x64x64xbf16>, tensor<1x64x16xbf16>) outs(%{{.+}} : tensor<1x64x16xf32>)
// DOTS: ins(%{{.+}}, %{{.+}} : tensor<1x64x64xbf16>, tensor<1x64x8xbf16>) outs(%{{.+}} : tensor<1x64x8xf32>)
func.func @grad(%q: tensor<2x128x16xbf16>, %k: tensor<2x128x16xbf16>, %v: tensor<2x128x8xbf16>,
                %o: tensor<2x128x8xbf16>, %lse: tensor<2x128xf32>, %g: tensor<2x128x8xbf16>,
                %s: tensor<bf16>)
    -> (tensor<2x128x16xbf16>, tensor<2x128x16xbf16>, tensor<2x128x8xbf16>) {
  %0:3 = loom.attention_grad %q, %k, %v, %o, %lse, %g scale %s causal accumulate f32
      : (tensor<2x128x16xbf16>, tensor<2x128x16xbf16>, tensor<2x128x8xbf16>, tensor<2x128x8xbf16>, tensor<2x128xf32>, tensor<2x128x8xbf16>, tensor<bf16>)
      -> (tensor<2x128x16xbf16>, tensor<2x128x16xbf16>, tensor<2x128x8xbf16>)
  return %0#0, %0#1, %0#2 : tensor<2x128x16xbf16>, tensor<2x128x16xbf16>, tensor<2x128x8xbf16>
}

// -----

// With its second result (loom-autodiff asks for it), the forward gives
// each row's log-sum-exp, max + log(sum) from its statistics pass, f32
// [batch, queries], block by block beside the output.

// CHECK-LABEL: func.func @with_lse
// CHECK: scf.for {{.+}} -> (tensor<2x128x8xbf16>, tensor<2x128xf32>)
// CHECK: scf.for {{.+}} -> (tensor<1x64xf32>, tensor<1x64xf32>)
// CHECK: math.log
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[%{{.+}}, %{{.+}}, 0] [1, 64, 8] [1, 1, 1] : tensor<1x64x8xbf16> into tensor<2x128x8xbf16>
// CHECK: tensor.insert_slice %{{.+}} into %{{.+}}[%{{.+}}, %{{.+}}] [1, 64] [1, 1] : tensor<1x64xf32> into tensor<2x128xf32>
// CHECK: return %{{.+}}#0, %{{.+}}#1 : tensor<2x128x8xbf16>, tensor<2x128xf32>
func.func @with_lse(%q: tensor<2x128x16xbf16>, %k: tensor<2x128x16xbf16>, %v: tensor<2x128x8xbf16>)
    -> (tensor<2x128x8xbf16>, tensor<2x128xf32>) {
  %0:2 = loom.attention %q, %k, %v causal accumulate f32
      : (tensor<2x128x16xbf16>, tensor<2x128x16xbf16>, tensor<2x128x8xbf16>) -> (tensor<2x128x8xbf16>, tensor<2x128xf32>)
  return %0#0, %0#1 : tensor<2x128x8xbf16>, tensor<2x128xf32>
}

// -----

// A kernel (loom.kernel) that is one attention the GPU kernel runs (bf16,
// sequences and features multiples of 16), its scale a constant, is marked
// loom.gpu_attention: the GPU stages replace its body by one launch
// (loom-build-gpu-attention) reading the operands at these positions.

// CHECK-LABEL: func.func @gpu_kernel
// CHECK-SAME:    loom.gpu_attention = {causal, inputs = 3 : i64, key = 1 : i64, query = 0 : i64, scale = 1.250000e-01 : f32, value = 2 : i64}
func.func @gpu_kernel(%q: tensor<4x64x32xbf16>, %k: tensor<4x64x32xbf16>, %v: tensor<4x64x16xbf16>)
    -> tensor<4x64x16xbf16> attributes {loom.kernel} {
  %s = arith.constant dense<1.250000e-01> : tensor<bf16>
  %0 = loom.attention %q, %k, %v scale %s causal accumulate f32
      : (tensor<4x64x32xbf16>, tensor<4x64x32xbf16>, tensor<4x64x16xbf16>, tensor<bf16>) -> tensor<4x64x16xbf16>
  return %0 : tensor<4x64x16xbf16>
}

// -----

// Not marked: f32 operands (the GPU kernel multiplies 16-bit ones), a
// kernel doing more than the attention, and a function that is no kernel.

// CHECK-LABEL: func.func @f32_kernel
// CHECK-NOT:     loom.gpu_attention
// CHECK-LABEL: func.func @more
// CHECK-NOT:     loom.gpu_attention
// CHECK-LABEL: func.func @not_a_kernel
// CHECK-NOT:     loom.gpu_attention
func.func @f32_kernel(%q: tensor<64x32xf32>, %k: tensor<64x32xf32>, %v: tensor<64x16xf32>)
    -> tensor<64x16xf32> attributes {loom.kernel} {
  %0 = loom.attention %q, %k, %v accumulate f32
      : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  return %0 : tensor<64x16xf32>
}
func.func @more(%q: tensor<64x32xbf16>, %k: tensor<64x32xbf16>, %v: tensor<64x16xbf16>)
    -> tensor<64x16xbf16> attributes {loom.kernel} {
  %0 = loom.attention %q, %k, %v accumulate f32
      : (tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64x16xbf16>) -> tensor<64x16xbf16>
  %1 = loom.neg %0 : tensor<64x16xbf16>
  return %1 : tensor<64x16xbf16>
}
func.func @not_a_kernel(%q: tensor<64x32xbf16>, %k: tensor<64x32xbf16>, %v: tensor<64x16xbf16>)
    -> tensor<64x16xbf16> {
  %0 = loom.attention %q, %k, %v accumulate f32
      : (tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64x16xbf16>) -> tensor<64x16xbf16>
  return %0 : tensor<64x16xbf16>
}

// -----

// The gradient kernel too (heads up to 64 features): `output` and `lse`
// name the forward's results' arguments, `result_grad` the result
// gradient's; the three gradients follow the inputs.

// CHECK-LABEL: func.func @gpu_grad_kernel
// CHECK-SAME:    loom.gpu_attention = {inputs = 6 : i64, key = 1 : i64, lse = 4 : i64, output = 3 : i64, query = 0 : i64, result_grad = 5 : i64, value = 2 : i64}
func.func @gpu_grad_kernel(%q: tensor<2x64x32xbf16>, %k: tensor<2x64x32xbf16>,
                           %v: tensor<2x64x32xbf16>, %o: tensor<2x64x32xbf16>,
                           %lse: tensor<2x64xf32>, %dy: tensor<2x64x32xbf16>)
    -> (tensor<2x64x32xbf16>, tensor<2x64x32xbf16>, tensor<2x64x32xbf16>) attributes {loom.kernel} {
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %dy accumulate f32
      : (tensor<2x64x32xbf16>, tensor<2x64x32xbf16>, tensor<2x64x32xbf16>, tensor<2x64x32xbf16>, tensor<2x64xf32>, tensor<2x64x32xbf16>)
      -> (tensor<2x64x32xbf16>, tensor<2x64x32xbf16>, tensor<2x64x32xbf16>)
  return %dq, %dk, %dv : tensor<2x64x32xbf16>, tensor<2x64x32xbf16>, tensor<2x64x32xbf16>
}

// -----

// Not marked: a gradient of heads wider than 128 features (the backward's
// registers), and one whose results come back in another order.

// CHECK-LABEL: func.func @wide_grad
// CHECK-NOT:     loom.gpu_attention
// CHECK-LABEL: func.func @swapped_grad
// CHECK-NOT:     loom.gpu_attention
func.func @wide_grad(%q: tensor<64x144xbf16>, %k: tensor<64x144xbf16>,
                     %v: tensor<64x144xbf16>, %o: tensor<64x144xbf16>,
                     %lse: tensor<64xf32>, %dy: tensor<64x144xbf16>)
    -> (tensor<64x144xbf16>, tensor<64x144xbf16>, tensor<64x144xbf16>) attributes {loom.kernel} {
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %dy accumulate f32
      : (tensor<64x144xbf16>, tensor<64x144xbf16>, tensor<64x144xbf16>, tensor<64x144xbf16>, tensor<64xf32>, tensor<64x144xbf16>)
      -> (tensor<64x144xbf16>, tensor<64x144xbf16>, tensor<64x144xbf16>)
  return %dq, %dk, %dv : tensor<64x144xbf16>, tensor<64x144xbf16>, tensor<64x144xbf16>
}
func.func @swapped_grad(%q: tensor<64x32xbf16>, %k: tensor<64x32xbf16>,
                        %v: tensor<64x32xbf16>, %o: tensor<64x32xbf16>,
                        %lse: tensor<64xf32>, %dy: tensor<64x32xbf16>)
    -> (tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64x32xbf16>) attributes {loom.kernel} {
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %dy accumulate f32
      : (tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64xf32>, tensor<64x32xbf16>)
      -> (tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64x32xbf16>)
  return %dk, %dq, %dv : tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<64x32xbf16>
}
