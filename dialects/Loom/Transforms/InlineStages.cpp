//===- InlineStages.cpp - Inline pipeline stages for one rank -------------===//

#include "Loom/Transforms/Passes.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMINLINESTAGES
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {
struct LoomInlineStages
    : public loom::impl::LoomInlineStagesBase<LoomInlineStages> {
  void runOnOperation() override {
    SmallVector<StageOp> stages;
    getOperation().walk([&](StageOp stage) { stages.push_back(stage); });
    for (StageOp stage : stages) {
      Block &body = stage.getBody().front();
      auto yield = cast<YieldOp>(body.getTerminator());
      // Each op remembers its stage, which placing the stages on ranks
      // (loom-place-stages) starts from.
      auto stageAttr = IntegerAttr::get(IntegerType::get(stage.getContext(), 64),
                                        static_cast<int64_t>(stage.getStage()));
      body.walk([&](Operation *op) {
        if (op != yield && !op->hasAttr(attr::kStage))
          op->setAttr(attr::kStage, stageAttr);
      });
      stage.replaceAllUsesWith(yield.getValues());
      yield.erase();
      // Stage bodies are not isolated: their ops move out unchanged.
      stage->getBlock()->getOperations().splice(
          stage->getIterator(), body.getOperations());
      stage.erase();
    }
  }
};
} // namespace
