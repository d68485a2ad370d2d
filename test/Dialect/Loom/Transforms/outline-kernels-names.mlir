// RUN: loom-opt %s --loom-outline-kernels | FileCheck %s

// A kernel's name taken already (hand-written IR) gets a suffix: it had
// been defined twice, and the module failed to verify.

// CHECK-LABEL: func.func private @m_k0(
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @m_k0_1(
// CHECK: loom.neg
// CHECK-LABEL: func.func @m(
// CHECK: call @m_k0_1(
func.func private @m_k0(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @m(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = loom.neg %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
