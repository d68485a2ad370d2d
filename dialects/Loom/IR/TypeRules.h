//===- TypeRules.h - Shape and element-type rules shared by ops and Sema --===//
//
// One definition of each typing rule: the op verifiers (through
// InferTypeOpInterface) and the front end's semantic checks both call
// these, so a script that passes Sema always produces IR that verifies.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IR_TYPERULES_H
#define LOOM_IR_TYPERULES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"

namespace mlir::loom {

/// Emits an error for a rule violation; may be null (check silently).
using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

/// The element type two operands of an elementwise op compute in: equal
/// types, or f32 with f16/bf16 (promoted to f32). f16 with bf16, and
/// integers with floats, are conflicts.
FailureOr<Type> promoteElementTypes(Type lhs, Type rhs, EmitErrorFn emitError);

/// Numpy broadcasting of two shapes, aligned at the trailing dimension.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> lhs,
                                                ArrayRef<int64_t> rhs,
                                                EmitErrorFn emitError);

/// `[..., M, K] x [K, N]` or `[b..., M, K] x [b..., K, N]`.
FailureOr<SmallVector<int64_t>> matmulShape(ArrayRef<int64_t> lhs,
                                            ArrayRef<int64_t> rhs,
                                            EmitErrorFn emitError);

/// Result dim i is input dim perm[i]; perm must be a permutation.
FailureOr<SmallVector<int64_t>> transposeShape(ArrayRef<int64_t> shape,
                                               ArrayRef<int64_t> perm,
                                               EmitErrorFn emitError);

/// The shape without `axis` (or with it set to 1 when keepdim).
FailureOr<SmallVector<int64_t>> reduceShape(ArrayRef<int64_t> shape,
                                            int64_t axis, bool keepdim,
                                            EmitErrorFn emitError);

/// Equal shapes except along `axis`, whose sizes add up.
FailureOr<SmallVector<int64_t>> concatShape(ArrayRef<ArrayRef<int64_t>> shapes,
                                            int64_t axis,
                                            EmitErrorFn emitError);

/// `ids.shape + [D]` for a `[V, D]` table.
FailureOr<SmallVector<int64_t>> embeddingShape(ArrayRef<int64_t> table,
                                               ArrayRef<int64_t> ids,
                                               EmitErrorFn emitError);

/// Checks that `axis` names a dimension of a rank-`rank` tensor.
LogicalResult checkAxis(int64_t axis, int64_t rank, EmitErrorFn emitError);

/// The largest number of elements a Loom tensor may have (2^48).
constexpr int64_t kMaxTensorElements = int64_t(1) << 48;

/// The element count of `shape`, or nullopt past kMaxTensorElements.
std::optional<int64_t> checkedElementCount(ArrayRef<int64_t> shape);

/// Formats a shape as `[64, 512]` for diagnostics.
std::string formatShape(ArrayRef<int64_t> shape);

// Result-type inference entry points used by the ops' InferTypeOpInterface.
LogicalResult inferBroadcastOp(std::optional<Location> loc, Type lhs, Type rhs,
                               SmallVectorImpl<Type> &types);
LogicalResult inferReduceOp(std::optional<Location> loc, Type input,
                            int64_t axis, bool keepdim,
                            SmallVectorImpl<Type> &types);

} // namespace mlir::loom

#endif // LOOM_IR_TYPERULES_H
