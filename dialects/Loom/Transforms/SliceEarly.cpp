//===- SliceEarly.cpp - A replicated value's rank block computed, not sliced -===//
//
// The partitioner lays out each result from its operands, so a value built
// from replicated ones (the backward's seed of a mean broadcast back to the
// batch) is built whole on every rank and only then sliced to the rank's
// block where a split value meets it. A slice has no data to move, but the
// whole value did cost memory and time in proportion to the global batch
// (a nested mean's gradient over a dp=64 batch: 512 MiB a rank). Moving each
// slice above the broadcasts, reshapes and elementwise ops that feed only
// it computes the rank's block alone.
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
class SliceEarly {
public:
  void run(func::FuncOp func) {
    func.walk([&](shard::AllSliceOp slice) { worklist.push_back(slice); });
    while (!worklist.empty())
      moveUp(worklist.pop_back_val());
  }

private:
  /// `type` with dim `axis` of `size`.
  static RankedTensorType withDim(RankedTensorType type, int64_t axis, int64_t size) {
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = size;
    return RankedTensorType::get(shape, type.getElementType());
  }

  /// A slice of `value` along `axis` as `like` slices, queued to move on.
  Value sliceOf(OpBuilder &b, shard::AllSliceOp like, Value value, int64_t axis) {
    auto type = cast<RankedTensorType>(value.getType());
    int64_t likeAxis = like.getSliceAxis().getSExtValue();
    int64_t ways = cast<RankedTensorType>(like.getInput().getType()).getDimSize(likeAxis) /
                   like.getType().getDimSize(likeAxis);
    auto slice = cast<shard::AllSliceOp>(b.clone(*like));
    slice->setOperand(0, value);
    slice.setSliceAxis(APInt(64, axis));
    slice.getResult().setType(withDim(type, axis, type.getDimSize(axis) / ways));
    worklist.push_back(slice);
    return slice;
  }

  /// `producer` rebuilt on `operands` with the slice's result type.
  static void replaceWithClone(OpBuilder &b, shard::AllSliceOp slice, Operation *producer,
                               ValueRange operands) {
    Operation *local = b.clone(*producer);
    local->setOperands(operands);
    auto type = cast<RankedTensorType>(producer->getResult(0).getType());
    local->getResult(0).setType(RankedTensorType::get(slice.getType().getShape(),
                                                      type.getElementType()));
    slice.replaceAllUsesWith(local->getResult(0));
    slice.erase();
    producer->erase();
  }

  void moveUp(shard::AllSliceOp slice) {
    Operation *producer = slice.getInput().getDefiningOp();
    // Not into the optimizer's update: its slice of a param (weight decay's
    // `w * decay`) became the forward's slice of the same param, which CSE
    // then made one, computed per microbatch and read by the update after
    // the accumulates (a plan the runtime refuses).
    if (!producer || !producer->hasOneUse() || producer->getNumResults() != 1 ||
        producer->getNumRegions() || producer->getBlock() != slice->getBlock() ||
        producer->hasAttr(attr::kUpdateBucket))
      return;
    int64_t axis = slice.getSliceAxis().getSExtValue();
    auto whole = cast<RankedTensorType>(slice.getInput().getType());
    OpBuilder b(slice);
    if (auto broadcast = dyn_cast<BroadcastOp>(producer)) {
      auto in = cast<RankedTensorType>(broadcast.getInput().getType());
      int64_t inAxis = axis - (whole.getRank() - in.getRank());
      // Along a dim the broadcast repeats, the input is what every block
      // repeats; along one it carries, the input's block.
      Value input = broadcast.getInput();
      if (inAxis >= 0 && in.getDimSize(inAxis) != 1)
        input = sliceOf(b, slice, input, inAxis);
      return replaceWithClone(b, slice, producer, {input});
    }
    if (auto reshape = dyn_cast<ReshapeOp>(producer)) {
      // The sliced dim must be one the reshape carries whole, at the same
      // place in the elements' order.
      auto in = cast<RankedTensorType>(reshape.getInput().getType());
      int64_t before = 1;
      for (int64_t d = 0; d < axis; ++d)
        before *= whole.getDimSize(d);
      int64_t inBefore = 1;
      for (int64_t d = 0; d < in.getRank(); inBefore *= in.getDimSize(d), ++d)
        if (inBefore == before && in.getDimSize(d) == whole.getDimSize(axis))
          return replaceWithClone(b, slice, producer,
                                  {sliceOf(b, slice, reshape.getInput(), d)});
      return;
    }
    if (!isElementwise(producer))
      return;
    // Operands of the result's shape are sliced alike; scalars stay.
    SmallVector<Value> operands;
    for (Value operand : producer->getOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.getType());
      if (!type || (type.getRank() != 0 && type.getShape() != whole.getShape()))
        return;
      operands.push_back(operand);
    }
    for (Value &operand : operands)
      if (cast<RankedTensorType>(operand.getType()).getRank() != 0)
        operand = sliceOf(b, slice, operand, axis);
    replaceWithClone(b, slice, producer, operands);
  }

  SmallVector<shard::AllSliceOp> worklist;
};
} // namespace

void mlir::loom::sliceEarly(func::FuncOp func) { SliceEarly().run(func); }
