//===- Driver.h - loomc's stages, from script to executable ---------------===//

#ifndef LOOM_DRIVER_DRIVER_H
#define LOOM_DRIVER_DRIVER_H

#include "KernelReport/KernelReport.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <string>

namespace loom {

/// The stages in order; each lowers further than the one before.
enum class Stage {
  AST, Loom, Partitioned, Kernels, Linalg, Tiled, LLVM, GPU, NVVM, PTX, Plan, Executable
};

/// The `--emit=` name of a stage.
llvm::StringRef stageName(Stage stage);

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
  /// Whether executables carry GPU kernels (needs a CUDA toolkit).
  bool embedGpu = false;
  /// Mesh axis sizes replacing the script's ("dp=2,tp=4").
  std::string mesh;
  /// Report every collective the partitioner inserts, as a remark.
  bool remarkCollectives = false;
  /// Sequence parallelism: reduce-scatter/all-gather around the norms.
  bool sequenceParallel = false;
  /// Print the GPU kernel report instead of building an executable.
  std::optional<KernelReportFormat> kernelReport;
  /// The GPU the kernel report models (a row of the GpuSpec table).
  std::string gpuDevice = "h200";
  /// Shared memory one block of a tensor-core matmul may use, in bytes,
  /// within the --gpu-arch's opt-in limit (GpuSpec); 0 for that limit. The
  /// default keeps the pipelines in static shared memory: on an H200 the
  /// 3-stage K-step-32 kernel this gives ran 2% faster than the 96 KiB
  /// K-step-64 one (benchmarks/gpu/NOTES.md).
  int64_t gpuSharedLimit = 48 * 1024;
  /// Run the matmuls a TMA tensor map can read on sm_90a's warpgroup
  /// wgmma (--gpu-mma=wgmma) instead of mma.sync.
  bool warpgroupMma = false;
};

/// Compiles the main buffer of `sourceMgr`. Diagnostics go through the
/// context; printed stages go to `os`.
mlir::LogicalResult runDriver(mlir::MLIRContext &context,
                              llvm::SourceMgr &sourceMgr,
                              const DriverOptions &options, llvm::raw_ostream &os);

} // namespace loom

#endif // LOOM_DRIVER_DRIVER_H
