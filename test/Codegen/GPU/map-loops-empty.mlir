// RUN: loom-opt %s --split-input-file --loom-map-loops-to-gpu | FileCheck %s

// --loom-map-loops-to-gpu on loops of no iterations (hand-written IR: the
// front end's shapes have no zero dims): the split-reduction choice had
// divided by the empty space's size (SIGFPE). The loop maps as any other,
// its threads guarded off.

// CHECK-LABEL: func.func @empty_batch_sum(
// CHECK: gpu.launch
// CHECK: scf.if
func.func @empty_batch_sum(%x: memref<4x8x16xbf16>, %acc: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %b = %c0 to %c4 step %c1 {
    scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c0) step (%c1, %c1) {
      %v = memref.load %x[%b, %i, %j] : memref<4x8x16xbf16>
      %s = memref.load %acc[%i, %j] : memref<8x16xf32>
      %w = arith.extf %v : bf16 to f32
      %t = arith.addf %s, %w : f32
      memref.store %t, %acc[%i, %j] : memref<8x16xf32>
    }
  }
  return
}
