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

// -----

// A full sum of a 3-d tensor (a loss): the accumulator is carried out of
// all three loops, and each level's sum starts from -0 (addf's identity)
// and is added to the running total after its loop, a tree of short sums
// instead of one chain of 4 * 8 * 16 adds.
// CHECK-LABEL: func.func @full_sum
// CHECK-SAME: (%[[IN:[^:]+]]: memref<4x8x16xf32>, %[[OUT:[^:]+]]: memref<f32>)
// CHECK: %[[INIT:.+]] = memref.load %[[OUT]][] : memref<f32>
// CHECK: %[[TOTAL:.+]] = scf.for %{{.+}} iter_args(%[[A:.+]] = %[[INIT]]) -> (f32) {
// CHECK: %[[Z1:.+]] = arith.constant -0.000000e+00 : f32
// CHECK: %[[S1:.+]] = scf.for %{{.+}} iter_args(%[[B:.+]] = %[[Z1]]) -> (f32) {
// CHECK: %[[Z2:.+]] = arith.constant -0.000000e+00 : f32
// CHECK: %[[S2:.+]] = scf.for %{{.+}} iter_args(%[[C:.+]] = %[[Z2]]) -> (f32) {
// CHECK: %[[X:.+]] = memref.load %[[IN]]
// CHECK: %[[NEXT:.+]] = arith.addf %[[C]], %[[X]] fastmath<reassoc> : f32
// CHECK: scf.yield %[[NEXT]] : f32
// CHECK: %[[B2:.+]] = arith.addf %[[B]], %[[S2]] fastmath<reassoc> : f32
// CHECK: scf.yield %[[B2]] : f32
// CHECK: %[[A2:.+]] = arith.addf %[[A]], %[[S1]] fastmath<reassoc> : f32
// CHECK: scf.yield %[[A2]] : f32
// CHECK: memref.store %[[TOTAL]], %[[OUT]][] : memref<f32>
// A maximum is carried the same way but not blocked: max is exact in any
// order.
// CHECK-LABEL: func.func @full_max
// CHECK-NOT: arith.constant -0.0
// CHECK: return
func.func @full_sum(%in: memref<4x8x16xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      scf.for %k = %c0 to %c16 step %c1 {
        %a = memref.load %out[] : memref<f32>
        %x = memref.load %in[%i, %j, %k] : memref<4x8x16xf32>
        %s = arith.addf %a, %x : f32
        memref.store %s, %out[] : memref<f32>
      }
    }
  }
  return
}

func.func @full_max(%in: memref<4x8xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %a = memref.load %out[] : memref<f32>
      %x = memref.load %in[%i, %j] : memref<4x8xf32>
      %s = arith.maximumf %a, %x : f32
      memref.store %s, %out[] : memref<f32>
    }
  }
  return
}
