//===- LoomMoeOps.cpp - Verifiers and VJPs of the routed MoE pieces -------===//
//
// The gradients of a gather into slots and of the weighted gather back are
// each other (with the gates kept), and the gates' own gradient is a dot
// product per choice (loom.moe_slot_dot). Routing decisions are integers:
// no gradient flows through them, as in every MoE implementation.
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/LoomOps.h"

#include <limits>
#include "Loom/IR/VjpBuilders.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::vjp;

/// Checks that `value` has shape `shape`, naming it `what`.
static LogicalResult expectShape(Operation *op, Value value, StringRef what,
                                 ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return success();
  return op->emitOpError() << what << " must have shape " << formatShape(shape)
                           << ", got " << formatShape(type.getShape());
}

LogicalResult MoeRouteOp::verify() {
  RankedTensorType probs = getProbs().getType();
  if (probs.getRank() != 2)
    return emitOpError("probs must be [tokens, experts]");
  int64_t tokens = probs.getDimSize(0), experts = probs.getDimSize(1);
  int64_t topK = getTopK(), capacity = getCapacity();
  if (topK < 1 || topK > experts)
    return emitOpError("top_k must be in [1, ") << experts << "], got " << topK;
  if (capacity < 1)
    return emitOpError("capacity must be positive, got ") << capacity;
  int64_t blocks = getBlocks().value_or(1);
  if (blocks < 1 || capacity % blocks)
    return emitOpError("blocks must divide the capacity ") << capacity << ", got " << blocks;
  int64_t buffer = getBuffer().value_or(capacity);
  if (buffer < 1 || buffer > capacity / blocks)
    return emitOpError("buffer must be in [1, capacity / blocks], got ") << buffer;
  // The routing counts slots and choices in 32 bits (its lowering's
  // running counts and slot numbers): more had wrapped, dropping and
  // misrouting tokens without a word.
  constexpr int64_t kMost = std::numeric_limits<int32_t>::max();
  if (experts * capacity > kMost || tokens * topK > kMost)
    return emitOpError("routes ")
           << experts * capacity << " slots (experts x capacity) and " << tokens * topK
           << " choices (tokens x top_k); the routing counts in 32 bits, at most " << kMost
           << " of each";
  if (getOffsets() &&
      failed(expectShape(*this, getOffsets(), "offsets", {1, topK, experts})))
    return failure();
  if (failed(expectShape(*this, getExpert(), "expert", {tokens, topK})) ||
      failed(expectShape(*this, getSlot(), "slot", {tokens, topK})) ||
      failed(expectShape(*this, getSource(), "source", {experts * blocks * buffer})) ||
      failed(expectShape(*this, getFirstCounts(), "first_counts", {experts})))
    return failure();
  return success();
}

LogicalResult MoeGateOp::verify() {
  RankedTensorType probs = getProbs().getType(), expert = getExpert().getType();
  if (probs.getRank() != 2 || expert.getRank() != 2 ||
      expert.getDimSize(0) != probs.getDimSize(0))
    return emitOpError("needs probs [tokens, experts] and expert [tokens, top_k]");
  return expectShape(*this, getResult(), "result", expert.getShape());
}

/// Dispatch and combine share one layout: tokens [N, D], slots [S, D],
/// source [S], slot and weights [N, K].
static LogicalResult verifyRouted(Operation *op, RankedTensorType tokens,
                                  RankedTensorType slots, Value source,
                                  Value slot, Value weights) {
  if (tokens.getRank() != 2 || slots.getRank() != 2 ||
      tokens.getDimSize(1) != slots.getDimSize(1) ||
      tokens.getElementType() != slots.getElementType())
    return op->emitOpError("needs tokens [N, D] and slots [S, D] of one element type");
  auto slotType = cast<RankedTensorType>(slot.getType());
  if (slotType.getRank() != 2 || slotType.getDimSize(0) != tokens.getDimSize(0))
    return op->emitOpError("slot must be [tokens, top_k]");
  if (failed(expectShape(op, source, "source", {slots.getDimSize(0)})))
    return failure();
  if (weights && failed(expectShape(op, weights, "weights", slotType.getShape())))
    return failure();
  return success();
}

LogicalResult MoeDispatchOp::verify() {
  return verifyRouted(*this, getInput().getType(), getType(), getSource(),
                      getSlot(), getWeights());
}

LogicalResult MoeCombineOp::verify() {
  return verifyRouted(*this, getType(), getInput().getType(), getSource(),
                      getSlot(), getWeights());
}

LogicalResult MoeStatsOp::verify() {
  if (getExpert().getType() != getSlot().getType() || getExpert().getType().getRank() != 2)
    return emitOpError("needs expert and slot of one [tokens, top_k] type");
  if (getType().getRank() != 2 || getType().getDimSize(1) != 2)
    return emitOpError("result must be [experts, 2]");
  return success();
}

LogicalResult MoeCountsOp::verify() {
  RankedTensorType expert = getExpert().getType(), result = getType();
  if (expert.getRank() != 2 || result.getRank() != 3 || result.getDimSize(0) != 1 ||
      result.getDimSize(1) != expert.getDimSize(1))
    return emitOpError("needs expert [tokens, top_k] and result [1, top_k, experts]");
  return success();
}

LogicalResult MoeOffsetsOp::verify() {
  if (getCounts().getType().getRank() != 3 || getType() != getCounts().getType())
    return emitOpError("needs counts and result of one [ranks, top_k, experts] type");
  return success();
}

LogicalResult MoeExchangeMapOp::verify() {
  RankedTensorType counts = getCounts().getType();
  if (counts.getRank() != 3 || getOffsets().getType() != counts)
    return emitOpError("needs counts and offsets of one [ranks, top_k, experts] type");
  int64_t capacity = getCapacity(), buffer = getBuffer();
  int64_t blocks = getBlocks().value_or(1);
  if (capacity < 1 || blocks < 1 || capacity % blocks ||
      (blocks > 1) != static_cast<bool>(getBlock()))
    return emitOpError("needs blocks dividing the capacity, and a block operand "
                       "exactly when there are several");
  int64_t width = capacity / blocks;
  if (buffer < 1 || buffer > width)
    return emitOpError("needs 1 <= buffer <= capacity / blocks");
  if (getBlock() && failed(expectShape(*this, getBlock(), "block", {1})))
    return failure();
  int64_t ranks = counts.getDimSize(0), experts = counts.getDimSize(2);
  if (failed(expectShape(*this, getSlot(), "slot", {ranks * experts * buffer, 1})) ||
      failed(expectShape(*this, getSource(), "source", {experts * width})))
    return failure();
  return success();
}

LogicalResult MoeRouteOp::buildVjp(OpBuilder &, ValueRange,
                                   SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({Value()});
  return success();
}

LogicalResult MoeGateOp::buildVjp(OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  Value probs = MoeGateGradOp::create(b, getLoc(), typeOf(getProbs()), getProbs(),
                                      getExpert(), grads[0]);
  operandGrads.assign({probs, Value()});
  return success();
}

/// The gradient of the weights of a dispatch or combine: per choice, the
/// dot product of the token-side gradient or value with the slot side.
static Value weightsGrad(OpBuilder &b, Location loc, Value weights, Value tokens,
                         Value slots, Value slot) {
  if (!weights)
    return Value();
  return MoeSlotDotOp::create(b, loc, typeOf(weights), tokens, slots, slot);
}

LogicalResult MoeDispatchOp::buildVjp(OpBuilder &b, ValueRange grads,
                                      SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value input = MoeCombineOp::create(b, loc, typeOf(getInput()), grads[0],
                                     getSource(), getSlot(), getWeights());
  operandGrads.assign({input, Value(), Value(),
                       weightsGrad(b, loc, getWeights(), getInput(), grads[0], getSlot())});
  operandGrads.resize(getNumOperands());
  return success();
}

LogicalResult MoeCombineOp::buildVjp(OpBuilder &b, ValueRange grads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value input = MoeDispatchOp::create(b, loc, typeOf(getInput()), grads[0],
                                      getSource(), getSlot(), getWeights());
  operandGrads.assign({input, Value(), Value(),
                       weightsGrad(b, loc, getWeights(), grads[0], getInput(), getSlot())});
  operandGrads.resize(getNumOperands());
  return success();
}
