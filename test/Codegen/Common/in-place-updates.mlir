// RUN: loom-opt %s --split-input-file --loom-in-place-updates | FileCheck %s

// --loom-in-place-updates: a kernel result every call returns as a param's
// new value (loom.updates), read once by the call and by nothing after
// it, that its generic may write over the param (identity-indexed, every
// other read of the param before it), is marked loom.in_place = the
// param's argument.

#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>

// SGD with momentum: m' = 0.9 m + g, w' = w - lr m'. Both over their own
// argument (m' reads m in the first generic; w' reads w and m').
// CHECK-LABEL: func.func private @sgd_update
// CHECK-SAME: -> (tensor<4xf32> {loom.in_place = 0 : i64}, tensor<4xf32> {loom.in_place = 2 : i64})
func.func private @sgd_update(%m: tensor<4xf32>, %g: tensor<4xf32>, %w: tensor<4xf32>, %lr: tensor<f32>)
    -> (tensor<4xf32>, tensor<4xf32>) attributes {loom.kernel} {
  %c = arith.constant 0.9 : f32
  %e = tensor.empty() : tensor<4xf32>
  %m1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%m, %g : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %c : f32
    %1 = arith.addf %0, %b : f32
    linalg.yield %1 : f32
  } -> tensor<4xf32>
  %w1 = linalg.generic {indexing_maps = [#id, #id, #scalar, #id], iterator_types = ["parallel"]}
      ins(%w, %m1, %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %l: f32, %o: f32):
    %0 = arith.mulf %b, %l : f32
    %1 = arith.subf %a, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<4xf32>
  return %m1, %w1 : tensor<4xf32>, tensor<4xf32>
}
func.func @step(%w: tensor<4xf32> {loom.param = "w"}, %m: tensor<4xf32> {loom.param = "opt.m.w"},
                %g: tensor<4xf32> {loom.input = "g"}, %lr: tensor<f32> {loom.input = "lr"})
    -> (tensor<4xf32> {loom.updates = "opt.m.w"}, tensor<4xf32> {loom.updates = "w"}) {
  %r:2 = call @sgd_update(%m, %g, %w, %lr) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// The same kernel under loss scaling: a skipped step keeps the old params,
// so nothing is written over them.
// CHECK-LABEL: func.func private @scaled_update
// CHECK-SAME: -> tensor<4xf32> attributes
func.func private @scaled_update(%w: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> attributes {loom.kernel} {
  %e = tensor.empty() : tensor<4xf32>
  %w1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.subf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %w1 : tensor<4xf32>
}
func.func @scaled(%w: tensor<4xf32> {loom.param = "w"}, %g: tensor<4xf32> {loom.input = "g"},
                   %l: tensor<f32> {loom.input = "l"})
    -> (tensor<4xf32> {loom.updates = "w"}, tensor<f32> {loom.loss = "loss"}) {
  %r = call @scaled_update(%w, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r, %l : tensor<4xf32>, tensor<f32>
}
loom.train @scaled optimizer "sgd" {lr = 1.000000e-01 : f32} microbatches 1 schedule "1f1b" loss_scale "dynamic" steps 1

// -----

#id = affine_map<(d0) -> (d0)>

// Not over the param: the kernel reads it again after the new value's
// generic (@late), or the model reads it after the update (@read_after),
// or the kernel's other call returns the result as no param's update
// (@shared, called by @twice).
// CHECK-LABEL: func.func private @late
// CHECK-SAME: -> (tensor<4xf32>, tensor<4xf32>) attributes
// CHECK-LABEL: func.func private @plain
// CHECK-SAME: -> tensor<4xf32> attributes
// CHECK-LABEL: func.func private @shared
// CHECK-SAME: -> tensor<4xf32> attributes
func.func private @late(%w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {loom.kernel} {
  %e = tensor.empty() : tensor<4xf32>
  %w1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.subf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %a : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %w1, %d : tensor<4xf32>, tensor<4xf32>
}
func.func private @plain(%w: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> attributes {loom.kernel} {
  %e = tensor.empty() : tensor<4xf32>
  %w1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.subf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %w1 : tensor<4xf32>
}
func.func private @shared(%w: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> attributes {loom.kernel} {
  %e = tensor.empty() : tensor<4xf32>
  %w1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.subf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %w1 : tensor<4xf32>
}
func.func @read_after(%w: tensor<4xf32> {loom.param = "w"}, %v: tensor<4xf32> {loom.param = "v"},
                      %g: tensor<4xf32> {loom.input = "g"})
    -> (tensor<4xf32> {loom.updates = "w"}, tensor<4xf32> {loom.updates = "v"}, tensor<4xf32> {loom.output = "y"}) {
  %r:2 = call @late(%w, %g) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %s = call @plain(%v, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = call @plain(%g, %v) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r#0, %s, %y : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
func.func @twice(%w: tensor<4xf32> {loom.param = "w"}, %g: tensor<4xf32> {loom.input = "g"})
    -> (tensor<4xf32> {loom.updates = "w"}, tensor<4xf32> {loom.output = "y"}) {
  %y = call @shared(%g, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = call @shared(%w, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r, %y : tensor<4xf32>, tensor<4xf32>
}
