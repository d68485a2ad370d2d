//===- KernelReport.h - loomc --kernel-report: what GPU launches cost -----===//

#ifndef LOOM_KERNELREPORT_KERNELREPORT_H
#define LOOM_KERNELREPORT_KERNELREPORT_H

#include "GpuSpec/GpuSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <string>
#include <vector>

namespace loom {

enum class KernelReportFormat { Text, Json };

/// A program the report covers: a model (1 rank) or its per-rank program,
/// with the kernels it calls, in order.
struct ReportedProgram {
  std::string name;
  int64_t ranks = 1;
  std::vector<std::string> kernels;
};

/// Collects, while the GPU stages run, each launch's grid, block, shared
/// memory, registers and spills (ptxas -v), FLOPs and bytes (from the
/// linalg ops it runs) and tensor-core use (from its PTX), and prints them
/// with the occupancy and roofline time on one GPU (docs/gpu-report.md).
class KernelReport {
public:
  /// `archName` is --gpu-arch (for ptxas), `arch` its row; `ptxas` may be
  /// empty (registers and spills are then unavailable).
  KernelReport(const ArchSpec &arch, std::string archName,
               const DeviceSpec &device, std::string ptxas)
      : arch(arch), archName(std::move(archName)), device(device),
        ptxas(std::move(ptxas)) {}

  /// Before the gpu pipeline: counts the FLOPs and bytes of every linalg op
  /// and copy of the bufferized kernels, and tags its location so that the
  /// launches made from it can be found.
  void countWork(mlir::ModuleOp kernels);

  /// After the gpu pipeline (before its gpu.modules are merged): each
  /// kernel's launches, the work they run and their workgroup memory.
  void readLaunches(mlir::ModuleOp gpu);

  /// The PTX of every launch: tensor-core instructions per function and,
  /// with ptxas, its registers, spills and shared memory. Fails when ptxas
  /// fails.
  mlir::LogicalResult readPtx(llvm::StringRef ptx, mlir::Location loc);

  void print(llvm::raw_ostream &os, KernelReportFormat format,
             llvm::ArrayRef<ReportedProgram> programs) const;

  /// What one linalg op, copy or attention kernel does, counted before GPU
  /// lowering.
  struct Work {
    int64_t flops = 0;
    /// The FLOPs of a contraction (what tensor cores can run), and the
    /// dense tensor-core peak for its operand type (0 when none).
    int64_t contractionFlops = 0;
    double tensorTflops = 0;
    int64_t bytes = 0;
    /// Work that a kernel splits over launches in order (the attention
    /// backward's query side, then its key side): each launch's share.
    /// Empty: the first launch that runs the op does all of it.
    std::vector<Work> launchParts;
  };

private:
  struct Launch {
    std::string function;
    std::array<int64_t, 3> grid{}, block{};
    /// Blocks a cluster (x, y, z) of a cluster launch; zeros otherwise.
    std::array<int64_t, 3> cluster{};
    /// What the launch runs: indices into `work` (each op's work goes to
    /// the first launch of its kernel that runs it), with the part of its
    /// launchParts the launch does (-1: all of it).
    std::vector<std::pair<unsigned, int>> work;
    /// Workgroup memory of the gpu.func, and the sizes of the buffers it
    /// takes (the bytes of a launch no linalg op is found for).
    int64_t sharedBytes = 0;
    int64_t bufferBytes = 0;
    /// Dynamic shared memory the launch passes (ptxas does not see it).
    int64_t dynamicSharedBytes = 0;
  };
  /// What ptxas -v and the PTX say about one GPU function.
  struct Function {
    bool tensorCores = false;
    bool assembled = false; // registers, spills, shared memory from ptxas
    int registers = 0;
    int64_t spillStores = 0, spillLoads = 0, sharedBytes = 0;
  };
  /// A launch with everything derived from it.
  struct Row;
  Row evaluate(const Launch &launch) const;

  const ArchSpec &arch;
  std::string archName;
  const DeviceSpec &device;
  std::string ptxas;
  std::vector<Work> work;
  llvm::StringMap<std::vector<Launch>> launches; // per kernel
  llvm::StringMap<Function> functions;           // per GPU function
};

} // namespace loom

#endif // LOOM_KERNELREPORT_KERNELREPORT_H
