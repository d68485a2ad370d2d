// RUN: loom-opt %s --split-input-file --verify-diagnostics

// One case per verifier error of the loom dialect, its attributes and its
// type inference.

//===----------------------------------------------------------------------===//
// loom.constant
//===----------------------------------------------------------------------===//

func.func @constant_not_scalar() {
  // expected-error @+1 {{'loom.constant' op must produce a rank-0 tensor}}
  %0 = loom.constant 1.0 : tensor<4xf32>
  return
}

// -----

func.func @constant_bad_element() {
  // expected-error @+1 {{'loom.constant' op result #0 must be ranked tensor of}}
  %0 = loom.constant 1.0 : tensor<f64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise binary ops (inferred result types)
//===----------------------------------------------------------------------===//

func.func @add_wrong_shape(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{'loom.add' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x9xf32>'}}
  // expected-error @+1 {{'loom.add' op failed to infer returned types}}
  %0 = loom.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x9xf32>
  return
}

// -----

func.func @add_not_promoted(%a: tensor<4x8xbf16>, %b: tensor<8xf32>) {
  // expected-error @+2 {{'loom.add' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x8xbf16>'}}
  // expected-error @+1 {{'loom.add' op failed to infer returned types}}
  %0 = loom.add %a, %b : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @sub_no_broadcast(%a: tensor<4x8xf32>, %b: tensor<9xf32>) {
  // expected-error @+2 {{shape mismatch: cannot broadcast [4, 8] with [9]}}
  // expected-error @+1 {{'loom.sub' op failed to infer returned types}}
  %0 = loom.sub %a, %b : (tensor<4x8xf32>, tensor<9xf32>) -> tensor<4x9xf32>
  return
}

// -----

func.func @mul_dtype_conflict(%a: tensor<8xf16>, %b: tensor<8xbf16>) {
  // expected-error @+2 {{dtype conflict: f16 and bf16 have no common type; cast one of them explicitly}}
  // expected-error @+1 {{'loom.mul' op failed to infer returned types}}
  %0 = loom.mul %a, %b : (tensor<8xf16>, tensor<8xbf16>) -> tensor<8xf16>
  return
}

// -----

func.func @div_integer(%a: tensor<8xf32>, %b: tensor<8xi32>) {
  // expected-error @+1 {{'loom.div' op operand #1 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %0 = loom.div %a, %b : (tensor<8xf32>, tensor<8xi32>) -> tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise unary ops and cast
//===----------------------------------------------------------------------===//

func.func @gelu_changes_type(%a: tensor<8xf32>) {
  // expected-error @+1 {{'loom.gelu' op requires the same type for all operands and results}}
  %0 = "loom.gelu"(%a) : (tensor<8xf32>) -> tensor<8xbf16>
  return
}

// -----

func.func @cast_changes_shape(%a: tensor<64x512xf32>) {
  // expected-error @+1 {{'loom.cast' op changes the shape from [64, 512] to [512, 64]}}
  %0 = loom.cast %a : tensor<64x512xf32> to tensor<512x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.matmul
//===----------------------------------------------------------------------===//

func.func @matmul_wrong_shape(%a: tensor<64x512xbf16>, %b: tensor<512x128xbf16>) {
  // expected-error @+2 {{'loom.matmul' op inferred type(s) 'tensor<64x128xbf16>' are incompatible with return type(s) of operation 'tensor<64x512xbf16>'}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b accumulate f32 : (tensor<64x512xbf16>, tensor<512x128xbf16>) -> tensor<64x512xbf16>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<64x512xf32>, %b: tensor<256x128xf32>) {
  // expected-error @+2 {{shape mismatch: matmul contracts [64, 512] with [256, 128] (512 != 256)}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b accumulate f32 : (tensor<64x512xf32>, tensor<256x128xf32>) -> tensor<64x128xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<512xf32>, %b: tensor<512x128xf32>) {
  // expected-error @+2 {{rank mismatch: matmul needs operands of rank >= 2, got [512] @ [512, 128]}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b accumulate f32 : (tensor<512xf32>, tensor<512x128xf32>) -> tensor<128xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x16x8xf32>, %b: tensor<3x8x16xf32>) {
  // expected-error @+2 {{shape mismatch: matmul batch dimensions of [2, 16, 8] and [3, 8, 16] do not broadcast}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b accumulate f32 : (tensor<2x16x8xf32>, tensor<3x8x16xf32>) -> tensor<2x16x16xf32>
  return
}

// -----

func.func @matmul_multiply_bf16(%a: tensor<64x512xf32>, %b: tensor<512x128xf32>) {
  // expected-error @+1 {{'loom.matmul' op multiplies in 'bf16'; only tf32 is supported}}
  %0 = loom.matmul %a, %b multiply bf16 accumulate f32 : (tensor<64x512xf32>, tensor<512x128xf32>) -> tensor<64x128xf32>
  return
}

// -----

func.func @matmul_tf32_of_bf16(%a: tensor<64x512xbf16>, %b: tensor<512x128xbf16>) {
  // expected-error @+1 {{'loom.matmul' op multiply tf32 needs f32 operands and f32 accumulation, not 'bf16' accumulated in 'f32'}}
  %0 = loom.matmul %a, %b multiply tf32 accumulate f32 : (tensor<64x512xbf16>, tensor<512x128xbf16>) -> tensor<64x128xbf16>
  return
}

// -----

func.func @matmul_mixed_operands(%a: tensor<64x512xbf16>, %b: tensor<512x128xf32>) {
  // expected-error @+1 {{'loom.matmul' op operands differ in element type: 'bf16' and 'f32'}}
  %0 = loom.matmul %a, %b accumulate f32 : (tensor<64x512xbf16>, tensor<512x128xf32>) -> tensor<64x128xbf16>
  return
}

// -----

func.func @matmul_narrow_accumulate(%a: tensor<64x512xf32>, %b: tensor<512x128xf32>) {
  // expected-error @+1 {{'loom.matmul' op accumulates in 'bf16'; expected f32 or the operand type 'f32'}}
  %0 = loom.matmul %a, %b accumulate bf16 : (tensor<64x512xf32>, tensor<512x128xf32>) -> tensor<64x128xf32>
  return
}

// -----

// The result may be the operand type or the accumulation type, nothing else.
func.func @matmul_result_type(%a: tensor<64x512xbf16>, %b: tensor<512x128xbf16>) {
  // expected-error @+1 {{'loom.matmul' op result element type 'f16' is neither the operand type 'bf16' nor the accumulation type 'f32'}}
  %0 = loom.matmul %a, %b accumulate f32 : (tensor<64x512xbf16>, tensor<512x128xbf16>) -> tensor<64x128xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Softmax, causal mask, normalizations
//===----------------------------------------------------------------------===//

func.func @softmax_axis(%a: tensor<16x64xf32>) {
  // expected-error @+1 {{'loom.softmax' op axis 2 is out of range for a tensor of rank 2}}
  %0 = loom.softmax %a axis 2 : tensor<16x64xf32>
  return
}

// -----

func.func @softmax_negative_axis(%a: tensor<16x64xf32>) {
  // expected-error @+1 {{'loom.softmax' op axis -1 is out of range for a tensor of rank 2}}
  %0 = loom.softmax %a axis -1 : tensor<16x64xf32>
  return
}

// -----

func.func @causal_mask_rank(%a: tensor<16xf32>) {
  // expected-error @+1 {{'loom.causal_mask' op needs a tensor of rank >= 2 (queries x keys)}}
  %0 = loom.causal_mask %a : tensor<16xf32>
  return
}

// -----

func.func @layernorm_scale_shape(%x: tensor<64x512xf32>, %g: tensor<256xf32>) {
  // expected-error @+1 {{'loom.layernorm' op scale must have shape [512], got [256]}}
  %0 = loom.layernorm %x scale %g epsilon 1.0e-5 : (tensor<64x512xf32>, tensor<256xf32>) -> tensor<64x512xf32>
  return
}

// -----

func.func @layernorm_bias_shape(%x: tensor<64x512xf32>, %g: tensor<512xf32>, %b: tensor<1x512xf32>) {
  // expected-error @+1 {{'loom.layernorm' op bias must have shape [512], got [1, 512]}}
  %0 = loom.layernorm %x scale %g bias %b epsilon 1.0e-5 : (tensor<64x512xf32>, tensor<512xf32>, tensor<1x512xf32>) -> tensor<64x512xf32>
  return
}

// -----

func.func @layernorm_scalar(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'loom.layernorm' op cannot normalize a scalar}}
  %0 = loom.layernorm %x scale %g epsilon 1.0e-5 : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

func.func @layernorm_epsilon(%x: tensor<64x512xf32>) {
  // expected-error @+1 {{'loom.layernorm' op epsilon must be positive}}
  %0 = loom.layernorm %x epsilon 0.0 : (tensor<64x512xf32>) -> tensor<64x512xf32>
  return
}

// -----

func.func @layernorm_not_promoted(%x: tensor<64x512xbf16>, %g: tensor<512xf32>) {
  // expected-error @+1 {{'loom.layernorm' op must produce 'tensor<64x512xf32>'}}
  %0 = loom.layernorm %x scale %g epsilon 1.0e-5 : (tensor<64x512xbf16>, tensor<512xf32>) -> tensor<64x512xbf16>
  return
}

// -----

func.func @layernorm_dtype_conflict(%x: tensor<64x512xbf16>, %g: tensor<512xf16>) {
  // expected-error @+1 {{'loom.layernorm' op dtype conflict: bf16 and f16 have no common type; cast one of them explicitly}}
  %0 = loom.layernorm %x scale %g epsilon 1.0e-5 : (tensor<64x512xbf16>, tensor<512xf16>) -> tensor<64x512xbf16>
  return
}

// -----

func.func @rmsnorm_scale_shape(%x: tensor<64x512xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'loom.rmsnorm' op scale must have shape [512], got [64]}}
  %0 = loom.rmsnorm %x scale %g epsilon 1.0e-5 : (tensor<64x512xf32>, tensor<64xf32>) -> tensor<64x512xf32>
  return
}

// -----

func.func @rmsnorm_epsilon(%x: tensor<64x512xf32>) {
  // expected-error @+1 {{'loom.rmsnorm' op epsilon must be positive}}
  %0 = loom.rmsnorm %x epsilon -1.0e-5 : (tensor<64x512xf32>) -> tensor<64x512xf32>
  return
}

// -----

func.func @rmsnorm_wrong_result(%x: tensor<64x512xf32>) {
  // expected-error @+1 {{'loom.rmsnorm' op must produce 'tensor<64x512xf32>'}}
  %0 = loom.rmsnorm %x epsilon 1.0e-5 : (tensor<64x512xf32>) -> tensor<64x256xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Indexing and data movement
//===----------------------------------------------------------------------===//

func.func @embedding_rows_count(%t: tensor<500x64xf32>, %ids: tensor<16xi32>, %rows: tensor<400xi32>) {
  // expected-error @+1 {{'loom.embedding' op needs one row id per row of its table (500), got 'tensor<400xi32>'}}
  %0 = loom.embedding %t[%ids] rows %rows of 1000 : (tensor<500x64xf32>, tensor<16xi32>, tensor<400xi32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @embedding_grad_rows_vocab(%ids: tensor<16xi32>, %g: tensor<16x64xf32>, %rows: tensor<500xi32>) {
  // expected-error @+1 {{'loom.embedding_grad' op holds 500 rows of a table of 100}}
  %0 = loom.embedding_grad %ids, %g rows %rows of 100 : (tensor<16xi32>, tensor<16x64xf32>, tensor<500xi32>) -> tensor<500x64xf32>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<1000xf32>, %ids: tensor<16xi32>) {
  // expected-error @+2 {{rank mismatch: an embedding table is [rows, dim], got [1000]}}
  // expected-error @+1 {{'loom.embedding' op failed to infer returned types}}
  %0 = loom.embedding %t[%ids] : (tensor<1000xf32>, tensor<16xi32>) -> tensor<16xf32>
  return
}

// -----

func.func @embedding_wrong_shape(%t: tensor<1000x64xf32>, %ids: tensor<2x16xi32>) {
  // expected-error @+2 {{'loom.embedding' op inferred type(s) 'tensor<2x16x64xf32>' are incompatible with return type(s) of operation 'tensor<32x64xf32>'}}
  // expected-error @+1 {{'loom.embedding' op failed to infer returned types}}
  %0 = loom.embedding %t[%ids] : (tensor<1000x64xf32>, tensor<2x16xi32>) -> tensor<32x64xf32>
  return
}

// -----

func.func @arange_rank() {
  // expected-error @+1 {{'loom.arange' op must produce a rank-1 tensor}}
  %0 = loom.arange : tensor<4x4xi32>
  return
}

// -----

func.func @transpose_wrong_shape(%x: tensor<2x16x4x8xf32>) {
  // expected-error @+2 {{'loom.transpose' op inferred type(s) 'tensor<2x4x16x8xf32>' are incompatible with return type(s) of operation 'tensor<2x16x4x8xf32>'}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %x perm [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x16x4x8xf32>
  return
}

// -----

func.func @transpose_perm_rank(%x: tensor<16x8xf32>) {
  // expected-error @+2 {{rank mismatch: permutation [0, 2, 1] has 3 entries for a tensor of rank 2}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %x perm [0, 2, 1] : tensor<16x8xf32> -> tensor<16x8xf32>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<16x8xf32>) {
  // expected-error @+2 {{[1, 1] is not a permutation of 0..1}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %x perm [1, 1] : tensor<16x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'loom.reshape' op changes the element type}}
  %0 = loom.reshape %x : tensor<2x16xf32> -> tensor<32xbf16>
  return
}

// -----

func.func @reshape_element_count(%x: tensor<2x16xf32>) {
  // expected-error @+1 {{'loom.reshape' op changes the number of elements from 32 to 30}}
  %0 = loom.reshape %x : tensor<2x16xf32> -> tensor<2x15xf32>
  return
}

// -----

func.func @split_axis(%x: tensor<16x64xf32>) {
  // expected-error @+1 {{'loom.split' op axis 2 is out of range for a tensor of rank 2}}
  %0:2 = loom.split %x axis 2 : tensor<16x64xf32> -> tensor<16x32xf32>, tensor<16x32xf32>
  return
}

// -----

func.func @split_no_pieces(%x: tensor<16x64xf32>) {
  // expected-error @+1 {{'loom.split' op must produce at least one piece}}
  "loom.split"(%x) <{axis = 1 : i64}> : (tensor<16x64xf32>) -> ()
  return
}

// -----

func.func @split_piece_shapes(%x: tensor<16x64xf32>) {
  // expected-error @+1 {{'loom.split' op shape mismatch: cannot concatenate [16, 32] and [8, 32] along axis 1}}
  %0:2 = loom.split %x axis 1 : tensor<16x64xf32> -> tensor<16x32xf32>, tensor<8x32xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<16x64xf32>) {
  // expected-error @+1 {{'loom.split' op pieces do not add up to [16, 64]}}
  %0:2 = loom.split %x axis 1 : tensor<16x64xf32> -> tensor<16x32xf32>, tensor<16x16xf32>
  return
}

// -----

func.func @split_element_type(%x: tensor<16x64xf32>) {
  // expected-error @+1 {{'loom.split' op changes the element type}}
  %0:2 = loom.split %x axis 1 : tensor<16x64xf32> -> tensor<16x32xf32>, tensor<16x32xbf16>
  return
}

// -----

func.func @concat_wrong_shape(%a: tensor<16x32xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+2 {{'loom.concat' op inferred type(s) 'tensor<16x40xf32>' are incompatible with return type(s) of operation 'tensor<32x32xf32>'}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %a, %b axis 1 : (tensor<16x32xf32>, tensor<16x8xf32>) -> tensor<32x32xf32>
  return
}

// -----

func.func @concat_mismatch(%a: tensor<16x32xf32>, %b: tensor<8x8xf32>) {
  // expected-error @+2 {{shape mismatch: cannot concatenate [16, 32] and [8, 8] along axis 1}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %a, %b axis 1 : (tensor<16x32xf32>, tensor<8x8xf32>) -> tensor<16x40xf32>
  return
}

// -----

func.func @concat_axis(%a: tensor<16x32xf32>) {
  // expected-error @+2 {{axis 2 is out of range for a tensor of rank 2}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %a axis 2 : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @concat_dtype(%a: tensor<16x32xf32>, %b: tensor<16x32xbf16>) {
  // expected-error @+2 {{dtype conflict: concat of different element types}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %a, %b axis 1 : (tensor<16x32xf32>, tensor<16x32xbf16>) -> tensor<16x64xf32>
  return
}

// -----

func.func @concat_nothing() {
  // expected-error @+2 {{concat needs at least one tensor}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = "loom.concat"() <{axis = 0 : i64}> : () -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

func.func @sum_wrong_shape(%x: tensor<16x64xf32>) {
  // expected-error @+2 {{'loom.sum' op inferred type(s) 'tensor<16x1xf32>' are incompatible with return type(s) of operation 'tensor<16xf32>'}}
  // expected-error @+1 {{'loom.sum' op failed to infer returned types}}
  %0 = loom.sum %x axis 1 keepdim : tensor<16x64xf32> -> tensor<16xf32>
  return
}

// -----

func.func @mean_axis(%x: tensor<16x64xf32>) {
  // expected-error @+2 {{axis 3 is out of range for a tensor of rank 2}}
  // expected-error @+1 {{'loom.mean' op failed to infer returned types}}
  %0 = loom.mean %x axis 3 : tensor<16x64xf32> -> tensor<16xf32>
  return
}

// -----

func.func @max_element_type(%x: tensor<16x64xbf16>) {
  // expected-error @+2 {{'loom.max' op inferred type(s) 'tensor<16xbf16>' are incompatible with return type(s) of operation 'tensor<16xf32>'}}
  // expected-error @+1 {{'loom.max' op failed to infer returned types}}
  %0 = loom.max %x axis 1 : tensor<16x64xbf16> -> tensor<16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

func.func @cross_entropy_labels(%l: tensor<2x16x1000xf32>, %t: tensor<2x1000xi32>) {
  // expected-error @+1 {{'loom.cross_entropy' op labels [2, 1000] must be the logits' shape [2, 16, 1000] without its last (class) dimension}}
  %0 = loom.cross_entropy %l, %t : (tensor<2x16x1000xf32>, tensor<2x1000xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_scalar(%l: tensor<f32>, %t: tensor<i32>) {
  // expected-error @+1 {{'loom.cross_entropy' op labels [] must be the logits' shape [] without its last (class) dimension}}
  %0 = loom.cross_entropy %l, %t : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_result(%l: tensor<16x10xf32>, %t: tensor<16xi32>) {
  // expected-error @+1 {{'loom.cross_entropy' op result #0 must be 0D tensor of 32-bit float values}}
  %0 = loom.cross_entropy %l, %t : (tensor<16x10xf32>, tensor<16xi32>) -> tensor<bf16>
  return
}

// -----

func.func @mse_shapes(%y: tensor<64x8xf32>, %t: tensor<8x64xf32>) {
  // expected-error @+1 {{'loom.mse' op compares tensors of different shapes [64, 8] and [8, 64]}}
  %0 = loom.mse %y, %t : (tensor<64x8xf32>, tensor<8x64xf32>) -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.stage and loom.yield
//===----------------------------------------------------------------------===//

func.func @stage_negative() {
  // expected-error @+1 {{'loom.stage' op stage number must be non-negative, got -1}}
  loom.stage -1 {
    loom.yield
  }
  return
}

// -----

func.func @stage_arguments() {
  // expected-error @+1 {{'loom.stage' op body takes no arguments}}
  loom.stage 0 {
  ^bb0(%a: tensor<4xf32>):
    loom.yield
  }
  return
}

// -----

func.func @stage_other_terminator() {
  // expected-error @+1 {{'loom.stage' op body must end with loom.yield}}
  loom.stage 0 {
    func.return
  }
  return
}

// -----

func.func @stage_yield_types(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.stage' op body yields 'tensor<4xf32>' but the op produces 'tensor<4xbf16>'}}
  %0 = loom.stage 0 -> tensor<4xbf16> {
    loom.yield %a : tensor<4xf32>
  }
  return
}

// -----

func.func @stage_yield_count(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.stage' op body yields 'tensor<4xf32>', 'tensor<4xf32>' but the op produces 'tensor<4xf32>'}}
  %0 = loom.stage 0 -> tensor<4xf32> {
    loom.yield %a, %a : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

func.func @stage_empty() {
  // expected-error @+1 {{'loom.stage' op expects a non-empty block}}
  loom.stage 0 {
  }
  return
}

// -----

func.func @yield_outside(%a: tensor<4xf32>) {
  // expected-error @+1 {{'loom.yield' op expects parent op to be one of 'loom.stage, loom.moe'}}
  loom.yield %a : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// loom.moe
//===----------------------------------------------------------------------===//

func.func @moe_no_experts(%x: tensor<16x32xf32>, %r: tensor<32x0xf32>) {
  // expected-error @+1 {{'loom.moe' op needs at least one expert, got 0}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 1 : i64, capacity_factor = 1.0 : f64, experts = 0 : i64, top_k = 1 : i64}
      : (tensor<16x32xf32>, tensor<32x0xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<1x32xf32>):
    loom.yield %t : tensor<1x32xf32>
  }
  return
}

// -----

func.func @moe_top_k(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op top_k must be in [1, 4], got 5}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 20 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 5 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<20x32xf32>):
    loom.yield %t : tensor<20x32xf32>
  }
  return
}

// -----

func.func @moe_top_k_zero(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op top_k must be in [1, 4], got 0}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 1 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 0 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<1x32xf32>):
    loom.yield %t : tensor<1x32xf32>
  }
  return
}

// -----

func.func @moe_capacity_factor(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op capacity_factor must be positive}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 1 : i64, capacity_factor = 0.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<1x32xf32>):
    loom.yield %t : tensor<1x32xf32>
  }
  return
}

// -----

func.func @moe_axis(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op needs the expert mesh axis}}
  %0 = loom.moe %x router %r {axis = "", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>):
    loom.yield %t : tensor<8x32xf32>
  }
  return
}

// -----

func.func @moe_scalar_input(%x: tensor<f32>, %r: tensor<1x4xf32>) {
  // expected-error @+1 {{'loom.moe' op input must have a feature dimension}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 1 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<f32>, tensor<1x4xf32>) -> tensor<f32> {
  ^bb0(%t: tensor<1x1xf32>):
    loom.yield %t : tensor<1x1xf32>
  }
  return
}

// -----

func.func @moe_empty_features(%x: tensor<16x0xf32>, %r: tensor<0x4xf32>) {
  // expected-error @+1 {{'loom.moe' op input features must be non-empty}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 1 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x0xf32>, tensor<0x4xf32>) -> tensor<16x0xf32> {
  ^bb0(%t: tensor<1x0xf32>):
    loom.yield %t : tensor<1x0xf32>
  }
  return
}

// -----

func.func @moe_router(%x: tensor<16x32xf32>, %r: tensor<4x32xf32>) {
  // expected-error @+1 {{'loom.moe' op router must have shape [32, 4], got [4, 32]}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<4x32xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>):
    loom.yield %t : tensor<8x32xf32>
  }
  return
}

// -----

func.func @moe_capacity(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // ceil(2 * 16 * 1.0 / 4) is 8, not 9.
  // expected-error @+1 {{'loom.moe' op capacity 9 does not follow from the routing parameters}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 9 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<9x32xf32>):
    loom.yield %t : tensor<9x32xf32>
  }
  return
}

// -----

func.func @moe_body_arguments(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>, %w: tensor<4x32x32xf32>) {
  // expected-error @+1 {{'loom.moe' op body must take the token tile and one argument per expert parameter}}
  %0 = loom.moe %x router %r params(%w) {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<4x32x32xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>):
    loom.yield %t : tensor<8x32xf32>
  }
  return
}

// -----

func.func @moe_tile(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op token tile must be 'tensor<8x32xf32>'}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<16x32xf32>):
    loom.yield %t : tensor<16x32xf32>
  }
  return
}

// -----

func.func @moe_param_not_stacked(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>, %w: tensor<2x32x32xf32>) {
  // expected-error @+1 {{'loom.moe' op expert parameter 'tensor<2x32x32xf32>' must be [experts, ...] with the body taking one expert's slice}}
  %0 = loom.moe %x router %r params(%w) {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<2x32x32xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>, %we: tensor<32x32xf32>):
    loom.yield %t : tensor<8x32xf32>
  }
  return
}

// -----

func.func @moe_param_slice(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>, %w: tensor<4x32x32xf32>) {
  // expected-error @+1 {{'loom.moe' op expert parameter 'tensor<4x32x32xf32>' must be [experts, ...] with the body taking one expert's slice}}
  %0 = loom.moe %x router %r params(%w) {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<4x32x32xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>, %we: tensor<4x32x32xf32>):
    loom.yield %t : tensor<8x32xf32>
  }
  return
}

// -----

func.func @moe_yield_count(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op body must yield one token tile}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>):
    loom.yield %t, %t : tensor<8x32xf32>, tensor<8x32xf32>
  }
  return
}

// -----

func.func @moe_other_terminator(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op body must yield one token tile}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>):
    func.return %t : tensor<8x32xf32>
  }
  return
}

// -----

func.func @moe_yield_shape(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op body must yield a [capacity, features] tile}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>):
    %s = loom.sum %t axis 0 : tensor<8x32xf32> -> tensor<32xf32>
    loom.yield %s : tensor<32xf32>
  }
  return
}

// -----

func.func @moe_result(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op result must be 'tensor<16x32xf32>'}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xbf16> {
  ^bb0(%t: tensor<8x32xf32>):
    loom.yield %t : tensor<8x32xf32>
  }
  return
}

// -----

func.func @moe_isolated(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>, %b: tensor<32xf32>) {
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>):
    // expected-error @+2 {{using value defined outside the region}}
    // expected-note @-4 {{required by region isolation constraints}}
    %a = loom.add %t, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    loom.yield %a : tensor<8x32xf32>
  }
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.train
//===----------------------------------------------------------------------===//

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op unknown optimizer 'lamb' (expected sgd, adam or adamw)}}
  loom.train @m optimizer "lamb" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op optimizer 'sgd' has no hyperparameter 'beta1'}}
  loom.train @m optimizer "sgd" {beta1 = 0.9} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op hyperparameter 'lr' must be a number}}
  loom.train @m optimizer "adamw" {lr = "fast"} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op needs at least one microbatch}}
  loom.train @m optimizer "adam" {} microbatches 0 schedule "1f1b" loss_scale "none" steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op needs at least one step}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 0
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op unknown pipeline schedule 'zigzag'}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "zigzag" loss_scale "none" steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op unknown loss scaling 'auto'}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "auto" steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op static loss scaling needs an initial_scale}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "static" steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op initial_scale goes with static or dynamic loss scaling, only}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" initial_scale 128.0 steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op unknown learning-rate schedule 'linear' (expected constant, warmup_cosine or warmup_linear)}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1 {lr_schedule = "linear"}
}
// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op warmup and min_lr go with the warmup_cosine and warmup_linear schedules, only}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1 {warmup = 10.0 : f64}
}
// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op warmup must be a whole number of steps}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1 {lr_schedule = "warmup_cosine", warmup = 2.5 : f64}
}
// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op min_lr must be non-negative}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1 {lr_schedule = "warmup_cosine", min_lr = -1.0 : f64}
}
// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op clip_grad_norm must be positive}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1 {clip_grad_norm = 0.0 : f64}
}

// -----

module {
  // expected-error @+1 {{'loom.train' op refers to an unknown model @nothing}}
  loom.train @nothing optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
}

// -----

module {
  shard.grid @gpus(shape = 2)
  // expected-error @+1 {{'loom.train' op refers to an unknown model @gpus}}
  loom.train @gpus optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.output = "l"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op model @m has no loom.loss result}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
}

// -----

func.func @train_nested() {
  // expected-error @+1 {{'loom.train' op expects parent op 'builtin.module'}}
  loom.train @train_nested optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
  return
}

// -----

//===----------------------------------------------------------------------===//
// Discardable attributes: arguments, results, operations
//===----------------------------------------------------------------------===//

// The attribute name may or may not be printed with its own quotes.
// expected-error-re @+1 {{'func.func' op '{{"?}}loom.input{{"?}}' must be a non-empty string}}
func.func @input_empty(%a: tensor<4xf32> {loom.input = ""}) {
  return
}

// -----

// The attribute name may or may not be printed with its own quotes.
// expected-error-re @+1 {{'func.func' op '{{"?}}loom.param{{"?}}' must be a non-empty string}}
func.func @param_not_string(%a: tensor<4xf32> {loom.param = 1 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.init' must be a #loom.init}}
func.func @init_not_init(%a: tensor<4xf32> {loom.param = "a", loom.init = "zeros"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 1 has an initializer but is not a param}}
func.func @init_on_input(%a: tensor<4xf32> {loom.param = "a"}, %b: tensor<4xf32> {loom.input = "b", loom.init = #loom.init<zeros>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.expert_param' must be a unit attribute}}
func.func @expert_param_value(%a: tensor<2x4xf32> {loom.param = "a", loom.expert_param = 1}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0 is an expert param but not a param}}
func.func @expert_param_input(%a: tensor<2x4xf32> {loom.input = "a", loom.expert_param}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op unknown loom argument attribute 'loom.weight'}}
func.func @unknown_arg_attr(%a: tensor<4xf32> {loom.weight = "a"}) {
  return
}

// -----

// The attribute name may or may not be printed with its own quotes.
// expected-error-re @+1 {{'func.func' op '{{"?}}loom.output{{"?}}' must be a non-empty string}}
func.func @output_empty(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.output = ""}) {
  return %a : tensor<4xf32>
}

// -----

// The attribute name may or may not be printed with its own quotes.
// expected-error-re @+1 {{'func.func' op '{{"?}}loom.loss{{"?}}' must be a non-empty string}}
func.func @loss_not_string(%a: tensor<f32>) -> (tensor<f32> {loom.loss}) {
  return %a : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op 'loom.assemble' must be "rows", "mean" or "sum"}}
func.func @bad_assemble(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.assemble = "max"}) attributes {loom.forward_microbatches = 2 : i64} {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'loom.forward_microbatches' must be a count of at least 2 on a model}}
func.func @one_microbatch(%a: tensor<4xf32>) -> tensor<4xf32> attributes {loom.forward_microbatches = 1 : i64} {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op unknown loom result attribute 'loom.input'}}
func.func @unknown_result_attr(%a: tensor<4xf32>) -> (tensor<4xf32> {loom.input = "a"}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op 'loom.precision' must be a #loom.precision on a module}}
func.func @precision_on_func() attributes {loom.precision = #loom.precision<compute = bf16, accumulate = f32>} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op 'loom.precision' must be a #loom.precision on a module}}
module attributes {loom.precision = "bf16"} {
}

// -----

// expected-error @+1 {{'shard.grid' op names 3 axes for a grid of rank 2}}
shard.grid @gpus(shape = 2x2) {loom.axes = ["dp", "tp", "pp"]}

// -----

// expected-error @+1 {{'shard.grid' op 'loom.axes' must hold distinct axis names}}
shard.grid @gpus(shape = 2x2) {loom.axes = ["dp", "dp"]}

// -----

// expected-error @+1 {{'shard.grid' op 'loom.axes' must hold distinct axis names}}
shard.grid @gpus(shape = 2x2) {loom.axes = ["dp", 1 : i64]}

// -----

// expected-error @+1 {{'shard.grid' op 'loom.axes' must be an array of names on a shard.grid}}
shard.grid @gpus(shape = 2x2) {loom.axes = "dp"}

// -----

// expected-error @+1 {{'func.func' op 'loom.axes' must be an array of names on a shard.grid}}
func.func @axes_on_func() attributes {loom.axes = ["dp"]} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.pipeline_axis' must be an axis name}}
func.func @pipeline_axis_not_string() attributes {loom.pipeline_axis = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.partition_of' must name a model, on a func.func}}
func.func @partition_of_not_string() attributes {loom.partition_of = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.grid' must name a shard.grid, on a func.func}}
func.func @grid_not_symbol() attributes {loom.grid = "g"} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.sharding' must be an array of i16 arrays (grid axes per dimension)}}
func.func @sharding_not_axes(%x: tensor<8xf32> {loom.sharding = [1 : i64]}) {
  return
}

// -----

func.func @update_bucket_not_number(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.neg' op 'loom.update_bucket' must be an update bucket number}}
  %0 = loom.neg %x {loom.update_bucket = "first"} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @gradient_bucket_not_on_all_reduce(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.neg' op 'loom.gradient_bucket' must be a gradient bucket number, on a shard.all_reduce}}
  %0 = loom.neg %x {loom.gradient_bucket = 0 : i64} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 2) {sym_visibility = "private"}
func.func @gradient_bucket_negative(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'shard.all_reduce' op 'loom.gradient_bucket' must be a gradient bucket number, on a shard.all_reduce}}
  %0 = shard.all_reduce %x on @g grid_axes = [0] {loom.gradient_bucket = -1 : i64} : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// A GPU attention mark needs the operands' positions.
// expected-error @+1 {{'func.func' op 'loom.gpu_attention' must be {query, key, value, inputs (, output, lse, result_grad): positions; causal: unit; scale: float}, on a function}}
func.func @gpu_attention_without_positions(%x: tensor<8xf32>) attributes {loom.gpu_attention = {query = 0 : i64}} {
  return
}

// -----

// A backward's mark names the forward's result and log-sum-exp too.
// expected-error @+1 {{'func.func' op 'loom.gpu_attention' must be {query, key, value, inputs (, output, lse, result_grad): positions; causal: unit; scale: float}, on a function}}
func.func @gpu_attention_grad_without_output(%x: tensor<8xf32>) attributes {loom.gpu_attention = {inputs = 5 : i64, key = 1 : i64, output = 3 : i64, query = 0 : i64, result_grad = 4 : i64, value = 2 : i64}} {
  return
}

// -----

func.func @gpu_attention_on_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.neg' op 'loom.gpu_attention' must be {query, key, value, inputs (, output, lse, result_grad): positions; causal: unit; scale: float}, on a function}}
  %0 = loom.neg %x {loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @update_kernel_on_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.neg' op 'loom.update_kernel' marks an update kernel (unit, on a function)}}
  %0 = loom.neg %x {loom.update_kernel} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @+1 {{'func.func' op unknown loom attribute 'loom.mesh'}}
func.func @unknown_op_attr() attributes {loom.mesh = "gpus"} {
  return
}

// -----

//===----------------------------------------------------------------------===//
// #loom.precision and #loom.init
//===----------------------------------------------------------------------===//

// expected-error @+1 {{precision types must be f32, f16 or bf16}}
module attributes {loom.precision = #loom.precision<compute = f64, accumulate = f64>} {
}

// -----

// expected-error @+1 {{precision types must be f32, f16 or bf16}}
module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = i32>} {
}

// -----

// expected-error @+1 {{accumulation type 'bf16' must be f32 or the compute type 'f32'}}
module attributes {loom.precision = #loom.precision<compute = f32, accumulate = bf16>} {
}

// -----

// expected-error @+1 {{tf32 matmuls accumulate in f32, not 'f16'}}
module attributes {loom.precision = #loom.precision<compute = tf32, accumulate = f16>} {
}

// -----

// expected-error @+1 {{precision types must be f32, f16 or bf16 (or tf32 for the compute type)}}
module attributes {loom.precision = #loom.precision<compute = f32, accumulate = tf32>} {
}

// -----

// expected-error @+1 {{unknown initializer 'xavier'}}
func.func @init_unknown(%a: tensor<4xf32> {loom.param = "a", loom.init = #loom.init<xavier>}) {
  return
}

// -----

// expected-error @+1 {{initializer 'zeros' takes 0 argument(s), got 1}}
func.func @init_zeros_arity(%a: tensor<4xf32> {loom.param = "a", loom.init = #loom.init<zeros(1.0)>}) {
  return
}

// -----

// expected-error @+1 {{initializer 'constant' takes 1 argument(s), got 0}}
func.func @init_constant_arity(%a: tensor<4xf32> {loom.param = "a", loom.init = #loom.init<constant>}) {
  return
}

// -----

// expected-error @+1 {{initializer 'uniform' takes 2 argument(s), got 1}}
func.func @init_uniform_arity(%a: tensor<4xf32> {loom.param = "a", loom.init = #loom.init<uniform(0.5)>}) {
  return
}

// -----

// expected-error @+1 {{normal initializer needs a positive standard deviation}}
func.func @init_normal_std(%a: tensor<4xf32> {loom.param = "a", loom.init = #loom.init<normal(-0.02)>}) {
  return
}

// -----

// expected-error @+1 {{uniform initializer needs low < high}}
func.func @init_uniform_order(%a: tensor<4xf32> {loom.param = "a", loom.init = #loom.init<uniform(0.1, -0.1)>}) {
  return
}

// -----

func.func @moe_tile_dtype(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) {
  // expected-error @+1 {{'loom.moe' op token tile must be 'tensor<8x32xf32>'}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xbf16> {
  ^bb0(%t: tensor<8x32xbf16>):
    loom.yield %t : tensor<8x32xbf16>
  }
  return
}

// -----

func.func @moe_router_dtype(%x: tensor<16x32xbf16>, %r: tensor<32x4xbf16>) {
  // expected-error @+1 {{'loom.moe' op router must be f32}}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xbf16>, tensor<32x4xbf16>) -> tensor<16x32xbf16> {
  ^bb0(%t: tensor<8x32xbf16>):
    loom.yield %t : tensor<8x32xbf16>
  }
  return
}

// -----

func.func @stage_without_terminator(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.stage' op body must end with loom.yield}}
  loom.stage 0 {
    %0 = loom.gelu %x : tensor<4xf32>
  }
  return
}

// -----

func.func @constant_not_integral() {
  // expected-error @+1 {{'loom.constant' op integer constant 1.500000e+00 is not integral}}
  %0 = loom.constant 1.5 : tensor<i32>
  return
}

// -----

func.func @layernorm_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'loom.layernorm' op cannot normalize a scalar}}
  %0 = loom.layernorm %x epsilon 1.0e-05 : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @m(%x: tensor<f32>) -> (tensor<f32> {loom.loss = "loss"}) {
  return %x : tensor<f32>
}
// expected-error @+1 {{'loom.train' op needs at least one microbatch}}
loom.train @m optimizer "sgd" {} microbatches -1 schedule "gpipe" loss_scale "none" steps 1

// -----

func.func @m(%x: tensor<f32>) -> (tensor<f32> {loom.loss = "loss"}) {
  return %x : tensor<f32>
}
// expected-error @+1 {{'loom.train' op needs at least one step}}
loom.train @m optimizer "sgd" {} microbatches 1 schedule "gpipe" loss_scale "none" steps -5

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

// -----

func.func @broadcast_bad_dim(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'loom.broadcast' op cannot broadcast dim 1 of size 3 to 8}}
  %0 = loom.broadcast %x : tensor<4x3xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_lower_rank(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'loom.broadcast' op cannot broadcast rank 2 to rank 1}}
  %0 = loom.broadcast %x : tensor<2x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @broadcast_element_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.broadcast' op must keep the element type}}
  %0 = loom.broadcast %x : tensor<4xf32> -> tensor<2x4xbf16>
  return
}

// -----

func.func @norm_grad_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'loom.norm_grad' op cannot normalize a scalar}}
  %0:3 = loom.norm_grad %x, %x epsilon 1.0e-5 : (tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<1xf32>, tensor<1xf32>)
  return
}

// -----

func.func @norm_grad_shapes(%x: tensor<4x8xf32>, %dy: tensor<4x9xf32>) {
  // expected-error @+1 {{'loom.norm_grad' op needs a gradient of the input's shape, and the input's type as its first result}}
  %0:3 = loom.norm_grad %x, %dy epsilon 1.0e-5 : (tensor<4x8xf32>, tensor<4x9xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @norm_grad_result(%x: tensor<4x8xbf16>) {
  // expected-error @+1 {{'loom.norm_grad' op needs a gradient of the input's shape, and the input's type as its first result}}
  %0:3 = loom.norm_grad %x, %x epsilon 1.0e-5 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @norm_grad_scale(%x: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'loom.norm_grad' op needs a scale of the input's last dim, [8]}}
  %0:3 = loom.norm_grad %x, %x scale %g epsilon 1.0e-5 centered : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @norm_grad_parameter_grads(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.norm_grad' op needs f32 [8] scale and bias gradients}}
  %0:3 = loom.norm_grad %x, %x epsilon 1.0e-5 : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>)
  return
}

// -----

func.func @norm_grad_epsilon(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.norm_grad' op epsilon must be positive in f32, got 0}}
  %0:3 = loom.norm_grad %x, %x epsilon 0.0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// The lowering adds epsilon in f32, where 1e-60 is 0.
func.func @norm_grad_epsilon_f32(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.norm_grad' op epsilon must be positive in f32, got 1.000000e-60}}
  %0:3 = loom.norm_grad %x, %x epsilon 1.0e-60 : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @activation_grad_unknown(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.activation_grad' op unknown activation 'tanh' (expected gelu, relu, silu or abs)}}
  %0 = loom.activation_grad "tanh" %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @activation_grad_shape(%x: tensor<4xf32>, %g: tensor<5xf32>) {
  // expected-error @+1 {{'loom.activation_grad' op needs an input and a gradient of the result's shape}}
  %0 = loom.activation_grad "relu" %x, %g : (tensor<4xf32>, tensor<5xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @embedding_grad_shape(%ids: tensor<2x3xi32>, %g: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'loom.embedding_grad' op needs a gradient of shape ids x D and a V x D table}}
  %0 = loom.embedding_grad %ids, %g : (tensor<2x3xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  return
}

// -----

func.func @cross_entropy_grad_type(%l: tensor<3x5xf32>, %y: tensor<3xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op result must have the logits' type}}
  %0 = loom.cross_entropy_grad %l, %y, %g : (tensor<3x5xf32>, tensor<3xi32>, tensor<f32>) -> tensor<3x5xbf16>
  return
}

// -----

func.func @cross_entropy_grad_labels(%l: tensor<3x5xf32>, %y: tensor<4xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{'loom.cross_entropy_grad' op labels must have the logits' shape without the classes}}
  %0 = loom.cross_entropy_grad %l, %y, %g : (tensor<3x5xf32>, tensor<4xi32>, tensor<f32>) -> tensor<3x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.accumulate
//===----------------------------------------------------------------------===//

func.func @one_microbatch(%g: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.accumulate' op accumulates over at least 2 microbatches, not 1}}
  %m = loom.accumulate %g over 1 microbatches : tensor<8xf32>
  return %m : tensor<8xf32>
}

// -----

func.func @bf16_sum(%g: tensor<8xbf16>) -> tensor<8xbf16> {
  // expected-error @+1 {{'loom.accumulate' op operand #0 must be ranked tensor of 32-bit float values}}
  %m = loom.accumulate %g over 2 microbatches : tensor<8xbf16>
  return %m : tensor<8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// Vocab-parallel cross-entropy
//===----------------------------------------------------------------------===//

func.func @vocab_ids(%x: tensor<4x8xf32>, %l: tensor<4xi32>, %ids: tensor<6xi32>, %m: tensor<4xf32>) {
  // expected-error @+1 {{'loom.vocab_stats' op needs one id per class of the logits}}
  %s, %t = loom.vocab_stats %x, %l, %ids, %m : (tensor<4x8xf32>, tensor<4xi32>, tensor<6xi32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @vocab_rows(%x: tensor<4x8xf32>, %l: tensor<4xi32>, %ids: tensor<8xi32>, %m: tensor<3xf32>) {
  // expected-error @+1 {{'loom.vocab_stats' op row statistics must have the labels' shape}}
  %s, %t = loom.vocab_stats %x, %l, %ids, %m : (tensor<4x8xf32>, tensor<4xi32>, tensor<8xi32>, tensor<3xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @vocab_labels(%x: tensor<4x8xf32>, %l: tensor<5xi32>, %ids: tensor<8xi32>, %m: tensor<4xf32>, %s: tensor<4xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'loom.vocab_grad' op labels must have the logits' shape without the classes}}
  %d = loom.vocab_grad %x, %l, %ids, %m, %s, %g : (tensor<4x8xf32>, tensor<5xi32>, tensor<8xi32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @vocab_loss(%m: tensor<4xf32>, %s: tensor<4xf32>, %t: tensor<3xf32>) {
  // expected-error @+1 {{'loom.vocab_loss' op row statistics must have one shape}}
  %l = loom.vocab_loss %m, %s, %t : (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<f32>
  return
}

// -----

func.func @moe_route(%p: tensor<16x4xf32>, %p3: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op top_k must be in [1, 4], got 5}}
  %e, %s, %src, %c = loom.moe_route %p top_k 5 capacity 5 : tensor<16x4xf32> -> tensor<16x5xi32>, tensor<16x5xi32>, tensor<20xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_route_slots(%p: tensor<16x8xf32>) {
  // The routing counts in 32 bits: 8 experts of 2^28 slots are 2^31.
  // expected-error @+1 {{'loom.moe_route' op routes 2147483648 slots (experts x capacity) and 32 choices (tokens x top_k); the routing counts in 32 bits, at most 2147483647 of each}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 268435456 : tensor<16x8xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<2147483648xi32>, tensor<8xf32>
  return
}

// -----

func.func @moe_route_capacity(%p: tensor<16x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op capacity must be positive, got 0}}
  %e, %s, %src, %c = loom.moe_route %p top_k 1 capacity 0 : tensor<16x4xf32> -> tensor<16x1xi32>, tensor<16x1xi32>, tensor<0xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_route_source(%p: tensor<16x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op source must have shape [20], got [16]}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 5 : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<16xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_route_rank(%p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op probs must be [tokens, experts]}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 5 : tensor<2x8x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_gate(%p: tensor<16x4xf32>, %e: tensor<8x2xi32>) {
  // expected-error @+1 {{'loom.moe_gate' op needs probs [tokens, experts] and expert [tokens, top_k]}}
  %g = loom.moe_gate %p[%e] : (tensor<16x4xf32>, tensor<8x2xi32>) -> tensor<8x2xf32>
  return
}

// -----

func.func @moe_dispatch(%x: tensor<16x32xf32>, %src: tensor<20xi32>, %s: tensor<16x2xi32>) {
  // expected-error @+1 {{'loom.moe_dispatch' op needs tokens [N, D] and slots [S, D] of one element type}}
  %t = loom.moe_dispatch %x[%src, %s] : (tensor<16x32xf32>, tensor<20xi32>, tensor<16x2xi32>) -> tensor<20x16xf32>
  return
}

// -----

func.func @moe_dispatch_source(%x: tensor<16x32xf32>, %src: tensor<24xi32>, %s: tensor<16x2xi32>) {
  // expected-error @+1 {{'loom.moe_dispatch' op source must have shape [20], got [24]}}
  %t = loom.moe_dispatch %x[%src, %s] : (tensor<16x32xf32>, tensor<24xi32>, tensor<16x2xi32>) -> tensor<20x32xf32>
  return
}

// -----

func.func @moe_combine(%o: tensor<20x32xf32>, %src: tensor<20xi32>, %s: tensor<8x2xi32>) {
  // expected-error @+1 {{'loom.moe_combine' op slot must be [tokens, top_k]}}
  %y = loom.moe_combine %o[%src, %s] : (tensor<20x32xf32>, tensor<20xi32>, tensor<8x2xi32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @moe_combine_weights(%o: tensor<20x32xf32>, %src: tensor<20xi32>, %s: tensor<16x2xi32>, %g: tensor<16x1xf32>) {
  // expected-error @+1 {{'loom.moe_combine' op weights must have shape [16, 2], got [16, 1]}}
  %y = loom.moe_combine %o[%src, %s] weights %g : (tensor<20x32xf32>, tensor<20xi32>, tensor<16x2xi32>, tensor<16x1xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @moe_stats(%e: tensor<16x2xi32>, %s: tensor<16x1xi32>) {
  // expected-error @+1 {{'loom.moe_stats' op needs expert and slot of one [tokens, top_k] type}}
  %st = loom.moe_stats %e, %s : (tensor<16x2xi32>, tensor<16x1xi32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @moe_stats_result(%e: tensor<16x2xi32>, %s: tensor<16x2xi32>) {
  // expected-error @+1 {{'loom.moe_stats' op result must be [experts, 2]}}
  %st = loom.moe_stats %e, %s : (tensor<16x2xi32>, tensor<16x2xi32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @moe_route_buffer(%p: tensor<16x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op buffer must be in [1, capacity / blocks], got 6}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 5 buffer 6 : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<24xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_route_blocks(%p: tensor<16x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op blocks must divide the capacity 6, got 4}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 6 buffer 1 blocks 4 : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<16xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_exchange_map_block(%c: tensor<4x2x1xi32>, %o: tensor<4x2x1xi32>) {
  // expected-error @+1 {{'loom.moe_exchange_map' op needs blocks dividing the capacity, and a block operand exactly when there are several}}
  %s, %src = loom.moe_exchange_map %c, %o capacity 6 buffer 3 blocks 2 : tensor<4x2x1xi32>, tensor<4x2x1xi32> -> tensor<12x1xi32>, tensor<3xi32>
  return
}

// -----

func.func @moe_route_offsets(%p: tensor<16x4xf32>, %o: tensor<1x1x4xi32>) {
  // expected-error @+1 {{'loom.moe_route' op offsets must have shape [1, 2, 4], got [1, 1, 4]}}
  %e, %s, %src, %c = loom.moe_route %p offsets %o top_k 2 capacity 5 buffer 4 : tensor<16x4xf32>, tensor<1x1x4xi32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<16xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_counts(%e: tensor<16x2xi32>) {
  // expected-error @+1 {{'loom.moe_counts' op needs expert [tokens, top_k] and result [1, top_k, experts]}}
  %c = loom.moe_counts %e : tensor<16x2xi32> -> tensor<2x4xi32>
  return
}

// -----

func.func @moe_offsets(%c: tensor<4x2x8xi32>) {
  // expected-error @+1 {{'loom.moe_offsets' op needs counts and result of one [ranks, top_k, experts] type}}
  %o = loom.moe_offsets %c : tensor<4x2x8xi32> -> tensor<1x2x8xi32>
  return
}

// -----

func.func @moe_exchange_map(%c: tensor<4x2x2xi32>, %o: tensor<4x2x2xi32>) {
  // expected-error @+1 {{'loom.moe_exchange_map' op needs 1 <= buffer <= capacity / blocks}}
  %s, %src = loom.moe_exchange_map %c, %o capacity 3 buffer 4 : tensor<4x2x2xi32>, tensor<4x2x2xi32> -> tensor<32x1xi32>, tensor<6xi32>
  return
}

// -----

func.func @moe_exchange_map_slot(%c: tensor<4x2x2xi32>, %o: tensor<4x2x2xi32>) {
  // expected-error @+1 {{'loom.moe_exchange_map' op slot must have shape [24, 1], got [32, 1]}}
  %s, %src = loom.moe_exchange_map %c, %o capacity 6 buffer 3 : tensor<4x2x2xi32>, tensor<4x2x2xi32> -> tensor<32x1xi32>, tensor<12xi32>
  return
}

// -----

func.func @moe_exchange_map_types(%c: tensor<4x2x2xi32>, %o: tensor<4x2x1xi32>) {
  // expected-error @+1 {{'loom.moe_exchange_map' op needs counts and offsets of one [ranks, top_k, experts] type}}
  %s, %src = loom.moe_exchange_map %c, %o capacity 6 buffer 3 : tensor<4x2x2xi32>, tensor<4x2x1xi32> -> tensor<24x1xi32>, tensor<12xi32>
  return
}

// -----

func.func @max_mask(%x: tensor<4x3xf32>, %m: tensor<4x2xf32>) {
  // expected-error @+1 {{'loom.max_mask' op needs a max that broadcasts to the input, and the input's shape as result}}
  %r = loom.max_mask %x, %m : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @moe_exchange_axes(%p: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op 'loom.moe_exchange_axes' must be a list of axis names, on a loom.moe_route}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 4 {loom.moe_exchange_axes = ["ep", 1]}
      : tensor<8x4xf32> -> tensor<8x2xi32>, tensor<8x2xi32>, tensor<16xi32>, tensor<4xf32>
  return
}

// -----

func.func @attention_feature_size(%q: tensor<2x8x16xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'loom.attention' op query and key must have the same feature size}}
  %0 = loom.attention %q, %k, %v accumulate f32 : (tensor<2x8x16xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'loom.attention' op query, key and value must have the same batch dimensions}}
  %0 = loom.attention %q, %k, %v accumulate f32 : (tensor<2x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_keys(%q: tensor<8x16xf32>, %k: tensor<12x16xf32>, %v: tensor<10x16xf32>) {
  // expected-error @+1 {{'loom.attention' op key and value must have the same number of keys}}
  %0 = loom.attention %q, %k, %v accumulate f32 : (tensor<8x16xf32>, tensor<12x16xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<8x16xf32>, %k: tensor<12x16xf32>, %v: tensor<12x4xf32>) {
  // expected-error @+1 {{'loom.attention' op result must have shape [8, 4]}}
  %0 = loom.attention %q, %k, %v accumulate f32 : (tensor<8x16xf32>, tensor<12x16xf32>, tensor<12x4xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @attention_types(%q: tensor<8x16xbf16>, %k: tensor<8x16xf32>, %v: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.attention' op query, key, value and result must have one element type}}
  %0 = loom.attention %q, %k, %v accumulate f32 : (tensor<8x16xbf16>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xbf16>
  return
}

// -----

func.func @attention_rank(%q: tensor<16xf32>, %k: tensor<16xf32>, %v: tensor<16xf32>) {
  // expected-error @+1 {{'loom.attention' op needs queries of rank >= 2 ([..., queries, features])}}
  %0 = loom.attention %q, %k, %v accumulate f32 : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @attention_ranks(%q: tensor<2x8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.attention' op query, key, value and result must have the same rank}}
  %0 = loom.attention %q, %k, %v accumulate f32 : (tensor<2x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x16xf32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'loom.attention' op scale must be a scalar of the operand type}}
  %0 = loom.attention %q, %k, %v scale %s accumulate f32 : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<1xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @attention_grad_types(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x4xf32>, %l: tensor<8xf32>, %g: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op gradients must have the types of query, key and value}}
  %0:3 = loom.attention_grad %q, %k, %v, %g, %l, %g accumulate f32 : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8x4xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>)
  return
}

// -----

func.func @attention_grad_shape(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x4xf32>, %l: tensor<8xf32>, %g: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op result must have shape [8, 4]}}
  %0:3 = loom.attention_grad %q, %k, %v, %g, %l, %g accumulate f32 : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>)
  return
}

// -----

func.func @attention_grad_output(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x4xf32>, %o: tensor<8x4xbf16>, %l: tensor<8xf32>, %g: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op output must have the type of result_grad}}
  %0:3 = loom.attention_grad %q, %k, %v, %o, %l, %g accumulate f32 : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xbf16>, tensor<8xf32>, tensor<8x4xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>)
  return
}

// -----

func.func @attention_grad_lse(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x4xf32>, %o: tensor<8x4xf32>, %l: tensor<8x1xf32>, %g: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.attention_grad' op lse must be f32 of shape [8]}}
  %0:3 = loom.attention_grad %q, %k, %v, %o, %l, %g accumulate f32 : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x1xf32>, tensor<8x4xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>)
  return
}

// -----

func.func @attention_lse(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>, %v: tensor<2x8x4xbf16>) {
  // expected-error @+1 {{'loom.attention' op lse must be f32 of shape [2, 8]}}
  %0:2 = loom.attention %q, %k, %v accumulate f32 : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x4xbf16>) -> (tensor<2x8x4xbf16>, tensor<2x8xbf16>)
  return
}

// -----

// A grid that is not there (hand-edited IR had verified).
// expected-error @+1 {{'func.func' op 'loom.grid' must name a shard.grid, on a func.func}}
func.func @grid_missing() attributes {loom.grid = @nope} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.stages_count' must be a count of stages, at least 1}}
func.func @no_stages() attributes {loom.stages_count = 0 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.schedule' must be gpipe, 1f1b, interleaved or zero_bubble}}
func.func @bogus_schedule() attributes {loom.schedule = "bogus", loom.stages_count = 2 : i64} {
  return
}

// -----

func.func @stage_past_count(%x: tensor<4xf32>) -> tensor<4xf32> attributes {loom.stages_count = 2 : i64} {
  // expected-error @+1 {{'loom.gelu' op 'loom.stage' 7 is past the 2 stages of its model}}
  %0 = loom.gelu %x {loom.stage = 7 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// An axis past the grid (hand-edited IR had split nothing, silently).
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
// expected-error @+1 {{'func.func' op 'loom.sharding' names grid axis 5 of a grid of rank 2}}
func.func @sharding_axis_past_grid(%x: tensor<4x8xf32> {loom.sharding = [array<i16: 5>, array<i16>]}) attributes {loom.grid = @g} {
  return
}

// -----

shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
// expected-error @+1 {{'func.func' op 'loom.sharding' splits by grid axis 0 twice}}
func.func @sharding_axis_twice(%x: tensor<4x8xf32> {loom.sharding = [array<i16: 0>, array<i16: 0>]}) attributes {loom.grid = @g} {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'loom.sharding' splits 3 dimensions of a value of rank 2}}
func.func @sharding_past_rank() -> (tensor<4x8xf32> {loom.sharding = [array<i16: 0>, array<i16>, array<i16>]}) {
  %e = tensor.empty() : tensor<4x8xf32>
  return %e : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{'func.func' op result 0 of type 'tensor<4x4xf32>' is in place of argument 0 of type 'tensor<4x8xf32>'}}
func.func @in_place_other_type(%x: tensor<4x8xf32>) -> (tensor<4x4xf32> {loom.in_place = 0 : i64}) {
  %e = tensor.empty() : tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2) {loom.axes = ["dp"]}
// expected-error @+1 {{'func.func' op 'loom.pipeline_axis' names axis 'pp', which grid 'g' does not have}}
func.func @pipeline_axis_not_in_grid() attributes {loom.grid = @g, loom.pipeline_axis = "pp"} {
  return
}

// -----

shard.grid @g(shape = 2) {loom.axes = ["dp"]}
func.func @moe_axis_not_in_grid(%p: tensor<16x4xf32>) attributes {loom.grid = @g} {
  // expected-error @+1 {{'loom.moe_route' op 'loom.moe_axis' names axis 'ep', which grid 'g' does not have}}
  %e, %s, %src, %c = loom.moe_route %p top_k 1 capacity 4 {loom.moe_axis = "ep"} : tensor<16x4xf32> -> tensor<16x1xi32>, tensor<16x1xi32>, tensor<16xi32>, tensor<4xf32>
  return
}

// -----

module {
  func.func @m(%a: tensor<4xf32>) -> (tensor<f32> {loom.loss = "loss"}) {
    %l = loom.mse %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  // expected-error @+1 {{'loom.train' op zero 2 is not built (expected zero 1)}}
  loom.train @m optimizer "adam" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1 {zero = 2 : i64}
}

// -----

// Only the generic form can leave out the rows held.
func.func @embedding_no_rows(%t: tensor<500x64xf32>, %ids: tensor<16xi32>) {
  // expected-error @+1 {{'loom.embedding' op needs both the rows it holds and the table's size}}
  %0 = "loom.embedding"(%t, %ids) <{vocab = 1000 : i64}> : (tensor<500x64xf32>, tensor<16xi32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @activation_grad_shapes(%x: tensor<4xf32>, %g: tensor<5xf32>) {
  // expected-error @+1 {{'loom.activation_grad' op needs an input and a gradient of the result's shape, and the gradient's type as result}}
  %0 = loom.activation_grad "gelu" %x, %g : (tensor<4xf32>, tensor<5xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @moe_route_expert_shape(%p: tensor<16x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op expert must have shape [16, 2], got [16, 1]}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 5 : tensor<16x4xf32> -> tensor<16x1xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_route_slot_shape(%p: tensor<16x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op slot must have shape [16, 2], got [8, 2]}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 5 : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<8x2xi32>, tensor<20xi32>, tensor<4xf32>
  return
}

// -----

func.func @moe_route_counts_shape(%p: tensor<16x4xf32>) {
  // expected-error @+1 {{'loom.moe_route' op first_counts must have shape [4], got [2]}}
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 5 : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<2xf32>
  return
}

// -----

func.func @moe_gate_result_shape(%p: tensor<16x4xf32>, %e: tensor<16x2xi32>) {
  // expected-error @+1 {{'loom.moe_gate' op result must have shape [16, 2], got [16, 4]}}
  %g = loom.moe_gate %p[%e] : (tensor<16x4xf32>, tensor<16x2xi32>) -> tensor<16x4xf32>
  return
}

// -----

func.func @moe_exchange_map_source_shape(%c: tensor<4x2x2xi32>, %o: tensor<4x2x2xi32>) {
  // expected-error @+1 {{'loom.moe_exchange_map' op source must have shape [12], got [13]}}
  %s, %src = loom.moe_exchange_map %c, %o capacity 6 buffer 3 : tensor<4x2x2xi32>, tensor<4x2x2xi32> -> tensor<24x1xi32>, tensor<13xi32>
  return
}

// -----

// An unpartitioned model names no loom.grid: its axes are the module's
// only grid's (a misspelt one had verified until loom-partition).
shard.grid @g(shape = 2) {loom.axes = ["pp"]}
// expected-error @+1 {{'func.func' op 'loom.pipeline_axis' names axis 'px', which grid 'g' does not have}}
func.func @pipeline_axis_unpartitioned() attributes {loom.pipeline_axis = "px"} {
  return
}

// -----

shard.grid @g(shape = 2) {loom.axes = ["ep"]}
func.func @moe_exchange_axes_twice(%p: tensor<16x4xf32>) attributes {loom.grid = @g} {
  // expected-error @+1 {{'loom.moe_route' op 'loom.moe_exchange_axes' names axis 'ep' twice}}
  %e, %s, %src, %c = loom.moe_route %p top_k 1 capacity 4 {loom.moe_exchange_axes = ["ep", "ep"]} : tensor<16x4xf32> -> tensor<16x1xi32>, tensor<16x1xi32>, tensor<16xi32>, tensor<4xf32>
  return
}

// -----

func.func @dropout_probability(%x: tensor<4xf32>, %r: tensor<4xi32>) {
  // expected-error @+1 {{'loom.dropout' op probability must be in [0, 1) in f32, got 1}}
  %d = loom.dropout %x positions(%r) {probability = 1.0 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_positions(%x: tensor<4x2xf32>, %r: tensor<4xi32>) {
  // expected-error @+1 {{'loom.dropout' op needs one positions vector per dim (2), got 1}}
  %d = loom.dropout %x positions(%r) {probability = 0.5 : f64, stream = 0 : i64} : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @dropout_position_size(%x: tensor<4xf32>, %r: tensor<5xi32>) {
  // expected-error @+1 {{'loom.dropout' op positions 0 must be an i32 vector of 4, got 'tensor<5xi32>'}}
  %d = loom.dropout %x positions(%r) {probability = 0.5 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<5xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_keys(%x: tensor<4xf32>, %r: tensor<4xi32>, %k: tensor<f32>) {
  // expected-error @+1 {{'loom.dropout' op keys are none or two f32 scalars (seed, microbatch)}}
  %d = loom.dropout %x positions(%r) keys(%k) {probability = 0.5 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @dropout_type(%x: tensor<4xf32>, %r: tensor<4xi32>) {
  // expected-error @+1 {{'loom.dropout' op result must have the input's type}}
  %d = loom.dropout %x positions(%r) {probability = 0.5 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xbf16>
  return
}
