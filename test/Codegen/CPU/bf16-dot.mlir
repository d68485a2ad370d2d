// RUN: loom-opt %s --split-input-file --loom-tile-contractions-for-cpu="vector-bits=512 bf16-dot=true" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-tile-contractions-for-cpu="vector-bits=512" | FileCheck %s --check-prefix=FMA

// --loom-tile-contractions-for-cpu with 512-bit vectors: 8 x 32 register
// tiles (16 zmm accumulators). With bf16-dot, a bf16 matmul with an f32
// accumulator runs on avx512_bf16 pair dot products: A viewed as
// [M, K/2, 2], B copied once into VNNI panels [N/32, K/2, 32, 2] (a plan
// buffer: the copy's alloc becomes a scratch argument later), C viewed as
// [M, N/32, 32]; each step of the k/2 loop is one x86vector.avx512.dot per
// row and 16 columns, A's pair broadcast as one 32-bit lane, B's 16 pairs
// one contiguous 64-byte read. Without bf16-dot (FMA) the same op widens
// its operands into f32 copies first and multiply-adds in f32.

// CHECK-LABEL: func.func @bf16_64
// CHECK-SAME: (%[[A:[^:]+]]: memref<64x64xbf16>, %[[B:[^:]+]]: memref<64x64xbf16>, %[[C:[^:]+]]: memref<64x64xf32>)
// CHECK-DAG: %[[AP:.+]] = memref.reinterpret_cast %[[A]] to offset: [0], sizes: [64, 32, 2], strides: [64, 2, 1]
// CHECK-DAG: %[[CP:.+]] = memref.reinterpret_cast %[[C]] to offset: [0], sizes: [64, 2, 32], strides: [64, 32, 1]
// CHECK-DAG: %[[BV:.+]] = memref.reinterpret_cast %[[B]] to offset: [0], sizes: [32, 2, 2, 32], strides: [128, 64, 32, 1]
// CHECK: %[[P:.+]] = memref.alloc() : memref<2x32x32x2xbf16>
// The copy into panels, vectorized: per (panel, k pair) two rows of 32,
// each one read (not cut to the dots' 16 pairs: LLVM then interleaved
// them with scalar shuffles), interleaved and written as 64 contiguous
// elements.
// CHECK: scf.for
// CHECK-NEXT: scf.for
// CHECK-NEXT: vector.transfer_read %[[BV]]{{.+}} : memref<32x2x2x32xbf16, strided<[128, 64, 32, 1]>>, vector<32xbf16>
// CHECK-NEXT: vector.transfer_read %[[BV]]{{.+}} : memref<32x2x2x32xbf16, strided<[128, 64, 32, 1]>>, vector<32xbf16>
// CHECK-NOT: vector.transfer_read
// CHECK: vector.transfer_write %{{.+}} : vector<64xbf16>, memref<2x32x64xbf16>
// The register tiles: the accumulators read once, the k/2 loop, 16 dots.
// CHECK: scf.for %{{.+}} step %c8
// CHECK-NEXT: scf.for
// CHECK-COUNT-8: vector.transfer_read %[[CP]]{{.+}} : memref<64x2x32xf32, strided<[64, 32, 1]>>, vector<32xf32>
// CHECK: scf.for %{{.+}} = %c0 to %c32 step %c1 iter_args(%{{.+}}) -> (vector<8x32xf32>) {
// CHECK-COUNT-8: vector.transfer_read %[[AP]]{{.+}} : memref<64x32x2xbf16, strided<[64, 2, 1]>>, vector<2xbf16>
// CHECK: vector.transfer_read %{{.+}} : memref<2x32x64xbf16>, vector<32xbf16>
// CHECK: vector.transfer_read %{{.+}} : memref<2x32x64xbf16>, vector<32xbf16>
// CHECK: %[[PAIR:.+]] = vector.bitcast %{{.+}} : vector<2xbf16> to vector<1xi32>
// CHECK-NEXT: %[[LANES:.+]] = vector.broadcast %[[PAIR]] : vector<1xi32> to vector<16xi32>
// CHECK-NEXT: %[[AB:.+]] = vector.bitcast %[[LANES]] : vector<16xi32> to vector<32xbf16>
// CHECK-NEXT: x86vector.avx512.dot %{{.+}}, %[[AB]], %{{.+}} : vector<32xbf16> -> vector<16xf32>
// CHECK-COUNT-15: x86vector.avx512.dot
// CHECK-NOT: x86vector.avx512.dot
// CHECK: scf.yield %{{.+}} : vector<8x32xf32>
// CHECK: vector.transfer_write %{{.+}}, %[[CP]]
// CHECK: memref.dealloc %[[P]]
// CHECK-NOT: loom.cpu_
// FMA-LABEL: func.func @bf16_64
// FMA-NOT: x86vector
// FMA: %[[WA:.+]] = memref.alloc() : memref<64x64xf32>
// FMA: arith.extf %{{.+}} : bf16 to f32
// FMA: %[[WB:.+]] = memref.alloc() : memref<64x64xf32>
// FMA: arith.extf %{{.+}} : bf16 to f32
// FMA: scf.for %{{.+}} iter_args(%{{.+}}) -> (vector<8x32xf32>) {
// FMA-NOT: arith.extf
// FMA: vector.transfer_read %[[WB]]{{.+}} : memref<64x64xf32>, vector<32xf32>
// FMA: arith.addf %{{.+}}, %{{.+}} fastmath<contract> : vector<8x32xf32>
// FMA-NOT: x86vector
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @bf16_64(%A: memref<64x64xbf16>, %B: memref<64x64xbf16>, %C: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x64xbf16>, memref<64x64xbf16>) outs(%C : memref<64x64xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %0 = arith.extf %x : bf16 to f32
    %1 = arith.extf %y : bf16 to f32
    %2 = arith.mulf %0, %1 fastmath<contract> : f32
    %3 = arith.addf %acc, %2 fastmath<contract> : f32
    linalg.yield %3 : f32
  }
  return
}

// -----

// A K-contiguous B ([N, K], `a @ transpose(b)`) goes into the same panels
// from the view [N/32, 32, K/2, 2]; batched, one batch per tile.
// CHECK-LABEL: func.func @batched_k_contiguous
// CHECK-SAME: %[[B:[^:]+]]: memref<2x32x64xbf16>
// CHECK: %[[BV:.+]] = memref.reinterpret_cast %[[B]] to offset: [0], sizes: [2, 1, 32, 32, 2], strides: [2048, 2048, 64, 2, 1]
// CHECK: memref.alloc() : memref<2x1x32x32x2xbf16>
// CHECK: vector.transfer_read %[[BV]]
// CHECK: scf.for %{{.+}} iter_args(%{{.+}}) -> (vector<8x32xf32>) {
// CHECK-COUNT-16: x86vector.avx512.dot
// CHECK-NOT: x86vector.avx512.dot
func.func @batched_k_contiguous(%a: memref<2x16x64xbf16>, %b: memref<2x32x64xbf16>, %c: memref<2x16x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : memref<2x16x64xbf16>, memref<2x32x64xbf16>) outs(%c : memref<2x16x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not a pair dot: an odd K (the pairs would not cover it) keeps the f32
// multiply-adds, on widened copies of the operands.
// CHECK-LABEL: func.func @no_pairs
// CHECK-NOT: x86vector
// CHECK: memref.alloc() : memref<16x63xf32>
// CHECK: memref.alloc() : memref<63x32xf32>
// CHECK: iter_args(%{{.+}}) -> (vector<8x32xf32>)
// CHECK-NOT: x86vector
func.func @no_pairs(%a: memref<16x63xbf16>, %b: memref<63x32xbf16>, %c: memref<16x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<16x63xbf16>, memref<63x32xbf16>) outs(%c : memref<16x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An A that reads k from its first dim ([K][M], the backward's x^T read in
// place) is copied once into a K-contiguous temporary (in blocks of 32 k),
// so that its pairs are adjacent: the dots then run as for any A.
// CHECK-LABEL: func.func @m_contiguous_a
// CHECK-SAME: (%[[AT:.+]]: memref<64x16xbf16>,
// CHECK: %[[COPY:.+]] = memref.alloc() : memref<16x64xbf16>
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %c64 step %c32
// CHECK: %[[FROM:.+]] = memref.subview %[[AT]][%[[K]], 0] [32, 16] [1, 1]
// CHECK: %[[TO:.+]] = memref.subview %[[COPY]][0, %[[K]]] [16, 32] [1, 1]
// CHECK: linalg.transpose ins(%[[FROM]] : memref<32x16xbf16, strided<[16, 1], offset: ?>>) outs(%[[TO]] : memref<16x32xbf16, strided<[64, 1], offset: ?>>) permutation = [1, 0]
// CHECK: x86vector.avx512.dot
// CHECK: memref.dealloc %[[COPY]]
func.func @m_contiguous_a(%at: memref<64x16xbf16>, %b: memref<64x32xbf16>, %c: memref<16x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%at, %b : memref<64x16xbf16>, memref<64x32xbf16>) outs(%c : memref<16x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// f32 with 512-bit vectors: 8 x 32 register tiles, the same in both runs.
// CHECK-LABEL: func.func @f32_tiles
// CHECK: scf.for %{{.+}} = %c0 to %c128 step %c8 {
// CHECK-NEXT: scf.for %{{.+}} = %c0 to %c128 step %c32 {
// CHECK: scf.for %{{.+}} = %c0 to %c128 step %c1 iter_args(%{{.+}}) -> (vector<8x32xf32>) {
// CHECK: arith.addf %{{.+}}, %{{.+}} fastmath<contract> : vector<8x32xf32>
// FMA-LABEL: func.func @f32_tiles
// FMA: iter_args(%{{.+}}) -> (vector<8x32xf32>)
func.func @f32_tiles(%A: memref<128x128xf32>, %B: memref<128x128xf32>, %C: memref<128x128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<128x128xf32>, memref<128x128xf32>) outs(%C : memref<128x128xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %0 = arith.mulf %x, %y fastmath<contract> : f32
    %1 = arith.addf %acc, %0 fastmath<contract> : f32
    linalg.yield %1 : f32
  }
  return
}
