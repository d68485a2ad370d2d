// RUN: loom-opt %s --split-input-file --loom-kernel-destinations | FileCheck %s

// --loom-kernel-destinations: every tensor result of a loom.kernel function
// gets a destination argument after the inputs, in result order, and is
// returned materialized into it (so bufferization writes it in place).

// CHECK-LABEL: func.func private @two_results
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>, %[[D0:[^:]+]]: tensor<4xf32>, %[[D1:[^:]+]]: tensor<2x3xbf16>) -> (tensor<4xf32>, tensor<2x3xbf16>)
// CHECK: %[[SUM:.+]] = arith.addf %[[X]], %[[X]]
// CHECK: %[[R0:.+]] = bufferization.materialize_in_destination %[[SUM]] in %[[D0]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[R1:.+]] = bufferization.materialize_in_destination %{{.+}} in %[[D1]] : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
// CHECK: return %[[R0]], %[[R1]]
func.func private @two_results(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<2x3xbf16>) attributes {loom.kernel} {
  %sum = arith.addf %x, %x : tensor<4xf32>
  %zero = arith.constant dense<0.0> : tensor<2x3xbf16>
  return %sum, %zero : tensor<4xf32>, tensor<2x3xbf16>
}

// -----

// A non-tensor result keeps no destination; the tensor result still gets one.
// CHECK-LABEL: func.func private @mixed
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>, %[[D:[^:]+]]: tensor<4xf32>) -> (index, tensor<4xf32>)
// CHECK: %[[R:.+]] = bufferization.materialize_in_destination %[[X]] in %[[D]]
// CHECK: return %{{.+}}, %[[R]]
func.func private @mixed(%x: tensor<4xf32>) -> (index, tensor<4xf32>) attributes {loom.kernel} {
  %c = arith.constant 4 : index
  return %c, %x : index, tensor<4xf32>
}

// -----

// Functions that are not kernels, and kernel declarations, are left alone.
// CHECK-LABEL: func.func @model
// CHECK-SAME: (%{{[^:]+}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: materialize_in_destination
// CHECK: return
// CHECK-LABEL: func.func private @declared
// CHECK-SAME: (tensor<4xf32>) -> tensor<4xf32>
func.func @model(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func private @declared(tensor<4xf32>) -> tensor<4xf32> attributes {loom.kernel}

// -----

// A value returned twice is materialized in place into its first
// destination; the second gets a copy (a linalg.generic), made before
// either destination is written.
// CHECK-LABEL: func.func private @returned_twice
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>, %[[D0:[^:]+]]: tensor<4xf32>, %[[D1:[^:]+]]: tensor<4xf32>)
// CHECK: %[[SUM:.+]] = arith.addf %[[X]], %[[X]]
// CHECK: %[[COPY:.+]] = linalg.generic
// CHECK-SAME: ins(%[[SUM]] : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]] : f32
// CHECK: %[[R0:.+]] = bufferization.materialize_in_destination %[[SUM]] in %[[D0]]
// CHECK: %[[R1:.+]] = bufferization.materialize_in_destination %[[COPY]] in %[[D1]]
// CHECK: return %[[R0]], %[[R1]]
func.func private @returned_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {loom.kernel} {
  %sum = arith.addf %x, %x : tensor<4xf32>
  return %sum, %sum : tensor<4xf32>, tensor<4xf32>
}

// -----

// A result loom-in-place-updates put over an argument is materialized
// into that argument (the mark goes); its destination argument stays, for
// the plan's step, which passes the param's bytes for both.
// CHECK-LABEL: func.func private @in_place
// CHECK-SAME: (%[[W:[^:]+]]: tensor<4xf32>, %[[G:[^:]+]]: tensor<4xf32>, %{{[^:]+}}: tensor<4xf32>) -> tensor<4xf32> attributes
// CHECK: %[[NEW:.+]] = arith.subf %[[W]], %[[G]]
// CHECK: %[[R:.+]] = bufferization.materialize_in_destination %[[NEW]] in %[[W]]
// CHECK: return %[[R]]
func.func private @in_place(%w: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32> {loom.in_place = 0 : i64}) attributes {loom.kernel} {
  %new = arith.subf %w, %g : tensor<4xf32>
  return %new : tensor<4xf32>
}

// -----

// A call of a kernel left in the module (hand-written IR) passes a new
// empty tensor per tensor result: it had kept the old signature and failed
// to verify ("incorrect number of operands for callee").

// CHECK-LABEL: func.func @calls_kernel
// CHECK-SAME: (%[[W:[^:]+]]: tensor<4xf32>)
// CHECK: %[[DEST:.+]] = tensor.empty() : tensor<4xf32>
// CHECK: call @called(%[[W]], %[[DEST]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func private @called(%x: tensor<4xf32>) -> tensor<4xf32> attributes {loom.kernel} {
  return %x : tensor<4xf32>
}
func.func @calls_kernel(%w: tensor<4xf32>) -> tensor<4xf32> {
  %r = call @called(%w) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
