//===- Driver.h - The main program of compiled executables ------*- C++ -*-===//

#ifndef LOOM_RUNTIME_DRIVER_H
#define LOOM_RUNTIME_DRIVER_H

#include "loom/runtime/KernelABI.h"

#include <cstdio>

namespace loom::runtime {

/// Everything a compiled executable does: parses the command line,
/// validates `planText` and binds it to `kernels`, then prints --help or
/// --info, or initializes/loads the weights, reads the inputs, runs and
/// writes or summarizes the outputs. Reports to `out`, errors to `err` as
/// "<program>: error: ..."; returns the exit status (0 or 1).
/// LoomRuntimeMain's main() calls it with loom_kernels and loom_plan.
int runMain(int argc, char **argv, const LoomKernel *kernels,
            const char *planText, std::FILE *out = stdout,
            std::FILE *err = stderr);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_DRIVER_H
