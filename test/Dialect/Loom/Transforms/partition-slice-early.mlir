// RUN: loom-opt %s --split-input-file --loom-partition | FileCheck %s

// --loom-partition computes a rank's block of a value built from replicated
// ones where a split value meets it: the slice moves above the broadcasts,
// reshapes and elementwise ops that feed only it. The seed of a
// nested mean's gradient had been broadcast to the whole batch on every
// rank and then sliced (a dp=64 batch: 512 MiB a rank).
// CHECK-LABEL: func.func @mean_seed_spmd
// CHECK-SAME: (%[[Y:[^:]+]]: tensor<8x16xf32>
// CHECK: [[C0:%.+]] = loom.constant 1.562500e-02 : tensor<f32>
// CHECK: [[C:%.+]] = loom.reshape [[C0]] : tensor<f32> -> tensor<1xf32>
// CHECK: [[B:%.+]] = loom.broadcast [[C]] : tensor<1xf32> -> tensor<8xf32>
// CHECK: [[R:%.+]] = loom.reshape [[B]] : tensor<8xf32> -> tensor<8x1xf32>
// CHECK: [[S:%.+]] = loom.mul [[R]], %{{.+}} : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
// CHECK: [[W:%.+]] = loom.broadcast [[S]] : tensor<8x1xf32> -> tensor<8x16xf32>
// CHECK: loom.mul [[W]], %[[Y]] : (tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK-NOT: shard.all_slice
// CHECK-NOT: tensor<64x
// CHECK: return
shard.grid @g(shape = 8) {loom.axes = ["dp"]}
func.func @mean_seed(%y: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %ys = shard.shard %y to %s : tensor<64x16xf32>
  %c0 = loom.constant 1.562500e-02 : tensor<f32>
  %c = loom.reshape %c0 : tensor<f32> -> tensor<1xf32>
  %b = loom.broadcast %c : tensor<1xf32> -> tensor<64xf32>
  %r = loom.reshape %b : tensor<64xf32> -> tensor<64x1xf32>
  %k = loom.constant 6.250000e-02 : tensor<f32>
  %m = loom.mul %r, %k : (tensor<64x1xf32>, tensor<f32>) -> tensor<64x1xf32>
  %w = loom.broadcast %m : tensor<64x1xf32> -> tensor<64x16xf32>
  %g = loom.mul %w, %ys : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  %gs = shard.shard %g to %s : tensor<64x16xf32>
  return %gs : tensor<64x16xf32>
}

// -----

// A replicated value that something else reads whole is computed whole and
// sliced where the split value meets it: the slice stays below it.
// CHECK-LABEL: func.func @read_whole_too_spmd
// CHECK: [[B:%.+]] = loom.broadcast %{{.+}} : tensor<1xf32> -> tensor<64x16xf32>
// CHECK: shard.all_slice [[B]] on @g grid_axes = [0] slice_axis = 0 : tensor<64x16xf32> -> tensor<8x16xf32>
// CHECK: return
shard.grid @g(shape = 8) {loom.axes = ["dp"]}
func.func @read_whole_too(%y: tensor<64x16xf32>, %c: tensor<1xf32>) -> (tensor<64x16xf32>, tensor<64x16xf32>) {
  %s = shard.sharding @g split_axes = [[0], []] : !shard.sharding
  %ys = shard.shard %y to %s : tensor<64x16xf32>
  %b = loom.broadcast %c : tensor<1xf32> -> tensor<64x16xf32>
  %g = loom.mul %b, %ys : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  %gs = shard.shard %g to %s : tensor<64x16xf32>
  return %gs, %b : tensor<64x16xf32>, tensor<64x16xf32>
}

// -----

// A reshape that moves the sliced dim's elements (the split rows of
// [4, 16] are not rows of [8, 8]) keeps its slice after it.
// CHECK-LABEL: func.func @reshape_mixes_spmd
// CHECK: [[R:%.+]] = loom.reshape %{{.+}} : tensor<8x8xf32> -> tensor<4x16xf32>
// CHECK: shard.all_slice [[R]] on @g grid_axes = [0] slice_axis = 1 : tensor<4x16xf32> -> tensor<4x2xf32>
shard.grid @g(shape = 8) {loom.axes = ["dp"]}
func.func @reshape_mixes(%y: tensor<4x16xf32>, %c: tensor<8x8xf32>) -> tensor<4x16xf32> {
  %s = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %ys = shard.shard %y to %s : tensor<4x16xf32>
  %r = loom.reshape %c : tensor<8x8xf32> -> tensor<4x16xf32>
  %g = loom.add %r, %ys : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %gs = shard.shard %g to %s : tensor<4x16xf32>
  return %gs : tensor<4x16xf32>
}
