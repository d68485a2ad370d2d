//===- Passes.h - Codegen shared by the CPU and GPU targets ---------------===//

#ifndef LOOM_CODEGEN_COMMON_PASSES_H
#define LOOM_CODEGEN_COMMON_PASSES_H

#include "Loom/IR/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir::loom {

#define GEN_PASS_DECL
#include "Codegen/Common/Passes.h.inc"

/// Replaces `copy` by a parallel loop of loads and stores; fails (with an
/// error) unless both shapes are static.
LogicalResult lowerCopyToLoop(memref::CopyOp copy);

#define GEN_PASS_REGISTRATION
#include "Codegen/Common/Passes.h.inc"

} // namespace mlir::loom

#endif // LOOM_CODEGEN_COMMON_PASSES_H
