// RUN: loom-opt %s --split-input-file --loom-hoist-kernel-allocs | FileCheck %s

// --loom-hoist-kernel-allocs: in a function marked loom.kernel, each
// statically shaped, dense memref.alloc at the top of the body becomes a
// new trailing argument (in order), its users use the argument and its
// memref.dealloc goes away; the new arguments are marked loom.scratch (no
// other step reads them, so a kernel may skip writing them). Other functions, dynamic allocs and allocs in
// nested regions are left alone.

// Two temporaries (an accumulator and row statistics) become arguments 2
// and 3; the view and the copies now use them.
// CHECK-LABEL: func.func private @kernel
// CHECK-SAME: (%[[A:[^:]+]]: memref<4x8xf32>, %[[OUT:[^:]+]]: memref<4x8xf32>, %[[T:[^:]+]]: memref<4x8xf32> {loom.scratch}, %[[S:[^:]+]]: memref<4xf32> {loom.scratch})
// CHECK-SAME: attributes {loom.kernel}
// CHECK-NOT: memref.alloc
// CHECK-NEXT: memref.copy %[[A]], %[[T]] : memref<4x8xf32> to memref<4x8xf32>
// CHECK-NEXT: %[[ROW:.+]] = memref.subview %[[T]][0, 0] [1, 4] [1, 1]
// CHECK-NEXT: %[[ROWS:.+]] = memref.collapse_shape %[[ROW]]
// CHECK-NEXT: memref.copy %[[ROWS]], %[[S]]
// CHECK-NEXT: memref.copy %[[T]], %[[OUT]] : memref<4x8xf32> to memref<4x8xf32>
// CHECK-NEXT: return
// CHECK-NOT: memref.dealloc
func.func private @kernel(%a: memref<4x8xf32>, %out: memref<4x8xf32>) attributes {loom.kernel} {
  %t = memref.alloc() : memref<4x8xf32>
  %s = memref.alloc() : memref<4xf32>
  memref.copy %a, %t : memref<4x8xf32> to memref<4x8xf32>
  %row = memref.subview %t[0, 0] [1, 4] [1, 1] : memref<4x8xf32> to memref<1x4xf32, strided<[8, 1]>>
  %rows = memref.collapse_shape %row [[0, 1]] : memref<1x4xf32, strided<[8, 1]>> into memref<4xf32, strided<[1]>>
  memref.copy %rows, %s : memref<4xf32, strided<[1]>> to memref<4xf32>
  memref.copy %t, %out : memref<4x8xf32> to memref<4x8xf32>
  memref.dealloc %t : memref<4x8xf32>
  memref.dealloc %s : memref<4xf32>
  return
}

// -----

// Not a kernel: nothing changes. A kernel declaration has no body to
// change.
// CHECK-LABEL: func.func @not_a_kernel
// CHECK-SAME: (%[[OUT:[^:]+]]: memref<4xf32>) {
// CHECK-NEXT: %[[T:.+]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memref.copy %[[T]], %[[OUT]]
// CHECK-NEXT: memref.dealloc %[[T]] : memref<4xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @declared(memref<4xf32>) attributes {loom.kernel}
func.func @not_a_kernel(%out: memref<4xf32>) {
  %t = memref.alloc() : memref<4xf32>
  memref.copy %t, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %t : memref<4xf32>
  return
}
func.func private @declared(memref<4xf32>) attributes {loom.kernel}

// -----

// The static allocs become arguments, the one inside the loop too (no
// iteration reads what another wrote: one buffer serves them all); the
// dynamic one stays.
// CHECK-LABEL: func.func private @mixed
// CHECK-SAME: (%[[N:[^:]+]]: index, %[[OUT:[^:]+]]: memref<?xf32>, %[[T:[^:]+]]: memref<8xf32> {loom.scratch}, %[[U:[^:]+]]: memref<8xf32> {loom.scratch})
// CHECK-SAME: attributes {loom.kernel}
// CHECK: %[[D:.+]] = memref.alloc(%[[N]]) : memref<?xf32>
// CHECK-NEXT: memref.copy %[[D]], %[[OUT]]
// CHECK-NEXT: memref.dealloc %[[D]] : memref<?xf32>
// CHECK-NEXT: scf.for
// CHECK-NEXT: memref.copy %[[U]], %[[T]] : memref<8xf32> to memref<8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func private @mixed(%n: index, %out: memref<?xf32>) attributes {loom.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d = memref.alloc(%n) : memref<?xf32>
  %t = memref.alloc() : memref<8xf32>
  memref.copy %d, %out : memref<?xf32> to memref<?xf32>
  memref.dealloc %d : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %u = memref.alloc() : memref<8xf32>
    memref.copy %u, %t : memref<8xf32> to memref<8xf32>
    memref.dealloc %u : memref<8xf32>
  }
  memref.dealloc %t : memref<8xf32>
  return
}

// -----

// Left in place: an alloc a loop carries to its next iteration, and one in
// a parallel loop (its iterations may run at once).
// CHECK-LABEL: func.func private @carried
// CHECK-SAME: (%{{[^:]+}}: index, %{{[^:]+}}: memref<8xf32>) attributes {loom.kernel}
// CHECK: scf.for
// CHECK: memref.alloc() : memref<8xf32>
// CHECK: scf.yield
// CHECK: scf.parallel
// CHECK: memref.alloc() : memref<4xf32>
func.func private @carried(%n: index, %out: memref<8xf32>) attributes {loom.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%prev = %out) -> (memref<8xf32>) {
    %next = memref.alloc() : memref<8xf32>
    memref.copy %prev, %next : memref<8xf32> to memref<8xf32>
    scf.yield %next : memref<8xf32>
  }
  memref.copy %last, %out : memref<8xf32> to memref<8xf32>
  scf.parallel (%j) = (%c0) to (%n) step (%c1) {
    %w = memref.alloc() : memref<4xf32>
    memref.dealloc %w : memref<4xf32>
    scf.reduce
  }
  return
}

// -----

// Plan buffers are dense, row-major and in the default memory space: an
// alloc with a strided layout or another memory space stays.
// CHECK-LABEL: func.func private @not_plan_buffers
// CHECK-SAME: (%[[OUT:[^:]+]]: memref<4xf32>) attributes {loom.kernel}
// CHECK-NEXT: %[[S:.+]] = memref.alloc() : memref<4xf32, strided<[2]>>
// CHECK-NEXT: %[[W:.+]] = memref.alloc() : memref<4xf32, 3>
// CHECK-NEXT: memref.copy %[[S]], %[[OUT]]
// CHECK-NEXT: memref.copy %[[W]], %[[OUT]]
// CHECK-NEXT: return
func.func private @not_plan_buffers(%out: memref<4xf32>) attributes {loom.kernel} {
  %s = memref.alloc() : memref<4xf32, strided<[2]>>
  %w = memref.alloc() : memref<4xf32, 3>
  memref.copy %s, %out : memref<4xf32, strided<[2]>> to memref<4xf32>
  memref.copy %w, %out : memref<4xf32, 3> to memref<4xf32>
  return
}
