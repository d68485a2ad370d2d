// RUN: loom-opt %s --split-input-file --verify-diagnostics --convert-loom-to-linalg

// --convert-loom-to-linalg sizes its tensors from static shapes, all the
// front end builds; a dynamic dim in hand-written IR is an error at the op
// (a reshape's lowering had crashed, others built invalid tensor.empty).

func.func @reshape(%x: tensor<?x8xf32>) -> tensor<?x2x4xf32> {
  // expected-error @+1 {{'loom.reshape' op needs static shapes to lower to linalg, got 'tensor<?x8xf32>'}}
  %y = loom.reshape %x : tensor<?x8xf32> -> tensor<?x2x4xf32>
  return %y : tensor<?x2x4xf32>
}

// -----

func.func @matmul(%x: tensor<?x4xf32>, %w: tensor<4x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'loom.matmul' op needs static shapes to lower to linalg, got 'tensor<?x4xf32>'}}
  %y = loom.matmul %x, %w accumulate f32 : (tensor<?x4xf32>, tensor<4x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
