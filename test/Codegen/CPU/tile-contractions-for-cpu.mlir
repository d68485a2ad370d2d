// RUN: loom-opt %s --split-input-file --loom-tile-contractions-for-cpu | FileCheck %s

// --loom-tile-contractions-for-cpu (vector-bits=256, its default): a
// bufferized contraction whose m is a multiple of 4 and n of 16 is tiled in
// cache tiles (up to 128 x 128 x 256, dividing the shape) and 4 x 16
// register tiles, the register tile
// vectorized: the 4 x 16 f32 accumulator lives in a vector<4x16xf32>
// iter_arg of the k loop (its reads and writes hoisted out of it) and each
// k step reads 4 elements of A and 16 of B. Other contractions keep their
// linalg.generic.

// 64 x 64 x 64 bf16 with an f32 accumulator: its operands are widened to
// f32 copies first (one elementwise pass each; without bf16-dot a 16-bit
// matmul is an f32 one on its copies), then the cache tile is the whole op
// (its loops fold away), leaving the (m, n) register loops and k.
// CHECK-LABEL: func.func @bf16_64
// CHECK-SAME: (%[[A:[^:]+]]: memref<64x64xbf16>, %[[B:[^:]+]]: memref<64x64xbf16>, %[[C:[^:]+]]: memref<64x64xf32>)
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[C4:.+]] = arith.constant 4 : index
// CHECK-DAG: %[[C16:.+]] = arith.constant 16 : index
// CHECK-DAG: %[[C64:.+]] = arith.constant 64 : index
// CHECK: %[[WA:.+]] = memref.alloc() : memref<64x64xf32>
// CHECK: linalg.generic {{.+}} ins(%[[A]] : memref<64x64xbf16>) outs(%[[WA]] : memref<64x64xf32>)
// CHECK: arith.extf %{{.+}} : bf16 to f32
// CHECK: %[[WB:.+]] = memref.alloc() : memref<64x64xf32>
// CHECK: linalg.generic {{.+}} ins(%[[B]] : memref<64x64xbf16>) outs(%[[WB]] : memref<64x64xf32>)
// CHECK: scf.for %[[M:[a-z0-9_]+]] = %[[C0]] to %[[C64]] step %[[C4]] {
// CHECK-NEXT: scf.for %[[N:[a-z0-9_]+]] = %[[C0]] to %[[C64]] step %[[C16]] {
// The accumulator rows, read once before the k loop.
// CHECK-COUNT-4: vector.transfer_read %[[C]][%{{.+}}, %[[N]]], %{{.+}} {in_bounds = [true]} : memref<64x64xf32>, vector<16xf32>
// CHECK: %[[ACC:.+]] = scf.for %[[K:[a-z0-9_]+]] = %[[C0]] to %[[C64]] step %[[C1]] iter_args(%[[IACC:[a-z0-9_]+]] = %{{.+}}) -> (vector<4x16xf32>) {
// CHECK-NOT: vector.transfer_write
// CHECK-NOT: arith.extf
// CHECK-COUNT-4: vector.transfer_read %[[WA]][%{{.+}}, %[[K]]], %{{.+}} {in_bounds = [true]} : memref<64x64xf32>, vector<1xf32>
// CHECK: %[[BA:.+]] = vector.broadcast %{{.+}} : vector<4x1xf32> to vector<16x4x1xf32>
// CHECK-NEXT: %[[X:.+]] = vector.transpose %[[BA]], [1, 0, 2] : vector<16x4x1xf32> to vector<4x16x1xf32>
// CHECK-NEXT: %[[RB:.+]] = vector.transfer_read %[[WB]][%[[K]], %[[N]]], %{{.+}} {in_bounds = [true]} : memref<64x64xf32>, vector<16xf32>
// CHECK-NEXT: %[[BB:.+]] = vector.broadcast %[[RB]] : vector<16xf32> to vector<4x1x16xf32>
// CHECK-NEXT: %[[Y:.+]] = vector.transpose %[[BB]], [0, 2, 1] : vector<4x1x16xf32> to vector<4x16x1xf32>
// CHECK-NEXT: %[[P:.+]] = arith.mulf %[[X]], %[[Y]] : vector<4x16x1xf32>
// CHECK-NEXT: %[[P2:.+]] = vector.shape_cast %[[P]] : vector<4x16x1xf32> to vector<4x16xf32>
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[IACC]], %[[P2]] : vector<4x16xf32>
// CHECK-NEXT: scf.yield %[[S]] : vector<4x16xf32>
// CHECK-NEXT: }
// The accumulator rows, written once after it.
// CHECK-COUNT-4: vector.transfer_write %{{.+}}, %[[C]][%{{.+}}, %[[N]]] {in_bounds = [true]} : vector<16xf32>, memref<64x64xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: memref.dealloc %[[WA]]
// CHECK-NEXT: memref.dealloc %[[WB]]
// CHECK-NEXT: return
// CHECK-NOT: loom.cpu_tile
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @bf16_64(%A: memref<64x64xbf16>, %B: memref<64x64xbf16>, %C: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x64xbf16>, memref<64x64xbf16>) outs(%C : memref<64x64xf32>) {
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

// 256 x 256 x 96: cache tiles of 128 x 128 x 32 (the largest candidates
// that divide), then the 4 x 16 register tiles and k within the cache tile.
// CHECK-LABEL: func.func @cache_tiles
// CHECK-NOT: linalg.generic
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[C4:.+]] = arith.constant 4 : index
// CHECK-DAG: %[[C16:.+]] = arith.constant 16 : index
// CHECK-DAG: %[[C32:.+]] = arith.constant 32 : index
// CHECK-DAG: %[[C96:.+]] = arith.constant 96 : index
// CHECK-DAG: %[[C128:.+]] = arith.constant 128 : index
// CHECK-DAG: %[[C256:.+]] = arith.constant 256 : index
// CHECK: scf.for %{{.+}} = %[[C0]] to %[[C256]] step %[[C128]] {
// CHECK-NEXT: scf.for %{{.+}} = %[[C0]] to %[[C256]] step %[[C128]] {
// CHECK-NEXT: scf.for %{{.+}} = %[[C0]] to %[[C96]] step %[[C32]] {
// CHECK-NEXT: scf.for %{{.+}} = %[[C0]] to %[[C128]] step %[[C4]] {
// CHECK-NEXT: scf.for %{{.+}} = %[[C0]] to %[[C128]] step %[[C16]] {
// CHECK: scf.for %{{.+}} = %[[C0]] to %[[C32]] step %[[C1]] iter_args(%{{.+}}) -> (vector<4x16xf32>) {
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<4x16x1xf32>
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<4x16xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @cache_tiles(%A: memref<256x96xf32>, %B: memref<96x256xf32>, %C: memref<256x256xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<256x96xf32>, memref<96x256xf32>) outs(%C : memref<256x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// A batched contraction: one batch index per cache and register tile.
// CHECK-LABEL: func.func @batched
// CHECK-NOT: linalg.generic
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[C2:.+]] = arith.constant 2 : index
// CHECK-DAG: %[[C4:.+]] = arith.constant 4 : index
// CHECK-DAG: %[[C8:.+]] = arith.constant 8 : index
// CHECK: scf.for %{{.+}} = %[[C0]] to %[[C2]] step %[[C1]] {
// CHECK-NEXT: scf.for %{{.+}} = %[[C0]] to %[[C8]] step %[[C4]] {
// CHECK: scf.for %{{.+}} = %[[C0]] to %[[C4]] step %[[C1]] iter_args(%{{.+}}) -> (vector<1x4x16xf32>) {
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<1x4x16xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(b, m, n, k) -> (b, m, k)>
#b = affine_map<(b, m, n, k) -> (b, k, n)>
#c = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @batched(%A: memref<2x8x4xf32>, %B: memref<2x4x16xf32>, %C: memref<2x8x16xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<2x8x4xf32>, memref<2x4x16xf32>) outs(%C : memref<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// No whole register tiles: N = 10 is not a multiple of 16, M = 6 not one
// of 4. The 64 x 10 x 64 bf16 matmul is padded to whole tiles: its B and
// its accumulator copied into zeroed 64 x 16 temporaries, B then widened
// to f32 (as A), the padded op tiled, and the accumulator's 64 x 10 copied
// back (it had been left to LLVM's vectorizer, which gathers B's columns:
// 20-180x slower at sizes from 1000). The 6 x 16 x 8 one, too small for
// the copies to pay, keeps its scalar linalg.generic (without the pass's
// tag), as does an elementwise op, while the 8 x 16 x 4 contraction before
// them in the same function is tiled.
// CHECK-LABEL: func.func @mixed
// CHECK: scf.for
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<4x16xf32>
// CHECK-COUNT-4: vector.transfer_write %{{.+}} : vector<16xf32>, memref<8x16xf32>
// CHECK-NOT: vector.
// CHECK: %[[PB:.+]] = memref.alloc() : memref<64x16xbf16>
// CHECK: linalg.fill ins(%{{.+}} : bf16) outs(%[[PB]] : memref<64x16xbf16>)
// CHECK: %[[VB:.+]] = memref.subview %[[PB]][0, 0] [64, 10] [1, 1]
// CHECK: linalg.copy ins(%[[B:.+]] : memref<64x10xbf16>) outs(%[[VB]]
// CHECK: %[[PC:.+]] = memref.alloc() : memref<64x16xf32>
// CHECK: %[[VC:.+]] = memref.subview %[[PC]][0, 0] [64, 10] [1, 1]
// CHECK: linalg.copy ins(%[[C:.+]] : memref<64x10xf32>) outs(%[[VC]]
// CHECK: %[[WA:.+]] = memref.alloc() : memref<64x64xf32>
// CHECK: arith.extf
// CHECK: %[[WB:.+]] = memref.alloc() : memref<64x16xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[PB]] : memref<64x16xbf16>) outs(%[[WB]] : memref<64x16xf32>)
// CHECK: arith.extf
// CHECK: scf.for
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<4x16xf32>
// CHECK: memref.dealloc %[[WA]]
// CHECK: memref.dealloc %[[WB]]
// CHECK: linalg.copy ins(%[[VC]] : memref<64x10xf32, strided<[16, 1]>>) outs(%[[C]] : memref<64x10xf32>)
// CHECK: memref.dealloc %[[PB]]
// CHECK: memref.dealloc %[[PC]]
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.+}}, %{{.+}} : memref<6x8xf32>, memref<8x16xf32>) outs(%{{.+}} : memref<6x16xf32>)
// CHECK-NOT: loom.cpu_tile
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK-NOT: scf.for
// CHECK-NOT: vector.
// CHECK-NOT: loom.cpu_tile
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @mixed(%P: memref<8x4xf32>, %Q: memref<4x16xf32>, %R: memref<8x16xf32>,
                 %A: memref<64x64xbf16>, %B: memref<64x10xbf16>, %C: memref<64x10xf32>,
                 %D: memref<6x8xf32>, %E: memref<8x16xf32>, %F: memref<6x16xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%P, %Q : memref<8x4xf32>, memref<4x16xf32>) outs(%R : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x64xbf16>, memref<64x10xbf16>) outs(%C : memref<64x10xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %0 = arith.extf %x : bf16 to f32
    %1 = arith.extf %y : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %acc, %2 : f32
    linalg.yield %3 : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%D, %E : memref<6x8xf32>, memref<8x16xf32>) outs(%F : memref<6x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%F : memref<6x16xf32>) outs(%F : memref<6x16xf32>) {
  ^bb0(%x: f32, %out: f32):
    %0 = arith.addf %x, %x : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// A K-contiguous B ([N, K], a transpose folded into the matmul's map) is
// first copied into an N-contiguous temporary, in f32 blocks of 16 x 16,
// each 16 rows read, transposed in shuffles (unpacks, then 128-bit lane
// permutes) and 16 rows written, which the register tiles then read 16
// contiguous elements at a time; the temporary is freed after the matmul.
// CHECK-LABEL: func.func @k_contiguous_b
// CHECK-SAME: (%[[A:[^:]+]]: memref<64x64xf32>, %[[B:[^:]+]]: memref<32x64xf32>, %[[C:[^:]+]]: memref<64x32xf32>)
// CHECK: %[[T:.+]] = memref.alloc() : memref<64x32xf32>
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %c64 step %c16
// CHECK-NEXT: scf.for %[[N:.+]] = %{{.+}} to %c32 step %c16
// CHECK-NEXT: vector.transfer_read %[[B]][%[[N]], %[[K]]], %{{.+}} {in_bounds = [true]} : memref<32x64xf32>, vector<16xf32>
// CHECK-COUNT-15: vector.transfer_read %[[B]]{{.+}} : memref<32x64xf32>, vector<16xf32>
// CHECK-NEXT: vector.shuffle {{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xf32>, vector<16xf32>
// CHECK-NOT: linalg.transpose
// CHECK-COUNT-16: vector.transfer_write %{{.+}}, %[[T]][{{.+}}] {in_bounds = [true]} : vector<16xf32>, memref<64x32xf32>
// CHECK: scf.for
// CHECK: vector.transfer_read %[[T]][%{{.+}}, %{{.+}}], %{{.+}} {in_bounds = [true]} : memref<64x32xf32>, vector<16xf32>
// CHECK: memref.dealloc %[[T]] : memref<64x32xf32>
// CHECK-NEXT: return
func.func @k_contiguous_b(%a: memref<64x64xf32>, %b: memref<32x64xf32>, %c: memref<64x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<64x64xf32>, memref<32x64xf32>) outs(%c : memref<64x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An f32 matmul whose operands outgrow a quarter of L2 (here 1 MiB, k and n
// >= 128) reads both packed: B in panels [N/16, K, 16], A in blocks
// [M/4, K, 4] (a register tile's rows side by side per k, which unpacked
// are K elements apart and evict each other from L1), C viewed as
// [M/4, 4, N/16, 16]. Each k step then reads 4 contiguous elements of A's
// block and 16 of B's panel.
// CHECK-LABEL: func.func @f32_packed
// CHECK-SAME: (%[[A:[^:]+]]: memref<512x256xf32>, %[[B:[^:]+]]: memref<256x512xf32>, %[[C:[^:]+]]: memref<512x512xf32>)
// CHECK-DAG: %[[VA:.+]] = memref.reinterpret_cast %[[A]] to offset: [0], sizes: [128, 4, 256], strides: [1024, 256, 1]
// CHECK-DAG: %[[VC:.+]] = memref.reinterpret_cast %[[C]] to offset: [0], sizes: [128, 4, 32, 16], strides: [2048, 512, 16, 1]
// CHECK-DAG: %[[VB:.+]] = memref.reinterpret_cast %[[B]] to offset: [0], sizes: [256, 32, 16], strides: [512, 16, 1]
// CHECK: %[[PB:.+]] = memref.alloc() : memref<32x256x16xf32>
// CHECK: vector.transfer_read %[[VB]]{{.+}} vector<16xf32>
// CHECK: vector.transfer_write %{{.+}}, %[[PB]]
// CHECK: %[[PA:.+]] = memref.alloc() : memref<128x256x4xf32>
// CHECK: vector.transfer_write %{{.+}}, %[[PA]]{{.+}} : vector<4xf32>, memref<128x256x4xf32>
// CHECK-COUNT-4: vector.transfer_read %[[VC]]{{.+}} vector<16xf32>
// CHECK: scf.for %[[K:[a-z0-9_]+]] = %{{.+}} iter_args(%{{.+}}) -> (vector<1x4x1x16xf32>) {
// CHECK: vector.transfer_read %[[PA]][%{{.+}}, %[[K]], %{{.+}}], %{{.+}} {in_bounds = [true]} : memref<128x256x4xf32>, vector<4xf32>
// CHECK: vector.transfer_read %[[PB]][%{{.+}}, %[[K]], %{{.+}}], %{{.+}} {in_bounds = [true]} : memref<32x256x16xf32>, vector<16xf32>
// CHECK: scf.yield
// CHECK-COUNT-4: vector.transfer_write %{{.+}}, %[[VC]]
// CHECK: memref.dealloc %[[PB]]
// CHECK: memref.dealloc %[[PA]]
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @f32_packed(%A: memref<512x256xf32>, %B: memref<256x512xf32>, %C: memref<512x512xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<512x256xf32>, memref<256x512xf32>) outs(%C : memref<512x512xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y fastmath<contract> : f32
    %1 = arith.addf %acc, %0 fastmath<contract> : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// The same with A M-contiguous ([K, M], the backward's `x^T @ dy`): A's
// blocks are copied from it directly (a block's 4 rows at one k are 4
// contiguous elements there), not through a transposed copy first.
// CHECK-LABEL: func.func @f32_packed_transposed_a
// CHECK-SAME: (%[[A:[^:]+]]: memref<256x512xf32>, %[[B:[^:]+]]: memref<256x512xf32>, %[[C:[^:]+]]: memref<512x512xf32>)
// CHECK-NOT: linalg.transpose
// CHECK-DAG: %[[VA:.+]] = memref.reinterpret_cast %[[A]] to offset: [0], sizes: [256, 128, 4], strides: [512, 4, 1]
// CHECK: %[[PA:.+]] = memref.alloc() : memref<128x256x4xf32>
// CHECK: vector.transfer_read %[[VA]]{{.+}} : memref<256x128x4xf32, strided<[512, 4, 1]>>, vector<4xf32>
// CHECK: vector.transfer_write %{{.+}}, %[[PA]]{{.+}} : vector<4xf32>, memref<128x256x4xf32>
// CHECK: vector.transfer_read %[[PA]][%{{.+}}, %{{.+}}, %{{.+}}], %{{.+}} {in_bounds = [true]} : memref<128x256x4xf32>, vector<4xf32>
func.func @f32_packed_transposed_a(%A: memref<256x512xf32>, %B: memref<256x512xf32>, %C: memref<512x512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<256x512xf32>, memref<256x512xf32>) outs(%C : memref<512x512xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y fastmath<contract> : f32
    %1 = arith.addf %acc, %0 fastmath<contract> : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// An embedding's gradient into a one-row table has a matmul's loops (rows,
// features, ids) with its ids A = f(k) alone: a scatter-add, not a matmul
// (A reads no m). It is left as it is; it used to be taken for a matmul
// and crash the pass (an operand of rank 1 has no two dims to swap).
// CHECK-LABEL: func.func @embedding_grad_one_row
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-NOT: vector.
// CHECK-NOT: loom.cpu_tile
#ids = affine_map<(v, d, p) -> (p)>
#grad = affine_map<(v, d, p) -> (p, d)>
#table = affine_map<(v, d, p) -> (v, d)>
func.func @embedding_grad_one_row(%ids: memref<16xi32>, %dy: memref<16x17xf32>, %out: memref<1x17xf32>) {
  %c0 = arith.constant 0 : index
  linalg.generic {indexing_maps = [#ids, #grad, #table], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %dy : memref<16xi32>, memref<16x17xf32>) outs(%out : memref<1x17xf32>) {
  ^bb0(%id: i32, %g: f32, %acc: f32):
    // The row index, folded to 0 with one row: no linalg.index.
    %i = arith.index_cast %id : i32 to index
    %hit = arith.cmpi eq, %i, %c0 : index
    %sum = arith.addf %acc, %g : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Packed with a K-contiguous B ([N, K]): its panels [N/16, K, 16] are
// copied in 16 x 16 blocks of (k, columns), 16 rows of k read, transposed
// in shuffles and written as 16 rows of the panel, not gathered an element
// at a time.
// CHECK-LABEL: func.func @f32_packed_k_contiguous_b
// CHECK-SAME: (%[[A:[^:]+]]: memref<512x256xf32>, %[[B:[^:]+]]: memref<512x256xf32>, %[[C:[^:]+]]: memref<512x512xf32>)
// CHECK: %[[VB:.+]] = memref.reinterpret_cast %[[B]] to offset: [0], sizes: [32, 16, 256], strides: [4096, 256, 1]
// CHECK: %[[PB:.+]] = memref.alloc() : memref<32x256x16xf32>
// CHECK: scf.for %[[P:.+]] = %c0 to %c32 step %c1
// CHECK-NEXT: scf.for %[[K:.+]] = %c0 to %c256 step %c16
// CHECK-NEXT: vector.transfer_read %[[VB]][%[[P]], %c0, %[[K]]], %{{.+}} {in_bounds = [true]} : memref<32x16x256xf32, strided<[4096, 256, 1]>>, vector<16xf32>
// CHECK-COUNT-15: vector.transfer_read %[[VB]]
// CHECK-NEXT: vector.shuffle
// CHECK-NOT: vector.from_elements
// CHECK: vector.transfer_write %{{.+}}, %[[PB]]{{.+}} : vector<16xf32>, memref<32x256x16xf32>
func.func @f32_packed_k_contiguous_b(%A: memref<512x256xf32>, %B: memref<512x256xf32>, %C: memref<512x512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<512x256xf32>, memref<512x256xf32>) outs(%C : memref<512x512xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y fastmath<contract> : f32
    %1 = arith.addf %acc, %0 fastmath<contract> : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// A kernel's own transpose of the last two dims (a weight gradient made
// [n, k] for its [k, n] param) runs in blocks as the operand copies do:
// f32 in vectorized 16 x 16 blocks, 16-bit in 32 x 32 blocks whose row
// pairs are interleaved into 32-bit pairs, transposed as 16 x 16 32-bit
// blocks (shuffles) and stored as whole destination rows of 32. One
// that keeps the last dim (attention's heads) copies whole rows, each one
// vector, when a row is whole 512-bit registers (a row of 65 bf16 stays a
// linalg.transpose: LLVM's x86 backend aborted on such vectors).
// CHECK-LABEL: func.func @own_transposes
// CHECK-SAME: (%[[X:[^:]+]]: memref<2x32x64xf32>, %[[Y:[^:]+]]: memref<2x64x32xf32>, %[[H:[^:]+]]: memref<64x128xbf16>, %[[G:[^:]+]]: memref<128x64xbf16>, %[[Q:[^:]+]]: memref<2x4x3x32xf32>, %[[R:[^:]+]]: memref<2x3x4x32xf32>, %[[S:[^:]+]]: memref<2x3x65xbf16>, %[[T:[^:]+]]: memref<3x2x65xbf16>)
// CHECK: scf.for %{{.+}} = %c0 to %c2 step %c1
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c64 step %c16
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c32 step %c16
// CHECK-COUNT-16: vector.transfer_read %[[X]]{{.+}} : memref<2x32x64xf32>, vector<16xf32>
// CHECK: vector.shuffle
// CHECK-COUNT-16: vector.transfer_write %{{.+}}, %[[Y]]{{.+}} : vector<16xf32>, memref<2x64x32xf32>
// CHECK: scf.for %{{.+}} = %c0 to %c128 step %c32
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c64 step %c32
// CHECK-NOT: linalg.transpose
// CHECK-COUNT-2: vector.load %{{.+}} : memref<32x32xbf16, strided<[128, 1], offset: ?>>, vector<16xbf16>
// CHECK-NEXT: vector.interleave %{{.+}}, %{{.+}} : vector<16xbf16> -> vector<32xbf16>
// CHECK: vector.shuffle
// CHECK: vector.store %{{.+}}, %{{.+}} : memref<32x32xbf16, strided<[64, 1], offset: ?>>, vector<32xbf16>
// CHECK: scf.for %[[B:.+]] = %c0 to %c2 step %c1
// CHECK-NEXT: scf.for %[[I:.+]] = %c0 to %c3 step %c1
// CHECK-NEXT: scf.for %[[J:.+]] = %c0 to %c4 step %c1
// CHECK-NEXT: %[[ROW:.+]] = vector.transfer_read %[[Q]][%[[B]], %[[J]], %[[I]], %c0], %{{.+}} {in_bounds = [true]} : memref<2x4x3x32xf32>, vector<32xf32>
// CHECK-NEXT: vector.transfer_write %[[ROW]], %[[R]][%[[B]], %[[I]], %[[J]], %c0] {in_bounds = [true]} : vector<32xf32>, memref<2x3x4x32xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: linalg.transpose ins(%[[S]] : memref<2x3x65xbf16>) outs(%[[T]] : memref<3x2x65xbf16>) permutation = [1, 0, 2]
func.func @own_transposes(%x: memref<2x32x64xf32>, %y: memref<2x64x32xf32>, %h: memref<64x128xbf16>, %g: memref<128x64xbf16>, %q: memref<2x4x3x32xf32>, %r: memref<2x3x4x32xf32>, %s: memref<2x3x65xbf16>, %t: memref<3x2x65xbf16>) {
  linalg.transpose ins(%x : memref<2x32x64xf32>) outs(%y : memref<2x64x32xf32>) permutation = [0, 2, 1]
  linalg.transpose ins(%h : memref<64x128xbf16>) outs(%g : memref<128x64xbf16>) permutation = [1, 0]
  linalg.transpose ins(%q : memref<2x4x3x32xf32>) outs(%r : memref<2x3x4x32xf32>) permutation = [0, 2, 1, 3]
  linalg.transpose ins(%s : memref<2x3x65xbf16>) outs(%t : memref<3x2x65xbf16>) permutation = [1, 0, 2]
  return
}

// -----

// A batched matmul of a weight (B without batch dims) whose M = 6 the 4-row
// tiles do not divide, but whose 2 x 6 rows they do: one 12 x 16 x 8 matmul
// over the collapsed rows of A and C, tiled (each batch entry's 6 rows had
// been padded to 8 on their own).
// CHECK-LABEL: func.func @batch_rows
// CHECK: %[[A:.+]] = memref.collapse_shape %{{.+}} {{\[\[}}0, 1], [2]] : memref<2x6x8xf32> into memref<12x8xf32>
// CHECK: %[[C:.+]] = memref.collapse_shape %{{.+}} {{\[\[}}0, 1], [2]] : memref<2x6x16xf32> into memref<12x16xf32>
// CHECK: scf.for
// CHECK: vector.transfer_read %[[C]]
// CHECK: arith.addf %{{.+}}, %{{.+}} : vector<4x16xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(b, m, n, k) -> (b, m, k)>
#b = affine_map<(b, m, n, k) -> (k, n)>
#c = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @batch_rows(%A: memref<2x6x8xf32>, %B: memref<8x16xf32>, %C: memref<2x6x16xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<2x6x8xf32>, memref<8x16xf32>) outs(%C : memref<2x6x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// A matrix-vector product (n = 1, A and B contiguous along k) is left to
// the loops: each output element's k loop carries its sum in a register
// (loom-promote-loop-accumulators), two streams LLVM vectorizes. Padded,
// it computed 32 columns of which one was kept (10x slower). An A read
// across k (transposed) is still tiled.
// CHECK-LABEL: func.func @row_dots
// CHECK-NOT: memref.alloc
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-LABEL: func.func @column_dots_transposed_a
// CHECK: memref.alloc
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#at = affine_map<(m, n, k) -> (k, m)>
func.func @row_dots(%a: memref<4096x512xf32>, %b: memref<512x1xf32>, %out: memref<4096x1xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4096x512xf32>, memref<512x1xf32>) outs(%out : memref<4096x1xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
func.func @column_dots_transposed_a(%a: memref<512x4096xf32>, %b: memref<512x1xf32>, %out: memref<4096x1xf32>) {
  linalg.generic {indexing_maps = [#at, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<512x4096xf32>, memref<512x1xf32>) outs(%out : memref<4096x1xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// One output row ([1, K] @ [K, N], a decoding step's projection), or up to
// 4 f32 rows (2 of 16 bits), against a B contiguous along n: its k loop
// moves outside m and n (the iterators read k, m, n), each k adding a[m, k]
// times B's row k to each output row, and it is left to the loops. Five
// rows are tiled. Tiled, the row was padded to 8 and all of B copied into
// panels first (5x slower). Against a B contiguous along k, the row's
// elements are dot products, left as they are. A B strided along both is
// still tiled.
// CHECK-LABEL: func.func @row_axpy
// CHECK-NOT: memref.alloc
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK-SAME: indexing_maps = [#[[A:.+]], #[[B:.+]], #[[C:.+]]], iterator_types = ["reduction", "parallel", "parallel"]
// CHECK-LABEL: func.func @four_rows_axpy
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["reduction", "parallel", "parallel"]
// CHECK-LABEL: func.func @five_rows
// CHECK: memref.alloc
// CHECK-LABEL: func.func @row_dots_one_row
// CHECK-NOT: memref.alloc
// CHECK-NOT: vector.
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-LABEL: func.func @row_strided_b
// CHECK: memref.alloc
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#bt = affine_map<(m, n, k) -> (n, k)>
func.func @row_axpy(%a: memref<1x512xf32>, %b: memref<512x4096xf32>, %out: memref<1x4096xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<1x512xf32>, memref<512x4096xf32>) outs(%out : memref<1x4096xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
func.func @four_rows_axpy(%a: memref<4x512xf32>, %b: memref<512x4096xf32>, %out: memref<4x4096xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x512xf32>, memref<512x4096xf32>) outs(%out : memref<4x4096xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
func.func @five_rows(%a: memref<5x512xf32>, %b: memref<512x4096xf32>, %out: memref<5x4096xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<5x512xf32>, memref<512x4096xf32>) outs(%out : memref<5x4096xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
func.func @row_dots_one_row(%a: memref<1x512xf32>, %b: memref<4096x512xf32>, %out: memref<1x4096xf32>) {
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<1x512xf32>, memref<4096x512xf32>) outs(%out : memref<1x4096xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
func.func @row_strided_b(%a: memref<1x512xf32>, %b: memref<512x4096xf32, strided<[8192, 2]>>, %out: memref<1x4096xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<1x512xf32>, memref<512x4096xf32, strided<[8192, 2]>>) outs(%out : memref<1x4096xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A batch of single rows against one B ([64, 1, 512] @ [512, 512], a
// decoding batch) is tiled: the register tiles take the batch's rows
// together and read each panel of B once. As 64 row products it read all
// of B 64 times (315 -> 777 us). Single rows each against its own B
// ([4, 1, K] @ [4, K, N]) share nothing, and run as row products.
// CHECK-LABEL: func.func @rows_one_b
// CHECK: memref.alloc
// CHECK-LABEL: func.func @rows_own_b
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction", "parallel", "parallel"]
#a3 = affine_map<(b, m, n, k) -> (b, m, k)>
#w = affine_map<(b, m, n, k) -> (k, n)>
#bb = affine_map<(b, m, n, k) -> (b, k, n)>
#c3 = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @rows_one_b(%a: memref<64x1x512xf32>, %b: memref<512x512xf32>, %out: memref<64x1x512xf32>) {
  linalg.generic {indexing_maps = [#a3, #w, #c3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<64x1x512xf32>, memref<512x512xf32>) outs(%out : memref<64x1x512xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
func.func @rows_own_b(%a: memref<4x1x512xf32>, %b: memref<4x512x256xf32>, %out: memref<4x1x256xf32>) {
  linalg.generic {indexing_maps = [#a3, #bb, #c3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x1x512xf32>, memref<4x512x256xf32>) outs(%out : memref<4x1x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
