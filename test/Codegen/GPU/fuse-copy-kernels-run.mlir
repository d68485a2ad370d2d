// loom-fuse-update-loops on copy kernels (a gradient bucket's packing and
// unpacking: only views and copies of static 1-D buffers). The pack writes
// its pieces straight into the output instead of a scratch buffer copied
// there at the end, and both kernels become one flat loop (one launch
// instead of one per piece). Run on the CPU through mlir-runner as written
// and as rewritten, on a = 0..3, b = 10..15, c = 20..21: the same buffers,
// the bucket a ++ b ++ c and its pieces back.
// RUN: mlir-opt %s --convert-scf-to-cf --expand-strided-metadata --lower-affine --finalize-memref-to-llvm --convert-arith-to-llvm --convert-index-to-llvm --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | grep -v 'base@' > %t.plain
// RUN: loom-opt %s --loom-fuse-update-loops | FileCheck %s --check-prefix=FUSED
// RUN: loom-opt %s --loom-fuse-update-loops \
// RUN:   | mlir-opt --convert-scf-to-cf --expand-strided-metadata --lower-affine --finalize-memref-to-llvm --convert-arith-to-llvm --convert-index-to-llvm --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | grep -v 'base@' > %t.fused
// RUN: diff %t.plain %t.fused
// RUN: FileCheck %s < %t.fused

// FUSED-LABEL: func.func @pack
// FUSED-SAME:  %[[OUT:[^:]+]]: memref<12xf32>, %{{[^:]+}}: memref<12xf32> {loom.scratch}
// FUSED-NOT:   memref.copy
// FUSED:       memref.subview %[[OUT]][0] [4] [1]
// FUSED:       memref.subview %[[OUT]][4] [6] [1]
// FUSED:       memref.subview %[[OUT]][10] [2] [1]
// FUSED:       scf.parallel (%{{.+}}) = (%{{.+}}) to (%c12{{.*}}) step
// FUSED:         scf.index_switch
// FUSED-NOT:   scf.parallel
// FUSED-NOT:   memref.copy
// FUSED:       return
// FUSED-LABEL: func.func @unpack
// FUSED-NOT:   memref.copy
// FUSED:       scf.parallel (%{{.+}}) = (%{{.+}}) to (%c12{{.*}}) step
// FUSED:         scf.index_switch
// FUSED-NOT:   scf.parallel
// FUSED:       return

// CHECK:      [0, 1, 2, 3, 10, 11, 12, 13, 14, 15, 20, 21]
// CHECK-NEXT: [0, 1, 2, 3]
// CHECK-NEXT: [10, 11, 12, 13, 14, 15]
// CHECK-NEXT: [20, 21]

func.func @pack(%a: memref<4xf32>, %b: memref<6xf32>, %c: memref<2xf32>,
                %out: memref<12xf32>, %scratch: memref<12xf32> {loom.scratch}) {
  %sa = memref.subview %scratch[0] [4] [1] : memref<12xf32> to memref<4xf32, strided<[1]>>
  memref.copy %a, %sa : memref<4xf32> to memref<4xf32, strided<[1]>>
  %sb = memref.subview %scratch[4] [6] [1] : memref<12xf32> to memref<6xf32, strided<[1], offset: 4>>
  memref.copy %b, %sb : memref<6xf32> to memref<6xf32, strided<[1], offset: 4>>
  %sc = memref.subview %scratch[10] [2] [1] : memref<12xf32> to memref<2xf32, strided<[1], offset: 10>>
  memref.copy %c, %sc : memref<2xf32> to memref<2xf32, strided<[1], offset: 10>>
  memref.copy %scratch, %out : memref<12xf32> to memref<12xf32>
  return
}

func.func @unpack(%bucket: memref<12xf32>, %a: memref<4xf32>, %b: memref<6xf32>, %c: memref<2xf32>) {
  %sa = memref.subview %bucket[0] [4] [1] : memref<12xf32> to memref<4xf32, strided<[1]>>
  memref.copy %sa, %a : memref<4xf32, strided<[1]>> to memref<4xf32>
  %sb = memref.subview %bucket[4] [6] [1] : memref<12xf32> to memref<6xf32, strided<[1], offset: 4>>
  memref.copy %sb, %b : memref<6xf32, strided<[1], offset: 4>> to memref<6xf32>
  %sc = memref.subview %bucket[10] [2] [1] : memref<12xf32> to memref<2xf32, strided<[1], offset: 10>>
  memref.copy %sc, %c : memref<2xf32, strided<[1], offset: 10>> to memref<2xf32>
  return
}

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @fill(%m: memref<?xf32>, %first: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %m, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %ii = arith.index_cast %i : index to i32
    %x = arith.sitofp %ii : i32 to f32
    %v = arith.addf %x, %first : f32
    memref.store %v, %m[%i] : memref<?xf32>
  }
  return
}

func.func @main() {
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<6xf32>
  %c = memref.alloc() : memref<2xf32>
  %out = memref.alloc() : memref<12xf32>
  %scratch = memref.alloc() : memref<12xf32>
  %a2 = memref.alloc() : memref<4xf32>
  %b2 = memref.alloc() : memref<6xf32>
  %c2 = memref.alloc() : memref<2xf32>
  %f0 = arith.constant 0.0 : f32
  %f10 = arith.constant 10.0 : f32
  %f20 = arith.constant 20.0 : f32
  %da = memref.cast %a : memref<4xf32> to memref<?xf32>
  %db = memref.cast %b : memref<6xf32> to memref<?xf32>
  %dc = memref.cast %c : memref<2xf32> to memref<?xf32>
  call @fill(%da, %f0) : (memref<?xf32>, f32) -> ()
  call @fill(%db, %f10) : (memref<?xf32>, f32) -> ()
  call @fill(%dc, %f20) : (memref<?xf32>, f32) -> ()
  call @pack(%a, %b, %c, %out, %scratch) : (memref<4xf32>, memref<6xf32>, memref<2xf32>, memref<12xf32>, memref<12xf32>) -> ()
  call @unpack(%out, %a2, %b2, %c2) : (memref<12xf32>, memref<4xf32>, memref<6xf32>, memref<2xf32>) -> ()
  %u0 = memref.cast %out : memref<12xf32> to memref<*xf32>
  call @printMemrefF32(%u0) : (memref<*xf32>) -> ()
  %u1 = memref.cast %a2 : memref<4xf32> to memref<*xf32>
  call @printMemrefF32(%u1) : (memref<*xf32>) -> ()
  %u2 = memref.cast %b2 : memref<6xf32> to memref<*xf32>
  call @printMemrefF32(%u2) : (memref<*xf32>) -> ()
  %u3 = memref.cast %c2 : memref<2xf32> to memref<*xf32>
  call @printMemrefF32(%u3) : (memref<*xf32>) -> ()
  return
}
