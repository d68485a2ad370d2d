// loom-fuse-update-loops computes what the loops it replaces compute: this
// update bucket (a 4 x 8 param with momentum, m' = m/2 + g and
// p' = p - lr m', and a 6-element param, b' = b - lr g_b) runs on the CPU
// through mlir-runner once as written and once fused and flattened, on
// inputs p = 0..31, g = 1, m = 2, lr = 1/4, b = 0..5, g_b = 4. Both print
// the same buffers, and the values are the formulas': m' = 2, p' = p - 1/2,
// b' = b - 1.
// RUN: mlir-opt %s --convert-scf-to-cf --expand-strided-metadata --lower-affine --finalize-memref-to-llvm --convert-arith-to-llvm --convert-index-to-llvm --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | grep -v 'base@' > %t.plain
// RUN: loom-opt %s --loom-fuse-update-loops | FileCheck %s --check-prefix=FUSED
// RUN: loom-opt %s --loom-fuse-update-loops \
// RUN:   | mlir-opt --convert-scf-to-cf --expand-strided-metadata --lower-affine --finalize-memref-to-llvm --convert-arith-to-llvm --convert-index-to-llvm --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | grep -v 'base@' > %t.fused
// RUN: diff %t.plain %t.fused
// RUN: FileCheck %s < %t.fused

// FUSED-LABEL: func.func @update
// FUSED:       scf.parallel (%{{.+}}) = (%{{.+}}) to (%c38) step
// FUSED:         scf.index_switch
// FUSED-NOT:   scf.parallel
// FUSED:       return

// CHECK:      [2, 2, 2, 2, 2, 2, 2, 2],
// CHECK-NEXT: [2, 2, 2, 2, 2, 2, 2, 2],
// CHECK-NEXT: [2, 2, 2, 2, 2, 2, 2, 2],
// CHECK-NEXT: [2, 2, 2, 2, 2, 2, 2, 2]]
// CHECK:      [-0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5],
// CHECK-NEXT: [7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5],
// CHECK-NEXT: [15.5, 16.5, 17.5, 18.5, 19.5, 20.5, 21.5, 22.5],
// CHECK-NEXT: [23.5, 24.5, 25.5, 26.5, 27.5, 28.5, 29.5, 30.5]]
// CHECK:      [-1, 0, 1, 2, 3, 4]

func.func @update(%p: memref<4x8xf32>, %g: memref<4x8xf32>, %m: memref<4x8xf32>, %lr: memref<f32>,
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
func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %p = memref.alloc() : memref<4x8xf32>
  %g = memref.alloc() : memref<4x8xf32>
  %m = memref.alloc() : memref<4x8xf32>
  %lr = memref.alloc() : memref<f32>
  %b = memref.alloc() : memref<6xf32>
  %gb = memref.alloc() : memref<6xf32>
  %pn = memref.alloc() : memref<4x8xf32>
  %mn = memref.alloc() : memref<4x8xf32>
  %bn = memref.alloc() : memref<6xf32>
  %quarter = arith.constant 0.25 : f32
  memref.store %quarter, %lr[] : memref<f32>
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %k = arith.muli %i, %c8 : index
      %l = arith.addi %k, %j : index
      %li = arith.index_cast %l : index to i32
      %x = arith.sitofp %li : i32 to f32
      memref.store %x, %p[%i, %j] : memref<4x8xf32>
      %one = arith.constant 1.0 : f32
      memref.store %one, %g[%i, %j] : memref<4x8xf32>
      %two = arith.constant 2.0 : f32
      memref.store %two, %m[%i, %j] : memref<4x8xf32>
    }
  }
  scf.for %i = %c0 to %c6 step %c1 {
    %ii = arith.index_cast %i : index to i32
    %x = arith.sitofp %ii : i32 to f32
    memref.store %x, %b[%i] : memref<6xf32>
    %four = arith.constant 4.0 : f32
    memref.store %four, %gb[%i] : memref<6xf32>
  }
  call @update(%p, %g, %m, %lr, %b, %gb, %pn, %mn, %bn) : (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<f32>, memref<6xf32>, memref<6xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<6xf32>) -> ()
  %u1 = memref.cast %mn : memref<4x8xf32> to memref<*xf32>
  call @printMemrefF32(%u1) : (memref<*xf32>) -> ()
  %u2 = memref.cast %pn : memref<4x8xf32> to memref<*xf32>
  call @printMemrefF32(%u2) : (memref<*xf32>) -> ()
  %u3 = memref.cast %bn : memref<6xf32> to memref<*xf32>
  call @printMemrefF32(%u3) : (memref<*xf32>) -> ()
  return
}
