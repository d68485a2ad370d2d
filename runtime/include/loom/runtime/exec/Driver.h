//===- Driver.h - The main program of compiled executables ------*- C++ -*-===//

#ifndef LOOM_RUNTIME_EXEC_DRIVER_H
#define LOOM_RUNTIME_EXEC_DRIVER_H

#include "loom/runtime/plan/KernelABI.h"

#include <cstdint>
#include <cstdio>

namespace loom::runtime {

class Communicator;

/// What a compiled executable provides (the symbols of KernelABI.h), where
/// --device cuda looks for the CUDA driver and NCCL, and the ranks it runs
/// on.
struct Executable {
  const LoomKernel *kernels = nullptr;
  const char *plan = nullptr;
  /// The partitioned plan (loom_spmd_plan); null or empty when the model is
  /// not partitioned.
  const char *spmdPlan = nullptr;
  /// What loomc compiled the CPU kernels for (loom_cpu_target,
  /// exec/CpuTarget.h); null from a loomc that did not record it.
  const char *cpuTarget = nullptr;
  /// The build's identity (loom_build_id); null or empty from a loomc that
  /// did not record it (the ranks then compare the plans alone).
  const char *buildId = nullptr;
  const unsigned char *gpuImage = nullptr;
  uint64_t gpuImageSize = 0;
  /// The driver library dlopen()ed for --device cuda (tests substitute a
  /// fake one).
  const char *cudaDriver = "libcuda.so.1";
  /// The NCCL library dlopen()ed for --device cuda on several ranks (tests
  /// substitute a fake one).
  const char *ncclLibrary = "libnccl.so.2";
  /// The ranks of this run. Null: runMain looks for an MPI launcher in the
  /// environment and, under one, initializes MPI and runs as its rank
  /// (tests substitute one rank of an in-process LocalWorld).
  Communicator *communicator = nullptr;
};

/// Everything a compiled executable does: parses the command line,
/// validates the plans and binds them to `kernels`, chooses the plan for
/// the number of ranks (loom_plan on one rank, loom_spmd_plan on as many
/// as its mesh has), then prints --help or --info, or initializes/loads
/// the weights, reads the inputs, runs and writes or summarizes the
/// outputs. Reports to `out`, errors to `err` as "<program>: error: ...";
/// returns the exit status (0 or 1, the same on every rank).
/// LoomRuntimeMain's main() calls it with loom_kernels, loom_plan,
/// loom_spmd_plan and loom_gpu_image.
int runMain(int argc, char **argv, const Executable &executable,
            std::FILE *out = stdout, std::FILE *err = stderr);

/// runMain for an executable without a GPU image.
int runMain(int argc, char **argv, const LoomKernel *kernels,
            const char *planText, std::FILE *out = stdout,
            std::FILE *err = stderr);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_DRIVER_H
