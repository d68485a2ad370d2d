//===- Passes.h - Codegen for the CPU: tiles for caches and vectors -------===//

#ifndef LOOM_CODEGEN_CPU_PASSES_H
#define LOOM_CODEGEN_CPU_PASSES_H

#include "Loom/IR/LoomDialect.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::loom {

#define GEN_PASS_DECL
#include "Codegen/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Codegen/CPU/Passes.h.inc"

} // namespace mlir::loom

#endif // LOOM_CODEGEN_CPU_PASSES_H
