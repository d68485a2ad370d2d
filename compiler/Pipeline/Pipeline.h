//===- Pipeline.h - Loom's compilation stages as pass pipelines -----------===//

#ifndef LOOM_PIPELINE_PIPELINE_H
#define LOOM_PIPELINE_PIPELINE_H

#include "Backend/CpuTarget.h"

#include "mlir/Pass/PassManager.h"

#include <string>

namespace loom {

/// Which attention loom-fuse-attention forms: none, any (CPU builds), or
/// only what the GPU attention kernels run (GPU builds, whose CPU kernels
/// are the same plan's).
enum class AttentionFusion { None, Any, GpuKernel };

/// How the per-rank programs are made (loomc --remarks=collectives,
/// --sequence-parallel).
struct PartitionOptions {
  bool remarks = false;
  bool sequenceParallel = false;
  /// The data-parallel gradient sums in buckets of this many MiB
  /// (loomc --grad-bucket-mb); 0 leaves one all-reduce per gradient.
  double gradBucketMb = 0;
  /// loomc --schedule: a pipelined model's schedule instead of its train
  /// section's.
  std::string schedule;
  /// loom-fuse-attention first (a forward-only build; a trained one fused
  /// in the autodiff pipeline).
  AttentionFusion fuseAttention = AttentionFusion::None;
};

/// loom -> autodiff: stages inlined, and each trained model's loss
/// differentiated: its results gain `grad.<param>` for every param. With
/// `train`, the gradients then feed the optimizer's update (a training
/// step: `next.<param>` results), in update buckets of `updateBucketMb`
/// MiB of params, one kernel each.
void buildAutodiffPipeline(mlir::OpPassManager &pm, bool train,
                           double updateBucketMb = 25,
                           AttentionFusion fuseAttention = AttentionFusion::None);

/// loom (or autodiff) -> partitioned: stages inlined, and next to each model `@M` its
/// per-rank program `@M_spmd` with explicit `shard` collectives (when the
/// mesh has more than one device).
void buildPartitionPipeline(mlir::OpPassManager &pm,
                            const PartitionOptions &options);

/// partitioned -> kernels: shardings dropped from the single-rank program,
/// and every model function a sequence of calls to outlined kernels (and
/// collectives, in a per-rank program).
void buildKernelsPipeline(mlir::OpPassManager &pm);

/// kernels -> linalg: every kernel on linalg/tensor/arith/math, with
/// elementwise producers fused into their consumers; norm gradients in
/// blocks of rows of `normRowBlockBytes` (0: unblocked).
void buildLinalgPipeline(mlir::OpPassManager &pm, bool bf16Operands = false,
                         bool inPlaceUpdates = false, int64_t normRowBlockBytes = 0);

/// linalg -> buffers: kernels on memrefs, results turned into
/// out-parameters and temporaries into trailing scratch arguments, so a
/// kernel's arguments are (inputs, outputs, scratch), all plan buffers.
void buildBufferizePipeline(mlir::OpPassManager &pm);

/// buffers -> tiled (CPU): matmuls in cache tiles of vectorized register
/// tiles sized for `vectorBits`-wide registers (outer products), bf16 ones
/// on the `bf16` path; other kernels unchanged.
void buildCpuTilingPipeline(mlir::OpPassManager &pm, unsigned vectorBits,
                            Bf16MatmulPath bf16);

/// tiled -> llvm (CPU): loops and the LLVM dialect with bare-pointer
/// kernel signatures (one `ptr` per buffer, see docs/plan-format.md).
void buildCpuLoweringPipeline(mlir::OpPassManager &pm);

/// The NVIDIA target of the GPU stages.
struct GpuTarget {
  std::string chip = "sm_90a";     // --gpu-arch
  std::string features = "+ptx80"; // PTX ISA 8.0: sm_80 and sm_90a both need it
  std::string toolkitPath;         // CUDA toolkit (libdevice, ptxas); may be empty
};

/// What the GPU kernel stages build for: the target GPU and which kernels
/// its matmuls and attention run on.
struct GpuKernelsOptions {
  /// bf16/f16 matmuls on mma.sync tensor cores (sm_80 and later), in tiles
  /// sized for a GPU of `multiprocessors` SMs.
  bool tensorCores = false;
  int64_t multiprocessors = 132;
  /// The tensor-core pipelines' shared memory: the spec table's opt-in
  /// block limit (or less), SM size and per-block reservation.
  int64_t sharedPerBlock = 48 * 1024, sharedPerSM = 228 * 1024,
          reservedSharedPerBlock = 1024;
  /// sm_90a: matmuls a TMA tensor map can read on wgmma instead of
  /// mma.sync; in persistent warp-specialized kernels (in clusters of two
  /// sharing B by TMA multicast); their 16-bit results written back by TMA
  /// stores.
  bool warpgroupMma = false, persistentWarpgroupMma = false,
       tmaMulticast = false, tmaStoreEpilogue = false;
  /// sm_90a: the persistent kernels' consumer warpgroups take tiles and the
  /// tensor cores by turns (ping-pong).
  bool pingpongWarpgroupMma = false;
  /// Bytes of dynamic shared memory a block of the wgmma attention kernels
  /// may use (0: none, the attention stays on mma.sync; sm_90a).
  int64_t warpgroupAttentionShared = 0;
  /// Bytes of shared memory the mma.sync attention kernels may stage their
  /// operands in (--gpu-shared-limit; they take at most the 48 KiB of static
  /// shared memory). Below a launch's two stages it stages nothing and
  /// reads its operands from global memory.
  int64_t attentionStagingShared = 48 * 1024;
};

/// buffers -> gpu: matmuls as shared-memory tiled launches (on tensor cores
/// as `options` says), every other linalg op as parallel loops mapped to
/// blocks and threads, kernels outlined into a gpu.module; the host
/// functions keep the launches.
void buildGpuKernelsPipeline(mlir::OpPassManager &pm,
                             const GpuKernelsOptions &options);

/// gpu -> nvvm: the gpu.module's kernels in the NVVM/LLVM dialects, with
/// the target attached (bare pointers for memref arguments).
void buildNvvmPipeline(mlir::OpPassManager &pm, const GpuTarget &target);

/// nvvm -> binary: PTX text (`isa`) or a cubin (`bin`, runs ptxas).
void buildGpuBinaryPipeline(mlir::OpPassManager &pm, const GpuTarget &target,
                            llvm::StringRef format);

/// Registers the dialects every stage needs.
void registerLoomCompilerDialects(mlir::DialectRegistry &registry);

} // namespace loom

#endif // LOOM_PIPELINE_PIPELINE_H
