//===- GpuLaunches.h - The GPU launches each kernel makes, for the plan ---===//

#ifndef LOOM_PLAN_GPULAUNCHES_H
#define LOOM_PLAN_GPULAUNCHES_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <string>
#include <vector>

namespace loom {

/// One `launch` record of the plan: a GPU function, its grid and block, its
/// arguments as plan text (`b:I` = the kernel's I-th buffer, `i64:V`,
/// `i32:V`, `f32:V` immediates), and its dynamic shared memory in bytes
/// (written as a last `shared:BYTES` token when positive).
struct GpuLaunch {
  std::string function;
  std::array<int64_t, 3> grid, block;
  std::vector<std::string> args;
  int64_t sharedBytes = 0;
};

/// Reads the launches of every host kernel function of `module` (the gpu
/// stage), in order, then merges its gpu.modules into one named
/// `loom_kernels` whose functions are named after their old modules, which
/// is what the launch records refer to. Reports unsupported launches.
mlir::FailureOr<llvm::StringMap<std::vector<GpuLaunch>>>
collectGpuLaunches(mlir::ModuleOp module);

} // namespace loom

#endif // LOOM_PLAN_GPULAUNCHES_H
