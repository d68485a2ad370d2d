// RUN: loom-opt %s --split-input-file --loom-master-weights | FileCheck %s

// --loom-master-weights: each 16-bit param of a trained model becomes an
// f32 master; the forward reads its cast to the old type, after the
// sharding annotation (which moves to f32 with it). f32 params and inputs
// stay as they are.
// CHECK-LABEL: func.func @lin
// CHECK-SAME: %arg0: tensor<4x8xbf16> {loom.input = "x"}
// CHECK-SAME: %arg2: tensor<8x3xf32> {loom.param = "w"}
// CHECK-SAME: %arg3: tensor<3xf32> {loom.param = "b"}
// CHECK: %[[W:.+]] = shard.shard %arg2 to %{{.+}} : tensor<8x3xf32>
// CHECK-NEXT: %[[COPY:.+]] = loom.cast %[[W]] : tensor<8x3xf32> to tensor<8x3xbf16>
// CHECK-NEXT: loom.matmul %arg0, %[[COPY]]
// CHECK-NOT: loom.cast %arg3
shard.grid @grid(shape = 2) {loom.axes = ["tp"]}
func.func @lin(%x: tensor<4x8xbf16> {loom.input = "x"}, %t: tensor<4x3xbf16> {loom.input = "t"},
               %w: tensor<8x3xbf16> {loom.param = "w"}, %b: tensor<3xf32> {loom.param = "b"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<8x3xbf16>
  %0 = loom.matmul %x, %ws accumulate f32 : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
  %1 = loom.cast %0 : tensor<4x3xbf16> to tensor<4x3xf32>
  %2 = loom.add %1, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %3 = loom.cast %t : tensor<4x3xbf16> to tensor<4x3xf32>
  %4 = loom.mse %2, %3 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
loom.train @lin optimizer "sgd" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// Without an annotation the cast is the body's first op; an f16 param used
// twice is cast once.
// CHECK-LABEL: func.func @square
// CHECK-SAME: %arg1: tensor<4x4xf32> {loom.param = "w"}
// CHECK-NEXT: %[[COPY:.+]] = loom.cast %arg1 : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: loom.matmul %[[COPY]], %[[COPY]]
func.func @square(%t: tensor<4x4xf16> {loom.input = "t"}, %w: tensor<4x4xf16> {loom.param = "w"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.matmul %w, %w accumulate f32 : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
  %1 = loom.mse %0, %t : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<f32>
  return %1 : tensor<f32>
}
loom.train @square optimizer "sgd" {} microbatches 1 schedule "1f1b" loss_scale "dynamic" steps 1

// -----

// A model without a train section keeps its 16-bit params.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<4xbf16> {loom.param = "w"}
// CHECK-NOT: loom.cast
func.func @forward(%w: tensor<4xbf16> {loom.param = "w"}) -> (tensor<4xbf16> {loom.output = "y"}) {
  return %w : tensor<4xbf16>
}

// -----

// A param read through an annotation (`let ec = e shard [_, tp]`) and
// directly: both readers read a 16-bit copy, the annotation's after it and
// the direct one's at the top (the direct reader read the f32 master: an
// internal "operands differ in element type" error).
// CHECK-LABEL: func.func @annotated_and_direct
// CHECK-NEXT: %[[DIRECT:.+]] = loom.cast %arg1 : tensor<16x16xf32> to tensor<16x16xbf16>
// CHECK: %[[E:.+]] = shard.shard %arg1 to %{{.+}} : tensor<16x16xf32>
// CHECK-NEXT: %[[COPY:.+]] = loom.cast %[[E]] : tensor<16x16xf32> to tensor<16x16xbf16>
// CHECK-NEXT: %[[H:.+]] = loom.matmul %arg0, %[[COPY]]
// CHECK-NEXT: loom.matmul %[[H]], %[[DIRECT]]
shard.grid @grid(shape = 2) {loom.axes = ["tp"]}
func.func @annotated_and_direct(%x: tensor<8x16xbf16> {loom.input = "x"}, %e: tensor<16x16xbf16> {loom.param = "e"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %es = shard.shard %e to %s : tensor<16x16xbf16>
  %0 = loom.matmul %x, %es accumulate f32 : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  %1 = loom.matmul %0, %e accumulate f32 : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  %2 = loom.cast %1 : tensor<8x16xbf16> to tensor<8x16xf32>
  %3 = loom.mean %2 axis 1 : tensor<8x16xf32> -> tensor<8xf32>
  %4 = loom.mean %3 axis 0 : tensor<8xf32> -> tensor<f32>
  return %4 : tensor<f32>
}
loom.train @annotated_and_direct optimizer "sgd" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A lookup of a 16-bit table reads the f32 master and casts the rows it
// gathers, not the whole table (which had been cast every step); the
// table's other readers (a tied output projection) read its cast.
// CHECK-LABEL: func.func @lookup
// CHECK-SAME: %[[TABLE:[^:]+]]: tensor<16x8xf32> {loom.param = "wte"}
// CHECK: %[[COPY:.+]] = loom.cast %[[TABLE]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: %[[ROWS:.+]] = loom.embedding %[[TABLE]][%{{.+}}] : (tensor<16x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[CAST:.+]] = loom.cast %[[ROWS]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[TIED:.+]] = loom.transpose %[[COPY]]
// CHECK-NEXT: loom.matmul %[[CAST]], %[[TIED]]
func.func @lookup(%ids: tensor<4xi32> {loom.input = "ids"}, %t: tensor<4x16xbf16> {loom.input = "t"},
                  %wte: tensor<16x8xbf16> {loom.param = "wte"}) -> (tensor<f32> {loom.loss = "loss"}) {
  %rows = loom.embedding %wte[%ids] : (tensor<16x8xbf16>, tensor<4xi32>) -> tensor<4x8xbf16>
  %tied = loom.transpose %wte perm [1, 0] : tensor<16x8xbf16> -> tensor<8x16xbf16>
  %logits = loom.matmul %rows, %tied accumulate f32 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %l = loom.mse %logits, %t : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<f32>
  return %l : tensor<f32>
}
loom.train @lookup optimizer "sgd" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
