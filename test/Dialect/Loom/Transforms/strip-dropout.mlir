// RUN: loom-opt %s --split-input-file --loom-strip-dropout | FileCheck %s

// --loom-strip-dropout: a loom.dropout without keys (outside a training
// step) is its input; its positions' aranges go with it. A keyed one (a
// step's) stays.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK-NOT: loom.arange
// CHECK-NOT: loom.dropout
// CHECK: %[[G:.+]] = loom.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = loom.arange : tensor<4xi32>
  %c = loom.arange : tensor<8xi32>
  %d = loom.dropout %x positions(%r, %c) {probability = 1.0e-01 : f64, stream = 0 : i64}
      : (tensor<4x8xf32>, tensor<4xi32>, tensor<8xi32>) -> tensor<4x8xf32>
  %g = loom.gelu %d : tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @step
// CHECK: %[[R:.+]] = loom.arange : tensor<4xi32>
// CHECK: loom.dropout %{{.+}} positions(%[[R]]) keys(%{{.+}}, %{{.+}})
func.func @step(%x: tensor<4xf32>, %seed: tensor<f32>, %mb: tensor<f32>) -> tensor<4xf32> {
  %r = loom.arange : tensor<4xi32>
  %d = loom.dropout %x positions(%r) keys(%seed, %mb) {probability = 5.0e-01 : f64, stream = 3 : i64}
      : (tensor<4xf32>, tensor<4xi32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// An input returned through a dropout stays a copy (x * 1): an output may
// not be an input's buffer ("output 'y' is input 'x' itself" of a script
// that wrote y = dropout(x, p)).
// CHECK-LABEL: func.func @returned
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xbf16>)
// CHECK: %[[ONE:.+]] = loom.constant 1.000000e+00 : tensor<bf16>
// CHECK: %[[Y:.+]] = loom.mul %[[X]], %[[ONE]] : (tensor<4xbf16>, tensor<bf16>) -> tensor<4xbf16>
// CHECK: return %[[Y]]
func.func @returned(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %r = loom.arange : tensor<4xi32>
  %d = loom.dropout %x positions(%r) {probability = 1.0e-01 : f64, stream = 0 : i64}
      : (tensor<4xbf16>, tensor<4xi32>) -> tensor<4xbf16>
  return %d : tensor<4xbf16>
}
