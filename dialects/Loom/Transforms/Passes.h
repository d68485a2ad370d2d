//===- Passes.h - Loom's transformations on the loom dialect --------------===//

#ifndef LOOM_TRANSFORMS_PASSES_H
#define LOOM_TRANSFORMS_PASSES_H

#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::loom {

#define GEN_PASS_DECL
#include "Loom/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Loom/Transforms/Passes.h.inc"

} // namespace mlir::loom

#endif // LOOM_TRANSFORMS_PASSES_H
