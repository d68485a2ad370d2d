// RUN: loom-opt %s --split-input-file --loom-lower-strided-copies | FileCheck %s

// --loom-lower-strided-copies: a memref.copy from or to a strided view (a
// split piece, a concat slot) becomes an scf.parallel of loads and stores
// over the copy's (static) shape; a rank-0 one becomes one load and one
// store. Copies between dense buffers or dense views (one contiguous run,
// as a 1-D bucket's pieces) stay memref.copy (one memcpy each).

// Reading a split piece: the loop covers 4 x 4 and reads through the view.
// CHECK-LABEL: func.func @from_view
// CHECK-SAME: (%[[A:[^:]+]]: memref<4x8xf32>, %[[OUT:[^:]+]]: memref<4x4xf32>)
// CHECK-NEXT: %[[V:.+]] = memref.subview %[[A]][0, 2] [4, 4] [1, 1]
// CHECK-NEXT: %[[LB0:.+]] = arith.constant 0 : index
// CHECK-NEXT: %[[UB0:.+]] = arith.constant 4 : index
// CHECK-NEXT: %[[ST0:.+]] = arith.constant 1 : index
// CHECK-NEXT: %[[LB1:.+]] = arith.constant 0 : index
// CHECK-NEXT: %[[UB1:.+]] = arith.constant 4 : index
// CHECK-NEXT: %[[ST1:.+]] = arith.constant 1 : index
// CHECK-NEXT: scf.parallel (%[[I:[a-z0-9_]+]], %[[J:[a-z0-9_]+]]) = (%[[LB0]], %[[LB1]]) to (%[[UB0]], %[[UB1]]) step (%[[ST0]], %[[ST1]]) {
// CHECK-NEXT: %[[X:.+]] = memref.load %[[V]][%[[I]], %[[J]]] : memref<4x4xf32, strided<[8, 1], offset: 2>>
// CHECK-NEXT: memref.store %[[X]], %[[OUT]][%[[I]], %[[J]]] : memref<4x4xf32>
// CHECK-NEXT: scf.reduce
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @from_view(%a: memref<4x8xf32>, %out: memref<4x4xf32>) {
  %v = memref.subview %a[0, 2] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 2>>
  memref.copy %v, %out : memref<4x4xf32, strided<[8, 1], offset: 2>> to memref<4x4xf32>
  return
}

// -----

// Writing a concat slot: the bounds are the copy's shape (2 x 3), the
// stores go through the view.
// CHECK-LABEL: func.func @to_view
// CHECK-SAME: (%[[A:[^:]+]]: memref<2x3xf32>, %[[OUT:[^:]+]]: memref<2x6xf32>)
// CHECK-NEXT: %[[V:.+]] = memref.subview %[[OUT]][0, 3] [2, 3] [1, 1]
// CHECK-NOT: memref.copy
// CHECK: %[[UB0:.+]] = arith.constant 2 : index
// CHECK: %[[UB1:.+]] = arith.constant 3 : index
// CHECK: scf.parallel (%[[I:[a-z0-9_]+]], %[[J:[a-z0-9_]+]]) = (%{{.+}}, %{{.+}}) to (%[[UB0]], %[[UB1]]) step
// CHECK-NEXT: %[[X:.+]] = memref.load %[[A]][%[[I]], %[[J]]] : memref<2x3xf32>
// CHECK-NEXT: memref.store %[[X]], %[[V]][%[[I]], %[[J]]] : memref<2x3xf32, strided<[6, 1], offset: 3>>
// CHECK-NOT: memref.copy
// CHECK: return
func.func @to_view(%a: memref<2x3xf32>, %out: memref<2x6xf32>) {
  %v = memref.subview %out[0, 3] [2, 3] [1, 1] : memref<2x6xf32> to memref<2x3xf32, strided<[6, 1], offset: 3>>
  memref.copy %a, %v : memref<2x3xf32> to memref<2x3xf32, strided<[6, 1], offset: 3>>
  return
}

// -----

// A copy inside a loop is found too (the view's offset is dynamic there).
// CHECK-LABEL: func.func @in_loop
// CHECK: scf.for
// CHECK-NEXT: %[[V:.+]] = memref.subview
// CHECK-NOT: memref.copy
// CHECK: scf.parallel
// CHECK-NEXT: memref.load %[[V]]
// CHECK-NOT: memref.copy
// CHECK: return
func.func @in_loop(%a: memref<4x8xf32>, %out: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    %v = memref.subview %a[0, %i] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: ?>>
    memref.copy %v, %out : memref<4x4xf32, strided<[8, 1], offset: ?>> to memref<4x4xf32>
  }
  return
}

// -----

// A rank-0 strided copy: one load, one store, no loop.
// CHECK-LABEL: func.func @rank0
// CHECK-SAME: (%[[A:[^:]+]]: memref<f32, strided<[], offset: 3>>, %[[OUT:[^:]+]]: memref<f32>)
// CHECK-NEXT: %[[X:.+]] = memref.load %[[A]][] : memref<f32, strided<[], offset: 3>>
// CHECK-NEXT: memref.store %[[X]], %[[OUT]][] : memref<f32>
// CHECK-NEXT: return
func.func @rank0(%a: memref<f32, strided<[], offset: 3>>, %out: memref<f32>) {
  memref.copy %a, %out : memref<f32, strided<[], offset: 3>> to memref<f32>
  return
}

// -----

// Dense copies stay one memref.copy; so does a strided copy of dynamic
// shape (the loop needs static bounds).
// CHECK-LABEL: func.func @dense
// CHECK-SAME: (%[[A:[^:]+]]: memref<4x8xf32>, %[[OUT:[^:]+]]: memref<4x8xf32>)
// CHECK-NEXT: memref.copy %[[A]], %[[OUT]] : memref<4x8xf32> to memref<4x8xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: (%[[A:[^:]+]]: memref<?xf32, strided<[2]>>, %[[OUT:[^:]+]]: memref<?xf32>)
// CHECK-NEXT: memref.copy %[[A]], %[[OUT]] : memref<?xf32, strided<[2]>> to memref<?xf32>
// CHECK-NEXT: return
func.func @dense(%a: memref<4x8xf32>, %out: memref<4x8xf32>) {
  memref.copy %a, %out : memref<4x8xf32> to memref<4x8xf32>
  return
}
func.func @dynamic(%a: memref<?xf32, strided<[2]>>, %out: memref<?xf32>) {
  memref.copy %a, %out : memref<?xf32, strided<[2]>> to memref<?xf32>
  return
}

// -----

// A 1-D concat's slots and a split's pieces, and rows of a matrix, are
// one contiguous run each: one memref.copy (a memcpy) each, no loop. A
// gradient bucket of a deep model has hundreds of them.
// CHECK-LABEL: func.func @dense_views
// CHECK-NOT: scf.parallel
// CHECK: memref.copy %{{.+}}, %{{.+}} : memref<256xf32> to memref<256xf32, strided<[1], offset: 256>>
// CHECK-NOT: scf.parallel
// CHECK: memref.copy %{{.+}}, %{{.+}} : memref<128xf32, strided<[1], offset: 384>> to memref<128xf32>
// CHECK-NOT: scf.parallel
// CHECK: memref.copy %{{.+}}, %{{.+}} : memref<2x8xf32, strided<[8, 1], offset: 16>> to memref<2x8xf32>
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @dense_views(%a: memref<256xf32>, %bucket: memref<1024xf32>, %out: memref<128xf32>,
                       %m: memref<4x8xf32>, %rows: memref<2x8xf32>) {
  %slot = memref.subview %bucket[256] [256] [1] : memref<1024xf32> to memref<256xf32, strided<[1], offset: 256>>
  memref.copy %a, %slot : memref<256xf32> to memref<256xf32, strided<[1], offset: 256>>
  %piece = memref.subview %bucket[384] [128] [1] : memref<1024xf32> to memref<128xf32, strided<[1], offset: 384>>
  memref.copy %piece, %out : memref<128xf32, strided<[1], offset: 384>> to memref<128xf32>
  %r = memref.subview %m[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  memref.copy %r, %rows : memref<2x8xf32, strided<[8, 1], offset: 16>> to memref<2x8xf32>
  return
}
