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
