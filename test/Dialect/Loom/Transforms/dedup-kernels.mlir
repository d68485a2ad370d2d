// RUN: loom-opt %s --split-input-file --loom-dedup-kernels | FileCheck %s

// --loom-dedup-kernels: kernels with one signature and structurally equal
// bodies (locations aside) become the first of them; calls are redirected.
// A kernel that differs in an attribute or a type stays.
// CHECK-LABEL: func.func private @m_k0
// CHECK-NOT: func.func private @m_k1
// CHECK-LABEL: func.func private @m_k2
// CHECK: loom.softmax %{{.+}} axis 0
// CHECK-LABEL: func.func private @m_k3
// CHECK-LABEL: func.func @m
// CHECK: call @m_k0(%{{.+}}) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: call @m_k0(%{{.+}}) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: call @m_k2(
// CHECK-NEXT: call @m_k3(
func.func private @m_k0(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {loom.kernel} {
  %0 = loom.softmax %x axis 1 : tensor<4x8xf32> loc("a.loom":3:5)
  return %0 : tensor<4x8xf32>
}
func.func private @m_k1(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {loom.kernel} {
  %0 = loom.softmax %x axis 1 : tensor<4x8xf32> loc("a.loom":9:5)
  return %0 : tensor<4x8xf32>
}
func.func private @m_k2(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {loom.kernel} {
  %0 = loom.softmax %x axis 0 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
func.func private @m_k3(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> attributes {loom.kernel} {
  %0 = loom.softmax %x axis 1 : tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}
func.func @m(%x: tensor<4x8xf32>, %y: tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>) {
  %0 = call @m_k0(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = call @m_k1(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = call @m_k2(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = call @m_k3(%y) : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>
}
