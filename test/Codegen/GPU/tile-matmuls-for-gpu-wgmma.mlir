// RUN: loom-opt %s --split-input-file --loom-tile-matmuls-for-gpu="tensor-cores warpgroup-mma shared-per-block=232448" --canonicalize --cse | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-tile-matmuls-for-gpu="tensor-cores warpgroup-mma shared-per-block=49152" --canonicalize --cse | FileCheck %s --check-prefix=SMALL

// --loom-tile-matmuls-for-gpu with warpgroup-mma (sm_90a): a 16-bit matmul
// whose operands a TMA tensor map can read runs as 128 x 128 tiles of two
// warpgroups, wgmma.m64n128k16 reading shared memory that TMA fills. Two
// blocks of 3 stages of 32 KiB fit an SM's 228 KiB (less 1 KiB reserved
// per block), plus 1 KiB to align the stages to the 128-byte swizzle's
// 1024-byte period: 99328 bytes of dynamic shared memory. With only 48 KiB
// a block (SMALL), no two stages fit and the mma.sync pipeline runs.

#a = affine_map<(m, n, k) -> (m, k)>
#bt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @k_major_b
// The tensor maps are made on the host: boxes of 128 rows of 64 elements.
// CHECK:      %[[CA:.+]] = memref.cast %arg0 : memref<256x512xbf16> to memref<*xbf16>
// CHECK:      %[[MA:.+]] = nvgpu.tma.create.descriptor %[[CA]] box[%c128, %c64] : memref<*xbf16> -> <tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK:      %[[CB:.+]] = memref.cast %arg1 : memref<192x512xbf16> to memref<*xbf16>
// CHECK:      %[[MB:.+]] = nvgpu.tma.create.descriptor %[[CB]] box[%c128, %c64]
// CHECK:      gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %c2, %{{.+}} = %c2, %{{.+}} = %c1) threads(%[[TID:[^,]+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c256, %{{.+}} = %c1, %{{.+}} = %c1) dynamic_shared_memory_size %c99328_i32
// The stages start at the first 1024-byte boundary.
// CHECK:        %[[SMEM:.+]] = gpu.dynamic_shared_memory
// CHECK:        %[[ADDR:.+]] = memref.extract_aligned_pointer_as_index %[[SMEM]]
// CHECK:        arith.remui %[[ADDR]], %c1024
// CHECK:        %[[BARS:.+]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
// CHECK:        %[[LEADER:.+]] = arith.cmpi eq, %[[TID]], %c0
// CHECK-COUNT-3: nvgpu.mbarrier.init %[[BARS]][%{{.+}}], %c1, predicate = %[[LEADER]]
// CHECK:        gpu.barrier
// Prologue: stages 0 and 1 loaded, A at (k, m) and B at (k, n), innermost first.
// CHECK:        nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%c0], %c32768, predicate = %[[LEADER]]
// CHECK:        nvgpu.tma.async.load %[[MA]][%c0, %{{.+}}], %[[BARS]][%c0] to %{{.+}}, predicate = %[[LEADER]]
// CHECK:        nvgpu.tma.async.load %[[MB]][%c0, %{{.+}}], %[[BARS]][%c0] to %{{.+}}, predicate = %[[LEADER]]
// CHECK:        nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%c1], %c32768, predicate = %[[LEADER]]
// CHECK:        nvgpu.tma.async.load %[[MA]][%c64, %{{.+}}], %[[BARS]][%c1]
// CHECK:        nvgpu.tma.async.load %[[MB]][%c64, %{{.+}}], %[[BARS]][%c1]
// 8 K steps of 64; step i waits for phase i / 3 of stage i % 3.
// CHECK:        scf.for %[[KT:.+]] = %c0 to %c8 step %c1 iter_args(%[[ACC:.+]] = %{{.+}}) -> (!llvm.struct<(f32,
// CHECK:          %[[STAGE:.+]] = arith.remui %[[KT]], %c3
// CHECK:          %[[USE:.+]] = arith.divui %[[KT]], %c3
// CHECK:          %[[USE64:.+]] = arith.index_castui %[[USE]] : index to i64
// CHECK:          %[[PARITY:.+]] = arith.trunci %[[USE64]] : i64 to i1
// CHECK:          nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[STAGE]]], %[[PARITY]], %c10000000
// K-major descriptors: 1024-byte stride offset (8 rows of 128 bytes),
// 128-byte swizzle (bit 62), 16-byte leading offset; 32 bytes (2) a step.
// CHECK:          %[[DA:.+]] = arith.ori %{{.+}}, %c4611686293305360384_i64 : i64
// CHECK:          %[[DB:.+]] = arith.ori %{{.+}}, %c4611686293305360384_i64 : i64
// CHECK:          nvvm.wgmma.fence.aligned
// CHECK:          %[[W0:.+]] = nvvm.wgmma.mma_async %[[DA]], %[[DB]], %[[ACC]], <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK:          %[[DA1:.+]] = arith.addi %[[DA]], %c2_i64
// CHECK:          %[[DB1:.+]] = arith.addi %[[DB]], %c2_i64
// CHECK:          %[[W1:.+]] = nvvm.wgmma.mma_async %[[DA1]], %[[DB1]], %[[W0]]
// CHECK:          nvvm.wgmma.mma_async
// CHECK:          %[[W3:.+]] = nvvm.wgmma.mma_async
// CHECK:          nvvm.wgmma.commit.group.sync.aligned
// CHECK:          nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:          gpu.barrier
// The leader refills the stage the previous step read: K tile i + 2.
// CHECK:          %[[NEXT:.+]] = arith.addi %[[KT]], %c2
// CHECK:          %[[MORE:.+]] = arith.cmpi ult, %[[NEXT]], %c8
// CHECK:          scf.if %[[MORE]] {
// CHECK:            nvgpu.mbarrier.arrive.expect_tx
// CHECK-COUNT-2:    nvgpu.tma.async.load
// CHECK:          }
// CHECK:          scf.yield %[[W3]]
// CHECK:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:        vector.store
// CHECK-NOT:    linalg.generic
// SMALL-LABEL: func.func @k_major_b
// SMALL-NOT:   nvgpu.tma
// SMALL:       nvgpu.device_async_copy
// SMALL:       nvvm.mma.sync
func.func @k_major_b(%a: memref<256x512xbf16>, %b: memref<192x512xbf16>, %c: memref<256x192xf32>) {
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<256x512xbf16>, memref<192x512xbf16>) outs(%c : memref<256x192xf32>) {
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

// An N-contiguous B ([K][N], f16) is read as two 64 x 64 boxes at (n, k)
// and (n + 64, k), 8 KiB apart, and multiplied N-major (wgmma's "row" B):
// its descriptor's leading offset is that 8 KiB (512 << 16), and a step
// moves 16 rows of 128 bytes (2048 bytes, 128). A batch dim of A is a
// third tensor-map dim with a box of 1: the block's batch index (block z)
// is A's outermost coordinate.
#a3 = affine_map<(b, m, n, k) -> (b, m, k)>
#b2 = affine_map<(b, m, n, k) -> (k, n)>
#c3 = affine_map<(b, m, n, k) -> (b, m, n)>
// CHECK-LABEL: func.func @n_major_b_batched
// CHECK:      %[[MA:.+]] = nvgpu.tma.create.descriptor %{{.+}} box[%c1, %c128, %c64] : memref<*xf16> -> <tensor = memref<1x128x64xf16, #gpu.address_space<workgroup>>
// CHECK:      %[[MB:.+]] = nvgpu.tma.create.descriptor %{{.+}} box[%c64, %c64] : memref<*xf16> -> <tensor = memref<64x64xf16, #gpu.address_space<workgroup>>
// CHECK:      gpu.launch blocks(%[[BX:[^,]+]], %{{.+}}, %[[BZ:[^)]+]]) in (%{{.+}} = %c2, %{{.+}} = %c1, %{{.+}} = %c3) threads
// CHECK:        %[[COL0:.+]] = arith.muli %[[BX]], %c128
// CHECK:        %[[BATCH:.+]] = arith.remui %[[BZ]], %c3
// CHECK:        nvgpu.tma.async.load %[[MA]][%c0, %{{.+}}, %[[BATCH]]], %{{.+}}[%c0] to %{{.+}} : {{.+}} -> memref<1x128x64xf16, #gpu.address_space<workgroup>>
// CHECK:        nvgpu.tma.async.load %[[MB]][%[[COL0]], %c0], %{{.+}}[%c0] to %{{.+}} : {{.+}} -> memref<64x64xf16, #gpu.address_space<workgroup>>
// CHECK:        %[[COL64:.+]] = arith.addi %[[COL0]], %c64
// CHECK:        nvgpu.tma.async.load %[[MB]][%[[COL64]], %c0], %{{.+}}[%c0] to %{{.+}} : {{.+}} -> memref<64x64xf16, #gpu.address_space<workgroup>>
// CHECK:        scf.for
// CHECK:          %[[DB:.+]] = arith.ori %{{.+}}, %c4611686293338849280_i64 : i64
// CHECK:          nvvm.wgmma.mma_async %{{.+}}, %[[DB]], %{{.+}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// CHECK:          arith.addi %[[DB]], %c128_i64
// SMALL-LABEL: func.func @n_major_b_batched
// SMALL-NOT:   nvgpu.tma
func.func @n_major_b_batched(%a: memref<3x100x256xf16>, %b: memref<256x200xf16>, %c: memref<3x100x200xf32>) {
  linalg.generic {indexing_maps = [#a3, #b2, #c3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<3x100x256xf16>, memref<256x200xf16>) outs(%c : memref<3x100x200xf32>) {
  ^bb0(%x: f16, %y: f16, %acc: f32):
    %0 = arith.extf %x : f16 to f32
    %1 = arith.extf %y : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %acc, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// -----

// An A stored M-contiguous ([K][M], the backward's x^T read in place) is
// read as two 64 x 64 boxes per stage, (m, k) and (m + 64, k) innermost
// first, and multiplied M-major: wgmma's "col" A, with the leading byte
// offset of an M-major operand's boxes (8192) in its descriptor.
#at = affine_map<(m, n, k) -> (k, m)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @m_major_a
// CHECK:        nvgpu.tma.create.descriptor %{{.+}} box[%c64, %c64] : memref<*xbf16> -> <tensor = memref<64x64xbf16, #gpu.address_space<workgroup>>
// CHECK:        gpu.launch
// CHECK:          nvgpu.tma.async.load %{{.+}}[%[[M0:.+]], %c0], %{{.+}}[%c0] to
// CHECK-NEXT:     %[[M64:.+]] = arith.addi %[[M0]], %c64
// CHECK-NEXT:     %[[AT:.+]] = arith.addi %{{.+}}, %c8192
// CHECK-NEXT:     %[[BOX:.+]] = memref.view %{{.+}}[%[[AT]]][]
// CHECK-NEXT:     nvgpu.tma.async.load %{{.+}}[%[[M64]], %c0], %{{.+}}[%c0] to %[[BOX]]
// CHECK:          nvvm.wgmma.mma_async {{.+}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK:        return
func.func @m_major_a(%at: memref<256x512xbf16>, %b: memref<256x256xbf16>, %c: memref<512x256xf32>) {
  linalg.generic {indexing_maps = [#at, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%at, %b : memref<256x512xbf16>, memref<256x256xbf16>) outs(%c : memref<512x256xf32>) {
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

// Operands a tensor map cannot read keep the mma.sync kernels: rows of 60
// bf16 (120 bytes, not a multiple of 16).
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @not_tma
// CHECK-NOT:   nvgpu.tma
// CHECK:       nvvm.mma.sync
// CHECK-NOT:   nvvm.wgmma
// CHECK:       return
func.func @not_tma(%c: memref<128x64xf32>, %a2: memref<128x60xbf16>, %b2: memref<60x64xbf16>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a2, %b2 : memref<128x60xbf16>, memref<60x64xbf16>) outs(%c : memref<128x64xf32>) {
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

// A matmul big enough that 128 x 256 tiles still give each of the 132 SMs
// a block (2048 x 4096: 16 x 16 blocks) takes them: wgmma m64n256k16 with
// 128 accumulators a thread, one block an SM, so 4 stages of 48 KiB (A's
// 16 KiB and B's four 64 x 64 boxes) and the 1 KiB of slack. With 48 KiB
// a block no two stages fit (SMALL).
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @wide
// CHECK:      %[[MB:.+]] = nvgpu.tma.create.descriptor %{{.+}} box[%c64, %c64]
// CHECK:      gpu.launch blocks(%[[BX:[^,]+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c16, %{{.+}} = %c16, %{{.+}} = %c1) threads(%{{.+}}) in (%{{.+}} = %c256, %{{.+}} = %c1, %{{.+}} = %c1) dynamic_shared_memory_size %c197632_i32
// CHECK:        %[[COL0:.+]] = arith.muli %[[BX]], %c256
// CHECK:        nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
// CHECK:        nvgpu.mbarrier.arrive.expect_tx %{{.+}}[%c0], %c49152
// CHECK:        nvgpu.tma.async.load %[[MB]][%[[COL0]], %c0]
// CHECK:        nvgpu.tma.async.load %[[MB]][%{{.+}}, %c0]
// CHECK:        nvgpu.tma.async.load %[[MB]][%{{.+}}, %c0]
// CHECK:        %[[COL192:.+]] = arith.addi %[[COL0]], %c192
// CHECK:        nvgpu.tma.async.load %[[MB]][%[[COL192]], %c0]
// CHECK:        scf.for
// CHECK:          nvvm.wgmma.mma_async {{.+}}, <m = 64, n = 256, k = 16>
// CHECK:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:        llvm.extractvalue %{{.+}}[127]
// CHECK-NOT:    llvm.extractvalue %{{.+}}[128]
// SMALL-LABEL: func.func @wide
// SMALL-NOT:   nvgpu.tma
func.func @wide(%a: memref<2048x512xbf16>, %b: memref<512x4096xbf16>, %c: memref<2048x4096xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2048x512xbf16>, memref<512x4096xbf16>) outs(%c : memref<2048x4096xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %0 = arith.extf %x : bf16 to f32
    %1 = arith.extf %y : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %acc, %2 : f32
    linalg.yield %3 : f32
  }
  return
}
