//===- LoomOps.cpp - Verifiers and type inference of tensor ops -----------===//

#include "Loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::loom;

/// The shapes of `values`, for rules that take several operands.
static SmallVector<ArrayRef<int64_t>> shapesOf(TypeRange types) {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Type type : types)
    shapes.push_back(cast<RankedTensorType>(type).getShape());
  return shapes;
}

/// Wraps an optional location into the callback TypeRules expects.
static auto errorAt(std::optional<Location> loc) {
  return [loc]() { return loc ? emitError(*loc) : InFlightDiagnostic(); };
}

LogicalResult ConstantOp::verify() {
  if (getType().getRank() != 0)
    return emitOpError("must produce a rank-0 tensor");
  double value = getValue().convertToDouble();
  if (isa<IntegerType>(getType().getElementType()) && value != std::trunc(value))
    return emitOpError("integer constant ") << value << " is not integral";
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) {
  Type element = getType().getElementType();
  double value = getValue().convertToDouble();
  Attribute scalar = isa<FloatType>(element)
                         ? Attribute(FloatAttr::get(element, value))
                         : Attribute(IntegerAttr::get(element, (int64_t)value));
  return DenseElementsAttr::get(getType(), scalar);
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError("changes the shape from ")
           << formatShape(getInput().getType().getShape()) << " to "
           << formatShape(getType().getShape());
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto lhs = dyn_cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = dyn_cast<RankedTensorType>(adaptor.getRhs().getType());
  if (!lhs || !rhs)
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      matmulShape(lhs.getShape(), rhs.getShape(), errorAt(loc));
  if (failed(shape))
    return failure();
  types.push_back(RankedTensorType::get(*shape, lhs.getElementType()));
  return success();
}

bool MatmulOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  if (inferred == actual)
    return true;
  auto want = dyn_cast<RankedTensorType>(inferred.front());
  auto got = dyn_cast<RankedTensorType>(actual.front());
  return want && got && want.getShape() == got.getShape() &&
         got.getElementType().isF32();
}

LogicalResult MatmulOp::verify() {
  Type element = getLhs().getType().getElementType();
  if (element != getRhs().getType().getElementType())
    return emitOpError("operands differ in element type: ")
           << element << " and " << getRhs().getType().getElementType();
  if (getAccumulate() != element && !getAccumulate().isF32())
    return emitOpError("accumulates in ")
           << getAccumulate() << "; expected f32 or the operand type " << element;
  if (std::optional<Type> multiply = getMultiply()) {
    if (!multiply->isTF32())
      return emitOpError("multiplies in ") << *multiply << "; only tf32 is supported";
    if (!element.isF32() || !getAccumulate().isF32())
      return emitOpError("multiply tf32 needs f32 operands and f32 accumulation, not ")
             << element << " accumulated in " << getAccumulate();
  }
  Type result = getType().getElementType();
  if (result != element && result != getAccumulate())
    return emitOpError("result element type ")
           << result << " is neither the operand type " << element
           << " nor the accumulation type " << getAccumulate();
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return checkAxis(getAxis(), getType().getRank(),
                   [&] { return emitOpError(); });
}

LogicalResult CausalMaskOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError("needs a tensor of rank >= 2 (queries x keys)");
  return success();
}

LogicalResult DropoutOp::verify() {
  if (getType() != getInput().getType())
    return emitOpError("result must have the input's type");
  double p = getProbability().convertToDouble();
  if (!(p >= 0 && static_cast<float>(p) < 1))
    return emitOpError("probability must be in [0, 1) in f32, got ") << p;
  RankedTensorType type = getType();
  if (static_cast<int64_t>(getPositions().size()) != type.getRank())
    return emitOpError("needs one positions vector per dim (")
           << type.getRank() << "), got " << getPositions().size();
  for (auto [d, positions] : llvm::enumerate(getPositions())) {
    auto vector = cast<RankedTensorType>(positions.getType());
    if (vector.getRank() != 1 || vector.getDimSize(0) != type.getDimSize(d))
      return emitOpError("positions ") << d << " must be an i32 vector of "
                                       << type.getDimSize(d) << ", got " << vector;
  }
  if (!getKeys().empty() &&
      (getKeys().size() != 2 ||
       llvm::any_of(getKeys(), [](Value key) {
         return cast<RankedTensorType>(key.getType()).getRank() != 0;
       })))
    return emitOpError("keys are none or two f32 scalars (seed, microbatch)");
  return success();
}

int64_t mlir::loom::attentionBlockSize(int64_t queries, int64_t keys) {
  int64_t common = std::gcd(queries, keys);
  // Multiples of 32 first, which the CPU's register tiles divide (992's
  // 62 would leave its block products untiled).
  for (int64_t block : {64, 32})
    if (common % block == 0)
      return block;
  for (int64_t block = std::min<int64_t>(common, 64); block > 1; --block)
    if (common % block == 0)
      return block;
  return 1;
}

double mlir::loom::attentionPairs(ArrayRef<int64_t> query, ArrayRef<int64_t> key,
                                  bool causal) {
  size_t rows = query.size() - 2;
  double batch = 1;
  for (int64_t size : query.take_front(rows))
    batch *= size;
  double queries = query[rows], keys = key[rows];
  double pairs = queries * keys;
  if (causal) // the sum over i of min(i + 1, keys)
    pairs = keys >= queries ? queries * (queries + 1) / 2
                            : keys * (keys + 1) / 2 + (queries - keys) * keys;
  return batch * pairs;
}

double mlir::loom::attentionFlops(ArrayRef<int64_t> query, ArrayRef<int64_t> key,
                                  ArrayRef<int64_t> value, bool causal, bool gradient) {
  double e = query.back(), ev = value.back();
  return 2 * attentionPairs(query, key, causal) * (gradient ? 4 * e + 3 * ev : e + ev);
}

bool mlir::loom::gpuRunsAttention(RankedTensorType query, RankedTensorType key,
                                  RankedTensorType value, Type accumulate) {
  Type element = query.getElementType();
  if (!(element.isBF16() || element.isF16()) || !accumulate.isF32())
    return false;
  int64_t rows = query.getRank() - 2;
  auto fits = [](int64_t size, int64_t most) {
    return size % 16 == 0 && size <= most;
  };
  int64_t features = 128;
  // A launch's blocks of 64 rows go along grid y (at most 65535).
  int64_t sequence = 65535 * 64;
  // Each operand's own sequence dim: the fusion asks before it broadcasts
  // keys of lower rank than the queries (grouped-query attention).
  return fits(query.getShape()[rows], sequence) &&
         fits(key.getShape()[key.getRank() - 2], sequence) &&
         fits(query.getShape().back(), features) && fits(value.getShape().back(), features);
}

/// The operand rules of loom.attention and loom.attention_grad; `output`
/// is the attention's result type (its gradient's, for the latter).
static LogicalResult verifyAttention(Operation *op, RankedTensorType q,
                                     RankedTensorType k, RankedTensorType v,
                                     RankedTensorType output, Value scale) {
  Type element = q.getElementType();
  if (q.getRank() < 2)
    return op->emitOpError("needs queries of rank >= 2 ([..., queries, features])");
  if (k.getRank() != q.getRank() || v.getRank() != q.getRank() ||
      output.getRank() != q.getRank())
    return op->emitOpError("query, key, value and result must have the same rank");
  if (k.getElementType() != element || v.getElementType() != element ||
      output.getElementType() != element)
    return op->emitOpError("query, key, value and result must have one element type");
  int64_t batch = q.getRank() - 2;
  if (k.getShape().take_front(batch) != q.getShape().take_front(batch) ||
      v.getShape().take_front(batch) != q.getShape().take_front(batch))
    return op->emitOpError("query, key and value must have the same batch dimensions");
  if (k.getShape().back() != q.getShape().back())
    return op->emitOpError("query and key must have the same feature size");
  if (v.getShape()[batch] != k.getShape()[batch])
    return op->emitOpError("key and value must have the same number of keys");
  SmallVector<int64_t> shape(q.getShape());
  shape.back() = v.getShape().back();
  if (output.getShape() != ArrayRef<int64_t>(shape))
    return op->emitOpError("result must have shape ") << formatShape(shape);
  if (scale) {
    auto type = cast<RankedTensorType>(scale.getType());
    if (type.getRank() != 0 || type.getElementType() != element)
      return op->emitOpError("scale must be a scalar of the operand type");
  }
  return success();
}

/// Checks an attention's rows' log-sum-exp `lse` (if any): f32, the
/// query's shape without its features.
static LogicalResult verifyRowLse(Operation *op, RankedTensorType q, Value lse) {
  if (!lse)
    return success();
  auto type = cast<RankedTensorType>(lse.getType());
  ArrayRef<int64_t> rows = q.getShape().drop_back();
  if (!type.getElementType().isF32() || type.getShape() != rows)
    return op->emitOpError("lse must be f32 of shape ") << formatShape(rows);
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this, getQuery().getType(), getKey().getType(),
                             getValue().getType(), getResult().getType(), getScale())))
    return failure();
  return verifyRowLse(*this, getQuery().getType(), getLse());
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getQuery().getType(), getKey().getType(),
                             getValue().getType(), getResultGrad().getType(),
                             getScale())))
    return failure();
  if (getOutput().getType() != getResultGrad().getType())
    return emitOpError("output must have the type of result_grad");
  if (failed(verifyRowLse(*this, getQuery().getType(), getLse())))
    return failure();
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError("gradients must have the types of query, key and value");
  return success();
}

/// Checks that a normalization's scale or bias is `[D]` for input `[..., D]`.
static LogicalResult verifyNormParam(Operation *op, Value input, Value param,
                                     StringRef what) {
  if (!param)
    return success();
  auto inputType = cast<RankedTensorType>(input.getType());
  auto paramType = cast<RankedTensorType>(param.getType());
  if (inputType.getRank() == 0)
    return op->emitOpError("cannot normalize a scalar");
  if (paramType.getShape() != ArrayRef<int64_t>{inputType.getShape().back()})
    return op->emitOpError() << what << " must have shape ["
                             << inputType.getShape().back() << "], got "
                             << formatShape(paramType.getShape());
  return success();
}

/// The result of a normalization is the input's shape in the widest of the
/// input and parameter types (an f32 scale on bf16 activations gives f32).
static LogicalResult verifyNormResult(Operation *op, ValueRange operands) {
  auto input = cast<RankedTensorType>(operands.front().getType());
  if (input.getRank() == 0)
    return op->emitOpError("cannot normalize a scalar");
  Type element = input.getElementType();
  for (Value operand : operands.drop_front()) {
    FailureOr<Type> promoted = promoteElementTypes(
        element, cast<RankedTensorType>(operand.getType()).getElementType(),
        [&] { return op->emitOpError(); });
    if (failed(promoted))
      return failure();
    element = *promoted;
  }
  if (op->getResult(0).getType() != input.clone(element))
    return op->emitOpError("must produce ") << input.clone(element);
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyNormParam(*this, getInput(), getScale(), "scale")) ||
      failed(verifyNormParam(*this, getInput(), getBias(), "bias")))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError("epsilon must be positive");
  return verifyNormResult(*this, getOperands());
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyNormParam(*this, getInput(), getScale(), "scale")))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError("epsilon must be positive");
  return verifyNormResult(*this, getOperands());
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto table = dyn_cast<RankedTensorType>(adaptor.getTable().getType());
  auto ids = dyn_cast<RankedTensorType>(adaptor.getIds().getType());
  if (!table || !ids)
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      embeddingShape(table.getShape(), ids.getShape(), errorAt(loc));
  if (failed(shape))
    return failure();
  types.push_back(RankedTensorType::get(*shape, table.getElementType()));
  return success();
}

LogicalResult mlir::loom::verifyTableRows(Operation *op, RankedTensorType table,
                                          Value rows, std::optional<uint64_t> vocab) {
  if (!rows && !vocab)
    return success();
  if (!rows || !vocab)
    return op->emitOpError("needs both the rows it holds and the table's size");
  auto type = cast<RankedTensorType>(rows.getType());
  if (type.getRank() != 1 || type.getDimSize(0) != table.getDimSize(0))
    return op->emitOpError("needs one row id per row of its table (")
           << table.getDimSize(0) << "), got " << type;
  if (*vocab < static_cast<uint64_t>(table.getDimSize(0)))
    return op->emitOpError("holds ") << table.getDimSize(0)
           << " rows of a table of " << *vocab;
  return success();
}

LogicalResult EmbeddingOp::verify() {
  return verifyTableRows(*this, getTable().getType(), getRows(), getVocab());
}

LogicalResult ArangeOp::verify() {
  if (getType().getRank() != 1)
    return emitOpError("must produce a rank-1 tensor");
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto input = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!input)
    return failure();
  FailureOr<SmallVector<int64_t>> shape = transposeShape(
      input.getShape(), adaptor.getPermutation(), errorAt(loc));
  if (failed(shape))
    return failure();
  types.push_back(input.clone(*shape));
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError("changes the element type");
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("changes the number of elements from ")
           << input.getNumElements() << " to " << result.getNumElements();
  return success();
}

LogicalResult SplitOp::verify() {
  RankedTensorType input = getInput().getType();
  if (failed(checkAxis(getAxis(), input.getRank(),
                       [&] { return emitOpError(); })))
    return failure();
  if (getResults().empty())
    return emitOpError("must produce at least one piece");
  SmallVector<ArrayRef<int64_t>> shapes = shapesOf(getResultTypes());
  FailureOr<SmallVector<int64_t>> joined =
      concatShape(shapes, getAxis(), [&] { return emitOpError(); });
  if (failed(joined))
    return failure();
  if (ArrayRef<int64_t>(*joined) != input.getShape())
    return emitOpError("pieces ") << "do not add up to "
                                  << formatShape(input.getShape());
  for (Type type : getResultTypes())
    if (cast<RankedTensorType>(type).getElementType() != input.getElementType())
      return emitOpError("changes the element type");
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  TypeRange inputTypes = adaptor.getInputs().getTypes();
  if (inputTypes.empty()) {
    errorAt(loc)() << "concat needs at least one tensor";
    return failure();
  }
  Type element = cast<RankedTensorType>(inputTypes.front()).getElementType();
  for (Type type : inputTypes) {
    if (cast<RankedTensorType>(type).getElementType() != element) {
      errorAt(loc)() << "dtype conflict: concat of different element types";
      return failure();
    }
  }
  FailureOr<SmallVector<int64_t>> shape =
      concatShape(shapesOf(inputTypes), adaptor.getAxis(), errorAt(loc));
  if (failed(shape))
    return failure();
  types.push_back(RankedTensorType::get(*shape, element));
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  ArrayRef<int64_t> logits = getLogits().getType().getShape();
  ArrayRef<int64_t> labels = getLabels().getType().getShape();
  if (logits.empty() || logits.drop_back() != labels)
    return emitOpError("labels ")
           << formatShape(labels) << " must be the logits' shape "
           << formatShape(logits) << " without its last (class) dimension";
  return success();
}

LogicalResult MseOp::verify() {
  if (getPrediction().getType().getShape() != getTarget().getType().getShape())
    return emitOpError("compares tensors of different shapes ")
           << formatShape(getPrediction().getType().getShape()) << " and "
           << formatShape(getTarget().getType().getShape());
  return success();
}

#define GET_OP_CLASSES
#include "Loom/IR/LoomOps.cpp.inc"
