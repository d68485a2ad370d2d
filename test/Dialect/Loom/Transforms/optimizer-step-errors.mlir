// RUN: loom-opt %s --split-input-file --loom-autodiff --loom-optimizer-step -verify-diagnostics

// A 16-bit param needs its f32 master first (loom-master-weights).
// expected-error @+1 {{training param 'w' of type 'tensor<4xbf16>' needs an f32 master weight (loom-master-weights)}}
func.func @half(%t: tensor<4xbf16> {loom.input = "t"}, %w: tensor<4xbf16> {loom.param = "w"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.mse %w, %t : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<f32>
  return %0 : tensor<f32>
}
loom.train @half optimizer "sgd" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A model without a float param has nothing to update.
func.func @no_params(%x: tensor<4xf32> {loom.input = "x"}, %t: tensor<4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.mse %x, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{nothing to train: model 'no_params' has no float param}}
loom.train @no_params optimizer "sgd" {} microbatches 2 schedule "1f1b" loss_scale "none" steps 1
