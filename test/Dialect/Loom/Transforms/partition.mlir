// RUN: loom-opt %s --split-input-file --loom-partition | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-partition=sequence-parallel | FileCheck %s --check-prefix=SP

// --loom-partition adds, next to each model @M, its per-rank program
// @M_spmd: one rank's blocks as tensor types, and the upstream shard
// collectives that move data between shardings.

// Column- then row-parallel (Megatron): the first matmul needs no data
// movement, the second leaves partial sums over tp, kept in f32 and reduced
// once before they are rounded to bf16. Shapes are one rank's blocks.
// CHECK-LABEL: func.func @megatron_mlp_spmd
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x16xbf16> {loom.sharding = [array<i16: 0>, array<i16>]}, %[[W1:[^:]+]]: tensor<16x16xbf16> {loom.sharding = [array<i16>, array<i16: 1>]}, %[[W2:[^:]+]]: tensor<16x16xbf16> {loom.sharding = [array<i16: 1>, array<i16>]})
// CHECK-SAME: -> (tensor<4x16xbf16> {loom.sharding = [array<i16: 0>, array<i16>]})
// CHECK-SAME: attributes {loom.grid = @g, loom.partition_of = "megatron_mlp"}
// CHECK-NEXT: [[H:%.+]] = loom.matmul %[[X]], %[[W1]] accumulate f32 : (tensor<4x16xbf16>, tensor<16x16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: [[G:%.+]] = loom.gelu [[H]] : tensor<4x16xbf16>
// CHECK-NEXT: [[P:%.+]] = loom.matmul [[G]], %[[W2]] accumulate f32 : (tensor<4x16xbf16>, tensor<16x16xbf16>) -> tensor<4x16xf32>
// CHECK-NEXT: [[R:%.+]] = shard.all_reduce [[P]] on @g grid_axes = [1] : tensor<4x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: [[Y:%.+]] = loom.cast [[R]] : tensor<4x16xf32> to tensor<4x16xbf16>
// CHECK-NEXT: return [[Y]]
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @megatron_mlp(%x: tensor<8x16xbf16>, %w1: tensor<16x32xbf16>, %w2: tensor<32x16xbf16>) -> tensor<8x16xbf16> {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xbf16>
  %s1 = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %w1s = shard.shard %w1 to %s1 : tensor<16x32xbf16>
  %s2 = shard.sharding @g split_axes = [[1], []] : !shard.sharding
  %w2s = shard.shard %w2 to %s2 : tensor<32x16xbf16>
  %h = loom.matmul %xs, %w1s accumulate f32 : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %g = loom.gelu %h : tensor<8x32xbf16>
  %y = loom.matmul %g, %w2s accumulate f32 : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<8x16xbf16>
  return %y : tensor<8x16xbf16>
}

// -----

// A replicated value meeting a split one is sliced: no data moves.
// CHECK-LABEL: func.func @slice_replicated_spmd
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x16xf32> {{{.*}}}, %[[B:[^:]+]]: tensor<8x16xf32>)
// CHECK-NEXT: [[S:%.+]] = shard.all_slice %[[B]] on @g grid_axes = [0] slice_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: loom.add %[[X]], [[S]] : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @slice_replicated(%x: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %y = loom.add %xs, %b : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// An f32 sum over a split axis reduces each rank's block, and the partial
// sums are all-reduced (where they are used: here the return): only the
// result moves. A max, or a bf16 sum (which would round before the ranks'
// values are added), needs the axis whole: gathered over tp; dp stays
// split. A mean's partial means are scaled by 1/2 before they are summed.
// CHECK-LABEL: func.func @reduce_split_spmd
// CHECK-SAME: -> (tensor<4xf32> {loom.sharding = [array<i16: 0>]}, tensor<4xf32> {loom.sharding = [array<i16: 0>]}, tensor<4xbf16> {loom.sharding = [array<i16: 0>]}, tensor<4xf32> {loom.sharding = [array<i16: 0>]})
// CHECK-NEXT: [[S:%.+]] = loom.sum %{{.+}} axis 1 : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT: [[G:%.+]] = shard.all_gather %{{.+}} on @g grid_axes = [1] gather_axis = 1 : tensor<4x8xf32> -> tensor<4x16xf32>
// CHECK-NEXT: [[M:%.+]] = loom.max [[G]] axis 1 : tensor<4x16xf32> -> tensor<4xf32>
// CHECK-NEXT: [[GB:%.+]] = shard.all_gather %{{.+}} on @g grid_axes = [1] gather_axis = 1 : tensor<4x8xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT: [[B:%.+]] = loom.sum [[GB]] axis 1 : tensor<4x16xbf16> -> tensor<4xbf16>
// CHECK-NEXT: [[MEAN:%.+]] = loom.mean %{{.+}} axis 1 : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT: [[HALF:%.+]] = loom.constant 5.000000e-01 : tensor<f32>
// CHECK-NEXT: [[SCALED:%.+]] = loom.mul [[MEAN]], [[HALF]]
// CHECK-NEXT: [[RS:%.+]] = shard.all_reduce [[S]] on @g grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: [[RM:%.+]] = shard.all_reduce [[SCALED]] on @g grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: return [[RS]], [[M]], [[B]], [[RM]]
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @reduce_split(%x: tensor<8x16xf32>, %b: tensor<8x16xbf16>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>, tensor<8xf32>) {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %bs = shard.shard %b to %s : tensor<8x16xbf16>
  %y = loom.sum %xs axis 1 : tensor<8x16xf32> -> tensor<8xf32>
  %m = loom.max %xs axis 1 : tensor<8x16xf32> -> tensor<8xf32>
  %z = loom.sum %bs axis 1 : tensor<8x16xbf16> -> tensor<8xbf16>
  %n = loom.mean %xs axis 1 : tensor<8x16xf32> -> tensor<8xf32>
  return %y, %m, %z, %n : tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>, tensor<8xf32>
}

// -----

// Splitting [8, 16] over tp on dim 1 into heads [8, 4, 4] splits the heads;
// a transpose carries the split along, and a reshape of the split dim
// keeps it on its outermost part. Flattening a split inner dim needs it
// whole.
// CHECK-LABEL: func.func @reshape_heads_spmd
// CHECK-SAME: -> (tensor<1x8x4xf32> {loom.sharding = [array<i16: 1>, array<i16>, array<i16>]}, tensor<128xf32>)
// CHECK-NEXT: loom.reshape %{{.+}} : tensor<8x8xf32> -> tensor<8x2x4xf32>
// CHECK-NEXT: loom.transpose %{{.+}} perm [1, 0, 2] : tensor<8x2x4xf32> -> tensor<2x8x4xf32>
// CHECK-NEXT: loom.reshape %{{.+}} : tensor<2x8x4xf32> -> tensor<1x2x8x4xf32>
// CHECK-NEXT: loom.sum %{{.+}} axis 1 : tensor<1x2x8x4xf32> -> tensor<1x8x4xf32>
// CHECK-NEXT: [[G:%.+]] = shard.all_gather %{{.+}} on @g grid_axes = [1] gather_axis = 1 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: loom.reshape [[G]] : tensor<8x16xf32> -> tensor<128xf32>
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @reshape_heads(%x: tensor<8x16xf32>) -> (tensor<2x8x4xf32>, tensor<128xf32>) {
  %s = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %h = loom.reshape %xs : tensor<8x16xf32> -> tensor<8x4x4xf32>
  %t = loom.transpose %h perm [1, 0, 2] : tensor<8x4x4xf32> -> tensor<4x8x4xf32>
  %u = loom.reshape %t : tensor<4x8x4xf32> -> tensor<2x2x8x4xf32>
  %v = loom.sum %u axis 1 : tensor<2x2x8x4xf32> -> tensor<2x8x4xf32>
  %f = loom.reshape %xs : tensor<8x16xf32> -> tensor<128xf32>
  return %v, %f : tensor<2x8x4xf32>, tensor<128xf32>
}

// -----

// A split contraction dim meeting a replicated operand: the operand is
// sliced to match, and the f32 partial sums are all-reduced.
// CHECK-LABEL: func.func @split_contraction_spmd
// CHECK-NEXT: [[S:%.+]] = shard.all_slice %{{.+}} on @g grid_axes = [1] slice_axis = 0 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: [[P:%.+]] = loom.matmul %{{.+}}, [[S]] accumulate f32 : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: [[R:%.+]] = shard.all_reduce [[P]] on @g grid_axes = [1]
// CHECK-NEXT: return [[R]]
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @split_contraction(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %y = loom.matmul %xs, %w accumulate f32 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// A mean loss over a split batch: each rank's mean of its block, scaled by
// 1/shards, summed over dp.
// CHECK-LABEL: func.func @loss_spmd
// CHECK-NEXT: [[S:%.+]] = shard.all_slice %{{.+}} on @g grid_axes = [0] slice_axis = 0 : tensor<8x4x10xf32> -> tensor<4x4x10xf32>
// CHECK-NEXT: [[L:%.+]] = loom.cross_entropy [[S]], %{{.+}} : (tensor<4x4x10xf32>, tensor<4x4xi32>) -> tensor<f32>
// CHECK-NEXT: [[C:%.+]] = loom.constant 5.000000e-01 : tensor<f32>
// CHECK-NEXT: [[M:%.+]] = loom.mul [[L]], [[C]]
// CHECK-NEXT: [[R:%.+]] = shard.all_reduce [[M]] on @g grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: return [[R]]
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @loss(%logits: tensor<8x4x10xf32>, %labels: tensor<8x4xi32>) -> tensor<f32> {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %ls = shard.shard %labels to %s : tensor<8x4xi32>
  %l = loom.cross_entropy %logits, %ls : (tensor<8x4x10xf32>, tensor<8x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Residual stream with two row-parallel matmuls: all-reduces by default;
// with sequence-parallel=true the partial sums are reduce-scattered along
// the sequence (dim 1), the norm runs on a sequence block, and the next
// matmul (row-parallel here, so it wants its input split along K) gets it
// with one all-to-all from the sequence split to the K split.
// CHECK-LABEL: func.func @sequence_parallel_spmd
// CHECK-NOT: shard.reduce_scatter
// CHECK: shard.all_reduce %{{.+}} on @g grid_axes = [1] : tensor<2x8x16xf32>
// CHECK-NOT: shard.reduce_scatter
// CHECK: shard.all_reduce %{{.+}} on @g grid_axes = [1] : tensor<2x8x16xf32>
// CHECK-NOT: shard.all_gather
// CHECK: return
// SP-LABEL: func.func @sequence_parallel_spmd
// SP-SAME: -> (tensor<2x4x16xbf16> {loom.sharding = [array<i16>, array<i16: 1>, array<i16>]})
// SP: shard.reduce_scatter %{{.+}} on @g grid_axes = [1] scatter_axis = 1 : tensor<2x8x16xf32> -> tensor<2x4x16xf32>
// SP: loom.layernorm %{{.+}} : (tensor<2x4x16xbf16>, tensor<16xf32>) -> tensor<2x4x16xf32>
// SP: shard.all_to_all %{{.+}} on @g grid_axes = [1] split_axis = 2 concat_axis = 1 : tensor<2x4x16xbf16> -> tensor<2x8x8xbf16>
// SP: shard.reduce_scatter %{{.+}} on @g grid_axes = [1] scatter_axis = 1
// SP-NOT: shard.all_reduce
// SP: return
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @sequence_parallel(%x: tensor<2x8x16xbf16>, %w: tensor<16x16xbf16>, %g: tensor<16xf32>) -> tensor<2x8x16xbf16> {
  %s = shard.sharding @g split_axes = [[], [], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x8x16xbf16>
  %s2 = shard.sharding @g split_axes = [[1], []] : !shard.sharding
  %ws = shard.shard %w to %s2 : tensor<16x16xbf16>
  %p = loom.matmul %xs, %ws accumulate f32 : (tensor<2x8x16xbf16>, tensor<16x16xbf16>) -> tensor<2x8x16xbf16>
  %r = loom.add %p, %x : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %n = loom.layernorm %r scale %g epsilon 1.0e-05 : (tensor<2x8x16xbf16>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %q = loom.cast %n : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
  %m = loom.matmul %q, %ws accumulate f32 : (tensor<2x8x16xbf16>, tensor<16x16xbf16>) -> tensor<2x8x16xbf16>
  %o = loom.add %m, %r : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o : tensor<2x8x16xbf16>
}

// -----

// One device: no per-rank program.
// CHECK-LABEL: func.func @one_device
// CHECK-NOT: _spmd
shard.grid @g(shape = 1x1) {loom.axes = ["dp", "tp"]}
func.func @one_device(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %y = loom.gelu %xs : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Axes of size 1 split nothing: only tp's split remains.
// CHECK-LABEL: func.func @size_one_axis_spmd
// CHECK-SAME: (%{{[^:]+}}: tensor<8x8xf32> {loom.sharding = [array<i16>, array<i16: 1>]})
shard.grid @g(shape = 1x2) {loom.axes = ["dp", "tp"]}
func.func @size_one_axis(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %y = loom.gelu %xs : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// An axis moving from one dim to another: one all_to_all (split the new
// dim, concatenate the old one), not a gather and a slice.
// CHECK-LABEL: func.func @move_axis_spmd
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x16xf32> {loom.sharding = [array<i16: 1>, array<i16>]})
// CHECK-NEXT: [[T:%.+]] = shard.all_to_all %[[X]] on @g grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x16xf32> -> tensor<8x8xf32>
// CHECK-NEXT: loom.gelu [[T]] : tensor<8x8xf32>
// CHECK-NOT: shard.all_gather
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @move_axis(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @g split_axes = [[1], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %s2 = shard.sharding @g split_axes = [[], [1]] : !shard.sharding
  %ys = shard.shard %xs to %s2 : tensor<8x16xf32>
  %y = loom.gelu %ys : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A mean over microbatches keeps its input's layout, partial sums
// included: the data-parallel sum of a weight's gradient runs after it,
// once per step, not once per microbatch.
// CHECK-LABEL: func.func @accumulate_partial_spmd
// CHECK: %[[G:.+]] = loom.matmul {{.+}} -> tensor<16x16xf32>
// CHECK: %[[MEAN:.+]] = loom.accumulate %[[G]] over 2 microbatches : tensor<16x16xf32>
// CHECK: shard.all_reduce %[[MEAN]] on @g grid_axes = [0]
shard.grid @g(shape = 2) {loom.axes = ["dp"]}
func.func @accumulate_partial(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>) -> tensor<16x16xf32> {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %dys = shard.shard %dy to %s : tensor<8x16xf32>
  %xt = loom.transpose %xs perm [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %g = loom.matmul %xt, %dys accumulate f32 : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %m = loom.accumulate %g over 2 microbatches : tensor<16x16xf32>
  return %m : tensor<16x16xf32>
}

// -----

// A tied embedding's gradient parts over dp x tp: the head's (a weight
// gradient partial over dp, transposed, split over tp on the vocabulary)
// and the lookup's (a scatter-add of each rank's rows into the whole
// table, partial over dp) stay partial sums: the transpose keeps them, the
// lookup's part is cut over tp (no data moves) to meet the head's, and
// their sum is summed over dp once, after the microbatches.
// CHECK-LABEL: func.func @tied_partial_spmd
// CHECK-NOT: shard.all_reduce
// CHECK: %[[HEAD:.+]] = loom.transpose %{{.+}} perm [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK: %[[LOOKUP:.+]] = loom.embedding_grad %{{.+}}, %{{.+}} : (tensor<4xi32>, tensor<4x4xf32>) -> tensor<16x4xf32>
// CHECK: %[[CUT:.+]] = shard.all_slice %[[LOOKUP]] on @g grid_axes = [1] slice_axis = 0 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK: %[[SUM:.+]] = loom.add %[[HEAD]], %[[CUT]] : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK: %[[MEAN:.+]] = loom.accumulate %[[SUM]] over 2 microbatches : tensor<8x4xf32>
// CHECK: shard.all_reduce %[[MEAN]] on @g grid_axes = [0]
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @tied_partial(%h: tensor<8x4xf32>, %dlogits: tensor<8x16xf32>, %ids: tensor<8xi32>, %dx: tensor<8x4xf32>) -> tensor<16x4xf32> {
  %rows = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %vocab = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %hs = shard.shard %h to %rows : tensor<8x4xf32>
  %dls = shard.shard %dlogits to %vocab : tensor<8x16xf32>
  %ids_s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %idss = shard.shard %ids to %ids_s : tensor<8xi32>
  %dxs = shard.shard %dx to %rows : tensor<8x4xf32>
  %ht = loom.transpose %hs perm [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %gw = loom.matmul %ht, %dls accumulate f32 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %head = loom.transpose %gw perm [1, 0] : tensor<4x16xf32> -> tensor<16x4xf32>
  %lookup = loom.embedding_grad %idss, %dxs : (tensor<8xi32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %sum = loom.add %head, %lookup : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  %m = loom.accumulate %sum over 2 microbatches : tensor<16x4xf32>
  return %m : tensor<16x4xf32>
}

// -----

// A table split by rows (wte shard [tp, _]) is looked up vocab-parallel,
// as Megatron-LM does: each rank looks the ids up among its rows (its
// block of arange(V), sliced: no data moves), zeros for the others', and
// the [.., D] result is summed over tp where it is read. Its gradient is
// scattered into the rank's rows only, split like the param. The table is
// never gathered.
// CHECK-LABEL: func.func @vocab_parallel_spmd
// CHECK-NOT: shard.all_gather
// CHECK: %[[ROWS:.+]] = shard.all_slice %{{.+}} on @g grid_axes = [1] slice_axis = 0 : tensor<16xi32> -> tensor<8xi32>
// CHECK: %[[E:.+]] = loom.embedding %{{.+}}[%{{.+}}] rows %[[ROWS]] of 16 : (tensor<8x4xf32>, tensor<4xi32>, tensor<8xi32>) -> tensor<4x4xf32>
// CHECK: %[[SUM:.+]] = shard.all_reduce %[[E]] on @g grid_axes = [1]
// CHECK: loom.embedding_grad %{{.+}}, %{{.+}} rows %{{.+}} of 16 : (tensor<4xi32>, tensor<4x4xf32>, tensor<8xi32>) -> tensor<8x4xf32>
// CHECK-NOT: shard.all_gather
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @vocab_parallel(%w: tensor<16x4xf32> {loom.param = "w"}, %ids: tensor<8xi32>, %dy: tensor<8x4xf32>)
    -> (tensor<8x4xf32>, tensor<16x4xf32> {loom.output = "grad.w"}) {
  %vocab = shard.sharding @g split_axes = [[1], []] : !shard.sharding
  %ws = shard.shard %w to %vocab : tensor<16x4xf32>
  %rows = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %idss = shard.shard %ids to %rows : tensor<8xi32>
  %rows2 = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %dys = shard.shard %dy to %rows2 : tensor<8x4xf32>
  %e = loom.embedding %ws[%idss] : (tensor<16x4xf32>, tensor<8xi32>) -> tensor<8x4xf32>
  %h = loom.gelu %e : tensor<8x4xf32>
  %g = loom.embedding_grad %idss, %dys : (tensor<8xi32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  return %h, %g : tensor<8x4xf32>, tensor<16x4xf32>
}

// -----

// A position embedding's gradient: the sum over the split batch is a
// partial sum, and so is its scatter-add into the table (the ids are the
// whole arange); with sequence parallelism's rows split over tp too, the
// rows are gathered over tp, still partial over dp. Summed over dp once.
// CHECK-LABEL: func.func @position_partial_spmd
// CHECK: %[[ROWS:.+]] = loom.sum %{{.+}} axis 0 : tensor<2x2x4xf32> -> tensor<2x4xf32>
// CHECK: %[[WHOLE:.+]] = shard.all_gather %[[ROWS]] on @g grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK: %[[TABLE:.+]] = loom.embedding_grad %{{.+}}, %[[WHOLE]] : (tensor<4xi32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[MEAN:.+]] = loom.accumulate %[[TABLE]]
// CHECK: shard.all_reduce %[[MEAN]] on @g grid_axes = [0]
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @position_partial(%dx: tensor<4x4x4xf32>) -> tensor<4x4xf32> {
  %split = shard.sharding @g split_axes = [[0], [1], []] : !shard.sharding
  %dxs = shard.shard %dx to %split : tensor<4x4x4xf32>
  %rows = loom.sum %dxs axis 0 : tensor<4x4x4xf32> -> tensor<4x4xf32>
  %ids = loom.arange : tensor<4xi32>
  %table = loom.embedding_grad %ids, %rows : (tensor<4xi32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = loom.accumulate %table over 2 microbatches : tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

// The cross-entropy's gradient keeps the rows split over dp, with the
// loss's gradient scaled by 1/2 (each rank divides by its 4 rows of 8),
// and the embedding's gradient is a partial sum over dp of each rank's
// scatter-add: nothing is gathered.
// CHECK-LABEL: func.func @loss_grads_spmd
// CHECK-NOT: all_gather
// CHECK: %[[HALF:.+]] = loom.constant 5.000000e-01
// CHECK: %[[G:.+]] = loom.mul %{{.+}}, %[[HALF]]
// CHECK: loom.cross_entropy_grad %{{.+}}, %{{.+}}, %[[G]] : (tensor<4x16xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x16xf32>
// CHECK: %[[TABLE:.+]] = loom.embedding_grad {{.+}} -> tensor<16x4xf32>
// CHECK: shard.all_reduce %[[TABLE]] on @g grid_axes = [0]
shard.grid @g(shape = 2) {loom.axes = ["dp"]}
func.func @loss_grads(%logits: tensor<8x16xf32>, %labels: tensor<8xi32>, %dl: tensor<f32>, %dx: tensor<8x4xf32>) -> (tensor<8x16xf32>, tensor<16x4xf32>) {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %s2 = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %ls = shard.shard %logits to %s2 : tensor<8x16xf32>
  %ys = shard.shard %labels to %s : tensor<8xi32>
  %xs = shard.shard %dx to %s2 : tensor<8x4xf32>
  %g = loom.cross_entropy_grad %ls, %ys, %dl : (tensor<8x16xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x16xf32>
  %t = loom.embedding_grad %ys, %xs : (tensor<8xi32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  return %g, %t : tensor<8x16xf32>, tensor<16x4xf32>
}

// -----

// An mse over operands split on their last dim keeps both split alike (a
// partial mean over tp), as on any other shared dim.
// CHECK-LABEL: func.func @mse_last_dim_spmd
// CHECK: loom.mse %{{.+}}, %{{.+}} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
// CHECK: shard.all_reduce
shard.grid @g(shape = 2) {loom.axes = ["tp"]}
func.func @mse_last_dim(%y: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<f32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %ys = shard.shard %y to %s : tensor<4x8xf32>
  %ts = shard.shard %t to %s : tensor<4x8xf32>
  %l = loom.mse %ys, %ts : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Attention split over its sequences (dp) and heads (tp): every tensor
// operand and result keeps the split of the batch dims, the rows' log-sum-exp ([B, H, T])
// and the backward's operands included; no data moves.
// CHECK-LABEL: func.func @attention_heads_spmd
// CHECK-NOT: shard.all_
// CHECK: %[[O:.+]], %[[LSE:.+]] = loom.attention %{{.+}}, %{{.+}}, %{{.+}} causal accumulate f32 : (tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>) -> (tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>)
// CHECK-NOT: shard.all_
// CHECK: loom.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %[[O]], %[[LSE]], %{{.+}} causal accumulate f32 : (tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>, tensor<1x2x16x8xbf16>) -> (tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>)
// CHECK-NOT: shard.all_
// CHECK: return
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @attention_heads(%q: tensor<2x4x16x8xbf16>, %k: tensor<2x4x16x8xbf16>, %v: tensor<2x4x16x8xbf16>,
                           %g: tensor<2x4x16x8xbf16>)
    -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) {
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %qs = shard.shard %q to %s : tensor<2x4x16x8xbf16>
  %ks = shard.shard %k to %s : tensor<2x4x16x8xbf16>
  %vs = shard.shard %v to %s : tensor<2x4x16x8xbf16>
  %gs = shard.shard %g to %s : tensor<2x4x16x8xbf16>
  %o:2 = loom.attention %qs, %ks, %vs causal accumulate f32
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = loom.attention_grad %qs, %ks, %vs, %o#0, %o#1, %gs causal accumulate f32
      : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x8xbf16>)
      -> (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>)
  return %dq, %dk, %dv : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>
}

// -----

// A norm's gradients with the rows split over dp (and the features whole,
// the tp split gathered): dx keeps the rows' split, the scale and bias
// gradients are each rank's sums over its rows, partial sums over dp
// reduced once where they are returned whole.
// CHECK-LABEL: func.func @norm_grad_spmd
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x8x8xf32> {loom.sharding = [array<i16: 0>, array<i16>, array<i16: 1>]}, %[[DY:[^:]+]]: tensor<2x8x16xf32> {loom.sharding = [array<i16: 0>, array<i16>, array<i16>]}, %[[G:[^:]+]]: tensor<16xf32>)
// CHECK: [[XW:%.+]] = shard.all_gather %[[X]] on @g grid_axes = [1] gather_axis = 2 : tensor<2x8x8xf32> -> tensor<2x8x16xf32>
// CHECK: %[[DX:.+]], %[[DG:.+]], %[[DB:.+]] = loom.norm_grad [[XW]], %[[DY]] scale %[[G]] epsilon 1.000000e-05 centered : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK-DAG: shard.all_reduce %[[DG]] on @g grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
// CHECK-DAG: shard.all_reduce %[[DB]] on @g grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: return
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @norm_grad(%x: tensor<4x8x16xf32>, %dy: tensor<4x8x16xf32>, %g: tensor<16xf32>) -> (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %s = shard.sharding @g split_axes = [[0], [], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x8x16xf32>
  %r = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %dys = shard.shard %dy to %r : tensor<4x8x16xf32>
  %dx, %dg, %db = loom.norm_grad %xs, %dys scale %g epsilon 1.0e-05 centered : (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<16xf32>) -> (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %dx, %dg, %db : tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>
}
