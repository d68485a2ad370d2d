// RUN: loom-opt %s --split-input-file --loom-autodiff --verify-diagnostics

// Gradients need a train section: it names the loss.
module {
  // expected-error @+1 {{gradients need a train section, and model 'm' has none (its loss is what is differentiated)}}
  func.func @m(%w: tensor<4xf32> {loom.param = "w"}) -> (tensor<4xf32> {loom.output = "y"}) {
    %0 = loom.exp %w : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// IR past the kernels stage has no model: a kernel is not named as one.
// expected-error @+1 {{gradients need a train section and its model, and this module has neither (loom-autodiff runs on loom IR, before partitioning and kernels)}}
module {
  func.func @m_k0(%w: tensor<4xf32>) -> tensor<4xf32> attributes {loom.kernel} {
    %0 = loom.exp %w : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// An op without a VJP rule on the path from a param to the loss.
func.func @m(%w: tensor<4x3xf32> {loom.param = "w"}, %t: tensor<4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %m = loom.max %w axis 1 keepdim : tensor<4x3xf32> -> tensor<4x1xf32>
  // expected-error @+1 {{'loom.max_mask' has no gradient (no VJP rule)}}
  %mask = loom.max_mask %w, %m : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  %0 = loom.sum %mask axis 1 : tensor<4x3xf32> -> tensor<4xf32>
  %1 = loom.mse %0, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
loom.train @m optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// Stages are inlined first (loomc does: loom-inline-stages).
func.func @m(%w: tensor<4xf32> {loom.param = "w"}, %t: tensor<4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) attributes {loom.pipeline_axis = "pp"} {
  // expected-error @+1 {{'loom.stage' must be inlined before loom-autodiff}}
  %0 = loom.stage 0 -> tensor<4xf32> {
    %1 = loom.exp %w : tensor<4xf32>
    loom.yield %1 : tensor<4xf32>
  }
  %2 = loom.mse %0, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
loom.train @m optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
