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
  if (!llvm::is_contained({"gelu", "relu", "silu"}, getActivation()))
    return emitOpError("unknown activation '")
           << getActivation() << "' (expected gelu, relu or silu)";
  if (getInput().getType().getShape() != getGrad().getType().getShape() ||
      getGrad().getType() != getType())
    return emitOpError("needs an input and a gradient of the result's shape, "
                       "and the gradient's type as result");
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  ArrayRef<int64_t> ids = getIds().getType().getShape();
  ArrayRef<int64_t> grad = getGrad().getType().getShape();
  RankedTensorType table = getType();
  if (table.getRank() != 2 || grad.size() != ids.size() + 1 ||
      grad.drop_back() != ids || grad.back() != table.getDimSize(1))
    return emitOpError("needs a gradient of shape ids x D and a V x D table");
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  RankedTensorType logits = getLogits().getType();
  if (getType() != logits)
    return emitOpError("result must have the logits' type");
  if (logits.getShape().drop_back() != getLabels().getType().getShape())
    return emitOpError("labels must have the logits' shape without the classes");
  return success();
}
