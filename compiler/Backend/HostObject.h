//===- HostObject.h - LLVM dialect kernels to host object code ------------===//

#ifndef LOOM_BACKEND_HOSTOBJECT_H
#define LOOM_BACKEND_HOSTOBJECT_H

#include "mlir/IR/BuiltinOps.h"

namespace loom {

/// Translates `module` (LLVM dialect) to LLVM IR, optimizes it at -O3 for
/// `cpu` ("native": this machine's CPU and features; else an LLVM CPU name
/// such as x86-64-v3) and writes an ELF object file to `path`.
mlir::LogicalResult writeHostObject(mlir::ModuleOp module, llvm::StringRef path,
                                    llvm::StringRef cpu = "native");

} // namespace loom

#endif // LOOM_BACKEND_HOSTOBJECT_H
