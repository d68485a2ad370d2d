// RUN: loom-opt %s --split-input-file --loom-fuse-attention -verify-diagnostics | FileCheck %s

// f32 scores whose probabilities are cast to the 16-bit values' type (a
// bf16 model's queries and keys made f32 by f32 rotary tables): not fused,
// and said so at the product with the values.
// CHECK-LABEL: func.func @scores_of_another_type
// CHECK-NOT: loom.attention
// CHECK: loom.softmax
func.func @scores_of_another_type(%q: tensor<32x16xf32>, %k: tensor<48x16xf32>, %v: tensor<48x16xbf16>) -> tensor<32x16xbf16> {
  %kt = loom.transpose %k perm [1, 0] : tensor<48x16xf32> -> tensor<16x48xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<32x16xf32>, tensor<16x48xf32>) -> tensor<32x48xf32>
  %p = loom.softmax %s axis 1 : tensor<32x48xf32>
  %c = loom.cast %p : tensor<32x48xf32> to tensor<32x48xbf16>
  // expected-warning @+1 {{attention is not fused into one kernel: its scores are 'f32' and its values 'bf16' (give the queries and keys the values' type)}}
  %o = loom.matmul %c, %v accumulate f32 : (tensor<32x48xbf16>, tensor<48x16xbf16>) -> tensor<32x16xbf16>
  return %o : tensor<32x16xbf16>
}

// -----

// One type throughout: fused, nothing said.
// CHECK-LABEL: func.func @one_type
// CHECK: loom.attention
func.func @one_type(%q: tensor<32x16xbf16>, %k: tensor<48x16xbf16>, %v: tensor<48x16xbf16>) -> tensor<32x16xbf16> {
  %kt = loom.transpose %k perm [1, 0] : tensor<48x16xbf16> -> tensor<16x48xbf16>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<32x16xbf16>, tensor<16x48xbf16>) -> tensor<32x48xbf16>
  %p = loom.softmax %s axis 1 : tensor<32x48xbf16>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<32x48xbf16>, tensor<48x16xbf16>) -> tensor<32x16xbf16>
  return %o : tensor<32x16xbf16>
}
