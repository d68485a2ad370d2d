// RUN: loom-opt %s --split-input-file --loom-bucket-gradients="bucket-mb=0.0001" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-bucket-gradients="bucket-mb=0" | FileCheck %s --check-prefix=NONE

// --loom-bucket-gradients: in a per-rank program, the all-reduces whose
// results only the function returns (the dp sums of the gradients) are
// grouped in program order into buckets of at most bucket-mb MiB (here
// 104 bytes: 26 f32); a bucket's all-reduces move, in order, right after
// its last gradient, each marked loom.gradient_bucket (the plan makes them
// one collective).

// Three gradients of 16, 8 and 24 floats: [g0, g1] fill a bucket (24
// floats), g2 is alone and keeps its own unmarked all-reduce. The sum over
// tp feeds an op, not the return, and stays; so does the loss's (not a
// gradient).
// CHECK-LABEL: func.func @m_spmd
// CHECK: %[[G0:.+]] = loom.exp %arg0 : tensor<4x4xf32>
// CHECK: %[[G1:.+]] = loom.exp %arg1 : tensor<8xf32>
// CHECK-NEXT: %[[S0:.+]] = shard.all_reduce %[[G0]] on @g grid_axes = [0] {loom.gradient_bucket = 0 : i64} : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[S1:.+]] = shard.all_reduce %[[G1]] on @g grid_axes = [0] {loom.gradient_bucket = 0 : i64} : tensor<8xf32> -> tensor<8xf32>
// CHECK: %[[G2:.+]] = loom.exp %arg2 : tensor<24xf32>
// CHECK: %[[TP:.+]] = shard.all_reduce %[[G2]] on @g grid_axes = [1] :
// CHECK: %[[G3:.+]] = loom.exp %[[TP]]
// CHECK: %[[S2:.+]] = shard.all_reduce %[[G3]] on @g grid_axes = [0] :
// CHECK: %[[S3:.+]] = shard.all_reduce %{{.+}} on @g grid_axes = [0] : tensor<f32>
// CHECK: return %[[S0]], %[[S1]], %[[S2]], %[[S3]]

// NONE-LABEL: func.func @m_spmd
// NONE-NOT: loom.gradient_bucket
// NONE-COUNT-5: shard.all_reduce
shard.grid @g(shape = 2x2) {sym_visibility = "private"}
func.func @m_spmd(%a: tensor<4x4xf32>, %b: tensor<8xf32>, %c: tensor<24xf32>)
    -> (tensor<4x4xf32> {loom.output = "grad.a"}, tensor<8xf32> {loom.output = "grad.b"},
        tensor<24xf32> {loom.output = "grad.c"}, tensor<f32> {loom.loss = "loss"})
    attributes {loom.partition_of = "m"} {
  %g0 = loom.exp %a : tensor<4x4xf32>
  %g1 = loom.exp %b : tensor<8xf32>
  %g2 = loom.exp %c : tensor<24xf32>
  %t = shard.all_reduce %g2 on @g grid_axes = [1] : tensor<24xf32> -> tensor<24xf32>
  %g3 = loom.exp %t : tensor<24xf32>
  %s0 = shard.all_reduce %g0 on @g grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %s1 = shard.all_reduce %g1 on @g grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %s2 = shard.all_reduce %g3 on @g grid_axes = [0] : tensor<24xf32> -> tensor<24xf32>
  %l = loom.sum %g1 axis 0 : tensor<8xf32> -> tensor<f32>
  %s3 = shard.all_reduce %l on @g grid_axes = [0] : tensor<f32> -> tensor<f32>
  return %s0, %s1, %s2, %s3 : tensor<4x4xf32>, tensor<8xf32>, tensor<24xf32>, tensor<f32>
}

// -----

// The one-rank program (no loom.partition_of) is left alone.
// CHECK-LABEL: func.func @m
// CHECK-NOT: loom.gradient_bucket
// CHECK-COUNT-2: shard.all_reduce
shard.grid @g(shape = 2) {sym_visibility = "private"}
func.func @m(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s0 = shard.all_reduce %a on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %s1 = shard.all_reduce %b on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %s0, %s1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A training step: the gradients (marked loom.gradient_of by
// loom-optimizer-step) feed the update, not the return; their dp sums are
// bucketed all the same, right after the last gradient, before the update
// reads them.
// CHECK-LABEL: func.func @step_spmd
// CHECK: %[[G0:.+]] = loom.exp %arg0 {loom.gradient_of = "a"}
// CHECK: %[[G1:.+]] = loom.exp %arg1 {loom.gradient_of = "b"}
// CHECK-NEXT: %[[S0:.+]] = shard.all_reduce %[[G0]] on @g grid_axes = [0] {loom.gradient_bucket = 0 : i64}
// CHECK-NEXT: %[[S1:.+]] = shard.all_reduce %[[G1]] on @g grid_axes = [0] {loom.gradient_bucket = 0 : i64}
// CHECK-NEXT: loom.mul %[[S0]]
// CHECK-NEXT: loom.mul %[[S1]]
// CHECK-NEXT: return
// NONE-LABEL: func.func @step_spmd
// NONE-COUNT-2: shard.all_reduce
shard.grid @g(shape = 2) {sym_visibility = "private"}
func.func @step_spmd(%a: tensor<4x4xf32>, %b: tensor<8xf32>)
    -> (tensor<4x4xf32> {loom.output = "next.a"}, tensor<8xf32> {loom.output = "next.b"})
    attributes {loom.partition_of = "step"} {
  %g0 = loom.exp %a {loom.gradient_of = "a"} : tensor<4x4xf32>
  %g1 = loom.exp %b {loom.gradient_of = "b"} : tensor<8xf32>
  %s0 = shard.all_reduce %g0 on @g grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %n0 = loom.mul %s0, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s1 = shard.all_reduce %g1 on @g grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %n1 = loom.mul %s1, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %n0, %n1 : tensor<4x4xf32>, tensor<8xf32>
}

// -----

// A gradient computed from another's sum (`grad.w = transpose(grad.x)`, the
// backward of `x + transpose(w)` after partitioning) reads that sum inside
// the backward, before the all-reduce of a bucket closed by a later
// gradient (b's) would exist: x's sum keeps its own all-reduce (the bucket
// had made the transpose read a value defined after it: `operand #0 does
// not dominate this use`).
// CHECK-LABEL: func.func @read_in_backward_spmd
// CHECK: %[[GX:.+]] = loom.exp %arg0 {loom.gradient_of = "x"}
// CHECK: %[[SX:.+]] = shard.all_reduce %[[GX]] on @g grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK: loom.transpose %[[SX]]
// CHECK: %[[GB:.+]] = loom.exp %arg2 {loom.gradient_of = "b"}
// CHECK-NOT: loom.gradient_bucket
// CHECK: shard.all_reduce %[[GB]] on @g grid_axes = [0] :
// CHECK: return
shard.grid @g(shape = 2) {sym_visibility = "private"}
func.func @read_in_backward_spmd(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>)
    -> (tensor<4x4xf32> {loom.output = "next.x"}, tensor<4x4xf32> {loom.output = "next.w"},
        tensor<4xf32> {loom.output = "next.b"})
    attributes {loom.partition_of = "step"} {
  %gx = loom.exp %x {loom.gradient_of = "x"} : tensor<4x4xf32>
  %sx = shard.all_reduce %gx on @g grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %gw = loom.transpose %sx perm [1, 0] {loom.gradient_of = "w"} : tensor<4x4xf32> -> tensor<4x4xf32>
  %gb = loom.exp %b {loom.gradient_of = "b"} : tensor<4xf32>
  %sb = shard.all_reduce %gb on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %nx = loom.mul %sx, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nw = loom.mul %gw, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nb = loom.mul %sb, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %nx, %nw, %nb : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>
}

// -----

// A gradient summed twice alike (shard.all_reduce is not Pure, so CSE
// keeps both) is summed once, and the bucket carries it once (explain had
// counted it twice).
// CHECK-LABEL: func.func @twice_spmd
// CHECK: %[[G:.+]] = loom.exp %arg0 : tensor<4x4xf32>
// CHECK-NEXT: %[[S:.+]] = shard.all_reduce %[[G]] on @g grid_axes = [0]
// CHECK-NOT: shard.all_reduce
// CHECK: return %[[S]], %[[S]]
shard.grid @g(shape = 2x2) {sym_visibility = "private"}
func.func @twice_spmd(%a: tensor<4x4xf32>)
    -> (tensor<4x4xf32> {loom.output = "grad.a"}, tensor<4x4xf32> {loom.output = "grad.b"})
    attributes {loom.partition_of = "twice"} {
  %g = loom.exp %a : tensor<4x4xf32>
  %s0 = shard.all_reduce %g on @g grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %s1 = shard.all_reduce %g on @g grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %s0, %s1 : tensor<4x4xf32>, tensor<4x4xf32>
}
