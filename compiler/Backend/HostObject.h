//===- HostObject.h - LLVM dialect kernels to host object code ------------===//

#ifndef LOOM_BACKEND_HOSTOBJECT_H
#define LOOM_BACKEND_HOSTOBJECT_H

#include "Backend/CpuTarget.h"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace loom {

/// The host object files of a module's kernels, made in the background:
/// start deals the kernels into parts of about equal size (at most
/// `maxParts`: one per core the caller leaves free), translates each part
/// (LLVM dialect) to LLVM IR in an LLVM context of its own on the calling
/// thread, then optimizes each at -O3 for `cpu` and writes it to a
/// temporary ELF object file on a thread of its own, which touches only
/// its part's LLVM context, never the MLIR one. The compiler meanwhile builds the GPU image and the
/// plans; wait joins. The destructor joins too and removes the files.
class HostObjectJob {
public:
  HostObjectJob();
  ~HostObjectJob();
  HostObjectJob(const HostObjectJob &) = delete;
  HostObjectJob &operator=(const HostObjectJob &) = delete;

  /// At most `maxParts` parts (and 8).
  mlir::LogicalResult start(mlir::ModuleOp module, const CpuTarget &cpu,
                            unsigned maxParts);
  bool started() const { return !parts.empty(); }
  /// The job's result; its error, if any, reported at `loc`.
  mlir::LogicalResult wait(mlir::Location loc);
  /// Waits for the threads, reporting nothing (a compilation that failed
  /// before linking).
  void join();
  /// The object files (after a successful wait), one per part.
  std::vector<std::string> objects() const;

private:
  struct Part {
    std::unique_ptr<llvm::LLVMContext> context;
    std::unique_ptr<llvm::Module> module;
    std::unique_ptr<llvm::TargetMachine> machine;
    std::string path;
    std::thread worker;
    std::string error; // set by the worker
  };
  std::vector<std::unique_ptr<Part>> parts;
};

} // namespace loom

#endif // LOOM_BACKEND_HOSTOBJECT_H
