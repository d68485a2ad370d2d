//===- HostObject.h - LLVM dialect kernels to host object code ------------===//

#ifndef LOOM_BACKEND_HOSTOBJECT_H
#define LOOM_BACKEND_HOSTOBJECT_H

#include "Backend/CpuTarget.h"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>
#include <thread>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace loom {

/// The host object of a module's kernels, made in the background: start
/// translates the module (LLVM dialect) to LLVM IR on the calling thread,
/// then optimizes it at -O3 for `cpu` and writes an ELF object file to
/// `path` on a thread of its own, which touches only LLVM, never the MLIR
/// context. The compiler meanwhile builds the GPU image and the plans;
/// wait joins. Joined by the destructor too.
class HostObjectJob {
public:
  HostObjectJob();
  ~HostObjectJob();
  HostObjectJob(const HostObjectJob &) = delete;
  HostObjectJob &operator=(const HostObjectJob &) = delete;

  mlir::LogicalResult start(mlir::ModuleOp module, llvm::StringRef path,
                            const CpuTarget &cpu);
  bool started() const { return worker.joinable() || done; }
  /// The job's result; its error, if any, reported at `loc`.
  mlir::LogicalResult wait(mlir::Location loc);
  /// Waits for the thread, reporting nothing (a compilation that failed
  /// before linking).
  void join() {
    if (worker.joinable())
      worker.join();
  }

private:
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> machine;
  std::thread worker;
  std::string error; // set by the worker
  bool done = false;
};

/// start, then wait.
mlir::LogicalResult writeHostObject(mlir::ModuleOp module, llvm::StringRef path,
                                    const CpuTarget &cpu);

} // namespace loom

#endif // LOOM_BACKEND_HOSTOBJECT_H
