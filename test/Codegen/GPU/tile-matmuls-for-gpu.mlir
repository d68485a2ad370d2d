// RUN: loom-opt %s --split-input-file --loom-tile-matmuls-for-gpu | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-tile-matmuls-for-gpu=tile=8 | FileCheck %s --check-prefix=TILE8

// --loom-tile-matmuls-for-gpu: a bufferized contraction (loops (batch...,
// m, n, k), only the last one a reduction, A independent of n, B of m)
// becomes a gpu.launch: ceil(N/tile) x ceil(M/tile) x batches blocks of
// tile x tile threads, the A and B tiles staged in two workgroup buffers,
// two barriers per K step and the op's own body in the inner loop. Loads
// and the final store are guarded, so sizes need not be multiples of the
// tile. Other linalg ops are left alone.

// M = 40, N = 20, K = 24: 2 x 3 blocks of 16 x 16 threads, two K steps of
// which the second is partial (min(16, 24 - k0)). bf16 operands, f32
// accumulator: the tiles keep the operands' element type.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:[^:]+]]: memref<40x24xbf16>, %[[B:[^:]+]]: memref<24x20xbf16>, %[[C:[^:]+]]: memref<40x20xf32>)
// CHECK-NEXT: %[[GX:.+]] = arith.constant 2 : index
// CHECK-NEXT: %[[GY:.+]] = arith.constant 3 : index
// CHECK-NEXT: %[[GZ:.+]] = arith.constant 1 : index
// CHECK-NEXT: %[[TX16:.+]] = arith.constant 16 : index
// CHECK-NEXT: %[[TY16:.+]] = arith.constant 16 : index
// CHECK-NEXT: %[[TZ1:.+]] = arith.constant 1 : index
// CHECK-NEXT: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %[[BY:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[GX]], %{{[a-z0-9_]+}} = %[[GY]], %{{[a-z0-9_]+}} = %[[GZ]])
// CHECK-SAME: threads(%[[TX:[a-z0-9_]+]], %[[TY:[a-z0-9_]+]], %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[TX16]], %{{[a-z0-9_]+}} = %[[TY16]], %{{[a-z0-9_]+}} = %[[TZ1]])
// CHECK-SAME: workgroup(%[[AT:[a-z0-9_]+]] : memref<16x16xbf16, #gpu.address_space<workgroup>>, %[[BT:[a-z0-9_]+]] : memref<16x16xbf16, #gpu.address_space<workgroup>>)
// row = block y * 16 + thread y, col = block x * 16 + thread x.
// CHECK: %[[R0:.+]] = arith.muli %[[BY]], %{{.+}} : index
// CHECK-NEXT: %[[ROW:.+]] = arith.addi %[[R0]], %[[TY]] : index
// CHECK: %[[C0:.+]] = arith.muli %[[BX]], %{{.+}} : index
// CHECK-NEXT: %[[COL:.+]] = arith.addi %[[C0]], %[[TX]] : index
// CHECK-NEXT: %[[M:.+]] = arith.constant 40 : index
// CHECK-NEXT: %[[ROWOK:.+]] = arith.cmpi ult, %[[ROW]], %[[M]] : index
// CHECK-NEXT: %[[N:.+]] = arith.constant 20 : index
// CHECK-NEXT: %[[COLOK:.+]] = arith.cmpi ult, %[[COL]], %[[N]] : index
// CHECK-NEXT: %[[INSIDE:.+]] = arith.andi %[[ROWOK]], %[[COLOK]] : i1
// The accumulator starts from C, or 0 outside the output.
// CHECK: %[[INIT:.+]] = scf.if %[[INSIDE]] -> (f32) {
// CHECK-NEXT: %[[CV:.+]] = memref.load %[[C]][%[[ROW]], %[[COL]]] : memref<40x20xf32>
// CHECK-NEXT: scf.yield %[[CV]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: scf.yield %[[ZERO]] : f32
// CHECK: %[[K:.+]] = arith.constant 24 : index
// CHECK-NEXT: %[[STEP:.+]] = arith.constant 16 : index
// CHECK-NEXT: %[[RES:.+]] = scf.for %[[K0:[a-z0-9_]+]] = %{{.+}} to %[[K]] step %[[STEP]] iter_args(%[[ACC:[a-z0-9_]+]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT: %[[AK:.+]] = arith.addi %[[K0]], %[[TX]] : index
// CHECK-NEXT: %[[BK:.+]] = arith.addi %[[K0]], %[[TY]] : index
// Stage A[row, k0 + tx] when row < M and k0 + tx < K.
// CHECK-NEXT: %[[KA:.+]] = arith.constant 24 : index
// CHECK-NEXT: %[[AKOK:.+]] = arith.cmpi ult, %[[AK]], %[[KA]] : index
// CHECK-NEXT: %[[AOK:.+]] = arith.andi %[[ROWOK]], %[[AKOK]] : i1
// CHECK-NEXT: scf.if %[[AOK]] {
// CHECK-NEXT: %[[AV:.+]] = memref.load %[[A]][%[[ROW]], %[[AK]]] : memref<40x24xbf16>
// CHECK-NEXT: memref.store %[[AV]], %[[AT]][%[[TY]], %[[TX]]]
// CHECK-NEXT: }
// Stage B[k0 + ty, col] when col < N and k0 + ty < K.
// CHECK-NEXT: %[[KB:.+]] = arith.constant 24 : index
// CHECK-NEXT: %[[BKOK:.+]] = arith.cmpi ult, %[[BK]], %[[KB]] : index
// CHECK-NEXT: %[[BOK:.+]] = arith.andi %[[COLOK]], %[[BKOK]] : i1
// CHECK-NEXT: scf.if %[[BOK]] {
// CHECK-NEXT: %[[BV:.+]] = memref.load %[[B]][%[[BK]], %[[COL]]] : memref<24x20xbf16>
// CHECK-NEXT: memref.store %[[BV]], %[[BT]][%[[TY]], %[[TX]]]
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[T:.+]] = arith.constant 16 : index
// CHECK-NEXT: %[[KC:.+]] = arith.constant 24 : index
// CHECK-NEXT: %[[LEFT:.+]] = arith.subi %[[KC]], %[[K0]] : index
// CHECK-NEXT: %[[STEPS:.+]] = arith.minsi %[[T]], %[[LEFT]] : index
// The op's body, on the staged tiles: As[ty][kk] * Bs[kk][tx].
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1 : index
// CHECK-NEXT: %[[INNER:.+]] = scf.for %[[KK:[a-z0-9_]+]] = %{{.+}} to %[[STEPS]] step %[[ONE]] iter_args(%[[IACC:[a-z0-9_]+]] = %[[ACC]]) -> (f32) {
// CHECK-NEXT: %[[X:.+]] = memref.load %[[AT]][%[[TY]], %[[KK]]]
// CHECK-NEXT: %[[Y:.+]] = memref.load %[[BT]][%[[KK]], %[[TX]]]
// CHECK-NEXT: %[[XF:.+]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NEXT: %[[YF:.+]] = arith.extf %[[Y]] : bf16 to f32
// CHECK-NEXT: %[[P:.+]] = arith.mulf %[[XF]], %[[YF]] : f32
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[IACC]], %[[P]] : f32
// CHECK-NEXT: scf.yield %[[S]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: scf.yield %[[INNER]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %[[INSIDE]] {
// CHECK-NEXT: memref.store %[[RES]], %[[C]][%[[ROW]], %[[COL]]] : memref<40x20xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: return
// With tile=8: ceil(20/8) x ceil(40/8) blocks of 8 x 8 threads, 8 x 8
// tiles, K walked in steps of 8.
// TILE8-LABEL: func.func @matmul
// TILE8-NEXT: %[[GX:.+]] = arith.constant 3 : index
// TILE8-NEXT: %[[GY:.+]] = arith.constant 5 : index
// TILE8-NEXT: %[[GZ:.+]] = arith.constant 1 : index
// TILE8-NEXT: %[[TX8:.+]] = arith.constant 8 : index
// TILE8-NEXT: %[[TY8:.+]] = arith.constant 8 : index
// TILE8-NEXT: %[[TZ1:.+]] = arith.constant 1 : index
// TILE8-NEXT: gpu.launch blocks({{.*}}) in ({{.*}} = %[[GX]], {{.*}} = %[[GY]], {{.*}} = %[[GZ]]) threads({{.*}}) in ({{.*}} = %[[TX8]], {{.*}} = %[[TY8]], {{.*}} = %[[TZ1]])
// TILE8-SAME: workgroup(%{{.+}} : memref<8x8xbf16, #gpu.address_space<workgroup>>, %{{.+}} : memref<8x8xbf16, #gpu.address_space<workgroup>>)
// TILE8: %[[K:.+]] = arith.constant 24 : index
// TILE8-NEXT: %[[STEP:.+]] = arith.constant 8 : index
// TILE8-NEXT: scf.for %{{.+}} = %{{.+}} to %[[K]] step %[[STEP]] iter_args
// TILE8-COUNT-2: gpu.barrier
// TILE8-NOT: linalg.generic
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @matmul(%A: memref<40x24xbf16>, %B: memref<24x20xbf16>, %C: memref<40x20xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<40x24xbf16>, memref<24x20xbf16>) outs(%C : memref<40x20xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %0 = arith.extf %x : bf16 to f32
    %1 = arith.extf %y : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %acc, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// -----

// Two batch loops (2 x 3) and B transposed (B[b0, b1, n, k]): 6 blocks
// along z, each block recovers its batch indices from block z (the last
// batch loop varies fastest) and every access goes through the op's own
// indexing maps.
// CHECK-LABEL: func.func @batched_transposed_b
// TILE8-LABEL: func.func @batched_transposed_b
// TILE8: gpu.launch
// TILE8-SAME: workgroup(%{{.+}} : memref<8x8xf32, #gpu.address_space<workgroup>>, %{{.+}} : memref<8x8xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: (%[[A:[^:]+]]: memref<2x3x20x8xf32>, %[[B:[^:]+]]: memref<2x3x10x8xf32>, %[[C:[^:]+]]: memref<2x3x20x10xf32>)
// CHECK-NEXT: %[[GX:.+]] = arith.constant 1 : index
// CHECK-NEXT: %[[GY:.+]] = arith.constant 2 : index
// CHECK-NEXT: %[[GZ:.+]] = arith.constant 6 : index
// CHECK: gpu.launch blocks(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[BZ:[a-z0-9_]+]]) in (%{{[a-z0-9_]+}} = %[[GX]], %{{[a-z0-9_]+}} = %[[GY]], %{{[a-z0-9_]+}} = %[[GZ]])
// CHECK-SAME: threads(%[[TX:[a-z0-9_]+]], %[[TY:[a-z0-9_]+]], %{{[a-z0-9_]+}})
// CHECK-SAME: workgroup(%[[AT:[a-z0-9_]+]] : memref<16x16xf32, #gpu.address_space<workgroup>>, %[[BT:[a-z0-9_]+]] : memref<16x16xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[ROW:.+]] = arith.addi %{{.+}}, %[[TY]] : index
// CHECK: %[[COL:.+]] = arith.addi %{{.+}}, %[[TX]] : index
// CHECK-NEXT: %[[D1:.+]] = arith.constant 3 : index
// CHECK-NEXT: %[[B1:.+]] = arith.remui %[[BZ]], %[[D1]] : index
// CHECK-NEXT: %[[Z1:.+]] = arith.divui %[[BZ]], %[[D1]] : index
// CHECK-NEXT: %[[D0:.+]] = arith.constant 2 : index
// CHECK-NEXT: %[[B0:.+]] = arith.remui %[[Z1]], %[[D0]] : index
// CHECK: memref.load %[[C]][%[[B0]], %[[B1]], %[[ROW]], %[[COL]]] : memref<2x3x20x10xf32>
// CHECK: scf.for %[[K0:[a-z0-9_]+]] =
// CHECK-NEXT: %[[AK:.+]] = arith.addi %[[K0]], %[[TX]] : index
// CHECK-NEXT: %[[BK:.+]] = arith.addi %[[K0]], %[[TY]] : index
// CHECK: %[[AV:.+]] = memref.load %[[A]][%[[B0]], %[[B1]], %[[ROW]], %[[AK]]] : memref<2x3x20x8xf32>
// CHECK-NEXT: memref.store %[[AV]], %[[AT]][%[[TY]], %[[TX]]]
// CHECK: %[[BV:.+]] = memref.load %[[B]][%[[B0]], %[[B1]], %[[COL]], %[[BK]]] : memref<2x3x10x8xf32>
// CHECK-NEXT: memref.store %[[BV]], %[[BT]][%[[TY]], %[[TX]]]
// CHECK: gpu.barrier
// CHECK: arith.mulf
// CHECK: gpu.barrier
// CHECK: memref.store %{{.+}}, %[[C]][%[[B0]], %[[B1]], %[[ROW]], %[[COL]]] : memref<2x3x20x10xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(b0, b1, m, n, k) -> (b0, b1, m, k)>
#bt = affine_map<(b0, b1, m, n, k) -> (b0, b1, n, k)>
#c = affine_map<(b0, b1, m, n, k) -> (b0, b1, m, n)>
func.func @batched_transposed_b(%A: memref<2x3x20x8xf32>, %B: memref<2x3x10x8xf32>, %C: memref<2x3x20x10xf32>) {
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<2x3x20x8xf32>, memref<2x3x10x8xf32>) outs(%C : memref<2x3x20x10xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// Not contractions, left for the generic parallel-loop mapping: an
// elementwise op, a reduction that is not the last loop, a "contraction"
// whose A depends on n (tensor IR is an error: tile-matmuls-for-gpu-errors.mlir).
// CHECK-LABEL: func.func @not_contractions
// CHECK-NOT: gpu.launch
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: gpu.launch
#id = affine_map<(i, j) -> (i, j)>
#r3 = affine_map<(i, j, k) -> (i, j, k)>
#r3o = affine_map<(i, j, k) -> (i, k)>
#a = affine_map<(m, n, k) -> (m, n, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @not_contractions(%x: memref<8x8xf32>, %y: memref<8x8xf32>, %z: memref<8x8xf32>,
                            %t: memref<8x8x8xf32>, %o: memref<8x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : memref<8x8xf32>, memref<8x8xf32>) outs(%z : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#r3, #r3, #r3o], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%t, %t : memref<8x8x8xf32>, memref<8x8x8xf32>) outs(%o : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%t, %y : memref<8x8x8xf32>, memref<8x8xf32>) outs(%o : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  return
}
