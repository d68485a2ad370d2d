//===- BucketGradients.cpp - Gradient all-reduces grouped into buckets ----===//
//
// In a per-rank program, the data-parallel sums of the gradients are one
// all-reduce per param, all before the return. Many small collectives cost
// their latency each; DDP and Megatron sum gradients in buckets instead, in
// the order the backward produces them, one message per bucket, sent right
// after its last gradient exists (so a runtime can overlap it with the rest
// of the backward). Here a bucket is its all-reduces side by side after its
// last gradient, marked with its number; the plan makes them one
// collective of several buffers (as XLA's all-reduce combiner makes one
// variadic all-reduce), which the runtime packs or groups itself. The sums
// are elementwise, so the values are those of the unbucketed program, bit
// for bit.
//
//===----------------------------------------------------------------------===//

#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMBUCKETGRADIENTS
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The gradient sums one all-reduce can carry.
struct Bucket {
  SmallVector<shard::AllReduceOp> sums;
  int64_t bytes = 0;
  /// The first op (of the function's block) that reads one of the sums.
  Operation *firstReader = nullptr;
};
} // namespace

static int64_t bytesOf(RankedTensorType type) {
  return type.getNumElements() * type.getElementTypeBitWidth() / 8;
}

/// A sum over grid axes of a gradient: one whose result only the function
/// returns, as a gradient output (`grad.<param>`, from loom-autodiff), or,
/// in a training step, one of a value loom-optimizer-step marked as a
/// gradient (its readers, the update, all come after the backward).
static bool isGradientSum(shard::AllReduceOp sum, func::FuncOp func) {
  Operation *def = sum.getInput().getDefiningOp();
  if (sum.getReduction() != shard::ReductionKind::Sum || !def || sum->use_empty())
    return false;
  if (def->hasAttr(attr::kGradientOf))
    return true;
  return llvm::all_of(sum->getUses(), [&](OpOperand &use) {
    if (!isa<func::ReturnOp>(use.getOwner()))
      return false;
    auto name = func.getResultAttrOfType<StringAttr>(use.getOperandNumber(),
                                                     attr::kOutput);
    return name && name.getValue().starts_with("grad.");
  });
}

/// Moves the bucket's all-reduces right after its last gradient, in
/// order, each marked with the bucket's number: the plan builder makes them
/// one collective, which the runtime sums as one message. No pack and
/// unpack kernels: those (hundreds of pieces in a deep model's 25 MiB
/// bucket) were most of the compile time that grew with depth.
static void gatherAfterLast(Bucket &bucket, int64_t number, bool remark) {
  // Program order: the last gradient defined is the last in the bucket.
  Operation *last = bucket.sums.back().getInput().getDefiningOp();
  if (remark)
    emitRemark(last->getLoc())
        << "gradient bucket: " << bucket.sums.size()
        << " gradient sums in one all-reduce, " << bucket.bytes
        << " bytes per rank";
  auto numberAttr = IntegerAttr::get(IntegerType::get(last->getContext(), 64), number);
  Operation *after = last;
  for (shard::AllReduceOp sum : bucket.sums) {
    sum->moveAfter(after);
    sum->setAttr(attr::kGradientBucket, numberAttr);
    after = sum;
  }
}

namespace {
struct LoomBucketGradients
    : public loom::impl::LoomBucketGradientsBase<LoomBucketGradients> {
  using LoomBucketGradientsBase::LoomBucketGradientsBase;

  void runOnOperation() override {
    if (bucketMb <= 0)
      return;
    int64_t limit = gradientBucketBytes(bucketMb);
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(attr::kPartitionOf) || func.isExternal())
        continue;
      // In the order the backward produces the gradients.
      SmallVector<shard::AllReduceOp> sums;
      func.walk([&](shard::AllReduceOp sum) {
        if (isGradientSum(sum, func))
          sums.push_back(sum);
      });
      // (Sums of one gradient keep their own order: a total order, so
      // llvm::sort serves where stable_sort's buffer is deprecated.)
      llvm::sort(sums, [](shard::AllReduceOp a, shard::AllReduceOp b) {
        Operation *x = a.getInput().getDefiningOp();
        Operation *y = b.getInput().getDefiningOp();
        return x == y ? a->isBeforeInBlock(b) : x->isBeforeInBlock(y);
      });
      // A gradient summed twice alike (the partitioner made two sums of an
      // ep x tp MoE model's tp-split weight gradient) is summed once:
      // shard.all_reduce is not Pure, so CSE keeps both, and the bucket
      // carried the gradient twice (explain counted 1920 bytes for 1728).
      // (Sorted, a gradient's sums are neighbours: each is compared with
      // the kept sums of its own input.)
      SmallVector<shard::AllReduceOp> distinct;
      size_t sameInput = 0; // where the kept sums of the current input start
      for (shard::AllReduceOp sum : sums) {
        if (distinct.empty() || distinct.back().getInput() != sum.getInput())
          sameInput = distinct.size();
        ArrayRef<shard::AllReduceOp> kept = ArrayRef(distinct).drop_front(sameInput);
        const auto *same = llvm::find_if(kept, [&](shard::AllReduceOp earlier) {
          return OperationEquivalence::isEquivalentTo(earlier, sum,
                                                      OperationEquivalence::IgnoreLocations);
        });
        if (same == kept.end()) {
          distinct.push_back(sum);
          continue;
        }
        sum.getResult().replaceAllUsesWith(shard::AllReduceOp(*same).getResult());
        sum.erase();
      }
      sums = std::move(distinct);
      // One run of buckets per (axes, element type, pipeline stage), filled
      // greedily: a stage's ranks sum their own gradients.
      llvm::MapVector<std::tuple<Attribute, Type, Attribute>, Bucket> open;
      Block &body = func.getBody().front();
      SmallVector<Bucket> full;
      for (shard::AllReduceOp sum : sums) {
        auto type = cast<RankedTensorType>(sum.getInput().getType());
        Operation *def = sum.getInput().getDefiningOp();
        Attribute stage = def->getAttr(attr::kStage);
        Bucket &bucket =
            open[{sum.getGridAxesAttr(), type.getElementType(), stage}];
        // The bucket's all-reduce comes after its last gradient: a sum read
        // before that gradient (`grad.w0 = transpose(grad.x3)` reads x3's
        // sum inside the backward) closes the bucket first.
        bool readBefore = bucket.firstReader && !def->isBeforeInBlock(bucket.firstReader);
        if (!bucket.sums.empty() && (bucket.bytes + bytesOf(type) > limit || readBefore)) {
          full.push_back(std::move(bucket));
          bucket = Bucket();
        }
        bucket.sums.push_back(sum);
        bucket.bytes += bytesOf(type);
        for (Operation *user : sum->getUsers())
          if (Operation *top = body.findAncestorOpInBlock(*user))
            if (!bucket.firstReader || top->isBeforeInBlock(bucket.firstReader))
              bucket.firstReader = top;
      }
      for (auto &entry : open)
        full.push_back(std::move(entry.second));
      int64_t number = 0;
      for (Bucket &bucket : full)
        if (bucket.sums.size() > 1)
          gatherAfterLast(bucket, number++, remarks);
    }
  }
};
} // namespace
