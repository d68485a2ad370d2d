// RUN: loom-opt %s --split-input-file --loom-map-loops-to-gpu --verify-diagnostics -o /dev/null

// --loom-map-loops-to-gpu errors (hand-written IR: the GPU pipeline runs
// it on bufferized kernels of static shapes).

// Tensor IR: a value made inside a launch could not reach its uses (this
// had been a dominance error after the pass).
// expected-error @+1 {{loom-map-loops-to-gpu runs on bufferized kernels, but this kernel takes a tensor (bufferize first)}}
func.func @tensor_arguments(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a : tensor<8xf32>) outs(%a : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @tensor_inside(%a: memref<8xf32>) {
  // expected-error @+1 {{loom-map-loops-to-gpu runs on bufferized kernels, but this op makes a tensor (bufferize first)}}
  %t = bufferization.to_tensor %a restrict : memref<8xf32> to tensor<8xf32>
  return
}

// -----

func.func @dynamic_copy(%a: memref<?xf32>, %b: memref<?xf32>) {
  // expected-error @+1 {{copies of dynamically shaped buffers are not supported}}
  memref.copy %a, %b : memref<?xf32> to memref<?xf32>
  return
}
