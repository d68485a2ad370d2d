// RUN: loom-opt %s --split-input-file --loom-fuse-attention | FileCheck %s
// GPU builds fuse only what the GPU attention kernel runs: 16-bit operands
// accumulated in f32, sequences and feature sizes multiples of 16.
// RUN: loom-opt %s --split-input-file --loom-fuse-attention=gpu-kernel=true | FileCheck %s --check-prefix=GPU

// --loom-fuse-attention: softmax(causal_mask(q @ transpose(k) * s)) @ v
// becomes one loom.attention where its intermediates have no other use.

// Value features 8: no GPU kernel.
// GPU-LABEL: func.func @causal_scaled
// GPU-NOT: loom.attention
// CHECK-LABEL: func.func @causal_scaled
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x64x16xbf16>, %[[K:.+]]: tensor<2x4x64x16xbf16>, %[[V:.+]]: tensor<2x4x64x8xbf16>)
// CHECK: %[[S:.+]] = loom.constant
// CHECK-NEXT: %[[O:.+]] = loom.attention %[[Q]], %[[K]], %[[V]] scale %[[S]] causal accumulate f32 : (tensor<2x4x64x16xbf16>, tensor<2x4x64x16xbf16>, tensor<2x4x64x8xbf16>, tensor<bf16>) -> tensor<2x4x64x8xbf16>
// CHECK-NEXT: return %[[O]]
func.func @causal_scaled(%q: tensor<2x4x64x16xbf16>, %k: tensor<2x4x64x16xbf16>,
                         %v: tensor<2x4x64x8xbf16>) -> tensor<2x4x64x8xbf16> {
  %kt = loom.transpose %k perm [0, 1, 3, 2] : tensor<2x4x64x16xbf16> -> tensor<2x4x16x64xbf16>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<2x4x64x16xbf16>, tensor<2x4x16x64xbf16>) -> tensor<2x4x64x64xbf16>
  %c = loom.constant 2.500000e-01 : tensor<bf16>
  %ss = loom.mul %s, %c : (tensor<2x4x64x64xbf16>, tensor<bf16>) -> tensor<2x4x64x64xbf16>
  %m = loom.causal_mask %ss : tensor<2x4x64x64xbf16>
  %p = loom.softmax %m axis 3 : tensor<2x4x64x64xbf16>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<2x4x64x64xbf16>, tensor<2x4x64x8xbf16>) -> tensor<2x4x64x8xbf16>
  return %o : tensor<2x4x64x8xbf16>
}

// -----

// No scale, no mask, a matrix (no batch dims); the scale on the left.

// f32: no GPU kernel.
// GPU-LABEL: func.func @plain
// GPU-NOT: loom.attention
// CHECK-LABEL: func.func @plain
// CHECK: loom.attention %arg0, %arg1, %arg2 accumulate f32 : (tensor<32x16xf32>, tensor<48x16xf32>, tensor<48x16xf32>) -> tensor<32x16xf32>
// CHECK-NOT: loom.softmax
func.func @plain(%q: tensor<32x16xf32>, %k: tensor<48x16xf32>, %v: tensor<48x16xf32>) -> tensor<32x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<48x16xf32> -> tensor<16x48xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<32x16xf32>, tensor<16x48xf32>) -> tensor<32x48xf32>
  %p = loom.softmax %s axis 1 : tensor<32x48xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<32x48xf32>, tensor<48x16xf32>) -> tensor<32x16xf32>
  return %o : tensor<32x16xf32>
}

// CHECK-LABEL: func.func @scale_on_the_left
// CHECK: loom.attention %arg0, %arg1, %arg2 scale %{{.+}} accumulate f32
func.func @scale_on_the_left(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<32x32xf32>
  %c = loom.constant 2.500000e-01 : tensor<f32>
  %ss = loom.mul %c, %s : (tensor<f32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %p = loom.softmax %ss axis 1 : tensor<32x32xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<32x32xf32>, tensor<32x16xf32>) -> tensor<32x16xf32>
  return %o : tensor<32x16xf32>
}

// -----

// Left as they are: probabilities a model output also reads, a softmax
// along another axis, tf32 products, a mask before the scale, sequences
// without a common block of 16 (below).

// CHECK-LABEL: func.func @probabilities_read
// CHECK-NOT: loom.attention
// CHECK: loom.softmax
func.func @probabilities_read(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>)
    -> (tensor<32x16xf32>, tensor<32x32xf32>) {
  %kt = loom.transpose %k perm [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<32x32xf32>
  %p = loom.softmax %s axis 1 : tensor<32x32xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<32x32xf32>, tensor<32x16xf32>) -> tensor<32x16xf32>
  return %o, %p : tensor<32x16xf32>, tensor<32x32xf32>
}

// A scale computed from a param (a learned temperature): loom.attention_grad
// gives the scale no gradient, so fusing it would make its gradient 0.
// CHECK-LABEL: func.func @learned_scale
// CHECK-NOT: loom.attention
// CHECK: loom.softmax
func.func @learned_scale(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>,
                         %t: tensor<f32> {loom.param = "t"}) -> tensor<32x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<32x32xf32>
  %c = loom.constant 2.500000e-01 : tensor<f32>
  %scale = loom.mul %t, %c : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %ss = loom.mul %s, %scale : (tensor<32x32xf32>, tensor<f32>) -> tensor<32x32xf32>
  %p = loom.softmax %ss axis 1 : tensor<32x32xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<32x32xf32>, tensor<32x16xf32>) -> tensor<32x16xf32>
  return %o : tensor<32x16xf32>
}

// CHECK-LABEL: func.func @other_axis
// CHECK-NOT: loom.attention
func.func @other_axis(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<32x32xf32>
  %p = loom.softmax %s axis 0 : tensor<32x32xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<32x32xf32>, tensor<32x16xf32>) -> tensor<32x16xf32>
  return %o : tensor<32x16xf32>
}

// CHECK-LABEL: func.func @tf32
// CHECK-NOT: loom.attention
func.func @tf32(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = loom.matmul %q, %kt multiply tf32 accumulate f32 : (tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<32x32xf32>
  %p = loom.softmax %s axis 1 : tensor<32x32xf32>
  %o = loom.matmul %p, %v multiply tf32 accumulate f32 : (tensor<32x32xf32>, tensor<32x16xf32>) -> tensor<32x16xf32>
  return %o : tensor<32x16xf32>
}

// CHECK-LABEL: func.func @mask_then_scale
// CHECK-NOT: loom.attention
func.func @mask_then_scale(%q: tensor<32x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>) -> tensor<32x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<32x32xf32>
  %m = loom.causal_mask %s : tensor<32x32xf32>
  %c = loom.constant -2.500000e-01 : tensor<f32>
  %ss = loom.mul %m, %c : (tensor<32x32xf32>, tensor<f32>) -> tensor<32x32xf32>
  %p = loom.softmax %ss axis 1 : tensor<32x32xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<32x32xf32>, tensor<32x16xf32>) -> tensor<32x16xf32>
  return %o : tensor<32x16xf32>
}

// -----

// 1000 queries against 1024 keys share no block of 16 or more: the five
// ops stay (thousands of 8 x 8 blocks would be slower).
// CHECK-LABEL: func.func @small_blocks
// CHECK-NOT: loom.attention
func.func @small_blocks(%q: tensor<1000x16xf32>, %k: tensor<1024x16xf32>, %v: tensor<1024x16xf32>) -> tensor<1000x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<1024x16xf32> -> tensor<16x1024xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<1000x16xf32>, tensor<16x1024xf32>) -> tensor<1000x1024xf32>
  %p = loom.softmax %s axis 1 : tensor<1000x1024xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<1000x1024xf32>, tensor<1024x16xf32>) -> tensor<1000x16xf32>
  return %o : tensor<1000x16xf32>
}

// -----

// 1000 queries and keys share blocks of 50, which the CPU's register tiles
// (multiples of 32) do not divide: the five ops stay, whose matmuls are
// padded to whole tiles (fused, the blocks ran 2.5-6.5x slower). Blocks of
// 32 (T = 992) fuse.
// CHECK-LABEL: func.func @untiled_blocks
// CHECK-NOT: loom.attention
// CHECK-LABEL: func.func @blocks_of_32
// CHECK: loom.attention
func.func @untiled_blocks(%q: tensor<1000x16xf32>, %k: tensor<1000x16xf32>, %v: tensor<1000x16xf32>) -> tensor<1000x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<1000x16xf32> -> tensor<16x1000xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<1000x16xf32>, tensor<16x1000xf32>) -> tensor<1000x1000xf32>
  %p = loom.softmax %s axis 1 : tensor<1000x1000xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<1000x1000xf32>, tensor<1000x16xf32>) -> tensor<1000x16xf32>
  return %o : tensor<1000x16xf32>
}
func.func @blocks_of_32(%q: tensor<992x16xf32>, %k: tensor<992x16xf32>, %v: tensor<992x16xf32>) -> tensor<992x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<992x16xf32> -> tensor<16x992xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<992x16xf32>, tensor<16x992xf32>) -> tensor<992x992xf32>
  %p = loom.softmax %s axis 1 : tensor<992x992xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<992x992xf32>, tensor<992x16xf32>) -> tensor<992x16xf32>
  return %o : tensor<992x16xf32>
}

// -----

// bf16, 64 queries and keys, 32 and 16 features: fused for the GPU too.

// GPU-LABEL: func.func @gpu_shapes
// GPU: loom.attention %arg0, %arg1, %arg2 causal accumulate f32
// CHECK-LABEL: func.func @gpu_shapes
// CHECK: loom.attention %arg0, %arg1, %arg2 causal accumulate f32
func.func @gpu_shapes(%q: tensor<2x64x32xbf16>, %k: tensor<2x64x32xbf16>,
                      %v: tensor<2x64x16xbf16>) -> tensor<2x64x16xbf16> {
  %kt = loom.transpose %k perm [0, 2, 1] : tensor<2x64x32xbf16> -> tensor<2x32x64xbf16>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<2x64x32xbf16>, tensor<2x32x64xbf16>) -> tensor<2x64x64xbf16>
  %m = loom.causal_mask %s : tensor<2x64x64xbf16>
  %p = loom.softmax %m axis 2 : tensor<2x64x64xbf16>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<2x64x64xbf16>, tensor<2x64x16xbf16>) -> tensor<2x64x16xbf16>
  return %o : tensor<2x64x16xbf16>
}

// -----

// Grouped-query attention: keys and values whose batch dims broadcast to
// the queries' (two key/value heads for four query heads) are broadcast to
// them, then fused; the GPU kernel runs it too (bf16, 64 x 16).
// GPU-LABEL: func.func @grouped_query
// GPU: loom.attention
// CHECK-LABEL: func.func @grouped_query
// CHECK-SAME: (%[[Q:.+]]: tensor<2x2x2x64x16xbf16>, %[[K:.+]]: tensor<2x2x1x64x16xbf16>, %[[V:.+]]: tensor<2x2x1x64x16xbf16>)
// CHECK-DAG: %[[BK:.+]] = loom.broadcast %[[K]] : tensor<2x2x1x64x16xbf16> -> tensor<2x2x2x64x16xbf16>
// CHECK-DAG: %[[BV:.+]] = loom.broadcast %[[V]] : tensor<2x2x1x64x16xbf16> -> tensor<2x2x2x64x16xbf16>
// CHECK: loom.attention %[[Q]], %[[BK]], %[[BV]] causal accumulate f32
// CHECK-NOT: loom.softmax
func.func @grouped_query(%q: tensor<2x2x2x64x16xbf16>, %k: tensor<2x2x1x64x16xbf16>,
                         %v: tensor<2x2x1x64x16xbf16>) -> tensor<2x2x2x64x16xbf16> {
  %kt = loom.transpose %k perm [0, 1, 2, 4, 3] : tensor<2x2x1x64x16xbf16> -> tensor<2x2x1x16x64xbf16>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<2x2x2x64x16xbf16>, tensor<2x2x1x16x64xbf16>) -> tensor<2x2x2x64x64xbf16>
  %m = loom.causal_mask %s : tensor<2x2x2x64x64xbf16>
  %p = loom.softmax %m axis 4 : tensor<2x2x2x64x64xbf16>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<2x2x2x64x64xbf16>, tensor<2x2x1x64x16xbf16>) -> tensor<2x2x2x64x16xbf16>
  return %o : tensor<2x2x2x64x16xbf16>
}

// Keys and values without batch dims (one head shared by all: multi-query
// attention with the head dim dropped) are broadcast to every query head.
// CHECK-LABEL: func.func @shared_keys
// CHECK: loom.broadcast %arg1 : tensor<64x16xf32> -> tensor<2x4x64x16xf32>
// CHECK: loom.broadcast %arg2 : tensor<64x16xf32> -> tensor<2x4x64x16xf32>
// CHECK: loom.attention
func.func @shared_keys(%q: tensor<2x4x64x16xf32>, %k: tensor<64x16xf32>,
                       %v: tensor<64x16xf32>) -> tensor<2x4x64x16xf32> {
  %kt = loom.transpose %k perm [1, 0] : tensor<64x16xf32> -> tensor<16x64xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<2x4x64x16xf32>, tensor<16x64xf32>) -> tensor<2x4x64x64xf32>
  %p = loom.softmax %s axis 3 : tensor<2x4x64x64xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<2x4x64x64xf32>, tensor<64x16xf32>) -> tensor<2x4x64x16xf32>
  return %o : tensor<2x4x64x16xf32>
}

// Queries that broadcast to the keys' heads (a result with more heads than
// the queries) keep the five ops.
// CHECK-LABEL: func.func @queries_broadcast
// CHECK-NOT: loom.attention
// CHECK: loom.softmax
func.func @queries_broadcast(%q: tensor<2x1x64x16xf32>, %k: tensor<2x4x64x16xf32>,
                             %v: tensor<2x4x64x16xf32>) -> tensor<2x4x64x16xf32> {
  %kt = loom.transpose %k perm [0, 1, 3, 2] : tensor<2x4x64x16xf32> -> tensor<2x4x16x64xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<2x1x64x16xf32>, tensor<2x4x16x64xf32>) -> tensor<2x4x64x64xf32>
  %p = loom.softmax %s axis 3 : tensor<2x4x64x64xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<2x4x64x64xf32>, tensor<2x4x64x16xf32>) -> tensor<2x4x64x16xf32>
  return %o : tensor<2x4x64x16xf32>
}

// Keys of lower rank than the queries: their length is their own
// second-to-last dim (128), not the queries' dim at that index (16, the
// head width, would have made blocks of 16 and kept the five ops).
// CHECK-LABEL: func.func @lower_rank_keys
// CHECK: loom.broadcast %arg1 : tensor<4x128x16xf32> -> tensor<2x4x128x16xf32>
// CHECK: loom.attention {{.*}} causal
func.func @lower_rank_keys(%q: tensor<2x4x128x16xf32>, %k: tensor<4x128x16xf32>,
                           %v: tensor<4x128x16xf32>) -> tensor<2x4x128x16xf32> {
  %kt = loom.transpose %k perm [0, 2, 1] : tensor<4x128x16xf32> -> tensor<4x16x128xf32>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<2x4x128x16xf32>, tensor<4x16x128xf32>) -> tensor<2x4x128x128xf32>
  %m = loom.causal_mask %s : tensor<2x4x128x128xf32>
  %p = loom.softmax %m axis 3 : tensor<2x4x128x128xf32>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<2x4x128x128xf32>, tensor<4x128x16xf32>) -> tensor<2x4x128x16xf32>
  return %o : tensor<2x4x128x16xf32>
}

// The GPU kernel's shape rule reads the keys' own sequence dim too (the
// queries' dim 2 of keys of rank 2 lies past their shape).
// GPU-LABEL: func.func @gpu_lower_rank_keys
// GPU: loom.broadcast %arg1 : tensor<96x16xbf16> -> tensor<2x4x96x16xbf16>
// GPU: loom.attention
// CHECK-LABEL: func.func @gpu_lower_rank_keys
// CHECK: loom.attention
func.func @gpu_lower_rank_keys(%q: tensor<2x4x64x16xbf16>, %k: tensor<96x16xbf16>,
                               %v: tensor<96x16xbf16>) -> tensor<2x4x64x16xbf16> {
  %kt = loom.transpose %k perm [1, 0] : tensor<96x16xbf16> -> tensor<16x96xbf16>
  %s = loom.matmul %q, %kt accumulate f32 : (tensor<2x4x64x16xbf16>, tensor<16x96xbf16>) -> tensor<2x4x64x96xbf16>
  %p = loom.softmax %s axis 3 : tensor<2x4x64x96xbf16>
  %o = loom.matmul %p, %v accumulate f32 : (tensor<2x4x64x96xbf16>, tensor<96x16xbf16>) -> tensor<2x4x64x16xbf16>
  return %o : tensor<2x4x64x16xbf16>
}

// -----

// In a recomputed layer instance (`recompute block(h)`) the fused attention
// and its keys' broadcast belong to the instance too, so that the backward
// recomputes them: without the mark they, and with them q, k, v, the
// output and lse, had been kept from the forward.
// CHECK-LABEL: func.func @recomputed
// CHECK: loom.broadcast %arg1 {loom.recompute = "block.0"}
// CHECK: loom.attention {{.*}} {loom.recompute = "block.0"}
func.func @recomputed(%q: tensor<2x4x64x16xf32>, %k: tensor<2x1x64x16xf32>,
                      %v: tensor<2x4x64x16xf32>) -> tensor<2x4x64x16xf32> {
  %kt = loom.transpose %k perm [0, 1, 3, 2] {loom.recompute = "block.0"} : tensor<2x1x64x16xf32> -> tensor<2x1x16x64xf32>
  %s = loom.matmul %q, %kt accumulate f32 {loom.recompute = "block.0"} : (tensor<2x4x64x16xf32>, tensor<2x1x16x64xf32>) -> tensor<2x4x64x64xf32>
  %p = loom.softmax %s axis 3 {loom.recompute = "block.0"} : tensor<2x4x64x64xf32>
  %o = loom.matmul %p, %v accumulate f32 {loom.recompute = "block.0"} : (tensor<2x4x64x64xf32>, tensor<2x4x64x16xf32>) -> tensor<2x4x64x16xf32>
  return %o : tensor<2x4x64x16xf32>
}
