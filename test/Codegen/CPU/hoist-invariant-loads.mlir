// RUN: loom-opt %s --split-input-file --loom-hoist-invariant-loads | FileCheck %s

// An embedding lookup as convert-linalg-to-loops writes it: the id is
// loaded in the column loop. It moves before that loop (the table's load
// moves with its row index only once LLVM hoists the clamp: it depends on
// the column).
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[TABLE:[^:]+]]: memref<1000x256xf32>, %[[IDS:[^:]+]]: memref<4096xi32>, %[[OUT:[^:]+]]: memref<4096x256xf32>)
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step %{{.+}} {
// CHECK-NEXT: %[[ID:.+]] = memref.load %[[IDS]][%[[I]]]
// CHECK-NEXT: scf.for %[[J:.+]] = %{{.+}} to %{{.+}} step %{{.+}} {
// CHECK-NEXT: arith.index_cast %[[ID]]
// CHECK: memref.load %[[TABLE]]
// CHECK: memref.store %{{.+}}, %[[OUT]][%[[I]], %[[J]]]
func.func @embedding(%table: memref<1000x256xf32>, %ids: memref<4096xi32>, %out: memref<4096x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c999 = arith.constant 999 : index
  %c4096 = arith.constant 4096 : index
  scf.for %i = %c0 to %c4096 step %c1 {
    scf.for %j = %c0 to %c256 step %c1 {
      %id = memref.load %ids[%i] : memref<4096xi32>
      %index = arith.index_cast %id : i32 to index
      %low = arith.maxsi %index, %c0 : index
      %row = arith.minsi %low, %c999 : index
      %v = memref.load %table[%row, %j] : memref<1000x256xf32>
      memref.store %v, %out[%i, %j] : memref<4096x256xf32>
    }
  }
  return
}

// -----

// A row's scale, loaded per column, leaves both loops' inner one; the
// loads that move with the column stay.
// CHECK-LABEL: func.func @row_scale
// CHECK: scf.for %[[I:.+]] =
// CHECK-NEXT: %[[S:.+]] = memref.load %{{.+}}[%[[I]]] : memref<8xf32>
// CHECK-NEXT: scf.for
// CHECK-NEXT: memref.load %{{.+}} : memref<8x16xf32>
// CHECK-NEXT: arith.mulf %{{.+}}, %[[S]]
func.func @row_scale(%x: memref<8x16xf32>, %s: memref<8xf32>, %out: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c16 step %c1 {
      %v = memref.load %x[%i, %j] : memref<8x16xf32>
      %scale = memref.load %s[%i] : memref<8xf32>
      %p = arith.mulf %v, %scale : f32
      memref.store %p, %out[%i, %j] : memref<8x16xf32>
    }
  }
  return
}

// -----

// What the loop writes, through the same memref or a view of its buffer,
// is loaded where it is: the store may change it.
// CHECK-LABEL: func.func @written
// CHECK: scf.for
// CHECK-NEXT: memref.load %{{.+}}[%{{.+}}] : memref<4xf32>
// CHECK: scf.for
// CHECK-NEXT: memref.load %{{.+}}[%{{.+}}] : memref<2x2xf32>
func.func @written(%a: memref<4xf32>, %out: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %j = %c0 to %c4 step %c1 {
    %v = memref.load %a[%c1] : memref<4xf32>
    memref.store %v, %a[%j] : memref<4xf32>
  }
  %view = memref.expand_shape %a [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  scf.for %j = %c0 to %c4 step %c1 {
    %v = memref.load %view[%c0, %c1] : memref<2x2xf32>
    memref.store %v, %a[%j] : memref<4xf32>
  }
  return
}

// -----

// A loop that may run no trip (bounds not known) or that calls out keeps
// its loads.
// CHECK-LABEL: func.func @unknown
// CHECK: scf.for
// CHECK-NEXT: memref.load
// CHECK: scf.for
// CHECK-NEXT: memref.load
func.func private @opaque(memref<4xf32>)
func.func @unknown(%a: memref<4xf32>, %b: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %j = %c0 to %n step %c1 {
    %v = memref.load %a[%c0] : memref<4xf32>
    memref.store %v, %b[%j] : memref<4xf32>
  }
  scf.for %j = %c0 to %c4 step %c1 {
    %v = memref.load %a[%c0] : memref<4xf32>
    memref.store %v, %b[%j] : memref<4xf32>
    func.call @opaque(%b) : (memref<4xf32>) -> ()
  }
  return
}
