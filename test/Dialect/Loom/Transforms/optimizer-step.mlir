// RUN: loom-opt %s --split-input-file --loom-autodiff=scale-loss --loom-optimizer-step | FileCheck %s

// --loom-optimizer-step: the gradients feed the optimizer's update; the
// step returns the loss, the global gradient norm and the new params and
// state (`next.*`, `loom.updates`).

// SGD with momentum and weight decay: the decay applies to the matrix w,
// not to the bias b; the momentum buffer is a zero-initialized param laid
// out (annotated) as w; the learning rate is the input opt.lr.
// CHECK-LABEL: func.func @sgd
// CHECK-SAME: %[[BUF:arg[0-9]+]]: tensor<8x3xf32> {loom.init = #loom.init<zeros>, loom.param = "opt.momentum.w"}
// CHECK-SAME: %[[LR:arg[0-9]+]]: tensor<f32> {loom.input = "opt.lr"}
// CHECK-SAME: -> (tensor<f32> {loom.loss = "loss"}, tensor<f32> {loom.output = "grad_norm"}, tensor<8x3xf32> {loom.output = "next.opt.momentum.w", loom.updates = "opt.momentum.w"}, tensor<8x3xf32> {loom.output = "next.w", loom.updates = "w"}
// CHECK: shard.shard %[[BUF]] to
// The norm: the sum of every gradient's squares.
// CHECK: %[[SQ:.+]] = loom.mul %[[GW:.+]], %[[GW]] : (tensor<8x3xf32>, tensor<8x3xf32>)
// CHECK: loom.sum %[[SQ]] axis 0
// CHECK: %[[NORM:.+]] = loom.sqrt
// CHECK: %[[WD:.+]] = loom.constant 1.000000e-02
// CHECK: %[[DECAY:.+]] = loom.mul %{{.+}}, %[[WD]]
// CHECK: %[[D:.+]] = loom.add %[[GW]], %[[DECAY]]
// CHECK: %[[MOM:.+]] = loom.constant 9.000000e-01
// The new values are annotated with the layout of what they replace.
// CHECK: %[[NEWBUF:.+]] = loom.add %{{.+}}, %[[D]]
// CHECK: %[[BUFOUT:.+]] = shard.shard %[[NEWBUF]] to %[[WS:[^ ]+]]
// CHECK: %[[STEP:.+]] = loom.mul %[[NEWBUF]], %[[LR]]
// CHECK: %[[NEWW:.+]] = loom.sub %{{.+}}, %[[STEP]]
// CHECK: %[[WOUT:.+]] = shard.shard %[[NEWW]] to %[[WS]]
// CHECK: return %{{.+}}, %[[NORM]], %[[BUFOUT]], %[[WOUT]]
shard.grid @grid(shape = 2) {loom.axes = ["tp"]}
func.func @sgd(%x: tensor<4x8xf32> {loom.input = "x"}, %t: tensor<4x3xf32> {loom.input = "t"},
               %w: tensor<8x3xf32> {loom.param = "w"}, %b: tensor<3xf32> {loom.param = "b"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<8x3xf32>
  %0 = loom.matmul %x, %ws accumulate f32 : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %1 = loom.add %0, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %2 = loom.mse %1, %t : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
loom.train @sgd optimizer "sgd" {lr = 1.0e-1 : f64, momentum = 0.9 : f64, weight_decay = 0.01 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// AdamW, clipped, under dynamic loss scaling: the backward starts from the
// input opt.loss_scale, each gradient is divided by it, the norm is taken,
// and each param's update multiplies its gradient by min(1, 0.5 / (norm +
// 1e-6)) (as 0.5 / (0.5 + relu(norm + 1e-6 - 0.5)): exactly 1 unclipped) before the
// moments: the clipping is part of the update's bucket (one kernel per
// layer's bucket, not one reading every gradient).
// CHECK-LABEL: func.func @adamw
// CHECK-SAME: %[[SCALE:arg[0-9]+]]: tensor<f32> {loom.input = "opt.loss_scale"}
// CHECK-SAME: loom.input = "opt.decay"
// CHECK-SAME: loom.param = "opt.m.w"
// CHECK-SAME: loom.param = "opt.v.w"
// CHECK-SAME: loom.input = "opt.bc2_sqrt"
// CHECK-SAME: loom.input = "opt.step_size"
// CHECK: loom.mul %[[SCALE]],
// CHECK: %[[G:.+]] = loom.div %{{.+}}, %[[SCALE]] {loom.gradient_of = "w"} : (tensor<4x4xf32>, tensor<f32>)
// CHECK: %[[NORM:.+]] = loom.sqrt
// CHECK: %[[C:.+]] = loom.constant 5.000000e-01
// CHECK: %[[EPS:.+]] = loom.constant 9.9999999999999995E-7
// CHECK: %[[TOTAL:.+]] = loom.add %[[NORM]], %[[EPS]]
// CHECK: %[[OVER:.+]] = loom.sub %[[TOTAL]], %[[C]]
// CHECK: %[[EXCESS:.+]] = loom.relu %[[OVER]]
// CHECK: %[[DEN:.+]] = loom.add %[[C]], %[[EXCESS]]
// CHECK: %[[COEF:.+]] = loom.div %[[C]], %[[DEN]]
// CHECK: %[[CLIPPED:.+]] = loom.mul %[[G]], %[[COEF]] {loom.update_bucket = 0 : i64}
// CHECK: loom.mul %[[CLIPPED]], %{{.+}} {loom.update_bucket = 0 : i64} : (tensor<4x4xf32>, tensor<f32>)
// CHECK: return %{{.+}}, %[[NORM]],
func.func @adamw(%t: tensor<4x4xf32> {loom.input = "t"}, %w: tensor<4x4xf32> {loom.param = "w"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.mse %w, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
loom.train @adamw optimizer "adamw" {lr = 1.0e-3 : f64} microbatches 1 schedule "1f1b" loss_scale "dynamic" steps 1 {clip_grad_norm = 0.5 : f64}


// -----

// Microbatches: the gradient and the loss are means over the microbatches
// (loom.accumulate), which the update reads; the model's other outputs
// (one microbatch's each) are left out of the step.
// CHECK-LABEL: func.func @microbatches
// CHECK-SAME: -> (tensor<f32> {loom.loss = "loss"}, tensor<f32> {loom.output = "grad_norm"}, tensor<4x4xf32> {loom.output = "next.w", loom.updates = "w"})
// CHECK: %[[LOSS:.+]] = loom.mse
// CHECK: %[[L:.+]] = loom.accumulate %[[LOSS]] over 4 microbatches : tensor<f32>
// CHECK: %[[G:.+]] = loom.accumulate %{{.+}} over 4 microbatches {loom.gradient_of = "w"} : tensor<4x4xf32>
// CHECK: loom.mul %[[G]], %[[G]]
// CHECK: return %[[L]],
func.func @microbatches(%t: tensor<4x4xf32> {loom.input = "t"}, %w: tensor<4x4xf32> {loom.param = "w"})
    -> (tensor<4x4xf32> {loom.output = "y"}, tensor<f32> {loom.loss = "loss"}) {
  %y = loom.mul %w, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = loom.mse %y, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
  return %y, %0 : tensor<4x4xf32>, tensor<f32>
}
loom.train @microbatches optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 4 schedule "1f1b" loss_scale "none" steps 1

// -----

// A param two pipeline stages read (a tied weight): the gradient's terms
// are accumulated each on its own stage and added after the microbatches,
// once a step, rather than sent from stage to stage once per microbatch.
// CHECK-LABEL: func.func @tied_stages
// CHECK: %[[H:.+]] = loom.mul %arg1, %arg0 {loom.stage = 0 : i64}
// CHECK: %[[P1:.+]] = loom.mul %{{.+}}, %[[H]] {loom.backward, loom.stage = 1 : i64}
// CHECK: %[[P0:.+]] = loom.mul %{{.+}}, %arg0 {loom.backward, loom.stage = 0 : i64}
// CHECK-NOT: loom.add
// CHECK: %[[A:.+]] = loom.accumulate %[[P1]] over 4 microbatches : tensor<4x4xf32>
// CHECK: %[[B:.+]] = loom.accumulate %[[P0]] over 4 microbatches : tensor<4x4xf32>
// CHECK: %[[G:.+]] = loom.add %[[A]], %[[B]] {loom.gradient_of = "w"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: loom.mul %[[G]], %[[G]]
func.func @tied_stages(%t: tensor<4x4xf32> {loom.input = "t"}, %w: tensor<4x4xf32> {loom.param = "w"})
    -> (tensor<f32> {loom.loss = "loss"}) attributes {loom.pipeline_axis = "pp"} {
  %h = loom.mul %w, %t {loom.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = loom.mul %h, %w {loom.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = loom.mse %y, %t {loom.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
loom.train @tied_stages optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 4 schedule "1f1b" loss_scale "none" steps 1

// -----

// The squared norms are summed per set of mesh axes the gradients are
// split over (a, the tp-split, and b, the unsplit, are summed apart, then
// added): a split gradient's sum of squares is partial over its axes, and
// the partitioner then sums all of a set's over the mesh at once.
// CHECK-LABEL: func.func @norm_sets
// CHECK: %[[A:.+]] = loom.sum %{{.+}} axis 0 : tensor<4xf32> -> tensor<f32>
// CHECK: %[[B:.+]] = loom.sum %{{.+}} axis 0 : tensor<4xf32> -> tensor<f32>
// CHECK: %[[C:.+]] = loom.sum %{{.+}} axis 0 : tensor<4xf32> -> tensor<f32>
// CHECK: %[[AC:.+]] = loom.add %[[A]], %[[C]]
// CHECK: loom.add %[[AC]], %[[B]]
// CHECK: loom.sqrt
shard.grid @mesh(shape = 2) {loom.axes = ["tp"]}
func.func @norm_sets(%t: tensor<4xf32> {loom.input = "t"}, %a: tensor<4xf32> {loom.param = "a"},
                     %b: tensor<4xf32> {loom.param = "b"}, %c: tensor<4xf32> {loom.param = "c"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %split = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %as = shard.shard %a to %split : tensor<4xf32>
  %cs = shard.shard %c to %split : tensor<4xf32>
  %0 = loom.mul %as, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = loom.mul %0, %cs : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = loom.mse %1, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
loom.train @norm_sets optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// An MoE expert's params are stored [E, ...]: weight decay follows the
// declared rank (loom.expert_param), so the experts' matrices m decay and
// their biases e ([E, 3], declared [3]) do not, as a bias outside a block.
// CHECK-LABEL: func.func @expert_decay
// CHECK: %[[WD:.+]] = loom.constant 1.000000e-02
// CHECK-NEXT: loom.mul %{{.+}}, %[[WD]] {loom.update_bucket = {{[0-9]+}} : i64} : (tensor<2x3x3xf32>, tensor<f32>)
// CHECK-NOT: loom.constant 1.000000e-02
// CHECK: return
func.func @expert_decay(%t: tensor<2x3xf32> {loom.input = "t"},
                        %e: tensor<2x3xf32> {loom.param = "ffn.0.b", loom.expert_param},
                        %m: tensor<2x3x3xf32> {loom.param = "ffn.0.w", loom.expert_param})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.sum %m axis 2 : tensor<2x3x3xf32> -> tensor<2x3xf32>
  %1 = loom.add %e, %0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = loom.mse %1, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
loom.train @expert_decay optimizer "sgd" {lr = 1.0e-1 : f64, weight_decay = 0.01 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// Every dropout of the step, the forward's and its gradient's, takes the
// step's keys: two scalars the runtime fills (the run's seed and step, and
// the microbatch), so that both draw one mask.
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: %[[SEED:arg[0-9]+]]: tensor<f32> {loom.input = "opt.dropout_seed"}
// CHECK-SAME: %[[MB:arg[0-9]+]]: tensor<f32> {loom.input = "opt.dropout_microbatch"}
// CHECK: loom.dropout %{{.+}} positions(%[[R:.+]]) keys(%[[SEED]], %[[MB]]) {probability = 2.500000e-01 : f64, stream = 4 : i64}
// CHECK: loom.dropout %{{.+}} positions(%[[R]]) keys(%[[SEED]], %[[MB]]) {loom.gradient_of = "w", probability = 2.500000e-01 : f64, stream = 4 : i64}
func.func @dropout(%w: tensor<4xf32> {loom.param = "w"}, %t: tensor<4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %r = loom.arange : tensor<4xi32>
  %d = loom.dropout %w positions(%r) {probability = 0.25 : f64, stream = 4 : i64} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  %l = loom.mse %d, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
loom.train @dropout optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
