//===- KernelCheck.h - Each GPU kernel against its CPU kernel ---*- C++ -*-===//
//
// --check-kernels: the plan runs step by step on both devices, and before
// each step the device gets the CPU's values of the buffers the step reads,
// so that every GPU kernel is checked on exactly its CPU kernel's inputs
// (a difference is the kernel's own, not one carried from earlier steps).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_KERNELCHECK_H
#define LOOM_RUNTIME_EXEC_KERNELCHECK_H

#include "loom/runtime/exec/Cuda.h"
#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/plan/Plan.h"

#include <cstddef>
#include <cstdio>
#include <string>

namespace loom::runtime {

/// What checkKernels found.
struct KernelCheckResult {
  unsigned steps = 0;  // kernel steps checked
  unsigned failed = 0; // of them, with some element beyond tolerance
  /// The first failing step and its kernel's name (when failed > 0).
  size_t firstFailed = 0;
  std::string firstKernel;
};

/// Runs every kernel step of `plan` (one rank, no collectives) on the CPU
/// with `cpu` (bound and allocated, its arena holding the initialized
/// params and the inputs) and on the GPU with `gpu` (open), each from the
/// CPU's values of the buffers it reads, and compares the buffers each step
/// writes (not its scratch buffers; see analyzeStepAccess) by
/// compareTensors. Prints to `out` a header, one row per step (step,
/// kernel, outputs compared, elements, max abs error, max ulp, elements
/// over tolerance, PASS or FAIL), for each failing output a line with its
/// worst element, and a summary. With `dumpDir` (--check-dump), a failing
/// step's buffers go to DIR/step-N-KERNEL/ as .npy files: each buffer's
/// value before the step (AA-NAME.npy, AA its position among the step's
/// buffers), each output's on the CPU and on the GPU (.cpu.npy, .cuda.npy)
/// and, for an attention, its terms' sizes (.terms.npy); 256 MiB in all at
/// most, a line saying what was left out. False when a CUDA call fails or
/// a dump cannot be written; mismatches are reported in `result`.
bool checkKernels(const Plan &plan, Executor &cpu, CudaExecutor &gpu,
                  std::FILE *out, KernelCheckResult &result,
                  std::string &error, const std::string &dumpDir = "");

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_KERNELCHECK_H
