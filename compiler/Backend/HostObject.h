//===- HostObject.h - LLVM dialect kernels to host object code ------------===//

#ifndef LOOM_BACKEND_HOSTOBJECT_H
#define LOOM_BACKEND_HOSTOBJECT_H

#include "Backend/CpuTarget.h"

#include "mlir/IR/BuiltinOps.h"

namespace loom {

/// Translates `module` (LLVM dialect) to LLVM IR, optimizes it at -O3 for
/// `cpu` (resolveCpuTarget) and writes an ELF object file to `path`.
mlir::LogicalResult writeHostObject(mlir::ModuleOp module, llvm::StringRef path,
                                    const CpuTarget &cpu);

} // namespace loom

#endif // LOOM_BACKEND_HOSTOBJECT_H
