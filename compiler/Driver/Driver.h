//===- Driver.h - loomc's stages, from script to executable ---------------===//

#ifndef LOOM_DRIVER_DRIVER_H
#define LOOM_DRIVER_DRIVER_H

#include "Explain/Explain.h"
#include "KernelReport/KernelReport.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace loom {

/// The stages in order; each lowers further than the one before.
enum class Stage {
  AST, Loom, Schedule, Autodiff, Partitioned, Kernels, Linalg, Tiled, LLVM, GPU, NVVM, PTX, Plan, Executable
};

/// The `--emit=` name of a stage.
llvm::StringRef stageName(Stage stage);

/// Which tensor-core instructions bf16/f16 matmuls use on the GPU.
enum class GpuMma {
  /// wgmma on sm_90a (measured 0.75-0.89 of cuBLAS on an H200 against
  /// mma.sync's 0.45-0.51), mma.sync elsewhere.
  Auto,
  /// Warp-level mma.sync fed by cp.async (sm_80 and later).
  MmaSync,
  /// Warpgroup wgmma fed by TMA, for the matmuls a tensor map can read
  /// (sm_90a only; the others stay on mma.sync).
  Wgmma,
  /// As Wgmma, in persistent warp-specialized kernels (a block per SM over
  /// many tiles, a producer warpgroup issuing TMA, setmaxnreg): 0.80-0.82
  /// (4096^3) and 0.945 (8192^3) of cuBLAS on an H200, not yet the default.
  WgmmaPersistent,
  /// As WgmmaPersistent, the two consumer warpgroups taking 128 x 128 tiles
  /// and the tensor cores by turns (ping-pong); not yet measured on a GPU.
  WgmmaPingpong,
};

/// Which tensor-core instructions the attention kernels use on the GPU.
enum class GpuAttention {
  /// mma.sync everywhere, until the wgmma kernels have been measured.
  Auto,
  /// The warp-level FlashAttention-2 kernels (sm_80 and later).
  MmaSync,
  /// On sm_90a, the forward and each side of the backward on wgmma fed by
  /// TMA where its shapes allow (heads of 64 or 128, rows in blocks of
  /// 128); the other shapes stay on mma.sync.
  Wgmma,
};

/// When loomc says its stages as they start (--progress).
enum class ProgressLines { Never, Long, Always };

struct DriverOptions {
  /// Print this stage (to `output`, or stdout) instead of linking.
  std::optional<Stage> emit;
  /// The executable's path (when not emitting a stage).
  std::string output = "a.out";
  /// Write every stage reached to numbered files in this directory.
  std::string dumpDir;
  /// The model to build when the script has several.
  std::string model;
  /// The NVIDIA architecture of the GPU stages (sm_80, sm_90a, ...).
  std::string gpuArch = "sm_90a";
  /// The CPU the host kernels are compiled for ("native" or an LLVM name).
  std::string cpu = "native";
  /// How bf16 matmuls run on the CPU: "auto" (avx512_bf16 dot products on
  /// AMD Zen, the FMA tiles elsewhere), "dot", "fma", "amx" or
  /// "amx-emulated" (resolveCpuTarget).
  std::string bf16Matmul = "auto";
  /// Whether executables carry GPU kernels (needs a CUDA toolkit).
  bool embedGpu = false;
  /// Mesh axis sizes replacing the script's ("dp=2,tp=4").
  std::string mesh;
  /// Values replacing the script's top-level dims ("B=1,T=128").
  std::string dims;
  /// Report every collective the partitioner inserts, as a remark.
  bool remarkCollectives = false;
  /// Sequence parallelism: reduce-scatter/all-gather around the norms.
  bool sequenceParallel = false;
  /// Attention as one loom.attention, lowered in blocks on the CPU
  /// (loom-fuse-attention); not in builds with GPU kernels, whose stages
  /// have no blocked attention yet, nor for --explain, which models them.
  bool fuseAttention = true;
  /// --schedule: the pipeline schedule instead of the train section's
  /// (gpipe, 1f1b, interleaved, zero_bubble); --schedule-svg: where to draw
  /// its timeline.
  std::string schedule, scheduleSvg;
  /// --recompute=layers: every layer instance's activations are recomputed
  /// in the backward instead of kept.
  bool recomputeLayers = false;
  /// Build the gradient program (loom-autodiff): the model's outputs, its
  /// loss and the gradient of the loss for every param.
  bool gradients = false;
  /// Build a training step (implies `gradients`): the optimizer update
  /// after the backward, run by `./model train`.
  bool train = false;
  /// With `gradients`: the dp gradient sums in buckets of this many MiB.
  double gradBucketMb = 25;
  /// Print the GPU kernel report instead of building an executable.
  std::optional<KernelReportFormat> kernelReport;
  /// The GPU the kernel report models (a row of the GpuSpec table).
  std::string gpuDevice = "h200";
  /// Shared memory one block of a tensor-core matmul may use, in bytes,
  /// within the --gpu-arch's opt-in limit (GpuSpec); 0 for that limit.
  /// Unset: 48 KiB for the mma.sync pipelines, which keeps them in static
  /// shared memory (on an H200 the 3-stage K-step-32 kernel this gives ran
  /// 2% faster than the 96 KiB K-step-64 one, benchmarks/gpu/NOTES.md), and
  /// the architecture's limit where wgmma is used (its stages need it).
  std::optional<int64_t> gpuSharedLimit;
  /// The tensor-core instructions of bf16/f16 matmuls (--gpu-mma).
  GpuMma gpuMma = GpuMma::Auto;
  /// wgmma matmuls write 16-bit results back by TMA stores (--gpu-tma-store).
  bool gpuTmaStore = false;
  /// Persistent wgmma matmuls in clusters sharing B (--gpu-tma-multicast).
  bool gpuTmaMulticast = false;
  /// The tensor-core instructions of the attention kernels (--gpu-attention).
  GpuAttention gpuAttention = GpuAttention::Auto;
  /// --explain: print what the plan needs and costs on --gpu-device
  /// instead of building anything (docs/explain.md).
  std::optional<KernelReportFormat> explain;
  /// Links of the explain cost model; unset bandwidths are the device's.
  std::optional<double> intraNodeGBs, interNodeGBs;
  double intraNodeLatencyUs = 2, interNodeLatencyUs = 5;
  int64_t gpusPerNode = 8;
  /// A plan needing more bytes on some rank is an error; with --explain
  /// the default is the device's memory.
  std::optional<int64_t> memoryLimit;
  /// --zero=1: ZeRO stage 1 whatever the train section says;
  /// --microbatches: the train section's microbatches replaced.
  bool zero = false;
  std::optional<int64_t> microbatches;
  /// --mesh-svg: draw the mesh and each param's split into this file.
  std::string meshSvg;
  /// --explain --search-mesh N: rank the meshes of N devices instead.
  int64_t searchMesh = 0;
  /// --search-mesh's ranking as JSON rather than a table.
  bool searchJson = false;
  /// Set on the trial compilations of a search: keep the report, print
  /// nothing, check no limit; `loopLimit` samples a deep model's loops
  /// (ElaborationOptions).
  bool probe = false;
  /// Whether a plan over --memory-limit looks for a change that fits (off
  /// in the builds that check one: they would search again).
  bool suggestFits = true;
  int64_t loopLimit = 0;
  /// MLIR's per-pass timing (--timing), the IR after one pass
  /// (--print-ir-after=PASS), and every pass's IR into --dump-dir.
  bool timing = false;
  /// Lines on stderr as the stages start (--progress): never, once the
  /// build has run 2 s (a terminal's default), or from the start.
  ProgressLines progress = ProgressLines::Never;
  std::string printIrAfter;
  bool dumpAfterEachPass = false;
};

/// Compiles the main buffer of `sourceMgr`. Diagnostics go through the
/// context; printed stages go to `os`.
mlir::LogicalResult runDriver(mlir::MLIRContext &context,
                              llvm::SourceMgr &sourceMgr,
                              const DriverOptions &options, llvm::raw_ostream &os);

/// Runs a quiet explain compilation of the script with `options` (probe
/// set): its report, or failure when the script does not compile so.
mlir::FailureOr<ExplainReport> probeExplain(mlir::MLIRContext &context,
                                            llvm::SourceMgr &sourceMgr,
                                            DriverOptions options);

/// Flushes `out`, returning the error of any write that failed
/// (cleared, so that LLVM does not abort with "IO failure on output
/// stream" at exit: a full disk is a plain "cannot write" error).
std::error_code flushChecked(llvm::raw_fd_ostream &out);

} // namespace loom

#endif // LOOM_DRIVER_DRIVER_H
