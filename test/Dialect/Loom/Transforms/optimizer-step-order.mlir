// RUN: loom-opt %s --loom-optimizer-step -verify-diagnostics

// loom-optimizer-step reads the gradients loom-autodiff returns: run alone
// on a model with params, it says so (it had said "has no float param").
func.func @before_autodiff(%x: tensor<4xf32> {loom.input = "x"}, %w: tensor<4xf32> {loom.param = "w"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.mse %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{loom-optimizer-step updates the params of model 'before_autodiff' from their gradients, and it returns none: run loom-autodiff first}}
loom.train @before_autodiff optimizer "sgd" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
