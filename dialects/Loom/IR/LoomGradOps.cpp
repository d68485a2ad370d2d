//===- LoomGradOps.cpp - Verifiers of the ops only gradients need ---------===//

#include "Loom/IR/LoomOps.h"

using namespace mlir;
using namespace mlir::loom;

LogicalResult BroadcastOp::verify() {
  ArrayRef<int64_t> from = getInput().getType().getShape();
  ArrayRef<int64_t> to = getType().getShape();
  if (getInput().getType().getElementType() != getType().getElementType())
    return emitOpError("must keep the element type");
  if (from.size() > to.size())
    return emitOpError("cannot broadcast rank ")
           << from.size() << " to rank " << to.size();
  size_t offset = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != to[offset + d])
      return emitOpError("cannot broadcast dim ")
             << d << " of size " << from[d] << " to " << to[offset + d];
  return success();
}

LogicalResult ActivationGradOp::verify() {
  if (!llvm::is_contained({"gelu", "relu", "silu", "abs"}, getActivation()))
    return emitOpError("unknown activation '")
           << getActivation() << "' (expected gelu, relu, silu or abs)";
  if (getInput().getType().getShape() != getGrad().getType().getShape() ||
      getGrad().getType() != getType())
    return emitOpError("needs an input and a gradient of the result's shape, "
                       "and the gradient's type as result");
  return success();
}

LogicalResult NormGradOp::verify() {
  RankedTensorType input = getInput().getType();
  if (input.getRank() < 1)
    return emitOpError("cannot normalize a scalar");
  if (getGrad().getType().getShape() != input.getShape() || getInputGrad().getType() != input)
    return emitOpError("needs a gradient of the input's shape, and the input's type as "
                       "its first result");
  auto feature = RankedTensorType::get({input.getShape().back()}, Float32Type::get(getContext()));
  if (getScale() && getScale().getType().getShape() != feature.getShape())
    return emitOpError("needs a scale of the input's last dim, [")
           << input.getShape().back() << "]";
  if (getScaleGrad().getType() != feature || getBiasGrad().getType() != feature)
    return emitOpError("needs f32 [") << input.getShape().back()
                                      << "] scale and bias gradients";
  // The lowering adds it in f32: 1e-60 would be 0 there.
  if (!(static_cast<float>(getEpsilon().convertToDouble()) > 0))
    return emitOpError("epsilon must be positive in f32, got ") << getEpsilon().convertToDouble();
  return success();
}

LogicalResult MaxMaskOp::verify() {
  RankedTensorType input = getInput().getType(), max = getMax().getType();
  if (getType().getShape() != input.getShape() || max.getRank() != input.getRank() ||
      llvm::any_of(llvm::zip(max.getShape(), input.getShape()), [](auto dims) {
        return std::get<0>(dims) != 1 && std::get<0>(dims) != std::get<1>(dims);
      }))
    return emitOpError("needs a max that broadcasts to the input, and the input's shape as result");
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  ArrayRef<int64_t> ids = getIds().getType().getShape();
  ArrayRef<int64_t> grad = getGrad().getType().getShape();
  RankedTensorType table = getType();
  if (table.getRank() != 2 || grad.size() != ids.size() + 1 ||
      grad.drop_back() != ids || grad.back() != table.getDimSize(1))
    return emitOpError("needs a gradient of shape ids x D and a V x D table");
  return verifyTableRows(*this, table, getRows(), getVocab());
}

LogicalResult CrossEntropyGradOp::verify() {
  RankedTensorType logits = getLogits().getType();
  if (getType() != logits)
    return emitOpError("result must have the logits' type");
  if (logits.getShape().drop_back() != getLabels().getType().getShape())
    return emitOpError("labels must have the logits' shape without the classes");
  return success();
}

/// The rows of vocab-split logits: their shape without the classes, which
/// `ids` lists (one per local class).
static LogicalResult verifyVocabRows(Operation *op, RankedTensorType logits,
                                     RankedTensorType labels,
                                     RankedTensorType ids, ValueRange rows) {
  if (logits.getRank() < 1 ||
      logits.getShape().drop_back() != labels.getShape())
    return op->emitOpError("labels must have the logits' shape without the classes");
  if (ids.getRank() != 1 || ids.getDimSize(0) != logits.getShape().back())
    return op->emitOpError("needs one id per class of the logits");
  for (Value row : rows)
    if (cast<RankedTensorType>(row.getType()).getShape() != labels.getShape())
      return op->emitOpError("row statistics must have the labels' shape");
  return success();
}

LogicalResult VocabStatsOp::verify() {
  return verifyVocabRows(*this, getLogits().getType(), getLabels().getType(),
                         getIds().getType(),
                         {getMax(), getSumExp(), getTarget()});
}

LogicalResult VocabLossOp::verify() {
  if (getMax().getType() != getSumExp().getType() ||
      getMax().getType() != getTarget().getType())
    return emitOpError("row statistics must have one shape");
  return success();
}

LogicalResult VocabGradOp::verify() {
  if (getType() != getLogits().getType())
    return emitOpError("result must have the logits' type");
  return verifyVocabRows(*this, getLogits().getType(), getLabels().getType(),
                         getIds().getType(), {getMax(), getSumExp()});
}
