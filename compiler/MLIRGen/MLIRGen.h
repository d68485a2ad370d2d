//===- MLIRGen.h - Elaborates a Loom script into the loom dialect --------===//

#ifndef LOOM_MLIRGEN_MLIRGEN_H
#define LOOM_MLIRGEN_MLIRGEN_H

#include "Frontend/AST.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

namespace loom {

/// The MLIR location of a point in a script buffer of `sourceMgr`.
mlir::Location toLocation(mlir::MLIRContext &context,
                          const llvm::SourceMgr &sourceMgr, llvm::SMLoc loc);

/// Checks the script (names, shapes, dtypes, shardings, stages, MoE and
/// training settings) and builds its `loom` dialect module. Every problem is
/// reported as an error at its script location through the context's
/// diagnostic engine; the result is null when there was any. `meshSizes`
/// replaces the sizes of the named mesh axes (loomc --mesh dp=2,tp=4);
/// `recomputeLayers` marks every layer instance for recomputation
/// (loomc --recompute=layers), as `recompute` marks one. With
/// `trainStep` (loomc --train) a train section's `microbatches m` builds
/// the model for one microbatch.
mlir::OwningOpRef<mlir::ModuleOp>
mlirGen(mlir::MLIRContext &context, const Module &module,
        const llvm::SourceMgr &sourceMgr,
        const llvm::StringMap<int64_t> &meshSizes = {},
        bool recomputeLayers = false, bool trainStep = false);

} // namespace loom

#endif // LOOM_MLIRGEN_MLIRGEN_H
