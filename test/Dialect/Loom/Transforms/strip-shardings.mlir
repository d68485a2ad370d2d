// RUN: loom-opt %s --split-input-file --loom-strip-shardings | FileCheck %s

// --loom-strip-shardings: on one rank every tensor is whole, so each
// shard.shard is replaced by its operand and the shard.sharding ops left
// without users are erased. The grid itself stays.

// CHECK: shard.grid @gpus(shape = 2x2)
// CHECK-LABEL: func.func @annotated_args
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x16xf32>, %[[W:[^:]+]]: tensor<16x16xf32>)
// CHECK-NEXT: [[M:%.+]] = loom.matmul %[[X]], %[[W]] accumulate f32
// CHECK-NEXT: [[G:%.+]] = loom.gelu [[M]] : tensor<8x16xf32>
// CHECK-NEXT: return [[G]] : tensor<8x16xf32>
shard.grid @gpus(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @annotated_args(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @gpus split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %s2 = shard.sharding @gpus split_axes = [[], [1]] : !shard.sharding
  %ws = shard.shard %w to %s2 : tensor<16x16xf32>
  %m = loom.matmul %xs, %ws accumulate f32 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %g = loom.gelu %m : tensor<8x16xf32>
  return %g : tensor<8x16xf32>
}

// -----

// One sharding used by several annotations, chained annotations (also
// `annotate_for_users` ones) and an annotated intermediate value (a `let`
// with a shard spec): all of them collapse to the annotated value.
// CHECK-LABEL: func.func @shared_and_chained
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x16xf32>, %[[Y:[^:]+]]: tensor<8x16xf32>)
// CHECK-NOT: shard.
// CHECK: [[A:%.+]] = loom.add %[[X]], %[[Y]] :
// CHECK-NEXT: [[R:%.+]] = loom.relu [[A]] : tensor<8x16xf32>
// CHECK-NEXT: return [[R]] : tensor<8x16xf32>
shard.grid @gpus(shape = 2x2) {loom.axes = ["dp", "tp"]}
func.func @shared_and_chained(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @gpus split_axes = [[0], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x16xf32>
  %ys = shard.shard %y to %s : tensor<8x16xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8x16xf32>
  %a = loom.add %xu, %ys : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %s2 = shard.sharding @gpus split_axes = [[1], [0]] : !shard.sharding
  %as = shard.shard %a to %s2 : tensor<8x16xf32>
  %r = loom.relu %as : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// Annotations nested in a stage are found too; the stage stays.
// CHECK-LABEL: func.func @in_stage
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x8xf32>)
// CHECK-NEXT: loom.stage 0 -> tensor<4x8xf32> {
// CHECK-NEXT: [[M:%.+]] = loom.matmul %[[X]], %[[W]] accumulate f32
// CHECK-NEXT: loom.yield [[M]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NOT: shard.shard
shard.grid @gpus(shape = 2x2) {loom.axes = ["pp", "tp"]}
func.func @in_stage(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.stage 0 -> tensor<4x8xf32> {
    %s = shard.sharding @gpus split_axes = [[], [1]] : !shard.sharding
    %ws = shard.shard %w to %s : tensor<8x8xf32>
    %m = loom.matmul %x, %ws accumulate f32 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loom.yield %m : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// A sharding that something other than an annotation still uses is kept;
// only the annotations go.
// CHECK-LABEL: func.func @sharding_still_used
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8xf32>)
// CHECK-NEXT: [[S:%.+]] = shard.sharding @gpus split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: [[N:%.+]] = loom.neg %[[X]] : tensor<8xf32>
// CHECK-NEXT: return [[N]], [[S]] : tensor<8xf32>, !shard.sharding
shard.grid @gpus(shape = 2) {loom.axes = ["dp"]}
func.func @sharding_still_used(%x: tensor<8xf32>) -> (tensor<8xf32>, !shard.sharding) {
  %s = shard.sharding @gpus split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %n = loom.neg %xs : tensor<8xf32>
  return %n, %s : tensor<8xf32>, !shard.sharding
}

// -----

// Nothing to strip: unchanged.
// CHECK-LABEL: func.func @plain
// CHECK-NEXT: loom.exp
// CHECK-NEXT: return
func.func @plain(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = loom.exp %x : tensor<8xf32>
  return %e : tensor<8xf32>
}
