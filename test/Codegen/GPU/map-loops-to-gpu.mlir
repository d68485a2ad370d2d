// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-map-loops-to-gpu | FileCheck %s
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-map-loops-to-gpu=block-size=8 | FileCheck %s --check-prefix=BS8
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-map-loops-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=CANON

// --loom-map-loops-to-gpu: each top-level scf.parallel (and memref.copy,
// first turned into one) becomes a gpu.launch with one thread per
// iteration: ceil(total / block-size) blocks of block-size threads along
// x, a bounds check on the linear thread index and row-major
// delinearization (the last loop fastest). Whatever still touches memory
// at the top level runs in a 1x1x1 launch. Constants and views used by a
// launch are sunk into it.

// A 3-D loop with lower bounds and steps: trips 2 x 3 x 5 = 30 threads,
// one block of 256. Each index is lower + (linear index digit) * step.
// CHECK-LABEL: func.func @parallel_3d
// CHECK-SAME: (%[[A:[^:]+]]: memref<2x7x10xf32>, %[[OUT:[^:]+]]: memref<2x7x10xf32>)
// CHECK-NOT: scf.parallel
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1 : index
// CHECK-NEXT: %[[GRID:.+]] = arith.constant 1 : index
// CHECK-NEXT: %[[BLOCK:.+]] = arith.constant 256 : index
// CHECK-NEXT: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[GRID]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]])
// CHECK-SAME: threads(%[[TX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[BLOCK]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]])
// The f32 constant the body uses is sunk into the launch.
// CHECK-NEXT: %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT: %[[BS:.+]] = arith.constant 256 : index
// CHECK-NEXT: %[[BASE:.+]] = arith.muli %[[BX]], %[[BS]] : index
// CHECK-NEXT: %[[LIN:.+]] = arith.addi %[[BASE]], %[[TX]] : index
// CHECK-NEXT: %[[TOTAL:.+]] = arith.constant 30 : index
// CHECK-NEXT: %[[OK:.+]] = arith.cmpi ult, %[[LIN]], %[[TOTAL]] : index
// CHECK-NEXT: scf.if %[[OK]] {
// k: trip 5, lower 0, step 2.
// CHECK-NEXT: %[[T2:.+]] = arith.constant 5 : index
// CHECK-NEXT: %[[D2:.+]] = arith.remui %[[LIN]], %[[T2]] : index
// CHECK-NEXT: %[[R2:.+]] = arith.divui %[[LIN]], %[[T2]] : index
// CHECK-NEXT: %[[L2:.+]] = arith.constant 0 : index
// CHECK-NEXT: %[[S2:.+]] = arith.constant 2 : index
// CHECK-NEXT: %[[M2:.+]] = arith.muli %[[D2]], %[[S2]] : index
// CHECK-NEXT: %[[K:.+]] = arith.addi %[[L2]], %[[M2]] : index
// j: trip 3, lower 1, step 2.
// CHECK-NEXT: %[[T1:.+]] = arith.constant 3 : index
// CHECK-NEXT: %[[D1:.+]] = arith.remui %[[R2]], %[[T1]] : index
// CHECK-NEXT: %[[R1:.+]] = arith.divui %[[R2]], %[[T1]] : index
// CHECK-NEXT: %[[L1:.+]] = arith.constant 1 : index
// CHECK-NEXT: %[[S1:.+]] = arith.constant 2 : index
// CHECK-NEXT: %[[M1:.+]] = arith.muli %[[D1]], %[[S1]] : index
// CHECK-NEXT: %[[J:.+]] = arith.addi %[[L1]], %[[M1]] : index
// i: what is left, lower 0, step 1 (no remainder taken).
// CHECK-NOT: arith.remui
// CHECK: %[[M0:.+]] = arith.muli %[[R1]], %{{.+}} : index
// CHECK-NEXT: %[[I:.+]] = arith.addi %{{.+}}, %[[M0]] : index
// CHECK-NEXT: %[[V:.+]] = memref.load %[[A]][%[[I]], %[[J]], %[[K]]] : memref<2x7x10xf32>
// CHECK-NEXT: %[[W:.+]] = arith.mulf %[[V]], %[[TWO]] : f32
// CHECK-NEXT: memref.store %[[W]], %[[OUT]][%[[I]], %[[J]], %[[K]]] : memref<2x7x10xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: return
// With block-size=8: ceil(30 / 8) = 4 blocks of 8 threads.
// BS8-LABEL: func.func @parallel_3d
// BS8: arith.constant 2.000000e+00 : f32
// BS8-NEXT: %[[ONE:.+]] = arith.constant 1 : index
// BS8-NEXT: %[[GRID:.+]] = arith.constant 4 : index
// BS8-NEXT: %[[BLOCK:.+]] = arith.constant 8 : index
// BS8-NEXT: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[GRID]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]])
// BS8-SAME: threads(%[[TX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %[[BLOCK]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]])
// BS8: %[[BS:.+]] = arith.constant 8 : index
// BS8-NEXT: %[[BASE:.+]] = arith.muli %[[BX]], %[[BS]] : index
// BS8-NEXT: %[[LIN:.+]] = arith.addi %[[BASE]], %[[TX]] : index
// BS8-NEXT: %[[TOTAL:.+]] = arith.constant 30 : index
// BS8-NEXT: arith.cmpi ult, %[[LIN]], %[[TOTAL]] : index
func.func @parallel_3d(%a: memref<2x7x10xf32>, %out: memref<2x7x10xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %c10 = arith.constant 10 : index
  %two = arith.constant 2.0 : f32
  scf.parallel (%i, %j, %k) = (%c0, %c1, %c0) to (%c2, %c7, %c10) step (%c1, %c2, %c2) {
    %v = memref.load %a[%i, %j, %k] : memref<2x7x10xf32>
    %w = arith.mulf %v, %two : f32
    memref.store %w, %out[%i, %j, %k] : memref<2x7x10xf32>
    scf.reduce
  }
  return
}

// -----

// A dense copy becomes a loop first, then a launch. Its rows of 8 f32 are
// 16-byte aligned (a plan buffer starts on 64 bytes), so each thread copies
// 4 consecutive elements with one vector load and store: 4 x 2 = 8 threads.
// CHECK-LABEL: func.func @copy
// CHECK-SAME: (%[[A:[^:]+]]: memref<4x8xf32>, %[[OUT:[^:]+]]: memref<4x8xf32>)
// CHECK-NOT: memref.copy
// CHECK: gpu.launch
// CHECK: %[[TOTAL:.+]] = arith.constant 8 : index
// CHECK-NEXT: %[[OK:.+]] = arith.cmpi ult, %[[LIN:.+]], %[[TOTAL]] : index
// CHECK-NEXT: scf.if %[[OK]] {
// CHECK-NEXT: %[[T1:.+]] = arith.constant 2 : index
// CHECK-NEXT: %[[D1:.+]] = arith.remui %[[LIN]], %[[T1]] : index
// CHECK-NEXT: %[[R1:.+]] = arith.divui %[[LIN]], %[[T1]] : index
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: %[[W:.+]] = arith.constant 4 : index
// CHECK-NEXT: %[[M1:.+]] = arith.muli %[[D1]], %[[W]] : index
// CHECK-NEXT: %[[J:.+]] = arith.addi %{{.+}}, %[[M1]] : index
// CHECK: %[[I:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK: %[[V:.+]] = vector.load %[[A]][%[[I]], %[[J]]] {alignment = 16 : i64} : memref<4x8xf32>, vector<4xf32>
// CHECK-COUNT-4: vector.extract %[[V]]
// CHECK-NEXT: %[[E:.+]] = vector.from_elements
// CHECK-NEXT: vector.store %[[E]], %[[OUT]][%[[I]], %[[J]]] {alignment = 16 : i64} : memref<4x8xf32>, vector<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.terminator
// CHECK-NOT: memref.copy
// CHECK: return
// BS8-LABEL: func.func @copy
// BS8: gpu.launch blocks(%[[BX:[a-z0-9_]+]], {{.*}}) threads(%[[TX:[a-z0-9_]+]],
// BS8-NEXT: %[[BS:.+]] = arith.constant 8 : index
// BS8-NEXT: %[[BASE:.+]] = arith.muli %[[BX]], %[[BS]] : index
// BS8-NEXT: %[[LIN:.+]] = arith.addi %[[BASE]], %[[TX]] : index
// BS8-NEXT: %[[TOTAL:.+]] = arith.constant 8 : index
// BS8-NEXT: arith.cmpi ult, %[[LIN]], %[[TOTAL]] : index
func.func @copy(%a: memref<4x8xf32>, %out: memref<4x8xf32>) {
  memref.copy %a, %out : memref<4x8xf32> to memref<4x8xf32>
  return
}

// -----

// A view the loop reads is recomputed inside the launch: the launch body
// reads through its own subview, not one defined outside. The view starts 4
// f32 into rows of 8, so its rows stay 16-byte aligned: vector accesses.
// CHECK-LABEL: func.func @view_sunk
// CHECK-SAME: (%[[A:[^:]+]]: memref<4x8xf32>, %[[OUT:[^:]+]]: memref<4x4xf32>)
// CHECK: gpu.launch
// CHECK-NEXT: %[[V:.+]] = memref.subview %[[A]][0, 4] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
// CHECK: scf.if
// CHECK: %[[X:.+]] = vector.load %[[A]][%[[I:[a-z0-9_]+]], %[[J:[a-z0-9_]+]]] {alignment = 16 : i64} : memref<4x8xf32>, vector<4xf32>
// CHECK: %[[Y:.+]] = vector.load %[[V]][%[[I]], %[[J]]] {alignment = 16 : i64} : memref<4x4xf32, strided<[8, 1], offset: 4>>, vector<4xf32>
// CHECK-COUNT-4: arith.addf
// CHECK: vector.store %{{.+}}, %[[OUT]][%[[I]], %[[J]]] {alignment = 16 : i64} : memref<4x4xf32>, vector<4xf32>
// CHECK: gpu.terminator
func.func @view_sunk(%a: memref<4x8xf32>, %out: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %v = memref.subview %a[0, 4] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c4) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<4x8xf32>
    %y = memref.load %v[%i, %j] : memref<4x4xf32, strided<[8, 1], offset: 4>>
    %s = arith.addf %x, %y : f32
    memref.store %s, %out[%i, %j] : memref<4x4xf32>
    scf.reduce
  }
  return
}

// -----

// The parallel fill becomes a launch of 4 threads, each storing 4 elements
// in one vector store; the full reduction after it keeps its init store on
// one thread and runs as a grid-strided launch (one block here: 16 terms):
// each thread sums terms tid, tid + 256, ... from 0, the warp combines its
// partials by 5 xor shuffles and lane 0 adds the warp's sum atomically.
// CHECK-LABEL: func.func @fill_then_reduce
// CHECK-SAME: (%[[A:[^:]+]]: memref<16xf32>, %[[OUT:[^:]+]]: memref<f32>)
// CHECK: gpu.launch
// CHECK: vector.store %{{.+}}, %[[A]][%{{.+}}] {alignment = 16 : i64} : memref<16xf32>, vector<4xf32>
// CHECK: gpu.terminator
// CHECK: %[[ONE:.+]] = arith.constant 1 : index
// CHECK-NEXT: gpu.launch blocks(%{{.+}}) in (%{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]]) threads(%{{.+}}) in (%{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]])
// CHECK-NEXT: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: memref.store %[[ZERO]], %[[OUT]][] : memref<f32>
// CHECK-NEXT: gpu.terminator
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{.+}}) in (%{{[a-z0-9_]+}} = %[[BLOCKS:[a-z0-9_]+]], {{.+}} threads(%[[TX:[a-z0-9_]+]], %{{.+}}) in (%{{[a-z0-9_]+}} = %[[THREADS:[a-z0-9_]+]],
// CHECK: %[[FIRST:.+]] = arith.addi %{{.+}}, %[[TX]] : index
// CHECK: %[[TOTAL:.+]] = arith.constant 16 : index
// CHECK: %[[GRID:.+]] = arith.constant 256 : index
// CHECK: %[[SUM:.+]] = scf.for %[[I:[a-z0-9_]+]] = %[[FIRST]] to %[[TOTAL]] step %[[GRID]] iter_args(%[[P:[a-z0-9_]+]] = %{{.+}}) -> (f32) {
// CHECK: %[[V:.+]] = memref.load %[[A]][%{{.+}}] : memref<16xf32>
// CHECK-NEXT: %[[T:.+]] = arith.addf %[[P]], %[[V]] : f32
// CHECK-NEXT: scf.yield %[[T]] : f32
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: %[[WARP:.+]] = arith.addf
// CHECK: %[[LANE:.+]] = arith.remui %[[TX]], %{{.+}} : index
// CHECK: scf.if
// CHECK-NEXT: memref.atomic_rmw addf %[[WARP]], %[[OUT]][] : (f32, memref<f32>) -> f32
// CHECK: return
// With block-size=8 a block still has one warp (32 threads), the fewest.
// BS8-LABEL: func.func @fill_then_reduce
// BS8: scf.for %{{.+}} step %c32{{.*}} iter_args
func.func @fill_then_reduce(%a: memref<16xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
    memref.store %zero, %a[%i] : memref<16xf32>
    scf.reduce
  }
  memref.store %zero, %out[] : memref<f32>
  scf.for %i = %c0 to %c16 step %c1 {
    %v = memref.load %a[%i] : memref<16xf32>
    %s = memref.load %out[] : memref<f32>
    %t = arith.addf %s, %v : f32
    memref.store %t, %out[] : memref<f32>
  }
  return
}

// -----

// A full reduction over a nest of two loops (a max of a 300 x 100 matrix)
// strides over the flattened 30000 iterations: 7 blocks of 256 threads
// (at least 16 terms a thread), each index recovered by division; from
// -inf, folded into the accumulator with an atomic maximumf.
// CHECK-LABEL: func.func @max_of_matrix
// CHECK-SAME: (%[[A:[^:]+]]: memref<300x100xf32>, %[[OUT:[^:]+]]: memref<f32>)
// CHECK: %[[SEVEN:.+]] = arith.constant 7 : index
// CHECK: gpu.launch blocks(%{{.+}}) in (%{{[a-z0-9_]+}} = %[[SEVEN]],
// CHECK: %[[TOTAL:.+]] = arith.constant 30000 : index
// CHECK: %[[GRID:.+]] = arith.constant 1792 : index
// CHECK: %[[NEGINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK: scf.for %[[I:[a-z0-9_]+]] = %{{.+}} to %[[TOTAL]] step %[[GRID]] iter_args(%[[P:[a-z0-9_]+]] = %[[NEGINF]]) -> (f32) {
// CHECK: %[[COL:.+]] = arith.remui %[[I]], %[[HUNDRED:.+]] : index
// CHECK: %[[ROW:.+]] = arith.divui %[[I]], %[[HUNDRED]] : index
// CHECK: memref.load %[[A]]
// CHECK: arith.maximumf %[[P]]
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: memref.atomic_rmw maximumf %{{.+}}, %[[OUT]][] : (f32, memref<f32>) -> f32
func.func @max_of_matrix(%a: memref<300x100xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c100 = arith.constant 100 : index
  %c300 = arith.constant 300 : index
  scf.for %i = %c0 to %c300 step %c1 {
    scf.for %j = %c0 to %c100 step %c1 {
      %v = memref.load %a[%i, %j] : memref<300x100xf32>
      %s = memref.load %out[] : memref<f32>
      %t = arith.maximumf %s, %v : f32
      memref.store %t, %out[] : memref<f32>
    }
  }
  return
}

// -----

// A sum over an outer axis (a batch: `for b { parallel (i, j) { acc[i, j]
// += x[b, i, j] } }`) becomes one thread per element of acc, each adding
// its 4 terms in the batch's order: 128 threads, no shuffles.
// CHECK-LABEL: func.func @batch_sum
// CHECK-SAME: (%[[X:[^:]+]]: memref<4x8x16xbf16>, %[[ACC:[^:]+]]: memref<8x16xf32>)
// CHECK: gpu.launch
// CHECK: %[[N:.+]] = arith.constant 128 : index
// CHECK: %[[IN:.+]] = arith.cmpi ult, %{{.+}}, %[[N]] : index
// CHECK: scf.if %[[IN]] {
// CHECK: scf.for %[[B:[a-z0-9_]+]] = %{{.+}} to %{{.+}} step %{{.+}} {
// CHECK-NEXT: %[[V:.+]] = memref.load %[[X]][%[[B]], %[[I:[a-z0-9_]+]], %[[J:[a-z0-9_]+]]] : memref<4x8x16xbf16>
// CHECK-NEXT: %[[S:.+]] = memref.load %[[ACC]][%[[I]], %[[J]]] : memref<8x16xf32>
// CHECK: memref.store %{{.+}}, %[[ACC]][%[[I]], %[[J]]] : memref<8x16xf32>
// CHECK-NOT: gpu.shuffle
// CHECK: return
func.func @batch_sum(%x: memref<4x8x16xbf16>, %acc: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %b = %c0 to %c4 step %c1 {
    scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c16) step (%c1, %c1) {
      %v = memref.load %x[%b, %i, %j] : memref<4x8x16xbf16>
      %s = memref.load %acc[%i, %j] : memref<8x16xf32>
      %w = arith.extf %v : bf16 to f32
      %t = arith.addf %s, %w : f32
      memref.store %t, %acc[%i, %j] : memref<8x16xf32>
      scf.reduce
    }
  }
  return
}

// -----

// A bias's gradient: 512 outputs of 8192 terms each (4 x 2048 rows).
// Interchanged, 512 threads would each add 8192 terms; instead each of
// 128 chunks of 64 terms gets a thread per output (65536 threads, the
// outputs fastest: coalesced), which folds its partial sum into the output
// atomically. (After canonicalize and cse: one constant per value.)
// CANON-LABEL: func.func @bias_grad
// CANON-SAME: (%[[X:[^:]+]]: memref<4x2048x512xf32>, %[[ACC:[^:]+]]: memref<512xf32>)
// CANON: %[[THREADS:.+]] = arith.constant 65536 : index
// CANON: gpu.launch
// CANON: arith.cmpi ult, %[[LINEAR:.+]], %[[THREADS]] : index
// CANON: %[[OUTPUT:.+]] = arith.remui %[[LINEAR]], %[[N:.+]] : index
// CANON: %[[CHUNK:.+]] = arith.divui %[[LINEAR]], %[[N]] : index
// CANON: %[[FROM:.+]] = arith.muli %[[CHUNK]], %[[LENGTH:.+]] : index
// CANON: %[[END:.+]] = arith.addi %[[FROM]], %[[LENGTH]] : index
// CANON: %[[TO:.+]] = arith.minui %[[END]], %{{.+}} : index
// CANON: %[[SUM:.+]] = scf.for %{{.+}} = %[[FROM]] to %[[TO]] step %{{.+}} iter_args(%[[P:.+]] = %{{.+}}) -> (f32) {
// CANON: %[[V:.+]] = memref.load %[[X]][%{{.+}}, %{{.+}}, %[[J:[a-z0-9_]+]]] : memref<4x2048x512xf32>
// CANON: arith.addf %[[P]], %[[V]] : f32
// CANON: memref.atomic_rmw addf %[[SUM]], %[[ACC]][%[[J]]] : (f32, memref<512xf32>) -> f32
func.func @bias_grad(%x: memref<4x2048x512xf32>, %acc: memref<512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c512 = arith.constant 512 : index
  %c2048 = arith.constant 2048 : index
  scf.for %b = %c0 to %c4 step %c1 {
    scf.for %t = %c0 to %c2048 step %c1 {
      scf.parallel (%j) = (%c0) to (%c512) step (%c1) {
        %v = memref.load %x[%b, %t, %j] : memref<4x2048x512xf32>
        %s = memref.load %acc[%j] : memref<512xf32>
        %u = arith.addf %s, %v : f32
        memref.store %u, %acc[%j] : memref<512xf32>
        scf.reduce
      }
    }
  }
  return
}

// -----

// Not interchanged: iteration i reads acc[i + 1], which iteration i + 1
// writes, so the outer loop's order matters across parallel iterations.
// It stays on one thread, as written.
// CHECK-LABEL: func.func @shifted_sum
// CHECK: gpu.launch blocks(%{{.+}}) in (%{{[a-z0-9_]+}} = %[[ONE:[a-z0-9_]+]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]]) threads(%{{.+}}) in (%{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]])
// CHECK: scf.for
// CHECK-NEXT: scf.parallel
func.func @shifted_sum(%x: memref<4x16xf32>, %acc: memref<17xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  scf.for %b = %c0 to %c4 step %c1 {
    scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
      %i1 = arith.addi %i, %c1 : index
      %v = memref.load %x[%b, %i] : memref<4x16xf32>
      %s = memref.load %acc[%i1] : memref<17xf32>
      %t = arith.addf %s, %v : f32
      memref.store %t, %acc[%i] : memref<17xf32>
      scf.reduce
    }
  }
  return
}

// -----

// A rank-0 copy is a load and a store, on one thread.
// CHECK-LABEL: func.func @copy_rank0
// CHECK-SAME: (%[[A:[^:]+]]: memref<f32>, %[[OUT:[^:]+]]: memref<f32>)
// CHECK-NEXT: %[[ONE:.+]] = arith.constant 1 : index
// CHECK-NEXT: gpu.launch blocks(%{{.+}}) in (%{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]]) threads(%{{.+}}) in (%{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]], %{{[a-z0-9_]+}} = %[[ONE]])
// CHECK-NEXT: %[[V:.+]] = memref.load %[[A]][] : memref<f32>
// CHECK-NEXT: memref.store %[[V]], %[[OUT]][] : memref<f32>
// CHECK-NEXT: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @copy_rank0(%a: memref<f32>, %out: memref<f32>) {
  memref.copy %a, %out : memref<f32> to memref<f32>
  return
}

// -----

// Loop bounds must be constants: the grid is fixed at compile time.
func.func @dynamic_bound(%n: index, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  // expected-error @+1 {{loop bounds must be constants to map to the GPU}}
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %z, %out[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// A row reduction (linalg's loops for a sum over the last axis) runs one
// warp per row: 8 warps of a 256-thread block take 8 rows, so 10 rows need
// 2 blocks; lane l combines elements l, l + 32, ... from 0 (the identity of
// addf), the warp combines its partials with 5 xor shuffles, and lane 0
// adds the total into the row's accumulator.
// CHECK-LABEL: func.func @row_sum
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}) in (%{{[a-z0-9_]+}} = %{{.+}}, %{{[a-z0-9_]+}} = %{{.+}}, %{{[a-z0-9_]+}} = %{{.+}}) threads(%[[TX:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}})
// CHECK: %[[LANE:.+]] = arith.remui %[[TX]], %{{.+}} : index
// CHECK: scf.if
// CHECK: %[[PARTIAL:.+]] = scf.for %[[K:.+]] = %[[LANE]] to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %{{.+}}) -> (f32)
// CHECK-NEXT: %[[X:.+]] = memref.load %{{.+}}[%[[ROW:.+]], %[[K]]] : memref<10x100xf32>
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK-NEXT: scf.yield %[[S]] : f32
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK-NOT: gpu.shuffle
// CHECK: scf.if
// CHECK-NEXT: %[[OLD:.+]] = memref.load %{{.+}}[%[[ROW]]] : memref<10xf32>
// CHECK-NEXT: %[[NEW:.+]] = arith.addf %[[OLD]], %{{.+}} : f32
// CHECK-NEXT: memref.store %[[NEW]], %{{.+}}[%[[ROW]]] : memref<10xf32>
func.func @row_sum(%in: memref<10x100xf32>, %out: memref<10xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i) = (%c0) to (%c10) step (%c1) {
    scf.for %k = %c0 to %c100 step %c1 {
      %x = memref.load %in[%i, %k] : memref<10x100xf32>
      %acc = memref.load %out[%i] : memref<10xf32>
      %s = arith.addf %acc, %x : f32
      memref.store %s, %out[%i] : memref<10xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A loop that is not a reduction of the accumulator (it stores a value
// that does not combine the loaded accumulator) keeps one thread per row.
// CHECK-LABEL: func.func @not_a_reduction
// CHECK-NOT: gpu.shuffle
// CHECK: scf.for
func.func @not_a_reduction(%in: memref<10x100xf32>, %out: memref<10xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i) = (%c0) to (%c10) step (%c1) {
    scf.for %k = %c0 to %c100 step %c1 {
      %x = memref.load %in[%i, %k] : memref<10x100xf32>
      memref.store %x, %out[%i] : memref<10xf32>
    }
    scf.reduce
  }
  return
}

// -----

// bf16 rows of 16: 8 lanes (16 bytes) per thread, 4 x 2 = 8 threads. The
// bias is per row (it does not move with the innermost loop): one scalar
// load for all 8 lanes. Each lane runs the scalar body on its element.
// CHECK-LABEL: func.func @bf16_row_bias
// CHECK-SAME: (%[[X:[^:]+]]: memref<4x16xbf16>, %[[B:[^:]+]]: memref<4xbf16>, %[[OUT:[^:]+]]: memref<4x16xbf16>)
// CHECK: %[[TOTAL:.+]] = arith.constant 8 : index
// CHECK: arith.cmpi ult, %{{.+}}, %[[TOTAL]] : index
// CHECK: %[[V:.+]] = vector.load %[[X]][%[[I:[a-z0-9_]+]], %[[J:[a-z0-9_]+]]] {alignment = 16 : i64} : memref<4x16xbf16>, vector<8xbf16>
// CHECK-COUNT-8: vector.extract %[[V]]
// CHECK-NEXT: %[[S:.+]] = memref.load %[[B]][%[[I]]] : memref<4xbf16>
// CHECK-NOT: memref.load
// CHECK-COUNT-8: arith.addf %{{.+}}, %[[S]] : bf16
// CHECK-NEXT: %[[E:.+]] = vector.from_elements %{{.+}} : vector<8xbf16>
// CHECK-NEXT: vector.store %[[E]], %[[OUT]][%[[I]], %[[J]]] {alignment = 16 : i64} : memref<4x16xbf16>, vector<8xbf16>
func.func @bf16_row_bias(%x: memref<4x16xbf16>, %b: memref<4xbf16>, %out: memref<4x16xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c16) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<4x16xbf16>
    %s = memref.load %b[%i] : memref<4xbf16>
    %w = arith.addf %v, %s : bf16
    memref.store %w, %out[%i, %j] : memref<4x16xbf16>
    scf.reduce
  }
  return
}

// -----

// The narrowest element sets the lanes: 8 for a bf16 input, so the f32
// output is stored 8 at a time (32 bytes, still 16-byte aligned). A lane's
// own index (here converted to a float) is base + lane.
// CHECK-LABEL: func.func @widen_with_index
// CHECK: scf.if
// CHECK: arith.constant 1 : index
// CHECK-NEXT: %[[J1:.+]] = arith.addi %[[J:[a-z0-9_]+]], %{{.+}} : index
// CHECK: %[[V:.+]] = vector.load %{{.+}}[%[[J]]] {alignment = 16 : i64} : memref<64xbf16>, vector<8xbf16>
// CHECK: arith.index_cast %[[J]] : index to i32
// CHECK-NEXT: arith.index_cast %[[J1]] : index to i32
// CHECK: vector.store %{{.+}}, %{{.+}}[%[[J]]] {alignment = 16 : i64} : memref<64xf32>, vector<8xf32>
func.func @widen_with_index(%x: memref<64xbf16>, %out: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%j) = (%c0) to (%c64) step (%c1) {
    %v = memref.load %x[%j] : memref<64xbf16>
    %e = arith.extf %v : bf16 to f32
    %n = arith.index_cast %j : index to i32
    %f = arith.sitofp %n : i32 to f32
    %w = arith.addf %e, %f : f32
    memref.store %w, %out[%j] : memref<64xf32>
    scf.reduce
  }
  return
}

// -----

// Loops whose accesses are not contiguous and aligned along the innermost
// loop keep one thread per element: a transpose, a view 2 f32 (8 bytes)
// into its rows, and rows of 6 f32 (not a multiple of 4).
// CHECK-LABEL: func.func @transpose
// CHECK-NOT: vector.
// CHECK: memref.load
// CHECK-NOT: vector.
// CHECK-LABEL: func.func @unaligned_view
// CHECK-NOT: vector.
// CHECK: memref.load
// CHECK-NOT: vector.
// CHECK-LABEL: func.func @odd_rows
// CHECK: %[[TOTAL:.+]] = arith.constant 12 : index
// CHECK-NOT: vector.
// CHECK: memref.load
// CHECK-NOT: vector.
// CHECK: return
func.func @transpose(%x: memref<8x8xf32>, %out: memref<8x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c8) step (%c1, %c1) {
    %v = memref.load %x[%j, %i] : memref<8x8xf32>
    memref.store %v, %out[%i, %j] : memref<8x8xf32>
    scf.reduce
  }
  return
}
func.func @unaligned_view(%x: memref<4x10xf32>, %out: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %v = memref.subview %x[0, 2] [4, 8] [1, 1] : memref<4x10xf32> to memref<4x8xf32, strided<[10, 1], offset: 2>>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    %a = memref.load %v[%i, %j] : memref<4x8xf32, strided<[10, 1], offset: 2>>
    memref.store %a, %out[%i, %j] : memref<4x8xf32>
    scf.reduce
  }
  return
}
func.func @odd_rows(%x: memref<2x6xf32>, %out: memref<2x6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c6) step (%c1, %c1) {
    %a = memref.load %x[%i, %j] : memref<2x6xf32>
    memref.store %a, %out[%i, %j] : memref<2x6xf32>
    scf.reduce
  }
  return
}

// -----

// A row softmax as linalg's loops leave it (fill the max, reduce, fill the
// sum, reduce, divide), all over the same 2 rows, becomes one launch of a
// block per row. The steps run in order with a barrier between them; the
// first step of the row that loads x (the max) loads the thread's 4 chunks
// of 4 f32 once, and the later steps use them from registers. A reduction
// combines each thread's partial by shuffles, then the 2 warps' totals
// through a workgroup slot per warp; every thread folds the total into the
// accumulator it read (thread 0 stores it), so later steps use the value
// instead of loading it, and exp(x - max) is computed once per element
// (after CSE).
// CHECK-LABEL: func.func @softmax_rows
// CHECK-SAME: (%[[X:[^:]+]]: memref<2x1024xf32>, %[[OUT:[^:]+]]: memref<2x1024xf32>, %[[M:[^:]+]]: memref<2xf32>, %[[S:[^:]+]]: memref<2xf32>)
// CHECK: gpu.launch blocks(%{{.+}}) threads(%[[TID:[a-z0-9_]+]], %{{.+}}) workgroup(%[[SLOT1:.+]] : memref<2xf32, #gpu.address_space<workgroup>>, %[[SLOT2:.+]] : memref<2xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[R:.+]] = arith.addi %{{.+}}, %{{.+}} : index
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[TID]], %{{.+}} : index
// CHECK: scf.if %[[FIRST]] {
// CHECK-NEXT: memref.store %{{.+}}, %[[M]][%[[R]]] : memref<2xf32>
// CHECK: gpu.barrier
// CHECK-NEXT: %[[OLDM:.+]] = memref.load %[[M]][%[[R]]] : memref<2xf32>
// CHECK-COUNT-4: vector.load %[[X]][%[[R]], %{{.+}}] {alignment = 16 : i64} : memref<2x1024xf32>, vector<4xf32>
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: memref.store %{{.+}}, %[[SLOT1]][%{{.+}}]
// CHECK: gpu.barrier
// CHECK: %[[W0:.+]] = memref.load %[[SLOT1]]
// CHECK-NEXT: arith.constant 1 : index
// CHECK-NEXT: %[[W1:.+]] = memref.load %[[SLOT1]]
// CHECK-NEXT: %[[TOTAL:.+]] = arith.maximumf %[[W0]], %[[W1]] : f32
// CHECK-NEXT: %[[MAX:.+]] = arith.maximumf %[[OLDM]], %[[TOTAL]] : f32
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: memref.store %[[MAX]], %[[M]][%[[R]]] : memref<2xf32>
// CHECK: gpu.barrier
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: memref.store %{{.+}}, %[[S]][%[[R]]] : memref<2xf32>
// CHECK: gpu.barrier
// CHECK-NEXT: %[[OLDS:.+]] = memref.load %[[S]][%[[R]]] : memref<2xf32>
// CHECK-NOT: vector.load
// CHECK-NOT: memref.load %[[M]]
// CHECK: arith.subf %{{.+}}, %[[MAX]] : f32
// CHECK: memref.store %{{.+}}, %[[SLOT2]][%{{.+}}]
// CHECK: %[[SUM:.+]] = arith.addf %[[OLDS]], %{{.+}} : f32
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: memref.store %[[SUM]], %[[S]][%[[R]]] : memref<2xf32>
// CHECK: gpu.barrier
// CHECK-NOT: vector.load
// CHECK-NOT: memref.load
// CHECK: arith.divf %{{.+}}, %[[SUM]] : f32
// CHECK: vector.store %{{.+}}, %[[OUT]][%[[R]], %{{.+}}] {alignment = 16 : i64} : memref<2x1024xf32>, vector<4xf32>
// CHECK-COUNT-3: vector.store %{{.+}}, %[[OUT]]
// CHECK-NEXT: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: return
// CANON-LABEL: func.func @softmax_rows
// CANON: gpu.launch blocks({{.*}}) in (%{{[a-z0-9_]+}} = %c2, {{.*}}) threads({{.*}}) in (%{{[a-z0-9_]+}} = %c64,
// CANON-COUNT-16: math.exp
// CANON-NOT: math.exp
// CANON: return
func.func @softmax_rows(%x: memref<2x1024xf32>, %out: memref<2x1024xf32>, %m: memref<2xf32>, %s: memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c1024 = arith.constant 1024 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    memref.store %ninf, %m[%i] : memref<2xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %k = %c0 to %c1024 step %c1 {
      %v = memref.load %x[%i, %k] : memref<2x1024xf32>
      %a = memref.load %m[%i] : memref<2xf32>
      %r = arith.maximumf %a, %v : f32
      memref.store %r, %m[%i] : memref<2xf32>
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    memref.store %zero, %s[%i] : memref<2xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %k = %c0 to %c1024 step %c1 {
      %v = memref.load %x[%i, %k] : memref<2x1024xf32>
      %mx = memref.load %m[%i] : memref<2xf32>
      %a = memref.load %s[%i] : memref<2xf32>
      %d = arith.subf %v, %mx : f32
      %e = math.exp %d : f32
      %r = arith.addf %a, %e : f32
      memref.store %r, %s[%i] : memref<2xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %k) = (%c0, %c0) to (%c2, %c1024) step (%c1, %c1) {
    %v = memref.load %x[%i, %k] : memref<2x1024xf32>
    %mx = memref.load %m[%i] : memref<2xf32>
    %sm = memref.load %s[%i] : memref<2xf32>
    %d = arith.subf %v, %mx : f32
    %e = math.exp %d : f32
    %r = arith.divf %e, %sm : f32
    memref.store %r, %out[%i, %k] : memref<2x1024xf32>
    scf.reduce
  }
  return
}

// -----

// The same softmax over a batch of one ([1, 2, 1024]): the canonicalizer
// folds the unit dim out of the loops but not out of the buffers, whose
// index 0 there names the same place in every row. Still one launch (it
// was 5, one per loop).
// CHECK-LABEL: func.func @softmax_unit_batch
// CHECK: gpu.launch
// CHECK-COUNT-2: gpu.shuffle xor
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @softmax_unit_batch(%x: memref<1x2x1024xf32>, %out: memref<1x2x1024xf32>, %m: memref<1x2xf32>, %s: memref<1x2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c1024 = arith.constant 1024 : index
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    memref.store %ninf, %m[%c0, %i] : memref<1x2xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %k = %c0 to %c1024 step %c1 {
      %v = memref.load %x[%c0, %i, %k] : memref<1x2x1024xf32>
      %a = memref.load %m[%c0, %i] : memref<1x2xf32>
      %r = arith.maximumf %a, %v : f32
      memref.store %r, %m[%c0, %i] : memref<1x2xf32>
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    memref.store %zero, %s[%c0, %i] : memref<1x2xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %k = %c0 to %c1024 step %c1 {
      %v = memref.load %x[%c0, %i, %k] : memref<1x2x1024xf32>
      %mx = memref.load %m[%c0, %i] : memref<1x2xf32>
      %a = memref.load %s[%c0, %i] : memref<1x2xf32>
      %d = arith.subf %v, %mx : f32
      %e = math.exp %d : f32
      %r = arith.addf %a, %e : f32
      memref.store %r, %s[%c0, %i] : memref<1x2xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %k) = (%c0, %c0) to (%c2, %c1024) step (%c1, %c1) {
    %v = memref.load %x[%c0, %i, %k] : memref<1x2x1024xf32>
    %mx = memref.load %m[%c0, %i] : memref<1x2xf32>
    %sm = memref.load %s[%c0, %i] : memref<1x2xf32>
    %d = arith.subf %v, %mx : f32
    %e = math.exp %d : f32
    %r = arith.divf %e, %sm : f32
    memref.store %r, %out[%c0, %i, %k] : memref<1x2x1024xf32>
    scf.reduce
  }
  return
}

// -----

// Rows of a 2-D row space (2 x 3 = 6 blocks, delinearized from the block
// index), 10 f32 long: not a whole number of 16-byte vectors, so one warp
// with one element per lane and a guard past the row's end. The scalar step
// (a mean from the sum) runs on thread 0 from the forwarded sum.
// CHECK-LABEL: func.func @centre_rows
// CHECK-SAME: (%[[X:[^:]+]]: memref<2x3x10xf32>, %[[OUT:[^:]+]]: memref<2x3x10xf32>, %[[S:[^:]+]]: memref<2x3xf32>, %[[MEAN:[^:]+]]: memref<2x3xf32>)
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], {{.*}}) threads(%[[TID:[a-z0-9_]+]], {{.*}}) {
// CHECK: memref.store %{{.+}}, %[[S]][%[[II:.+]], %[[JJ:.+]]] : memref<2x3xf32>
// CHECK: gpu.barrier
// CHECK-NEXT: %[[OLD:.+]] = memref.load %[[S]][%[[II]], %[[JJ]]] : memref<2x3xf32>
// CHECK: scf.for
// CHECK: %[[IN:.+]] = arith.cmpi ult, %{{.+}}, %{{.+}} : index
// CHECK-NEXT: scf.if %[[IN]] -> (f32) {
// CHECK-NEXT: memref.load %[[X]][%[[II]], %[[JJ]], %{{.+}}] : memref<2x3x10xf32>
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK-NOT: workgroup
// CHECK: %[[SUM:.+]] = arith.addf %[[OLD]], %{{.+}} : f32
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: scf.if
// CHECK-NEXT: memref.store %[[SUM]], %[[S]][%[[II]], %[[JJ]]] : memref<2x3xf32>
// CHECK: gpu.barrier
// CHECK-NEXT: scf.if
// CHECK-NEXT: arith.mulf %[[SUM]], %{{.+}} : f32
// CHECK: gpu.barrier
// CHECK: memref.load %[[MEAN]][%[[II]], %[[JJ]]] : memref<2x3xf32>
// CHECK: memref.store %{{.+}}, %[[OUT]][%[[II]], %[[JJ]], %{{.+}}] : memref<2x3x10xf32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: return
// CANON-LABEL: func.func @centre_rows
// CANON: gpu.launch blocks(%[[BX:[a-z0-9_]+]], {{.*}}) in (%{{[a-z0-9_]+}} = %c6, {{.*}}) threads({{.*}}) in (%{{[a-z0-9_]+}} = %c32,
// CANON-NEXT: %[[J:.+]] = arith.remui %[[BX]], %c3 : index
// CANON-NEXT: %[[I:.+]] = arith.divui %[[BX]], %c3 : index
// CANON: memref.store %{{.+}}, %{{.+}}[%[[I]], %[[J]]] : memref<2x3xf32>
func.func @centre_rows(%x: memref<2x3x10xf32>, %out: memref<2x3x10xf32>, %s: memref<2x3xf32>, %mean: memref<2x3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c10 = arith.constant 10 : index
  %zero = arith.constant 0.0 : f32
  %tenth = arith.constant 0.1 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c3) step (%c1, %c1) {
    memref.store %zero, %s[%i, %j] : memref<2x3xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c3) step (%c1, %c1) {
    scf.for %k = %c0 to %c10 step %c1 {
      %v = memref.load %x[%i, %j, %k] : memref<2x3x10xf32>
      %a = memref.load %s[%i, %j] : memref<2x3xf32>
      %r = arith.addf %a, %v : f32
      memref.store %r, %s[%i, %j] : memref<2x3xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c3) step (%c1, %c1) {
    %a = memref.load %s[%i, %j] : memref<2x3xf32>
    %m = arith.mulf %a, %tenth : f32
    memref.store %m, %mean[%i, %j] : memref<2x3xf32>
    scf.reduce
  }
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%c2, %c3, %c10) step (%c1, %c1, %c1) {
    %v = memref.load %x[%i, %j, %k] : memref<2x3x10xf32>
    %m = memref.load %mean[%i, %j] : memref<2x3xf32>
    %d = arith.subf %v, %m : f32
    memref.store %d, %out[%i, %j, %k] : memref<2x3x10xf32>
    scf.reduce
  }
  return
}

// -----

// A step that reads another row of what an earlier step wrote (here row 0
// of the max) cannot share a block per row: each loop keeps its own launch.
// CHECK-LABEL: func.func @not_row_local
// CHECK-COUNT-3: gpu.launch
// CHECK-NOT: gpu.barrier
// CHECK: return
func.func @not_row_local(%x: memref<2x64xf32>, %out: memref<2x64xf32>, %m: memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %ninf = arith.constant 0xFF800000 : f32
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    memref.store %ninf, %m[%i] : memref<2xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
    scf.for %k = %c0 to %c64 step %c1 {
      %v = memref.load %x[%i, %k] : memref<2x64xf32>
      %a = memref.load %m[%i] : memref<2xf32>
      %r = arith.maximumf %a, %v : f32
      memref.store %r, %m[%i] : memref<2xf32>
    }
    scf.reduce
  }
  scf.parallel (%i, %k) = (%c0, %c0) to (%c2, %c64) step (%c1, %c1) {
    %v = memref.load %x[%i, %k] : memref<2x64xf32>
    %mx = memref.load %m[%c0] : memref<2xf32>
    %d = arith.subf %v, %mx : f32
    memref.store %d, %out[%i, %k] : memref<2x64xf32>
    scf.reduce
  }
  return
}

// -----

// Host-side scalar code that a parallel loop splits, a value loaded before
// the loop being used after it (an MoE routing of one token, its loop over
// tokens folded away), runs whole in one single-thread launch, the loop
// inside it: as launches of their own, the loaded value would have to pass
// from one launch to the next (loomc failed with `operand #0 does not
// dominate this use`).
// CHECK-LABEL: func.func @spanned_loop
// CHECK: gpu.launch
// CHECK: memref.load
// CHECK: scf.parallel
// CHECK: memref.store
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @spanned_loop(%ids: memref<2xi32>, %fill: memref<4xi32>, %out: memref<2xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %m1 = arith.constant -1 : i32
  %id = memref.load %ids[%c0] : memref<2xi32>
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %m1, %fill[%i] : memref<4xi32>
    scf.reduce
  }
  %next = arith.addi %id, %id : i32
  memref.store %next, %out[%c1] : memref<2xi32>
  return
}

// -----

// Dead host-side code is dropped, not left on the host.
// CHECK-LABEL: func.func @dead_host_code
// CHECK-NOT: arith.addi
// CHECK: return
func.func @dead_host_code(%ids: memref<2xi32>) {
  %c0 = arith.constant 0 : index
  %id = memref.load %ids[%c0] : memref<2xi32>
  %twice = arith.addi %id, %id : i32
  return
}

// -----

// A constant's global is sunk into the launch that copies it, like a
// constant: host-side code beside it (a scalar store, in one thread) had
// taken the get_global into its own launch, out of the copy's reach (a
// dominance error in a GPU --train build).
// CHECK-LABEL: func.func @global_beside_host_code
// CHECK: gpu.launch
// CHECK-NOT: memref.get_global
// CHECK: memref.store
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK: memref.get_global @__constant_1xf32
// CHECK: memref.load
// CHECK: gpu.terminator
memref.global "private" constant @__constant_1xf32 : memref<1xf32> = dense<1.0>
func.func @global_beside_host_code(%copy: memref<1xf32>, %half: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 5.000000e-01 : f32
  %0 = memref.get_global @__constant_1xf32 : memref<1xf32>
  memref.store %cst, %half[%c0] : memref<1xf32>
  memref.copy %0, %copy : memref<1xf32> to memref<1xf32>
  return
}
