//===- CpuTarget.h - The CPU an executable's kernels were compiled for ----===//
//
// loomc's glue records it (loom_cpu_target): "CPU f32=PATH bf16=PATH
// needs=FEATURE,...". The runtime reports it (--info) and refuses to run
// kernels on a CPU without the features they use, instead of dying of an
// illegal instruction.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_CPUTARGET_H
#define LOOM_RUNTIME_EXEC_CPUTARGET_H

#include <functional>
#include <string>
#include <vector>

namespace loom::runtime {

struct CpuTargetInfo {
  /// The LLVM CPU name the kernels were compiled for (znver5, x86-64-v3).
  std::string cpu;
  /// How matmuls run: avx512-fma, avx2-fma, avx512-bf16-dot, ...
  std::string f32Path, bf16Path;
  /// The vector extensions the kernels use, in the names of GCC's and
  /// clang's __builtin_cpu_supports.
  std::vector<std::string> needs;
};

/// Parses loom_cpu_target; false with `error` set on a malformed record.
bool parseCpuTarget(const std::string &text, CpuTargetInfo &info, std::string &error);

/// Whether this CPU has `feature` (one of the names of CpuFeatures.def,
/// the list loomc records from and parseCpuTarget accepts in needs=).
bool hostHasCpuFeature(const std::string &feature);

/// Asks Linux for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM), once
/// per process before the first tile instruction; false with `error` set
/// when it refuses.
bool enableAmxTiles(std::string &error);

/// The features of `info.needs` that `has` says are missing.
std::vector<std::string> missingCpuFeatures(const CpuTargetInfo &info,
                                            const std::function<bool(const std::string &)> &has);

/// "this executable's kernels were compiled for CPU 'znver5' and use
/// avx512bf16, which this CPU does not have (...)", or empty when none is
/// missing.
std::string cpuMismatchMessage(const CpuTargetInfo &info,
                               const std::vector<std::string> &missing);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_CPUTARGET_H
