// RUN: loom-opt %s --split-input-file --loom-build-gpu-attention -verify-diagnostics | FileCheck %s --check-prefixes=CHECK,STAGED
// RUN: loom-opt %s --split-input-file --loom-build-gpu-attention=stage-operands=false -verify-diagnostics | FileCheck %s --check-prefixes=CHECK,UNSTAGED
// RUN: loom-opt %s --split-input-file --loom-build-gpu-attention -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// --loom-build-gpu-attention: a kernel marked loom.gpu_attention (one
// loom.attention, lowered for the CPU) gets one launch instead of its body.
// Here 2 x 4 (batch, heads) entries of 128 queries and keys, 64 features,
// causal, scale 0.125: 8 x 2 blocks of 4 warps (128 threads), each warp 16
// query rows. The body's CPU loops (and the scratch argument) are gone.
// By default (STAGED) each block of 64 keys and values goes to shared
// memory (two stages of [64, 64] each, cp.async by the whole block, the
// next block's copies in flight while the warps multiply this one), read
// with ldmatrix, and the block's warps walk the key blocks together;
// with stage-operands=false (UNSTAGED) every warp reads K and V from
// global memory itself and stops at its own diagonal.
// A warp loads its queries' A fragments once (64 / 16 = 4 K steps of 4
// pairs), then walks the key blocks (64 keys) up to its diagonal carrying
// 8 output tiles of 4 f32 (64 value features / 8), two row maxima and two
// partial sums. Per key block: 4 x 8 mma.sync for the scores, the scores
// rounded to bf16 after the product and after the scale, masked above the
// diagonal, the row maxima over a quad (2 xor shuffles per row), the
// rescaled sums and outputs, exp(s - m) as ex2.approx (rounded as P V's
// operand), and 4 x 8 mma.sync for P V.
// At the end: the sums over the quad and O / l stored as bf16 pairs.

// CHECK-LABEL: func.func @attention_k0
// CHECK-SAME:    (%[[Q:.+]]: memref<2x4x128x64xbf16>, %[[K:.+]]: memref<2x4x128x64xbf16>, %[[V:.+]]: memref<2x4x128x64xbf16>, %[[O:.+]]: memref<2x4x128x64xbf16>, %{{.+}}: memref<8x64x64xf32> {loom.scratch})
// CHECK-NOT:     linalg.
// STAGED-DAG:    %[[C8:.+]] = arith.constant 8 : index
// STAGED-DAG:    %[[C2:.+]] = arith.constant 2 : index
// STAGED-DAG:    %[[C128:.+]] = arith.constant 128 : index
// STAGED:        gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %[[C8]], %{{.+}} = %[[C2]], %{{.+}} = %{{.+}}) threads(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %[[C128]], %{{.+}}, %{{.+}}) workgroup(%[[KS:.+]] : memref<2x64x64xbf16, #gpu.address_space<workgroup>>, %[[VS:.+]] : memref<2x64x64xbf16, #gpu.address_space<workgroup>>)
// STAGED-COUNT-16: vector.load %[[Q]]
// Key block 0 into stage 0 (if there are keys to read): 64 rows of 8
// chunks of 16 bytes each of K and V, 4 copies of each a thread.
// STAGED:          scf.if
// STAGED-COUNT-4:    nvgpu.device_async_copy %[[K]][{{.+}}], %[[KS]][%c0{{(_[0-9]+)?}}, {{.+}}], 8 {bypassL1}
// STAGED-COUNT-4:    nvgpu.device_async_copy %[[V]][{{.+}}], %[[VS]][%c0{{(_[0-9]+)?}}, {{.+}}], 8 {bypassL1}
// STAGED:          nvvm.cp.async.commit.group
// STAGED:          %{{.+}}:36 = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(
// The next block into the other stage, then this one awaited.
// STAGED:            scf.if
// STAGED-COUNT-4:      nvgpu.device_async_copy %[[K]]
// STAGED-COUNT-4:      nvgpu.device_async_copy %[[V]]
// STAGED:            nvvm.cp.async.commit.group
// STAGED-NEXT:       nvvm.cp.async.wait.group 1
// STAGED-NEXT:       gpu.barrier
// The scores: per 16 features and pair of 8-key tiles an ldmatrix.x4 of K.
// STAGED-COUNT-16:   nvgpu.ldmatrix %[[KS]][{{.+}}] {numTiles = 4 : i32, transpose = false}
// STAGED:            arith.cmpi ugt
// STAGED:            gpu.shuffle xor
// STAGED:            llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// P V: per 16 keys and pair of 8-feature tiles an ldmatrix.x4.trans of V.
// STAGED-COUNT-16:   nvgpu.ldmatrix %[[VS]][{{.+}}] {numTiles = 4 : i32, transpose = true}
// STAGED:            gpu.barrier
// STAGED-NEXT:       scf.yield
// STAGED-COUNT-4:  gpu.shuffle xor
// STAGED:          arith.divf
// STAGED:          vector.store %{{.+}}, %[[O]]
// STAGED:          gpu.terminator
// STAGED:        return
// UNSTAGED-DAG:     %[[C8:.+]] = arith.constant 8 : index
// UNSTAGED-DAG:     %[[C2:.+]] = arith.constant 2 : index
// UNSTAGED-DAG:     %[[C128:.+]] = arith.constant 128 : index
// UNSTAGED:         gpu.launch blocks(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %[[C8]], %{{.+}} = %[[C2]], %{{.+}} = %{{.+}}) threads(%{{.+}}, %{{.+}}, %{{.+}}) in (%{{.+}} = %[[C128]],
// UNSTAGED-COUNT-16: vector.load %[[Q]]
// UNSTAGED:           %{{.+}}:36 = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(
// UNSTAGED-COUNT-32:    nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>
// UNSTAGED:             arith.truncf %{{.+}} : f32 to bf16
// UNSTAGED:             arith.mulf %{{.+}}, %{{.+}} : f32
// Only the key blocks the diagonal crosses in the warp's rows are masked.
// UNSTAGED:             arith.cmpi ugt
// UNSTAGED:             scf.if
// UNSTAGED:               arith.cmpi ugt
// UNSTAGED:               arith.select %{{.+}}, %{{.+}}, %{{.+}} : f32
// UNSTAGED:             } else {
// UNSTAGED-COUNT-2:     gpu.shuffle xor
// UNSTAGED:             llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// UNSTAGED-COUNT-2:     gpu.shuffle xor
// UNSTAGED:             llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// UNSTAGED:             llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// UNSTAGED:             memref.load %[[V]]
// UNSTAGED-COUNT-32:    nvvm.mma.sync
// UNSTAGED-NOT:         nvvm.mma.sync
// UNSTAGED:             scf.yield
// UNSTAGED-COUNT-4:   gpu.shuffle xor
// UNSTAGED:           arith.divf
// UNSTAGED:           vector.store %{{.+}}, %[[O]]
// UNSTAGED:           gpu.terminator
// UNSTAGED:         return
func.func @attention_k0(%q: memref<2x4x128x64xbf16>, %k: memref<2x4x128x64xbf16>,
                        %v: memref<2x4x128x64xbf16>, %o: memref<2x4x128x64xbf16>,
                        %scratch: memref<8x64x64xf32> {loom.scratch})
    attributes {loom.kernel, loom.gpu_attention = {causal, inputs = 3 : i64, key = 1 : i64, query = 0 : i64, scale = 1.250000e-01 : f32, value = 2 : i64}} {
  %c0 = arith.constant 0.0 : f32
  linalg.fill ins(%c0 : f32) outs(%scratch : memref<8x64x64xf32>)
  return
}

// -----

// Not causal, no scale, 80 queries (the second block's last 3 warps have
// none: a guard), 48 keys (blocks of 16), f16, 32 features and 16 value
// features: 2 output tiles of 4, so 8 + 4 carried values; per key block 2 x 2
// mma.sync for the scores and 1 x 2 for P V. No mask, no scale.

// CHECK-LABEL: func.func @plain
// CHECK:         gpu.launch
// CHECK:           scf.if
// CHECK:             %{{.+}}:12 = scf.for
// CHECK-COUNT-4:       nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK-NOT:           arith.cmpi ugt
// CHECK:               gpu.shuffle xor
// CHECK-COUNT-2:       nvvm.mma.sync
// CHECK-NOT:           nvvm.mma.sync
// CHECK:               scf.yield
func.func @plain(%q: memref<80x32xf16>, %k: memref<48x32xf16>, %v: memref<48x16xf16>,
                 %o: memref<80x16xf16>)
    attributes {loom.kernel, loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} {
  return
}

// -----

// Heads of 96 (12 chunks of 16 bytes a row), staged in blocks of 32 keys:
// the swizzle's XOR key is (row / 2) % 4, which keeps every chunk in its
// row (row % 8 would move chunks 8-11 to 12-15, past the row).

// CHECK-LABEL: func.func @wide
// STAGED:        workgroup(%[[KS:.+]] : memref<2x32x96xf16, #gpu.address_space<workgroup>>, %{{.+}} : memref<2x32x96xf16, #gpu.address_space<workgroup>>)
// STAGED:        %[[ROW:.+]] = arith.divui %{{.+}}, %c12{{(_[0-9]+)?}} :
// STAGED:        %[[CHUNK:.+]] = arith.remui %{{.+}}, %c12{{(_[0-9]+)?}} :
// STAGED:        %[[PAIR:.+]] = arith.divui %[[ROW]], %c2{{(_[0-9]+)?}} :
// STAGED:        %[[KEY:.+]] = arith.remui %[[PAIR]], %c4{{(_[0-9]+)?}} :
// STAGED-NEXT:   arith.xori %[[CHUNK]], %[[KEY]]
// STAGED:        nvgpu.device_async_copy %{{.+}}, %[[KS]][%c0{{(_[0-9]+)?}}, %[[ROW]], %{{.+}}], 8
// UNSTAGED-NOT:  workgroup(
func.func @wide(%q: memref<64x96xf16>, %k: memref<64x96xf16>, %v: memref<64x96xf16>,
                %o: memref<64x96xf16>)
    attributes {loom.kernel, loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} {
  return
}

// -----

// A forward whose rows' log-sum-exp is a second output (loom-autodiff asks
// for it): after O / l, each quad's first lane stores m + lg2(l) ln(2) of
// its two rows.

// CHECK-LABEL: func.func @with_lse
// CHECK-SAME:    %[[LSE:[^:]+]]: memref<80xf32>
// CHECK:         %[[FLAT:.+]] = memref.collapse_shape %[[LSE]]
// CHECK:           vector.store
// CHECK:           llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
// CHECK:           scf.if
// CHECK:             memref.store %{{.+}}, %[[FLAT]]
// CHECK:             memref.store %{{.+}}, %[[FLAT]]
func.func @with_lse(%q: memref<80x32xf16>, %k: memref<48x32xf16>, %v: memref<48x16xf16>,
                    %o: memref<80x16xf16>, %lse: memref<80xf32>)
    attributes {loom.kernel, loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} {
  return
}

// -----

// The rows' log-sum-exp is f32, one per query row.
// expected-error @+1 {{loom.gpu_attention: the rows' log-sum-exp must be a contiguous f32 buffer of the queries' rows}}
func.func @bad_lse(%q: memref<80x32xf16>, %k: memref<48x32xf16>, %v: memref<48x16xf16>,
                   %o: memref<80x16xf16>, %lse: memref<80xf16>)
    attributes {loom.kernel, loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} {
  return
}

// -----

// The mark must match the arguments: 3 inputs and an output.
// expected-error @+1 {{loom.gpu_attention: the kernel's arguments do not match the mark}}
func.func @missing_output(%q: memref<64x32xbf16>, %k: memref<64x32xbf16>, %v: memref<64x32xbf16>)
    attributes {loom.kernel, loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} {
  return
}

// -----

// Tensors (loom-opt on unbufferized IR): the launches take buffers.
// expected-error @+1 {{loom-build-gpu-attention runs on bufferized kernels, but this kernel takes a tensor (bufferize first)}}
func.func @tensors(%q: tensor<64x32xbf16>, %k: tensor<64x32xbf16>, %v: tensor<64x32xbf16>) -> tensor<64x32xbf16>
    attributes {loom.kernel, loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} {
  return %q : tensor<64x32xbf16>
}

// -----

// 256 features do not fit a warp's registers.
// expected-error @+1 {{loom.gpu_attention: shapes the GPU attention kernel does not run}}
func.func @wide(%q: memref<64x256xbf16>, %k: memref<64x256xbf16>, %v: memref<64x256xbf16>,
                %o: memref<64x256xbf16>)
    attributes {loom.kernel, loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} {
  return
}

// -----

// expected-error @+1 {{loom.gpu_attention: its buffers must be contiguous buffers of one rank and type}}
func.func @mixed(%q: memref<64x32xbf16>, %k: memref<64x32xf16>, %v: memref<64x32xbf16>,
                 %o: memref<64x32xbf16>)
    attributes {loom.kernel, loom.gpu_attention = {inputs = 3 : i64, key = 1 : i64, query = 0 : i64, value = 2 : i64}} {
  return
}

// -----

// The backward (a mark with output, lse and result_grad): two launches.
// The query side (per 16 query rows, 2 x 1 blocks of 4 warps for 2 entries
// of 64 queries) takes dot = rowsum(dO * O) (loads of dO and O, no mma)
// and its rows' log-sum-exp (the forward's), then makes one pass over the
// key blocks: the scores (2 K steps x 8 tiles of mma.sync), p = exp(s -
// lse), dp = dO V^T (2 x 8), ds and dq += ds K (4 x 4), and stores dq and,
// by each quad's first lane, the rows' log-sum-exp and dots into the
// largest f32 scratch buffer, viewed flat (lse is too). The key side (per
// 16 key rows) walks the query blocks from its diagonal: K Q^T and V dO^T
// (2 x 8 each), then dv += p^T dO and dk += ds^T Q (4 x 4 each), reading
// both statistics back from that one buffer (a tile's two columns' at once,
// vector<2xf32>); it stores dk and dv.
// Staged (GRAD, the default), the query side's blocks stage K and V, dq +=
// ds K reading K transposed; the key side's stage Q and dO, dv += p^T dO
// and dk += ds^T Q reading them transposed.

// GRAD-LABEL: func.func @attention_grad_k0
// GRAD-SAME:    %[[Q:[^:]+]]: memref<2x64x32xbf16>, %[[K:[^:]+]]: memref<2x64x32xbf16>, %[[V:[^:]+]]: memref<2x64x32xbf16>, %[[O:[^:]+]]: memref<2x64x32xbf16>, %[[LSE:[^:]+]]: memref<2x64xf32>, %[[DO:[^:]+]]: memref<2x64x32xbf16>,
// GRAD:         gpu.launch {{.+}} workgroup(%[[KS:.+]] : memref<2x64x32xbf16, #gpu.address_space<workgroup>>, %[[VS:.+]] : memref<2x64x32xbf16, #gpu.address_space<workgroup>>)
// The dots from dO and O, the rows' lse, then the one pass streams K and V.
// GRAD:           vector.load %[[DO]]
// GRAD:           vector.load %[[O]]
// GRAD:           memref.load
// GRAD:           nvgpu.device_async_copy %[[K]]{{.+}}, %[[KS]]
// GRAD:           nvgpu.device_async_copy %[[V]]{{.+}}, %[[VS]]
// GRAD:           scf.for
// GRAD:             nvgpu.ldmatrix %[[KS]]{{.+}}transpose = false
// GRAD:             nvgpu.ldmatrix %[[VS]]{{.+}}transpose = false
// GRAD:             nvgpu.ldmatrix %[[KS]]{{.+}}transpose = true
// GRAD:           gpu.terminator
// GRAD:         gpu.launch {{.+}} workgroup(%[[QS:.+]] : memref<2x64x32xbf16, #gpu.address_space<workgroup>>, %[[DOS:.+]] : memref<2x64x32xbf16, #gpu.address_space<workgroup>>)
// GRAD:           nvgpu.device_async_copy %[[Q]]{{.+}}, %[[QS]]
// GRAD:           nvgpu.device_async_copy %[[DO]]{{.+}}, %[[DOS]]
// GRAD:           scf.for
// GRAD:             nvgpu.ldmatrix %[[QS]]{{.+}}transpose = false
// GRAD:             nvgpu.ldmatrix %[[DOS]]{{.+}}transpose = false
// GRAD:             vector.load
// GRAD:             nvgpu.ldmatrix %[[DOS]]{{.+}}transpose = true
// GRAD:             nvgpu.ldmatrix %[[QS]]{{.+}}transpose = true
// GRAD:           gpu.terminator

// CHECK-LABEL: func.func @attention_grad_k0
// CHECK-SAME:    %[[Q:[^:]+]]: memref<2x64x32xbf16>, %[[K:[^:]+]]: memref<2x64x32xbf16>, %[[V:[^:]+]]: memref<2x64x32xbf16>, %[[O:[^:]+]]: memref<2x64x32xbf16>, %[[LSE:[^:]+]]: memref<2x64xf32>, %[[DO:[^:]+]]: memref<2x64x32xbf16>, %[[DQ:[^:]+]]: memref<2x64x32xbf16>, %[[DK:[^:]+]]: memref<2x64x32xbf16>, %[[DV:[^:]+]]: memref<2x64x32xbf16>
// CHECK:         memref.collapse_shape %[[LSE]] {{\[\[}}0, 1]] : memref<2x64xf32> into memref<128xf32>
// CHECK:         gpu.launch
// CHECK:           %[[STATS:.+]] = memref.collapse_shape %{{.+}} {{\[\[}}0, 1, 2]] : memref<2x64x32xf32> into memref<4096xf32>
// CHECK-NOT:         nvvm.mma.sync
// CHECK-COUNT-8:   arith.mulf %{{.+}} : vector<2xf32>
// CHECK-NOT:         nvvm.mma.sync
// CHECK:           %{{.+}}:16 = scf.for
// CHECK-COUNT-16:    nvvm.mma.sync
// CHECK:             llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK-COUNT-32:    nvvm.mma.sync
// CHECK-NOT:         nvvm.mma.sync
// CHECK:             scf.yield
// CHECK:           vector.store %{{.+}}, %[[DQ]]
// CHECK:           scf.if
// CHECK-COUNT-4:     memref.store %{{.+}}, %[[STATS]]
// CHECK:           gpu.terminator
// CHECK:         gpu.launch
// CHECK:           %{{.+}}:32 = scf.for
// CHECK-COUNT-32:    nvvm.mma.sync
// CHECK:             vector.load %[[STATS]]{{.+}} : memref<4096xf32>, vector<2xf32>
// CHECK:             vector.load %[[STATS]]{{.+}} : memref<4096xf32>, vector<2xf32>
// CHECK-COUNT-32:    nvvm.mma.sync
// CHECK-NOT:         nvvm.mma.sync
// CHECK:             scf.yield
// CHECK:           vector.store %{{.+}}, %[[DK]]
// CHECK:           vector.store %{{.+}}, %[[DV]]
// CHECK:           gpu.terminator
func.func @attention_grad_k0(%q: memref<2x64x32xbf16>, %k: memref<2x64x32xbf16>,
                             %v: memref<2x64x32xbf16>, %o: memref<2x64x32xbf16>,
                             %lse: memref<2x64xf32>, %do: memref<2x64x32xbf16>,
                             %dq: memref<2x64x32xbf16>, %dk: memref<2x64x32xbf16>,
                             %dv: memref<2x64x32xbf16>,
                             %s0: memref<2x64xf32> {loom.scratch},
                             %s1: memref<2x64x32xf32> {loom.scratch})
    attributes {loom.kernel, loom.gpu_attention = {causal, inputs = 6 : i64, key = 1 : i64, lse = 4 : i64, output = 3 : i64, query = 0 : i64, result_grad = 5 : i64, scale = 1.250000e-01 : f32, value = 2 : i64}} {
  return
}
