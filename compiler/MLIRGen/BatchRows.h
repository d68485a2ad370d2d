//===- BatchRows.h - Does a model compute each batch row on its own? -*- C++ -*-===//
//
// A microbatch split runs the model built for B/m rows m times and averages
// the losses (or stacks the outputs). That equals the whole batch's step only
// when every row of the batch is computed on its own up to the loss's mean:
// no op may reduce, normalize or contract over the batch, nor take a value
// sized by the batch that is not the batch's (an `arange(B)`).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_MLIRGEN_BATCHROWS_H
#define LOOM_MLIRGEN_BATCHROWS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace loom {

/// Checks that `whole` (the model built for the whole batch, every input's
/// dim 0 the batch) computes its rows on their own up to its loss, and up to
/// every output when `outputsToo` (a pipelined forward stacks them); errors
/// go to the op that first combines rows, with a note at `resultLoc` of the
/// loss or output that depends on it.
/// `micro` is the same model built for one of `count` microbatches: its ops
/// must line up with `whole`'s (else an error at `where`), each value's
/// shape the whole's with the batch dim divided by `count`, each constant
/// the same number.
mlir::LogicalResult checkMicrobatchRows(
    mlir::func::FuncOp whole, mlir::func::FuncOp micro, int64_t count,
    bool outputsToo, mlir::Location where,
    llvm::function_ref<mlir::Location(unsigned result)> resultLoc);

/// `v` through any pipeline stage that yields it (a stage's result to its
/// value inside the stage).
mlir::Value throughStages(mlir::Value v);

/// The first term of `loss` whose mean over the microbatches would not be
/// the whole batch's, or null. A term is `free` of the batch (a weight
/// penalty, the same in every microbatch) or a `mean` over it; a loss is
/// split into terms through sums, differences, negations, casts, and
/// products and quotients by free values. `look` (when given) maps each
/// value before it is looked at (a pipeline stage's result to its value
/// inside the stage).
mlir::Value nonAveragingTerm(mlir::Value loss,
                             llvm::function_ref<bool(mlir::Value)> free,
                             llvm::function_ref<bool(mlir::Value)> mean,
                             llvm::function_ref<mlir::Value(mlir::Value)> look = nullptr);

} // namespace loom

#endif // LOOM_MLIRGEN_BATCHROWS_H
