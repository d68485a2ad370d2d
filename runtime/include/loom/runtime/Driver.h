//===- Driver.h - The main program of compiled executables ------*- C++ -*-===//

#ifndef LOOM_RUNTIME_DRIVER_H
#define LOOM_RUNTIME_DRIVER_H

#include "loom/runtime/KernelABI.h"

#include <cstdint>
#include <cstdio>

namespace loom::runtime {

/// What a compiled executable provides (the symbols of KernelABI.h), and
/// where --device cuda looks for the CUDA driver.
struct Executable {
  const LoomKernel *kernels = nullptr;
  const char *plan = nullptr;
  const unsigned char *gpuImage = nullptr;
  uint64_t gpuImageSize = 0;
  /// The driver library dlopen()ed for --device cuda (tests substitute a
  /// fake one).
  const char *cudaDriver = "libcuda.so.1";
};

/// Everything a compiled executable does: parses the command line,
/// validates `planText` and binds it to `kernels`, then prints --help or
/// --info, or initializes/loads the weights, reads the inputs, runs and
/// writes or summarizes the outputs. Reports to `out`, errors to `err` as
/// "<program>: error: ..."; returns the exit status (0 or 1).
/// LoomRuntimeMain's main() calls it with loom_kernels, loom_plan and
/// loom_gpu_image.
int runMain(int argc, char **argv, const Executable &executable,
            std::FILE *out = stdout, std::FILE *err = stderr);

/// runMain for an executable without a GPU image.
int runMain(int argc, char **argv, const LoomKernel *kernels,
            const char *planText, std::FILE *out = stdout,
            std::FILE *err = stderr);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_H
