//===- Passes.td - Codegen for the GPU: launches and tensor cores ---------===//

#ifndef LOOM_CODEGEN_GPU_PASSES_TD
#define LOOM_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomBuildGpuAttention : Pass<"loom-build-gpu-attention", "mlir::func::FuncOp"> {
  let summary = "A kernel marked loom.gpu_attention as FlashAttention launches";
  let description = [{
    Replaces the body of a kernel the attention lowering marked
    `loom.gpu_attention` (one `loom.attention` or `loom.attention_grad`,
    lowered for the CPU and bufferized) by `gpu.launch`es
    (AttentionKernel.cpp). The forward is one: per batch entry
    and 64 queries a block of 4 warps, each warp 16 query rows held as
    `mma.sync.m16n8k16` fragments; per block of keys the scores `Q K^T` on
    tensor cores, rounded and scaled as the op rounds them, the causal
    mask, an online softmax (row maxima over a lane quad by xor shuffles,
    the sums and outputs rescaled when a maximum grows) and `P V` on
    tensor cores, P taken from the score accumulators; at the end `O / l`
    rounded to the output (and, where the op has that result, each row's
    log-sum-exp). Causal warps stop at their diagonal. The backward is
    two: per 16 query rows the softmax gradient's row sums `rowsum(dO *
    O)` and dq (one pass over the keys, p from the forward's log-sum-exp),
    then per 16 key rows dk and dv (one pass over the queries, the
    log-sum-exp and row sums read back from the largest f32 scratch
    argument). Otherwise only the
    operand and result buffers are read. The forward's probabilities are
    rounded before their normalization (FlashAttention's online form), so
    results agree with the CPU's within the operand type's rounding.

    With `stage-operands` (the default), each launch stages the blocks of
    its column operands in shared memory where the shapes allow (whole
    blocks of 64 rows, 16-byte aligned rows): K and V in the forward and
    the backward's query side, Q and dO on its key side; `cp.async` copies
    by the whole block, double-buffered, read with `ldmatrix` (`.trans`
    where the operand's rows are the product's k); the block's warps then
    walk the column blocks together.

    With `warpgroup-mma` (sm_90a), each launch whose shapes allow it (bf16
    or f16, heads of 64 or 128, its rows in blocks of 128, operands a TMA
    tensor map can read) runs on wgmma instead (AttentionWarpgroup.cpp), in
    the manner of FlashAttention-3: blocks of three warpgroups per 128
    rows; a producer warpgroup copies the resident operands (Q in the
    forward) once and each column block (K and V) into a ring of stages in
    128-byte-swizzled shared memory by the TMA unit (mbarriers); two
    consumer warpgroups form the scores by wgmma from shared memory, the
    same online softmax, and `O += P V` by wgmma with P in registers. The
    backward's two launches alike (dq, dk and dv with ds and p in
    registers).
  }];
  let options = [
    Option<"stageOperands", "stage-operands", "bool", "true",
           "Stage the column operands' blocks (K and V; Q and dO on the "
           "backward's key side) in shared memory (cp.async, ldmatrix) "
           "where the shapes allow">,
    Option<"warpgroupMma", "warpgroup-mma", "bool", "false",
           "sm_90a: the launches on wgmma fed by TMA where their shapes "
           "allow (AttentionWarpgroup.cpp)">,
    Option<"sharedPerBlock", "shared-per-block", "int64_t", "232448",
           "Dynamic shared memory a block of the wgmma launches may use">,
    Option<"stagingShared", "staging-shared", "int64_t", "49152",
           "Shared memory the mma.sync launches may stage their operands in "
           "(at most 48 KiB, static; below a launch's two stages, none)">
  ];
  let dependentDialects = [
    "mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect", "mlir::LLVM::LLVMDialect",
    "mlir::vector::VectorDialect", "mlir::math::MathDialect",
    "mlir::scf::SCFDialect", "mlir::memref::MemRefDialect",
    "mlir::nvgpu::NVGPUDialect"
  ];
}

def LoomTileMatmulsForGpu : Pass<"loom-tile-matmuls-for-gpu", "mlir::func::FuncOp"> {
  let summary = "Matmul-like linalg ops as tiled gpu.launch kernels";
  let description = [{
    Rewrites every bufferized contraction (`linalg.generic` whose last loop
    is the only reduction, over (batch..., m, n, k)) into a `gpu.launch`:
    one block per `tile x tile` output tile (and per batch index), one
    thread per output element. The block walks K in steps of `tile`: its
    threads stage the A and B tiles in workgroup (shared) memory, wait at a
    `gpu.barrier`, accumulate from shared memory with the op's own body,
    and wait again before the next step. Loads outside the operands are
    skipped, so any size works. Other linalg ops are left for the generic
    parallel-loop mapping.

    With `tensor-cores` (sm_80 and later), contractions of bf16 or f16
    operands into an f32 accumulator run on tensor cores instead: blocks of
    4 or 8 warps per 64 x 64, 128 x 64 or 128 x 128 output tile (the largest
    that still gives each of `multiprocessors` SMs a block, with at most a
    quarter of padding), each warp a 32 x 32 or 64 x 32 part as 16 x 8
    `mma.sync.m16n8k16` (NVVM `nvvm.mma.sync`) with f32 accumulators in
    registers. Operands whose rows are 16-byte aligned are staged by
    `cp.async` (`nvgpu.device_async_copy`) in K steps of 32 or 64 into as
    many swizzled shared-memory stages as `shared-per-block` and
    `shared-per-sm` allow (at most 4; beyond 48 KiB in dynamic shared
    memory), read with `nvgpu.ldmatrix` (TensorCorePipeline.cpp); others
    element by element in K steps of 32 (TensorCoreMatmul.cpp). The fill
    before and the elementwise op after a matmul are fused into its launch
    (TensorCoreFusion.cpp). Both zero-fill outside the operands, so any
    shape works.

    With `warpgroup-mma` (sm_90a), matmuls whose operands a tensor map can
    describe (plain loop-dim indices, batch dims first, A K-contiguous, B
    K- or N-contiguous, 16-byte aligned rows) run on two warpgroups per
    128 x 256 or 128 x 128 block tile instead: `wgmma.mma_async.m64nNk16`
    reading shared memory that TMA copies (`nvgpu.tma.async.load`,
    mbarrier-counted) fill, in as many stages as the blocks an SM should
    hold allow (TensorCoreWarpgroup.cpp). Their tensor maps are
    `nvgpu.tma.create.descriptor` ops before the launch.

    With `persistent` as well, such a matmul is one persistent,
    warp-specialized kernel: a block per SM (at most one per tile) loops
    over the output tiles; its third warpgroup (`setmaxnreg` down to 40
    registers) issues the TMA loads into a ring of stages (full and empty
    mbarriers per stage), running ahead across tile boundaries, while the
    two consumer warpgroups (`setmaxnreg` up to 232) multiply and write
    back, so one tile's epilogue overlaps the next tile's loads.

    With `tma-store`, a wgmma kernel whose result is 16-bit and laid out
    as C (TmaStoreEpilogue.h) writes each warpgroup's rows into 64 x 64
    boxes of shared memory in the 128-byte swizzle and stores them with
    `nvgpu.tma.async.store`: in the one-block-a-tile kernel through the
    stages' memory once the K loop is done, in the persistent one through
    two boxes a consumer warpgroup after the stages, alternating, so the
    next tile's K loop starts while the TMA unit writes.

    With `pingpong`, the persistent kernel's two consumer warpgroups take
    the block's tiles by turns, each a whole 128 x 128 tile, and the tensor
    cores by turns too (named barriers 3 and 4): one warpgroup's write-back
    runs under the other's wgmmas (CUTLASS's ping-pong).

    With `multicast` (and `persistent`, not `pingpong`), where the tiles pair up (an even
    number of 128-row tiles along M), blocks 2c and 2c + 1 form a cluster
    (`gpu.launch clusters`, PTX `.reqnctapercluster 2, 1, 1`) whose tiles
    (m, n) and (m + 1, n) share B's columns: each producer copies its A and
    half of B's tile, the latter multicast into both blocks' stage; each
    stage's `empty` barrier counts both blocks' consumer warpgroups.
  }];
  let options = [
    Option<"tile", "tile", "int64_t", "16", "Output tile edge and K step">,
    Option<"tensorCores", "tensor-cores", "bool", "false",
           "Run bf16/f16 contractions with f32 accumulation on mma.sync">,
    Option<"multiprocessors", "multiprocessors", "int64_t", "132",
           "SMs of the target GPU, for the tensor-core tile choice">,
    Option<"sharedPerBlock", "shared-per-block", "int64_t", "49152",
           "Shared memory bytes one block may use (above 48 KiB as dynamic "
           "shared memory), for the tensor-core pipeline stages">,
    Option<"sharedPerSM", "shared-per-sm", "int64_t", "233472",
           "Shared memory bytes of one SM, for the tensor-core pipeline stages">,
    Option<"reservedSharedPerBlock", "reserved-shared-per-block", "int64_t",
           "1024", "Shared memory bytes the driver reserves per block">,
    Option<"warpgroupMma", "warpgroup-mma", "bool", "false",
           "On sm_90a: run 2-D tensor-core matmuls as wgmma fed by TMA "
           "(needs tensor maps from the runtime)">,
    Option<"persistentWarpgroupMma", "persistent", "bool", "false",
           "With warpgroup-mma: persistent warp-specialized kernels (a "
           "block per SM over many tiles; a producer warpgroup issues the "
           "TMA loads, setmaxnreg gives its registers to the two consumer "
           "warpgroups)">,
    Option<"pingpongWarpgroupMma", "pingpong", "bool", "false",
           "With warpgroup-mma: persistent kernels whose two consumer "
           "warpgroups take 128 x 128 tiles and the tensor cores by turns "
           "(CUTLASS's ping-pong), one's write-back under the other's "
           "wgmmas">,
    Option<"tmaStoreEpilogue", "tma-store", "bool", "false",
           "With warpgroup-mma: write 16-bit results back through shared "
           "memory by TMA stores (64 x 64 boxes, 128-byte swizzled) instead "
           "of each thread's global stores">,
    Option<"tmaMulticast", "multicast", "bool", "false",
           "With persistent: clusters of two blocks whose tiles share B's "
           "columns, each copying half of B's tile into both by TMA "
           "multicast">
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect",
                           "mlir::NVVM::NVVMDialect", "mlir::LLVM::LLVMDialect",
                           "mlir::nvgpu::NVGPUDialect", "mlir::vector::VectorDialect"];
}

def LoomFuseUpdateLoops : Pass<"loom-fuse-update-loops", "mlir::func::FuncOp"> {
  let summary = "A bucket's optimizer update as one parallel loop";
  let description = [{
    In a kernel that holds an update bucket's optimizer update
    (`loom.update_kernel`, from loom-optimizer-step and
    loom-outline-kernels), whose parallel loops are elementwise (each
    store at the loop's own indices; loads there or at indices the loop
    does not change, of buffers the loop does not store): adjacent loops of
    the same shape (a param's new state and value) fuse into one, and each
    run of such groups (about one per param, with only effect-free ops
    between them, none reading or writing what another writes) becomes one
    flat loop over the sum of their iterations, iteration `t` running
    group `k`'s element `t - offset_k` through an `scf.index_switch`. The
    bucket is then one launch of loom-map-loops-to-gpu, as multi-tensor
    Adam is, or several when its buffers and scalars would overflow a
    launch's 4352 bytes of parameters (at most 480 a launch).

    Copy kernels (only views, constants and copies of static 1-D buffers: a
    gradient bucket's packing and unpacking) get the same: each copy
    becomes an elementwise loop (a pack first writes its pieces straight
    into its output, instead of into a scratch buffer copied there at the
    end), and the copies into disjoint static pieces of one buffer flatten
    into one loop. Other kernels are left alone.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

def LoomMapLoopsToGpu : Pass<"loom-map-loops-to-gpu", "mlir::func::FuncOp"> {
  let summary = "Run a bufferized kernel's loops as gpu.launch kernels";
  let description = [{
    Every top-level `scf.parallel` (and `memref.copy`, first turned into
    one) becomes a `gpu.launch` with one thread per iteration: the
    iteration space is flattened, blocks of `block-size` threads cover it
    and each thread recovers its indices by delinearization, so loops of any
    rank map the same way. Where every load and store of the body either
    moves with the innermost loop contiguously from a 16-byte aligned start
    (checked on the memref's layout; plan buffers are 64-byte aligned) or
    not at all, and the innermost trip count allows, a thread runs 16
    bytes' worth of consecutive iterations (8 for bf16, 4 for f32) in
    lockstep: one `vector.load`/`vector.store` per access, the scalar body
    repeated per lane.

    A row reduction (a parallel loop over rows around a sequential loop
    that combines values into one accumulator element with `addf`,
    `maximumf` or `maxnumf`) runs one warp per row, the lanes striding over
    the row and combining their partials with `gpu.shuffle xor`. A run of
    consecutive loops over the same rows around a row reduction (fills and
    scalar steps per row, row reductions, elementwise loops along the row:
    a softmax, a layernorm) becomes one launch of a block per row instead,
    when every buffer the run writes is only accessed at the step's own
    row: the steps run in order separated by `gpu.barrier`, a reduction
    combines the block's warps through a workgroup slot per warp, every
    thread holds each reduction's result (later steps use it instead of
    loading it), and with at most 8 16-byte chunks per thread, the row's
    values loaded from buffers the run does not write stay in registers
    across steps.

    Top-level sequential nests are reductions (GpuSequentialNests.cpp). A
    reduction over an outer axis (`for b { parallel (i, j) { acc[i, j] +=
    x[b, i, j] } }`) is interchanged into a parallel loop around the
    sequential one when each parallel iteration only touches its own
    elements of what it writes, and runs one thread per element (or, for
    few outputs of many terms, one per output and chunk of its terms, each
    folding its partial sum into the output atomically). A full
    reduction to one element (a perfect nest accumulating into an element
    no loop moves) runs grid-strided: each thread combines its share of
    the flattened iterations, each warp its partials by shuffles, and lane
    0 folds the warp's into the accumulator atomically. What remains
    touching memory (init stores, scalar steps) runs in a one-thread
    launch. Views, constants and index arithmetic the kernels use are sunk
    into them, so only whole plan buffers cross to the device.
  }];
  let options = [Option<"blockSize", "block-size", "int64_t", "256",
                        "Threads per block">];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect",
                           "mlir::vector::VectorDialect"];
}

def LoomGpuOccupancyHints : Pass<"loom-gpu-occupancy-hints", "mlir::ModuleOp"> {
  let summary = "Ask ptxas to keep as many blocks resident as shared memory allows";
  let description = [{
    A launch that passes dynamic shared memory (the pipelined tensor-core
    matmuls, sized in loom-tile-matmuls-for-gpu for a number of resident
    blocks per SM) gets `nvvm.minctasm` on its kernel: the blocks that
    `shared-per-sm` holds at that size plus what the driver reserves per
    block (`reserved-shared-per-block`, from the spec table).
    ptxas then keeps the registers low enough for those blocks (PTX
    `.minnctapersm`); without the hint it may spend them on one block.
    Runs after gpu-kernel-outlining.
  }];
  let options = [Option<"sharedPerSM", "shared-per-sm", "int64_t", "233472",
                        "Shared memory bytes of one SM">,
                 Option<"reservedSharedPerBlock", "reserved-shared-per-block",
                        "int64_t", "1024",
                        "Shared memory bytes the driver reserves per block">];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect"];
}

def LoomTensorMapParams : Pass<"loom-tensor-map-params", "mlir::gpu::GPUModuleOp"> {
  let summary = "Kernels take their TMA tensor maps as pointers";
  let description = [{
    A kernel parameter of type `!nvgpu.tensormap.descriptor` (a wgmma
    matmul's operand, loom-tile-matmuls-for-gpu) becomes an `!llvm.ptr`,
    cast back to the descriptor type at the kernel's entry: the runtime
    passes the address of the 128-byte CUtensorMap it encoded in device
    memory (the plan's `tmap:` argument), which is what
    `convert-nvgpu-to-nvvm` lowers a descriptor to, and `convert-gpu-to-nvvm`
    cannot convert a descriptor-typed signature. Runs on the device code
    only, once the host code that launches the kernels is gone.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // LOOM_CODEGEN_GPU_PASSES_TD
