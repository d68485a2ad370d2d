// RUN: loom-opt %s --split-input-file --loom-partition | FileCheck %s

// --loom-partition on the routed pieces of an MoE block (loom-expand-moe's
// output). With tokens and experts split over one axis, each rank routes
// its own tokens; only the routing counts are all-gathered; the dispatch
// and the combine are one all-to-all each, between a send buffer of
// `buffer` rows per expert and the experts' slots.

// 8 tokens and 4 experts over ep = 4: 2 tokens and 1 expert per rank,
// capacity 3, so each rank sends min(3, 2) = 2 rows per expert.
// CHECK-LABEL: func.func @routed_spmd
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x16xf32> {{.+}}, %[[R:[^:]+]]: tensor<16x4xf32>, %[[W:[^:]+]]: tensor<1x16x16xf32>
// CHECK: [[P:%.+]] = loom.softmax
// CHECK: %[[E0:.+]], %{{.+}}, %{{.+}}, %{{.+}} = loom.moe_route [[P]] top_k 2 capacity 3 buffer 2 : tensor<2x4xf32>
// CHECK: [[N:%.+]] = loom.moe_counts %[[E0]] : tensor<2x2xi32> -> tensor<1x2x4xi32>
// CHECK: [[ALL:%.+]] = shard.all_gather [[N]] on @g grid_axes = [0] gather_axis = 0 : tensor<1x2x4xi32> -> tensor<4x2x4xi32>
// CHECK: [[OFF:%.+]] = loom.moe_offsets [[ALL]]
// CHECK: [[MINE:%.+]] = shard.all_slice [[OFF]] on @g grid_axes = [0] slice_axis = 0 : tensor<4x2x4xi32> -> tensor<1x2x4xi32>
// CHECK: [[EC:%.+]] = shard.all_slice [[ALL]] on @g grid_axes = [0] slice_axis = 2 : tensor<4x2x4xi32> -> tensor<4x2x1xi32>
// CHECK: [[EO:%.+]] = shard.all_slice [[OFF]] on @g grid_axes = [0] slice_axis = 2 : tensor<4x2x4xi32> -> tensor<4x2x1xi32>
// CHECK: %[[E:.+]], %[[S:.+]], %[[SRC:.+]], %{{.+}} = loom.moe_route [[P]] offsets [[MINE]] top_k 2 capacity 3 buffer 2 {loom.moe_axis = "ep", loom.moe_exchange_axes = ["ep"]}
// CHECK-SAME: -> tensor<2x2xi32>, tensor<2x2xi32>, tensor<8xi32>, tensor<4xf32>
// CHECK: %[[RS:.+]], %[[SR:.+]] = loom.moe_exchange_map [[EC]], [[EO]] capacity 3 buffer 2 : tensor<4x2x1xi32>, tensor<4x2x1xi32> -> tensor<8x1xi32>, tensor<3xi32>
// CHECK: [[ST:%.+]] = loom.moe_stats %[[E]], %[[S]] : (tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<4x2xf32>
// CHECK: [[G:%.+]] = loom.moe_gate [[P]][%[[E]]] : (tensor<2x4xf32>, tensor<2x2xi32>) -> tensor<2x2xf32>
// The dispatch: pack the rank's kept tokens, one all-to-all, into the slots.
// CHECK: [[SEND:%.+]] = loom.moe_dispatch %[[X]][%[[SRC]], %[[S]]] : (tensor<2x16xf32>, tensor<8xi32>, tensor<2x2xi32>) -> tensor<8x16xf32>
// CHECK: [[RECV:%.+]] = shard.all_to_all [[SEND]] on @g grid_axes = [0] split_axis = 0 concat_axis = 0 : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: [[SLOTS:%.+]] = loom.moe_dispatch [[RECV]][%[[SR]], %[[RS]]] : (tensor<8x16xf32>, tensor<3xi32>, tensor<8x1xi32>) -> tensor<3x16xf32>
// The rank's expert on its 3 slots.
// CHECK: loom.matmul %{{.+}}, %[[W]] accumulate f32 : (tensor<1x3x16xf32>, tensor<1x16x16xf32>) -> tensor<1x3x16xf32>
// CHECK: [[OUT:%.+]] = loom.reshape %{{.+}} : tensor<1x3x16xf32> -> tensor<3x16xf32>
// The combine: the same path back, then the weighted sum per token.
// CHECK: [[ROWS:%.+]] = loom.moe_combine [[OUT]][%[[SR]], %[[RS]]] : (tensor<3x16xf32>, tensor<3xi32>, tensor<8x1xi32>) -> tensor<8x16xf32>
// CHECK: [[BACK:%.+]] = shard.all_to_all [[ROWS]] on @g grid_axes = [0] split_axis = 0 concat_axis = 0 : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: [[Y:%.+]] = loom.moe_combine [[BACK]][%[[SRC]], %[[S]]] weights [[G]] : (tensor<8x16xf32>, tensor<8xi32>, tensor<2x2xi32>, tensor<2x2xf32>) -> tensor<2x16xf32>
// Routing counts are each rank's own: summed once, for the output.
// CHECK: [[STATS:%.+]] = shard.all_reduce [[ST]] on @g grid_axes = [0] : tensor<4x2xf32> -> tensor<4x2xf32>
// CHECK-NOT: shard.all_gather
// CHECK: return [[Y]], [[STATS]] : tensor<2x16xf32>, tensor<4x2xf32>
shard.grid @g(shape = 4) {loom.axes = ["ep"]}
func.func @routed(%x: tensor<8x16xf32>, %r: tensor<16x4xf32>, %w: tensor<4x16x16xf32>) -> (tensor<8x16xf32>, tensor<4x2xf32>) {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %se = shard.sharding @g split_axes = [[0], [], []] : !shard.sharding
  %ws = shard.shard %w to %se : tensor<4x16x16xf32>
  %l = loom.matmul %xs, %r accumulate f32 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %p = loom.softmax %l axis 1 : tensor<8x4xf32>
  %e, %slot, %src, %cnt = loom.moe_route %p top_k 2 capacity 3 {loom.moe_axis = "ep"} : tensor<8x4xf32> -> tensor<8x2xi32>, tensor<8x2xi32>, tensor<12xi32>, tensor<4xf32>
  %st = loom.moe_stats %e, %slot : (tensor<8x2xi32>, tensor<8x2xi32>) -> tensor<4x2xf32>
  %g = loom.moe_gate %p[%e] : (tensor<8x4xf32>, tensor<8x2xi32>) -> tensor<8x2xf32>
  %t = loom.moe_dispatch %xs[%src, %slot] : (tensor<8x16xf32>, tensor<12xi32>, tensor<8x2xi32>) -> tensor<12x16xf32>
  %t3 = loom.reshape %t : tensor<12x16xf32> -> tensor<4x3x16xf32>
  %o3 = loom.matmul %t3, %ws accumulate f32 : (tensor<4x3x16xf32>, tensor<4x16x16xf32>) -> tensor<4x3x16xf32>
  %o = loom.reshape %o3 : tensor<4x3x16xf32> -> tensor<12x16xf32>
  %y = loom.moe_combine %o[%src, %slot] weights %g : (tensor<12x16xf32>, tensor<12xi32>, tensor<8x2xi32>, tensor<8x2xf32>) -> tensor<8x16xf32>
  return %y, %st : tensor<8x16xf32>, tensor<4x2xf32>
}

// -----

// Tokens over dp and experts over ep, two separate axes (2 x 2 ranks): each
// rank slices its dp block of tokens over ep (no data moves) and routes
// those 2 tokens; the counts are all-gathered over [dp, ep] (token order)
// and read by the expert side in the all-to-all's member order [ep, dp]
// (reshape, transpose, reshape: each rank slices its expert's column before
// the last reshape); the experts split over [ep, dp], one per
// rank, sliced from the rank's ep block of weights. Still one all-to-all
// each way and no tokens gathered but the block's output rows, whole again
// over ep for the dp-split result.
// CHECK-LABEL: func.func @data_and_experts_spmd
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x16xf32> {{.+}}, %{{[^:]+}}: tensor<16x4xf32>, %[[W:[^:]+]]: tensor<2x16x16xf32>
// CHECK: [[P:%.+]] = loom.softmax %{{.+}} axis 1 : tensor<4x4xf32>
// CHECK: [[MYP:%.+]] = shard.all_slice [[P]] on @g grid_axes = [1] slice_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: %[[E0:.+]], %{{.+}}, %{{.+}}, %{{.+}} = loom.moe_route [[MYP]] top_k 2 capacity 3 buffer 2 : tensor<2x4xf32>
// CHECK: [[N:%.+]] = loom.moe_counts %[[E0]]
// CHECK: [[ALL:%.+]] = shard.all_gather [[N]] on @g grid_axes = [0, 1] gather_axis = 0 : tensor<1x2x4xi32> -> tensor<4x2x4xi32>
// CHECK: [[OFF:%.+]] = loom.moe_offsets [[ALL]]
// CHECK: [[MINE:%.+]] = shard.all_slice [[OFF]] on @g grid_axes = [0, 1] slice_axis = 0 : tensor<4x2x4xi32> -> tensor<1x2x4xi32>
// CHECK: [[C4:%.+]] = loom.reshape [[ALL]] : tensor<4x2x4xi32> -> tensor<2x2x2x4xi32>
// CHECK: [[CT:%.+]] = loom.transpose [[C4]] perm [1, 0, 2, 3]
// CHECK: [[CS:%.+]] = shard.all_slice [[CT]] on @g grid_axes = [1, 0] slice_axis = 3 : tensor<2x2x2x4xi32> -> tensor<2x2x2x1xi32>
// CHECK: [[EC:%.+]] = loom.reshape [[CS]] : tensor<2x2x2x1xi32> -> tensor<4x2x1xi32>
// CHECK: %[[E:.+]], %[[S:.+]], %[[SRC:.+]], %{{.+}} = loom.moe_route [[MYP]] offsets [[MINE]] top_k 2 capacity 3 buffer 2
// CHECK-SAME: loom.moe_exchange_axes = ["ep", "dp"]
// CHECK: %[[RS:.+]], %[[SR:.+]] = loom.moe_exchange_map [[EC]], %{{.+}} capacity 3 buffer 2 : tensor<4x2x1xi32>, tensor<4x2x1xi32> -> tensor<8x1xi32>, tensor<3xi32>
// CHECK: [[MYX:%.+]] = shard.all_slice %[[X]] on @g grid_axes = [1] slice_axis = 0 : tensor<4x16xf32> -> tensor<2x16xf32>
// CHECK: [[SEND:%.+]] = loom.moe_dispatch [[MYX]][%[[SRC]], %[[S]]] : (tensor<2x16xf32>, tensor<8xi32>, tensor<2x2xi32>) -> tensor<8x16xf32>
// CHECK: [[RECV:%.+]] = shard.all_to_all [[SEND]] on @g grid_axes = [1, 0] split_axis = 0 concat_axis = 0 : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK: loom.moe_dispatch [[RECV]][%[[SR]], %[[RS]]] : (tensor<8x16xf32>, tensor<3xi32>, tensor<8x1xi32>) -> tensor<3x16xf32>
// CHECK: [[MYW:%.+]] = shard.all_slice %[[W]] on @g grid_axes = [0] slice_axis = 0 : tensor<2x16x16xf32> -> tensor<1x16x16xf32>
// CHECK: loom.matmul %{{.+}}, [[MYW]] accumulate f32 : (tensor<1x3x16xf32>, tensor<1x16x16xf32>) -> tensor<1x3x16xf32>
// CHECK: [[ROWS:%.+]] = loom.moe_combine %{{.+}}[%[[SR]], %[[RS]]] : (tensor<3x16xf32>, tensor<3xi32>, tensor<8x1xi32>) -> tensor<8x16xf32>
// CHECK: [[BACK:%.+]] = shard.all_to_all [[ROWS]] on @g grid_axes = [1, 0] split_axis = 0 concat_axis = 0
// CHECK: [[Y:%.+]] = loom.moe_combine [[BACK]][%[[SRC]], %[[S]]] weights %{{.+}} : (tensor<8x16xf32>, tensor<8xi32>, tensor<2x2xi32>, tensor<2x2xf32>) -> tensor<2x16xf32>
// CHECK: [[YDP:%.+]] = shard.all_gather [[Y]] on @g grid_axes = [1] gather_axis = 0 : tensor<2x16xf32> -> tensor<4x16xf32>
// CHECK: [[STATS:%.+]] = shard.all_reduce %{{.+}} on @g grid_axes = [0, 1] : tensor<4x2xf32> -> tensor<4x2xf32>
// CHECK-NOT: shard.all_gather
// CHECK: return [[YDP]], [[STATS]]
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "ep"]}
func.func @data_and_experts(%x: tensor<8x16xf32>, %r: tensor<16x4xf32>, %w: tensor<4x16x16xf32>) -> (tensor<8x16xf32>, tensor<4x2xf32>) {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %se = shard.sharding @g split_axes = [[1], [], []] : !shard.sharding
  %ws = shard.shard %w to %se : tensor<4x16x16xf32>
  %l = loom.matmul %xs, %r accumulate f32 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %p = loom.softmax %l axis 1 : tensor<8x4xf32>
  %e, %slot, %src, %cnt = loom.moe_route %p top_k 2 capacity 3 {loom.moe_axis = "ep"} : tensor<8x4xf32> -> tensor<8x2xi32>, tensor<8x2xi32>, tensor<12xi32>, tensor<4xf32>
  %st = loom.moe_stats %e, %slot : (tensor<8x2xi32>, tensor<8x2xi32>) -> tensor<4x2xf32>
  %g = loom.moe_gate %p[%e] : (tensor<8x4xf32>, tensor<8x2xi32>) -> tensor<8x2xf32>
  %t = loom.moe_dispatch %xs[%src, %slot] : (tensor<8x16xf32>, tensor<12xi32>, tensor<8x2xi32>) -> tensor<12x16xf32>
  %t3 = loom.reshape %t : tensor<12x16xf32> -> tensor<4x3x16xf32>
  %o3 = loom.matmul %t3, %ws accumulate f32 : (tensor<4x3x16xf32>, tensor<4x16x16xf32>) -> tensor<4x3x16xf32>
  %o = loom.reshape %o3 : tensor<4x3x16xf32> -> tensor<12x16xf32>
  %y = loom.moe_combine %o[%src, %slot] weights %g : (tensor<12x16xf32>, tensor<12xi32>, tensor<8x2xi32>, tensor<8x2xf32>) -> tensor<8x16xf32>
  %ys = shard.shard %y to %s : tensor<8x16xf32>
  return %ys, %st : tensor<8x16xf32>, tensor<4x2xf32>
}

// -----

// One expert per rank of ep = 4 and tokens over dp = 2 (8 ranks, 4
// experts): each expert's 4 slots are 2 blocks of 2, one per dp rank
// ([E, C] split [[ep], [dp]]); the rank's block is its dp coordinate (an
// arange sliced over dp), the counts are sliced to its expert over ep
// alone, and the expert weights need no slicing (whole expert, part of
// its slots).
// CHECK-LABEL: func.func @slot_blocks_spmd
// CHECK-SAME: %[[W:[^:]+]]: tensor<1x16x16xf32>
// CHECK: loom.moe_route %{{.+}} top_k 2 capacity 4 buffer 1 blocks 2 : tensor<1x4xf32>
// CHECK-SAME: tensor<8xi32>
// CHECK: [[ECS:%.+]] = shard.all_slice %{{.+}} on @g grid_axes = [1] slice_axis = 3 : tensor<4x2x2x4xi32> -> tensor<4x2x2x1xi32>
// CHECK: [[EC:%.+]] = loom.reshape [[ECS]] : tensor<4x2x2x1xi32> -> tensor<8x2x1xi32>
// CHECK: loom.moe_route %{{.+}} offsets %{{.+}} top_k 2 capacity 4 buffer 1 blocks 2
// CHECK: [[ALL:%.+]] = loom.arange : tensor<2xi32>
// CHECK: [[B:%.+]] = shard.all_slice [[ALL]] on @g grid_axes = [0] slice_axis = 0 : tensor<2xi32> -> tensor<1xi32>
// CHECK: loom.moe_exchange_map [[EC]], %{{.+}} block [[B]] capacity 4 buffer 1 blocks 2 : tensor<8x2x1xi32>, tensor<8x2x1xi32>, tensor<1xi32> -> tensor<8x1xi32>, tensor<2xi32>
// CHECK: shard.all_to_all %{{.+}} on @g grid_axes = [1, 0] split_axis = 0 concat_axis = 0 : tensor<8x16xf32>
// CHECK: [[SLOTS:%.+]] = loom.moe_dispatch %{{.+}} -> tensor<2x16xf32>
// CHECK: [[T3:%.+]] = loom.reshape [[SLOTS]] : tensor<2x16xf32> -> tensor<1x2x16xf32>
// CHECK: loom.matmul [[T3]], %[[W]] accumulate f32 : (tensor<1x2x16xf32>, tensor<1x16x16xf32>) -> tensor<1x2x16xf32>
// CHECK: loom.reshape %{{.+}} : tensor<1x2x16xf32> -> tensor<2x16xf32>
// CHECK: shard.all_to_all %{{.+}} on @g grid_axes = [1, 0] split_axis = 0 concat_axis = 0 : tensor<8x16xf32>
// CHECK-NOT: shard.all_to_all
// CHECK: return
shard.grid @g(shape = 2x4) {loom.axes = ["dp", "ep"]}
func.func @slot_blocks(%x: tensor<8x16xf32>, %r: tensor<16x4xf32>, %w: tensor<4x16x16xf32>) -> (tensor<8x16xf32>, tensor<4x2xf32>) {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %se = shard.sharding @g split_axes = [[1], [], []] : !shard.sharding
  %ws = shard.shard %w to %se : tensor<4x16x16xf32>
  %l = loom.matmul %xs, %r accumulate f32 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %p = loom.softmax %l axis 1 : tensor<8x4xf32>
  %e, %slot, %src, %cnt = loom.moe_route %p top_k 2 capacity 4 {loom.moe_axis = "ep"} : tensor<8x4xf32> -> tensor<8x2xi32>, tensor<8x2xi32>, tensor<16xi32>, tensor<4xf32>
  %st = loom.moe_stats %e, %slot : (tensor<8x2xi32>, tensor<8x2xi32>) -> tensor<4x2xf32>
  %g = loom.moe_gate %p[%e] : (tensor<8x4xf32>, tensor<8x2xi32>) -> tensor<8x2xf32>
  %t = loom.moe_dispatch %xs[%src, %slot] : (tensor<8x16xf32>, tensor<16xi32>, tensor<8x2xi32>) -> tensor<16x16xf32>
  %t3 = loom.reshape %t : tensor<16x16xf32> -> tensor<4x4x16xf32>
  %o3 = loom.matmul %t3, %ws accumulate f32 : (tensor<4x4x16xf32>, tensor<4x16x16xf32>) -> tensor<4x4x16xf32>
  %o = loom.reshape %o3 : tensor<4x4x16xf32> -> tensor<16x16xf32>
  %y = loom.moe_combine %o[%src, %slot] weights %g : (tensor<16x16xf32>, tensor<16xi32>, tensor<8x2xi32>, tensor<8x2xf32>) -> tensor<8x16xf32>
  %ys = shard.shard %y to %s : tensor<8x16xf32>
  return %ys, %st : tensor<8x16xf32>, tensor<4x2xf32>
}

// -----

// The backward's pieces: the combine's gradient is a dispatch (a third
// all-to-all), the gates' gradient reads the combine's rows already at the
// tokens (no exchange), and the dispatch's gradient is a combine (a
// fourth).
// CHECK-LABEL: func.func @backward_spmd
// CHECK-COUNT-2: shard.all_to_all
// CHECK: [[DY:%.+]] = loom.moe_dispatch %{{.+}} weights
// CHECK: shard.all_to_all [[DY]]
// CHECK: loom.moe_slot_dot %{{.+}}, %{{.+}}[%{{.+}}] : (tensor<2x16xf32>, tensor<8x16xf32>, tensor<2x2xi32>) -> tensor<2x2xf32>
// CHECK: [[DX:%.+]] = loom.moe_combine %{{.+}} : (tensor<3x16xf32>, tensor<3xi32>, tensor<8x1xi32>) -> tensor<8x16xf32>
// CHECK: shard.all_to_all [[DX]]
// CHECK-NOT: shard.all_to_all
// CHECK: return
shard.grid @g(shape = 4) {loom.axes = ["ep"]}
func.func @backward(%x: tensor<8x16xf32>, %r: tensor<16x4xf32>, %w: tensor<4x16x16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x2xf32>, tensor<8x16xf32>) {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %dys = shard.shard %dy to %s : tensor<8x16xf32>
  %se = shard.sharding @g split_axes = [[0], [], []] : !shard.sharding
  %ws = shard.shard %w to %se : tensor<4x16x16xf32>
  %l = loom.matmul %xs, %r accumulate f32 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %p = loom.softmax %l axis 1 : tensor<8x4xf32>
  %e, %slot, %src, %cnt = loom.moe_route %p top_k 2 capacity 3 {loom.moe_axis = "ep"} : tensor<8x4xf32> -> tensor<8x2xi32>, tensor<8x2xi32>, tensor<12xi32>, tensor<4xf32>
  %g = loom.moe_gate %p[%e] : (tensor<8x4xf32>, tensor<8x2xi32>) -> tensor<8x2xf32>
  %t = loom.moe_dispatch %xs[%src, %slot] : (tensor<8x16xf32>, tensor<12xi32>, tensor<8x2xi32>) -> tensor<12x16xf32>
  %t3 = loom.reshape %t : tensor<12x16xf32> -> tensor<4x3x16xf32>
  %o3 = loom.matmul %t3, %ws accumulate f32 : (tensor<4x3x16xf32>, tensor<4x16x16xf32>) -> tensor<4x3x16xf32>
  %o = loom.reshape %o3 : tensor<4x3x16xf32> -> tensor<12x16xf32>
  %y = loom.moe_combine %o[%src, %slot] weights %g : (tensor<12x16xf32>, tensor<12xi32>, tensor<8x2xi32>, tensor<8x2xf32>) -> tensor<8x16xf32>
  %do = loom.moe_dispatch %dys[%src, %slot] weights %g : (tensor<8x16xf32>, tensor<12xi32>, tensor<8x2xi32>, tensor<8x2xf32>) -> tensor<12x16xf32>
  %dg = loom.moe_slot_dot %dys, %o[%slot] : (tensor<8x16xf32>, tensor<12x16xf32>, tensor<8x2xi32>) -> tensor<8x2xf32>
  %dx = loom.moe_combine %do[%src, %slot] : (tensor<12x16xf32>, tensor<12xi32>, tensor<8x2xi32>) -> tensor<8x16xf32>
  return %y, %dg, %dx : tensor<8x16xf32>, tensor<8x2xf32>, tensor<8x16xf32>
}

// -----

// Tokens split over dp and 4 experts over a separate ep = 4: dp x ep = 8
// ranks cannot each hold whole experts, so the routed pieces run whole on
// every rank (the tokens are gathered), with no all-to-all.
// CHECK-LABEL: func.func @fewer_experts_than_ranks_spmd
// CHECK: shard.all_gather
// CHECK: loom.moe_route %{{.+}} top_k 2 capacity 3 {loom.moe_axis = "ep"} : tensor<8x4xf32>
// CHECK-NOT: shard.all_to_all
// CHECK: return
shard.grid @g(shape = 2x4) {loom.axes = ["dp", "ep"]}
func.func @fewer_experts_than_ranks(%x: tensor<8x16xf32>, %r: tensor<16x4xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %se = shard.sharding @g split_axes = [[1], [], []] : !shard.sharding
  %ws = shard.shard %w to %se : tensor<4x16x16xf32>
  %l = loom.matmul %xs, %r accumulate f32 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %p = loom.softmax %l axis 1 : tensor<8x4xf32>
  %e, %slot, %src, %cnt = loom.moe_route %p top_k 2 capacity 3 {loom.moe_axis = "ep"} : tensor<8x4xf32> -> tensor<8x2xi32>, tensor<8x2xi32>, tensor<12xi32>, tensor<4xf32>
  %g = loom.moe_gate %p[%e] : (tensor<8x4xf32>, tensor<8x2xi32>) -> tensor<8x2xf32>
  %t = loom.moe_dispatch %xs[%src, %slot] : (tensor<8x16xf32>, tensor<12xi32>, tensor<8x2xi32>) -> tensor<12x16xf32>
  %t3 = loom.reshape %t : tensor<12x16xf32> -> tensor<4x3x16xf32>
  %o3 = loom.matmul %t3, %ws accumulate f32 : (tensor<4x3x16xf32>, tensor<4x16x16xf32>) -> tensor<4x3x16xf32>
  %o = loom.reshape %o3 : tensor<4x3x16xf32> -> tensor<12x16xf32>
  %y = loom.moe_combine %o[%src, %slot] weights %g : (tensor<12x16xf32>, tensor<12xi32>, tensor<8x2xi32>, tensor<8x2xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
