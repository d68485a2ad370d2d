// RUN: loom-opt %s --split-input-file --loom-place-stages --verify-diagnostics -o /dev/null

// --loom-place-stages errors.

// Three stages cannot be shared by two ranks.
shard.grid @gpus(shape = 2) {loom.axes = ["pp"]}
// expected-error @+1 {{model 'three' has 3 pipeline stages, which the 2 ranks of axis 'pp' cannot share: give it a multiple of 2 stages (a rank holds stages/2 of them)}}
func.func @three_spmd(%x: tensor<4xf32>) -> tensor<4xf32>
    attributes {loom.partition_of = "three", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %a = loom.neg %x {loom.stage = 0 : i64} : tensor<4xf32>
  %b = loom.neg %a {loom.stage = 1 : i64} : tensor<4xf32>
  %c = loom.neg %b {loom.stage = 2 : i64} : tensor<4xf32>
  return %c : tensor<4xf32>
}


// -----

// A stage number past what a plan holds (hand-written IR: the front end
// says so at the script); its count had wrapped around to "1 pipeline
// stage".
shard.grid @gpus(shape = 2) {loom.axes = ["pp"]}
func.func @fwd_spmd(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32>
    attributes {loom.partition_of = "fwd", loom.pipeline_axis = "pp", loom.grid = @gpus} {
  %a = loom.mul %x, %w {loom.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{stage 9223372036854775807 is not a stage a plan may have (0 to 65535)}}
  %b = loom.relu %a {loom.stage = 9223372036854775807 : i64} : tensor<4xf32>
  return %b : tensor<4xf32>
}
