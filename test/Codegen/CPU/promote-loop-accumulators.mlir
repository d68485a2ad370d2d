// RUN: loom-opt %s --split-input-file --loom-promote-loop-accumulators | FileCheck %s

// A row sum as convert-linalg-to-loops writes it: the inner loop loads,
// adds to and stores out[i] each step. The element becomes an iter_arg:
// one load before the loop, one store after; the add may reassociate, so
// that LLVM vectorizes the sum.
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME: (%[[IN:[^:]+]]: memref<4x8xf32>, %[[OUT:[^:]+]]: memref<4xf32>)
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step %{{.+}} {
// CHECK: %[[INIT:.+]] = memref.load %[[OUT]][%[[I]]] : memref<4xf32>
// CHECK: %[[SUM:.+]] = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %[[INIT]]) -> (f32) {
// CHECK: %[[X:.+]] = memref.load %[[IN]]
// CHECK: %[[NEXT:.+]] = arith.addf %[[ACC]], %[[X]] fastmath<reassoc> : f32
// CHECK: scf.yield %[[NEXT]] : f32
// CHECK: memref.store %[[SUM]], %[[OUT]][%[[I]]] : memref<4xf32>
func.func @row_sum(%in: memref<4x8xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %r = %c0 to %c8 step %c1 {
      %a = memref.load %out[%i] : memref<4xf32>
      %x = memref.load %in[%i, %r] : memref<4x8xf32>
      %s = arith.addf %a, %x : f32
      memref.store %s, %out[%i] : memref<4xf32>
    }
  }
  return
}

// -----

// Left alone: a loop that also reads the output elsewhere (out[0]), and an
// elementwise loop, whose store moves with the loop.
// CHECK-LABEL: func.func @not_accumulators
// CHECK-NOT: iter_args
// CHECK: return
func.func @not_accumulators(%in: memref<4x8xf32>, %out: memref<4xf32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c1 to %c4 step %c1 {
    scf.for %r = %c0 to %c8 step %c1 {
      %a = memref.load %out[%i] : memref<4xf32>
      %b = memref.load %out[%c0] : memref<4xf32>
      %s = arith.addf %a, %b : f32
      memref.store %s, %out[%i] : memref<4xf32>
    }
  }
  scf.for %r = %c0 to %c8 step %c1 {
    %x = memref.load %in[%c0, %r] : memref<4x8xf32>
    %v = memref.load %y[%r] : memref<8xf32>
    %s = arith.addf %v, %x : f32
    memref.store %s, %y[%r] : memref<8xf32>
  }
  return
}
