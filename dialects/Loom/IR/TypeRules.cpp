//===- TypeRules.cpp - Shape and element-type rules shared by ops and Sema ===//

#include "Loom/IR/TypeRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::loom;

/// Reports through `emitError` when there is one; always returns failure.
template <typename... Args>
static LogicalResult report(EmitErrorFn emitError, const Args &...args) {
  if (emitError) {
    InFlightDiagnostic diag = emitError();
    (diag << ... << args);
  }
  return failure();
}

std::string mlir::loom::formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

static std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

std::optional<int64_t> mlir::loom::checkedElementCount(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count) ||
        count > kMaxTensorElements)
      return std::nullopt;
  return count;
}

FailureOr<Type> mlir::loom::promoteElementTypes(Type lhs, Type rhs,
                                                EmitErrorFn emitError) {
  if (lhs == rhs)
    return lhs;
  bool lhsFloat = isa<FloatType>(lhs), rhsFloat = isa<FloatType>(rhs);
  // f32 is wide enough to hold either 16-bit format exactly.
  if (lhsFloat && rhsFloat && (lhs.isF32() || rhs.isF32()))
    return lhs.isF32() ? lhs : rhs;
  (void)report(emitError, "dtype conflict: ", typeName(lhs), " and ",
               typeName(rhs),
               lhsFloat && rhsFloat
                   ? " have no common type; cast one of them explicitly"
                   : " cannot be mixed; integer tensors only index");
  return failure();
}

FailureOr<SmallVector<int64_t>>
mlir::loom::broadcastShapes(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                            EmitErrorFn emitError) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1) {
      (void)report(emitError, "shape mismatch: cannot broadcast ",
                   formatShape(lhs), " with ", formatShape(rhs));
      return failure();
    }
    result[rank - 1 - i] = l == 1 ? r : l;
  }
  return result;
}

FailureOr<SmallVector<int64_t>>
mlir::loom::matmulShape(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                        EmitErrorFn emitError) {
  if (lhs.size() < 2 || rhs.size() < 2) {
    (void)report(emitError, "rank mismatch: matmul needs operands of rank >= 2, got ",
                 formatShape(lhs), " @ ", formatShape(rhs));
    return failure();
  }
  int64_t k = lhs.back(), kr = rhs[rhs.size() - 2];
  if (k != kr) {
    (void)report(emitError, "shape mismatch: matmul contracts ",
                 formatShape(lhs), " with ", formatShape(rhs), " (", k,
                 " != ", kr, ")");
    return failure();
  }
  SmallVector<int64_t> result;
  if (rhs.size() == 2) {
    // A weight matrix applies to every row of a batched activation.
    result.assign(lhs.begin(), lhs.end() - 1);
  } else {
    FailureOr<SmallVector<int64_t>> batch =
        broadcastShapes(lhs.drop_back(2), rhs.drop_back(2), nullptr);
    if (failed(batch)) {
      (void)report(emitError, "shape mismatch: matmul batch dimensions of ",
                   formatShape(lhs), " and ", formatShape(rhs),
                   " do not broadcast");
      return failure();
    }
    result = *batch;
    result.push_back(lhs[lhs.size() - 2]);
  }
  result.push_back(rhs.back());
  return result;
}

LogicalResult mlir::loom::checkAxis(int64_t axis, int64_t rank,
                                    EmitErrorFn emitError) {
  if (axis >= 0 && axis < rank)
    return success();
  return report(emitError, "axis ", axis, " is out of range for a tensor of rank ",
                rank);
}

FailureOr<SmallVector<int64_t>>
mlir::loom::transposeShape(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm,
                           EmitErrorFn emitError) {
  if (perm.size() != shape.size()) {
    (void)report(emitError, "rank mismatch: permutation ", formatShape(perm),
                 " has ", perm.size(), " entries for a tensor of rank ",
                 shape.size());
    return failure();
  }
  SmallVector<bool> seen(shape.size(), false);
  SmallVector<int64_t> result;
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)shape.size() || seen[p]) {
      (void)report(emitError, formatShape(perm), " is not a permutation of 0..",
                   shape.size() - 1);
      return failure();
    }
    seen[p] = true;
    result.push_back(shape[p]);
  }
  return result;
}

FailureOr<SmallVector<int64_t>>
mlir::loom::reduceShape(ArrayRef<int64_t> shape, int64_t axis, bool keepdim,
                        EmitErrorFn emitError) {
  if (failed(checkAxis(axis, shape.size(), emitError)))
    return failure();
  SmallVector<int64_t> result(shape);
  if (keepdim)
    result[axis] = 1;
  else
    result.erase(result.begin() + axis);
  return result;
}

FailureOr<SmallVector<int64_t>>
mlir::loom::concatShape(ArrayRef<ArrayRef<int64_t>> shapes, int64_t axis,
                        EmitErrorFn emitError) {
  if (shapes.empty()) {
    (void)report(emitError, "concat needs at least one tensor");
    return failure();
  }
  ArrayRef<int64_t> first = shapes.front();
  if (failed(checkAxis(axis, first.size(), emitError)))
    return failure();
  SmallVector<int64_t> result(first);
  for (ArrayRef<int64_t> shape : shapes.drop_front()) {
    bool compatible = shape.size() == first.size();
    for (size_t d = 0; compatible && d < shape.size(); ++d)
      compatible = (int64_t)d == axis || shape[d] == first[d];
    if (!compatible) {
      (void)report(emitError, "shape mismatch: cannot concatenate ",
                   formatShape(first), " and ", formatShape(shape),
                   " along axis ", axis);
      return failure();
    }
    result[axis] += shape[axis];
  }
  return result;
}

FailureOr<SmallVector<int64_t>>
mlir::loom::embeddingShape(ArrayRef<int64_t> table, ArrayRef<int64_t> ids,
                           EmitErrorFn emitError) {
  if (table.size() != 2) {
    (void)report(emitError, "rank mismatch: an embedding table is [rows, dim], got ",
                 formatShape(table));
    return failure();
  }
  SmallVector<int64_t> result(ids);
  result.push_back(table[1]);
  return result;
}

/// Adapts an optional location to the EmitErrorFn the rules take.
template <typename Rule>
static auto withLocation(std::optional<Location> loc, Rule rule) {
  if (!loc)
    return rule(nullptr);
  return rule([&] { return emitError(*loc); });
}

LogicalResult mlir::loom::inferBroadcastOp(std::optional<Location> loc,
                                           Type lhs, Type rhs,
                                           SmallVectorImpl<Type> &types) {
  auto lhsType = dyn_cast<RankedTensorType>(lhs);
  auto rhsType = dyn_cast<RankedTensorType>(rhs);
  if (!lhsType || !rhsType)
    return failure();
  return withLocation(loc, [&](EmitErrorFn emit) -> LogicalResult {
    FailureOr<Type> element = promoteElementTypes(
        lhsType.getElementType(), rhsType.getElementType(), emit);
    if (failed(element))
      return failure();
    FailureOr<SmallVector<int64_t>> shape =
        broadcastShapes(lhsType.getShape(), rhsType.getShape(), emit);
    if (failed(shape))
      return failure();
    types.push_back(RankedTensorType::get(*shape, *element));
    return success();
  });
}

LogicalResult mlir::loom::inferReduceOp(std::optional<Location> loc,
                                        Type input, int64_t axis, bool keepdim,
                                        SmallVectorImpl<Type> &types) {
  auto inputType = dyn_cast<RankedTensorType>(input);
  if (!inputType)
    return failure();
  return withLocation(loc, [&](EmitErrorFn emit) -> LogicalResult {
    FailureOr<SmallVector<int64_t>> shape =
        reduceShape(inputType.getShape(), axis, keepdim, emit);
    if (failed(shape))
      return failure();
    types.push_back(RankedTensorType::get(*shape, inputType.getElementType()));
    return success();
  });
}
