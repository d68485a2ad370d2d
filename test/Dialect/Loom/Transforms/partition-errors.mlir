// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-partition

// Errors of --loom-partition on hand-written IR (loomc always pairs each
// shard.shard with a shard.sharding of its grid).

shard.grid @g(shape = 2) {loom.axes = ["tp"]}
func.func @sharding_from_argument(%x: tensor<8xf32>, %s: !shard.sharding) -> tensor<8xf32> {
  // expected-error @+1 {{sharding annotation without a shard.sharding}}
  %xs = shard.shard %x to %s : tensor<8xf32>
  %y = loom.gelu %xs : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// What the front end never builds is an error, not a crash: a split over
// an axis the grid lacks (it had read the axis name out of range).
shard.grid @g(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @axis_out_of_range(%x: tensor<8x16xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{split over grid axis 7, but the grid has 2 axes}}
  %s = shard.sharding @g split_axes = [[7], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %y = loom.sum %xs axis 1 : tensor<8x16xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A result that is no tensor (it had crashed the partitioner).
shard.grid @g(shape = 2) {loom.axes = ["dp"]}
func.func @sharding_result(%x: tensor<8xf32>) -> !shard.sharding {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{loom-partition splits a model's tensor results, not '!shard.sharding'}}
  return %s : !shard.sharding
}

// -----

// A dynamic dim (its per-rank size had been printed as kDynamic / 2).
shard.grid @g(shape = 2) {loom.axes = ["dp"]}
// expected-error @+1 {{loom-partition splits tensors of static shapes, not 'tensor<?xf32>'}}
func.func @dynamic(%w: tensor<?xf32>) -> tensor<?xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<?xf32>
  %y = loom.neg %ws : tensor<?xf32>
  return %y : tensor<?xf32>
}

// -----

// A split the grid does not divide (upstream's verifier had reported the
// shard op this pass built).
shard.grid @g(shape = 2) {loom.axes = ["dp"]}
func.func @indivisible(%w: tensor<3xf32>) -> tensor<3xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{dimension 0 of size 3 is not divisible by 2, the number of shards of its grid axes}}
  %ws = shard.shard %w to %s : tensor<3xf32>
  %y = loom.neg %ws : tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

// A stage's ops are partitioned once inlined (its ops had been copied
// unsplit, and a sharded script's failed with type errors).
shard.grid @g(shape = 2) {loom.axes = ["pp"]}
func.func @stages(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.pipeline_axis = "pp"} {
  // expected-error @+1 {{'loom.stage' must be inlined (loom-inline-stages) before loom-partition}}
  %s = loom.stage 0 -> tensor<8xf32> {
    %g = loom.gelu %x : tensor<8xf32>
    loom.yield %g : tensor<8xf32>
  }
  return %s : tensor<8xf32>
}
