//===- LinalgBuilders.h - Building blocks of the loom-to-linalg lowering --===//
//
// Precision is decided here, once: floats are widened to f32 on load and
// rounded (to nearest even) to their storage type on store, and every
// reduction accumulates in f32.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_LINALGBUILDERS_H
#define LOOM_CONVERSION_LINALGBUILDERS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {

/// Computes one output element (in f32, or the storage type for integer
/// results) from one element of each input, already converted to f32.
using ScalarBody =
    function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// Converts a scalar to `type`: extf/truncf between floats, sitofp/fptosi
/// between ints and floats, extsi/trunci between ints.
Value convertScalar(OpBuilder &b, Location loc, Value value, Type type);

/// `f32` unless `type` is already f32-or-wider or an integer.
Value widen(OpBuilder &b, Location loc, Value value);

Value f32Constant(OpBuilder &b, Location loc, double value);

/// A tensor of `type` filled with `value` (an attribute of its element type).
Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   TypedAttr value);
/// `tensor` filled with `value`.
Value filledTensor(OpBuilder &b, Location loc, Value tensor, TypedAttr value);

/// The integer `id` as an index clamped into [0, size - 1]: ids and labels
/// out of range must not read outside their tensor (they are not reported;
/// see docs/language.md).
Value clampedIndex(OpBuilder &b, Location loc, Value id, int64_t size);

/// The row of a table that `id` selects: clamped into the table's `size`
/// rows or, for a vocab-parallel table (`rows`: the ids of the rows it
/// holds, consecutive), clamped into the whole table's `vocab` rows and
/// counted from `rows[0]`, so outside [0, rows held) for another rank's.
Value tableRow(OpBuilder &b, Location loc, Value id, int64_t size, Value rows,
               std::optional<uint64_t> vocab);

/// The map reading an operand of `shape` while iterating `result`, with
/// numpy broadcasting (aligned at the trailing dimension).
AffineMap broadcastMap(ArrayRef<int64_t> shape, ArrayRef<int64_t> result,
                       MLIRContext *context);

/// The map of the reduced tensor when iterating the full shape of `rank`
/// and reducing `axis` (dropped from the result).
AffineMap dropDimMap(int64_t rank, int64_t axis, MLIRContext *context);

/// A linalg.generic over `resultType`'s shape, all loops parallel, with
/// the given input maps; inputs are widened to f32 before `body` and the
/// result is converted to `resultType`'s element type.
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                       ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                       ScalarBody body);

/// The same with broadcasting maps for every input.
Value buildBroadcastElementwise(OpBuilder &b, Location loc,
                                RankedTensorType resultType, ValueRange inputs,
                                ScalarBody body);

/// `value` as a tensor of `resultType`: broadcast to its shape and each
/// element converted to its element type (one rounding from f32).
Value buildConverted(OpBuilder &b, Location loc, RankedTensorType resultType,
                     Value value);

/// `acc + a * c` with `a` and `c` converted to `acc`'s type: a matmul's
/// step. `contract` lets LLVM fuse the multiply and add into one FMA (one
/// rounding instead of two, within the accumulation type).
Value multiplyAccumulate(OpBuilder &b, Location loc, Value acc, Value a, Value c);

/// Reduces the loops of `shape` marked in `reducedLoops` into an f32
/// tensor over the others: `acc = combine(acc, f32 inputs...)` starting
/// from `init`, the inputs read through `inputMaps`.
Value buildReduction(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                     ArrayRef<bool> reducedLoops, ValueRange inputs,
                     ArrayRef<AffineMap> inputMaps, double init,
                     function_ref<Value(OpBuilder &, Location, Value, ValueRange)> combine);

/// Reduces `axis` of the tensors `inputs` (all of `input`'s shape, or
/// reduced ones given by `inputMaps`) into an f32 tensor without that axis:
/// `acc = combine(acc, f32 inputs...)` starting from `init`.
Value buildAxisReduction(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                         int64_t axis, ValueRange inputs,
                         ArrayRef<AffineMap> inputMaps, double init,
                         function_ref<Value(OpBuilder &, Location, Value,
                                            ValueRange)> combine);

/// Sums `value(f32 inputs...)` over every element into an f32 scalar tensor.
Value buildTotalSum(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                    ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                    function_ref<Value(OpBuilder &, Location, ValueRange)> value);

} // namespace mlir::loom

#endif // LOOM_CONVERSION_LINALGBUILDERS_H
