// RUN: loom-opt %s --split-input-file --loom-fuse-update-loops --canonicalize | FileCheck %s

// An update bucket's kernel: the two loops of the first param (same shape,
// the second reading what the first writes at the same element) fuse into
// one, and the two params' loops become one flat loop of 32 + 6
// iterations, an index_switch choosing the param: iterations from 32 on
// (t - 32) are the second's.
// CHECK-LABEL: func.func @bucket
// CHECK:       scf.parallel (%[[T:.+]]) = (%c0) to (%c38) step (%c1) {
// CHECK:         %[[PAST:.+]] = arith.cmpi uge, %[[T]], %c32
// CHECK:         %[[WHICH:.+]] = arith.index_castui %[[PAST]]
// CHECK:         scf.index_switch %[[WHICH]]
// CHECK:         case 0 {
// CHECK:           memref.store %{{.+}}, %arg7
// CHECK:           memref.store %{{.+}}, %arg6
// CHECK:         case 1 {
// CHECK:           %[[LOCAL:.+]] = arith.subi %[[T]], %c32
// CHECK:           memref.load %arg4[%[[LOCAL]]]
// CHECK:           memref.store %{{.+}}, %arg8[%[[LOCAL]]]
// CHECK-NOT:   scf.parallel
// CHECK:       return
func.func @bucket(%p: memref<4x8xf32>, %g: memref<4x8xf32>, %m: memref<4x8xf32>, %lr: memref<f32>,
                  %b: memref<6xf32>, %gb: memref<6xf32>,
                  %pn: memref<4x8xf32>, %mn: memref<4x8xf32>, %bn: memref<6xf32>)
    attributes {loom.update_kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %beta = arith.constant 0.5 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %mv = memref.load %m[%i, %j] : memref<4x8xf32>
    %gv = memref.load %g[%i, %j] : memref<4x8xf32>
    %t = arith.mulf %mv, %beta : f32
    %s = arith.addf %t, %gv : f32
    memref.store %s, %mn[%i, %j] : memref<4x8xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %x = memref.load %mn[%i, %j] : memref<4x8xf32>
    %l = memref.load %lr[] : memref<f32>
    %pv = memref.load %p[%i, %j] : memref<4x8xf32>
    %d = arith.mulf %l, %x : f32
    %r = arith.subf %pv, %d : f32
    memref.store %r, %pn[%i, %j] : memref<4x8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c6) step (%c1) {
    %l = memref.load %lr[] : memref<f32>
    %bv = memref.load %b[%i] : memref<6xf32>
    %gv = memref.load %gb[%i] : memref<6xf32>
    %d = arith.mulf %l, %gv : f32
    %r = arith.subf %bv, %d : f32
    memref.store %r, %bn[%i] : memref<6xf32>
    scf.reduce
  }
  return
}

// -----

// Kernels that are not an update bucket's are left alone.
// CHECK-LABEL: func.func @not_update
// CHECK-COUNT-2: scf.parallel
// CHECK-NOT:   scf.index_switch
func.func @not_update(%a: memref<8xf32>, %b: memref<4xf32>, %x: memref<8xf32>, %y: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %x[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = memref.load %b[%i] : memref<4xf32>
    memref.store %v, %y[%i] : memref<4xf32>
    scf.reduce
  }
  return
}

// -----

// Loops that are not elementwise stay loops of their own, and a loop that
// reads another's result elsewhere than at its own element cannot run
// beside it: here the second reads x[0], which the first writes, so the
// two stay apart, and the third, a transposing copy (its store not at its
// own indices), is left as it is. Nothing is flattened.
// CHECK-LABEL: func.func @dependent
// CHECK-COUNT-3: scf.parallel
// CHECK-NOT:   scf.index_switch
func.func @dependent(%a: memref<8xf32>, %x: memref<8xf32>, %y: memref<4xf32>,
                     %s: memref<4x8xf32>, %t: memref<8x4xf32>)
    attributes {loom.update_kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %x[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = memref.load %x[%c0] : memref<8xf32>
    memref.store %v, %y[%i] : memref<4xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %v = memref.load %s[%i, %j] : memref<4x8xf32>
    memref.store %v, %t[%j, %i] : memref<8x4xf32>
    scf.reduce
  }
  return
}

// -----

// One param's two loops alone: fused into one flat loop, no switch.
// CHECK-LABEL: func.func @one_param
// CHECK:       scf.parallel (%[[T:.+]]) = (%c0) to (%c32) step (%c1) {
// CHECK-NOT:     scf.index_switch
// CHECK:         memref.store %{{.+}}, %arg2
// CHECK:         memref.store %{{.+}}, %arg3
// CHECK-NOT:   scf.parallel
// CHECK:       return
func.func @one_param(%p: memref<4x8xf32>, %g: memref<4x8xf32>, %m: memref<4x8xf32>, %pn: memref<4x8xf32>)
    attributes {loom.update_kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %gv = memref.load %g[%i, %j] : memref<4x8xf32>
    %s = arith.addf %gv, %gv : f32
    memref.store %s, %m[%i, %j] : memref<4x8xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %x = memref.load %m[%i, %j] : memref<4x8xf32>
    %pv = memref.load %p[%i, %j] : memref<4x8xf32>
    %r = arith.subf %pv, %x : f32
    memref.store %r, %pn[%i, %j] : memref<4x8xf32>
    scf.reduce
  }
  return
}

// -----

// Two views of one buffer, one shifted by an element: the second loop's
// element i reads what the first writes at i + 1, another thread's
// element, so the loops neither fuse nor flatten.
// CHECK-LABEL: func.func @shifted_views
// CHECK-COUNT-2: scf.parallel
// CHECK-NOT:   scf.index_switch
func.func @shifted_views(%a: memref<8xf32>, %r: memref<9xf32>, %y: memref<8xf32>)
    attributes {loom.update_kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %first = memref.subview %r[0] [8] [1] : memref<9xf32> to memref<8xf32, strided<[1]>>
  %next = memref.subview %r[1] [8] [1] : memref<9xf32> to memref<8xf32, strided<[1], offset: 1>>
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %first[%i] : memref<8xf32, strided<[1]>>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %next[%i] : memref<8xf32, strided<[1], offset: 1>>
    memref.store %v, %y[%i] : memref<8xf32>
    scf.reduce
  }
  return
}

// -----

// Copy kernels whose pieces overlap (the second copy rewrites part of the
// first's) or read what another copy wrote keep their order: each copy
// becomes its own loop, none flattened with another.
// CHECK-LABEL: func.func @overlapping_copies
// CHECK-NOT:   memref.copy
// CHECK:       scf.parallel
// CHECK-NOT:   scf.index_switch
// CHECK:       scf.parallel
// CHECK-NOT:   scf.index_switch
// CHECK:       return
func.func @overlapping_copies(%a: memref<4xf32>, %b: memref<4xf32>, %out: memref<6xf32>) {
  %s0 = memref.subview %out[0] [4] [1] : memref<6xf32> to memref<4xf32, strided<[1]>>
  memref.copy %a, %s0 : memref<4xf32> to memref<4xf32, strided<[1]>>
  %s1 = memref.subview %out[2] [4] [1] : memref<6xf32> to memref<4xf32, strided<[1], offset: 2>>
  memref.copy %b, %s1 : memref<4xf32> to memref<4xf32, strided<[1], offset: 2>>
  return
}

// CHECK-LABEL: func.func @chained_copies
// CHECK-NOT:   memref.copy
// CHECK:       scf.parallel
// CHECK-NOT:   scf.index_switch
// CHECK:       scf.parallel
// CHECK-NOT:   scf.index_switch
// CHECK:       return
func.func @chained_copies(%a: memref<4xf32>, %mid: memref<8xf32>, %out: memref<2xf32>) {
  %s0 = memref.subview %mid[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  memref.copy %a, %s0 : memref<4xf32> to memref<4xf32, strided<[1]>>
  %s1 = memref.subview %mid[2] [2] [1] : memref<8xf32> to memref<2xf32, strided<[1], offset: 2>>
  memref.copy %s1, %out : memref<2xf32, strided<[1], offset: 2>> to memref<2xf32>
  return
}
