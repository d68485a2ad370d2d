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

/// How loomc changes a script as it elaborates it.
struct ElaborationOptions {
  /// Replace the sizes of the named mesh axes (loomc --mesh dp=2,tp=4).
  llvm::StringMap<int64_t> meshSizes;
  /// Replace the values of the named top-level dims (loomc --dim B=1).
  llvm::StringMap<int64_t> dimSizes;
  /// Mark every layer instance for recomputation (loomc --recompute=layers),
  /// as `recompute` marks one.
  bool recomputeLayers = false;
  /// Build a train section's `microbatches m` model for one microbatch
  /// (loomc --train).
  bool trainStep = false;
  /// Replace the train section's microbatches (loomc --microbatches).
  std::optional<int64_t> microbatches;
  /// Explain's sample of a deep model: every loop of more than
  /// `loopLimit` iterations (when nonzero) runs only `loopLimit`;
  /// `loopTripCount` receives their number of iterations (0 when no loop
  /// was cut, -1 when the cut loops' counts differ).
  int64_t loopLimit = 0;
  int64_t *loopTripCount = nullptr;
};

/// Checks the script (names, shapes, dtypes, shardings, stages, MoE and
/// training settings) and builds its `loom` dialect module. Every problem is
/// reported as an error at its script location through the context's
/// diagnostic engine; the result is null when there was any.
mlir::OwningOpRef<mlir::ModuleOp>
mlirGen(mlir::MLIRContext &context, const Module &module,
        const llvm::SourceMgr &sourceMgr,
        const ElaborationOptions &options = {});

} // namespace loom

#endif // LOOM_MLIRGEN_MLIRGEN_H
