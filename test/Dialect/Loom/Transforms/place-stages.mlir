// RUN: loom-opt %s --split-input-file --loom-place-stages | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-place-stages=schedule=gpipe | FileCheck %s --check-prefix=GPIPE

// --loom-place-stages: every op of a pipelined per-rank program gets its
// stage and phase; the update ops the stages that compute them.

// Forward only: an op without a stage (after the last stage block) runs on
// the stage of its operands; the train section's schedule (here none:
// 1f1b) or the pass option's is recorded.
// CHECK-LABEL: func.func @fwd_spmd
// CHECK-SAME: loom.schedule = "1f1b", loom.stages_count = 2 : i64
// CHECK: loom.mul %{{.*}} {loom.phase = "forward", loom.stage = 0 : i64}
// CHECK-NEXT: loom.relu %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.neg %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// GPIPE-LABEL: func.func @fwd_spmd
// GPIPE-SAME: loom.schedule = "gpipe"
shard.grid @gpus(shape = 2) {loom.axes = ["pp"]}
func.func @fwd_spmd(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32>
    attributes {loom.partition_of = "fwd", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %a = loom.mul %x, %w {loom.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = loom.relu %a {loom.stage = 1 : i64} : tensor<4xf32>
  %c = loom.neg %b : tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// Forward only, the loss of a pipelined MoE: it reads the last stage's
// logits and a value that reads only arguments (the labels' slice), and
// is added to a term of the first stage. The slice waits for its reader
// and takes its stage; nothing lands on stage 0 by default, where it
// would read the later stage's value.
// CHECK-LABEL: func.func @loss_spmd
// CHECK: loom.mul %{{.*}} {loom.phase = "forward", loom.stage = 0 : i64}
// CHECK-NEXT: loom.relu %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.neg %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.add %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
shard.grid @gpus(shape = 2) {loom.axes = ["pp"]}
func.func @loss_spmd(%x: tensor<4xf32>, %w: tensor<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32>
    attributes {loom.partition_of = "loss", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %aux = loom.mul %x, %w {loom.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %logits = loom.relu %aux {loom.stage = 1 : i64} : tensor<4xf32>
  %labels = loom.neg %t : tensor<4xf32>
  %ce = loom.mul %logits, %labels : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %loss = loom.add %ce, %aux : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %loss : tensor<4xf32>
}

// -----

// The labels sliced over two mesh axes (two all_slices, as the partitioner
// makes for a target split [_, b, a]): the second slice reads the first,
// not an argument, and still neither places the loss nor holds it back;
// the loss runs on its logits' stage 1 and both slices with it (on stage
// 0, the loss read the later stage's logits: differential seed 93358).
// CHECK-LABEL: func.func @sliced_labels_spmd
// CHECK: loom.relu %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.neg %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.exp %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
shard.grid @gpus(shape = 2) {loom.axes = ["pp"]}
func.func @sliced_labels_spmd(%x: tensor<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32>
    attributes {loom.partition_of = "sliced_labels", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %logits = loom.relu %x {loom.stage = 1 : i64} : tensor<4xf32>
  %slice = loom.neg %t : tensor<4xf32>
  %slice2 = loom.exp %slice : tensor<4xf32>
  %loss = loom.mul %logits, %slice2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %loss : tensor<4xf32>
}

// -----

// A training step: the backward keeps the stages autodiff gave it; the
// loss (no stage) runs where its reader does, in the backward of stage 1.
// The update: each param's on the stage that computed its gradient; what
// reads only arguments (lr * w1) where its reader runs; what reads values
// of two stages (n0 + n1) on both.
// CHECK-LABEL: func.func @train_spmd
// CHECK: loom.mul %{{.*}} {loom.phase = "forward", loom.stage = 0 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.neg %{{.*}} {loom.phase = "backward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.neg %{{.*}} {loom.backward, loom.phase = "backward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.backward, loom.phase = "backward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.backward, loom.phase = "backward", loom.stage = 1 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.backward, loom.phase = "backward", loom.stage = 0 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.phase = "update", loom.stages = array<i64: 1>}
// CHECK-NEXT: loom.sub %{{.*}} {loom.phase = "update", loom.stages = array<i64: 1>}
// CHECK-NEXT: loom.sub %{{.*}} {loom.phase = "update", loom.stages = array<i64: 0>}
// CHECK-NEXT: loom.add %{{.*}} {loom.phase = "update", loom.stages = array<i64: 0, 1>}
shard.grid @gpus(shape = 2) {loom.axes = ["pp"]}
func.func @train_spmd(%x: tensor<4xf32>, %w0: tensor<4xf32>, %w1: tensor<4xf32>, %lr: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    attributes {loom.partition_of = "train", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %h = loom.mul %x, %w0 {loom.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = loom.mul %h, %w1 {loom.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %loss = loom.neg %y : tensor<4xf32>
  %gy = loom.neg %loss {loom.backward} : tensor<4xf32>
  %g1 = loom.mul %gy, %h {loom.backward, loom.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gh = loom.mul %gy, %w1 {loom.backward, loom.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g0 = loom.mul %gh, %x {loom.backward, loom.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s1 = loom.mul %lr, %w1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n1 = loom.sub %s1, %g1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %n0 = loom.sub %w0, %g0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %both = loom.add %n0, %n1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %loss, %n0, %both : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// An op without a stage that only the backward reads runs at its readers'
// last stage: the backward runs stage 2 before stage 1, so a sum of a
// stage-2 gradient that stages 2 and 1 read (the data-parallel all-reduce
// the partitioner puts after it) runs on stage 2, not on stage 1 after
// stage 2's reader.
// CHECK-LABEL: func.func @backward_readers_spmd
// CHECK: loom.mul %{{.*}} {loom.backward, loom.phase = "backward", loom.stage = 2 : i64}
// CHECK-NEXT: loom.neg %{{.*}} {loom.phase = "backward", loom.stage = 2 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.backward, loom.phase = "backward", loom.stage = 2 : i64}
// CHECK-NEXT: loom.mul %{{.*}} {loom.backward, loom.phase = "backward", loom.stage = 1 : i64}
shard.grid @gpus(shape = 3) {loom.axes = ["pp"]}
func.func @backward_readers_spmd(%x: tensor<4xf32>, %w0: tensor<4xf32>, %w1: tensor<4xf32>, %w2: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    attributes {loom.partition_of = "three", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %h0 = loom.mul %x, %w0 {loom.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %h1 = loom.mul %h0, %w1 {loom.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = loom.mul %h1, %w2 {loom.stage = 2 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g2 = loom.mul %y, %h1 {loom.backward, loom.stage = 2 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %sum = loom.neg %g2 : tensor<4xf32>
  %a = loom.mul %sum, %w2 {loom.backward, loom.stage = 2 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = loom.mul %sum, %w1 {loom.backward, loom.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %a, %b : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A model that is not partitioned, or whose pipeline axis has one rank,
// is left alone.
shard.grid @gpus(shape = 1) {loom.axes = ["pp"]}
// CHECK-LABEL: func.func @one_spmd
// CHECK-NOT: loom.phase
func.func @one_spmd(%x: tensor<4xf32>) -> tensor<4xf32>
    attributes {loom.partition_of = "one", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %a = loom.neg %x {loom.stage = 0 : i64} : tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// A tied param's 16-bit copy (a cast, then a transpose of it) read by two
// stages is computed on each: stage 1 casts the param itself instead of
// receiving stage 0's copy once per microbatch. An input's op is not
// copied: only stages that hold the param can compute from it.
// CHECK-LABEL: func.func @tied_spmd
// CHECK: %[[C1:.+]] = loom.cast %arg1 {loom.phase = "forward", loom.stage = 1 : i64}
// CHECK-NEXT: %[[C0:.+]] = loom.cast %arg1 {loom.phase = "forward", loom.stage = 0 : i64}
// CHECK-NEXT: %[[R:.+]] = loom.relu %arg0 {loom.phase = "forward", loom.stage = 0 : i64}
// CHECK-NEXT: loom.mul %[[R]], %[[C0]] {loom.phase = "forward", loom.stage = 0 : i64}
// CHECK-NEXT: loom.transpose %[[C1]] {{.*}}loom.stage = 1 : i64
// CHECK-NEXT: loom.matmul
// CHECK-NEXT: loom.add %{{.*}}, %[[R]] {{.*}}loom.stage = 1 : i64
// CHECK-NOT: loom.relu
shard.grid @gpus(shape = 2) {loom.axes = ["pp"]}
func.func @tied_spmd(%x: tensor<4x4xbf16>, %w: tensor<4x4xf32> {loom.param = "w"}) -> tensor<4x4xbf16>
    attributes {loom.partition_of = "tied", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %c = loom.cast %w : tensor<4x4xf32> to tensor<4x4xbf16>
  %r = loom.relu %x : tensor<4x4xbf16>
  %h = loom.mul %r, %c {loom.stage = 0 : i64} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %t = loom.transpose %c perm [1, 0] {loom.stage = 1 : i64} : tensor<4x4xbf16> -> tensor<4x4xbf16>
  %y = loom.matmul %h, %t accumulate f32 {loom.stage = 1 : i64} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  %o = loom.add %y, %r {loom.stage = 1 : i64} : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  return %o : tensor<4x4xbf16>
}
