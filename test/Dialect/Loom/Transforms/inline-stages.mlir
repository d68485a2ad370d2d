// RUN: loom-opt %s --split-input-file --loom-inline-stages | FileCheck %s

// --loom-inline-stages: each loom.stage is replaced by its body, in place,
// and each stage result by the value its loom.yield gives. Every op keeps
// its stage as `loom.stage`, where placing the stages on ranks starts
// (loom-place-stages).

// Two stages: the bodies move out in order, between the ops that were
// around them, and later uses of the stage results read the yielded values.
// CHECK-LABEL: func.func @two_stages
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK-SAME: attributes {loom.pipeline_axis = "pp"}
// CHECK-NEXT: [[N:%.+]] = loom.neg %[[X]] : tensor<8x16xf32>
// CHECK-NEXT: [[G:%.+]] = loom.gelu [[N]] {loom.stage = 0 : i64} : tensor<8x16xf32>
// CHECK-NEXT: [[R:%.+]] = loom.relu [[G]] {loom.stage = 0 : i64} : tensor<8x16xf32>
// CHECK-NEXT: [[A:%.+]] = loom.add [[G]], [[R]] {loom.stage = 1 : i64} :
// CHECK-NEXT: [[T:%.+]] = loom.tanh [[R]] : tensor<8x16xf32>
// CHECK-NEXT: [[E:%.+]] = loom.exp [[A]] : tensor<8x16xf32>
// CHECK-NEXT: return [[E]], [[T]] : tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NOT: loom.stage
// CHECK-NOT: loom.yield
func.func @two_stages(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
    attributes {loom.pipeline_axis = "pp"} {
  %n = loom.neg %x : tensor<8x16xf32>
  %s:2 = loom.stage 0 -> tensor<8x16xf32>, tensor<8x16xf32> {
    %g = loom.gelu %n : tensor<8x16xf32>
    %r = loom.relu %g : tensor<8x16xf32>
    loom.yield %g, %r : tensor<8x16xf32>, tensor<8x16xf32>
  }
  %t = loom.stage 1 -> tensor<8x16xf32> {
    %a = loom.add %s#0, %s#1 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    loom.yield %a : tensor<8x16xf32>
  }
  %u = loom.tanh %s#1 : tensor<8x16xf32>
  %e = loom.exp %t : tensor<8x16xf32>
  return %e, %u : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// A stage may yield a value defined before it (here an argument): its
// result becomes that value. A stage without results, and one whose body
// is only the terminator, leave nothing behind.
// CHECK-LABEL: func.func @yield_outer_value
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: [[G:%.+]] = loom.gelu %[[X]] {loom.stage = 0 : i64} : tensor<4xf32>
// CHECK-NEXT: [[S:%.+]] = loom.sqrt %[[X]] {loom.stage = 1 : i64} : tensor<4xf32>
// CHECK-NEXT: return %[[X]] : tensor<4xf32>
func.func @yield_outer_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.stage 0 -> tensor<4xf32> {
    %g = loom.gelu %x : tensor<4xf32>
    loom.yield %x : tensor<4xf32>
  }
  loom.stage 1 {
    %s = loom.sqrt %x : tensor<4xf32>
    loom.yield
  }
  loom.stage 1 {
    loom.yield
  }
  return %0 : tensor<4xf32>
}

// -----

// Sharding annotations inside a stage move out with the body unchanged
// (stripping them is another pass).
// CHECK: shard.grid @gpus
// CHECK-LABEL: func.func @annotated
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x8xf32>)
// CHECK-NEXT: [[SH:%.+]] = shard.sharding @gpus split_axes = {{\[\[}}], [1]] {loom.stage = 1 : i64} : !shard.sharding
// CHECK-NEXT: [[WS:%.+]] = shard.shard %[[W]] to [[SH]] {loom.stage = 1 : i64} : tensor<8x8xf32>
// CHECK-NEXT: [[M:%.+]] = loom.matmul %[[X]], [[WS]] accumulate f32 {loom.stage = 1 : i64}
// CHECK-NEXT: return [[M]] : tensor<4x8xf32>
shard.grid @gpus(shape = 2x2) {loom.axes = ["pp", "tp"]}
func.func @annotated(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.stage 1 -> tensor<4x8xf32> {
    %s = shard.sharding @gpus split_axes = [[], [1]] : !shard.sharding
    %ws = shard.shard %w to %s : tensor<8x8xf32>
    %m = loom.matmul %x, %ws accumulate f32 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    loom.yield %m : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// Every function is handled, and one without stages is left as it is.
// CHECK-LABEL: func.func @first
// CHECK-NEXT: loom.relu
// CHECK-NEXT: return
// CHECK-LABEL: func.func @no_stages
// CHECK-NEXT: loom.gelu
// CHECK-NEXT: return
func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.stage 0 -> tensor<4xf32> {
    %r = loom.relu %x : tensor<4xf32>
    loom.yield %r : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}
func.func @no_stages(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.gelu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
