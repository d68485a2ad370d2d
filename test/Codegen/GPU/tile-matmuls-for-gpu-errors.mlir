// RUN: loom-opt %s --split-input-file --loom-tile-matmuls-for-gpu -verify-diagnostics

// --loom-tile-matmuls-for-gpu builds launches of buffers: on tensor IR (from
// loom-opt; loomc bufferizes first) it had silently left every matmul alone.

// expected-error @+1 {{loom-tile-matmuls-for-gpu runs on bufferized kernels, but this kernel takes a tensor (bufferize first)}}
func.func @tensor_arguments(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>, %c: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %d = linalg.matmul ins(%a, %b : tensor<32x32xf32>, tensor<32x32xf32>) outs(%c : tensor<32x32xf32>) -> tensor<32x32xf32>
  return %d : tensor<32x32xf32>
}

// -----

func.func @tensor_inside(%a: memref<32x32xf32>, %b: memref<32x32xf32>, %c: memref<32x32xf32>) {
  linalg.matmul ins(%a, %b : memref<32x32xf32>, memref<32x32xf32>) outs(%c : memref<32x32xf32>)
  // expected-error @+1 {{loom-tile-matmuls-for-gpu runs on bufferized kernels, but this op makes a tensor (bufferize first)}}
  %t = tensor.empty() : tensor<4xf32>
  return
}
