//===- Executable.h - Links kernels, plan and runtime into one program ----===//

#ifndef LOOM_BACKEND_EXECUTABLE_H
#define LOOM_BACKEND_EXECUTABLE_H

#include "Plan/PlanBuilder.h"

#include "mlir/IR/Location.h"

namespace loom {

/// The C source that gives the runtime its kernel table (`loom_kernels`, the
/// kernels of both plans), the plan text (`loom_plan`) and the per-rank plan
/// (`loom_spmd_plan`, empty without `spmd`), as docs/plan-format.md
/// specifies, and the build's identity (`loom_build_id`: the ranks of a
/// run check that they run the same build).
std::string buildGlueSource(const Plan &plan, const Plan *spmd,
                            llvm::StringRef gpuImage, llvm::StringRef cpuTarget,
                            llvm::StringRef buildId);

/// The runtime libraries an executable links: LOOM_RUNTIME_DIR's, else the
/// build tree's. An error at `loc` where one is missing.
struct RuntimeLibraries {
  std::string main, runtime;
};
mlir::FailureOr<RuntimeLibraries> findRuntimeLibraries(mlir::Location loc);

/// Links the kernels' object files, the glue and the runtime libraries (and
/// MPI's) into the executable `output` with clang. Errors are reported at
/// `loc`.
mlir::LogicalResult linkExecutable(mlir::Location loc, const Plan &plan,
                                   const Plan *spmd, llvm::StringRef gpuImage,
                                   llvm::StringRef cpuTarget,
                                   llvm::ArrayRef<std::string> kernelObjects,
                                   llvm::StringRef output);

} // namespace loom

#endif // LOOM_BACKEND_EXECUTABLE_H
