//===- StripShardings.cpp - Drop sharding annotations for one rank --------===//

#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSTRIPSHARDINGS
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomStripShardings
    : public loom::impl::LoomStripShardingsBase<LoomStripShardings> {
  void runOnOperation() override {
    SmallVector<shard::ShardOp> annotations;
    SmallVector<shard::ShardingOp> shardings;
    getOperation().walk([&](Operation *op) {
      if (auto annotation = dyn_cast<shard::ShardOp>(op))
        annotations.push_back(annotation);
      else if (auto sharding = dyn_cast<shard::ShardingOp>(op))
        shardings.push_back(sharding);
    });
    // Annotations first: they are the shardings' only users.
    for (shard::ShardOp annotation : annotations) {
      annotation.replaceAllUsesWith(annotation.getSrc());
      annotation.erase();
    }
    for (shard::ShardingOp sharding : shardings)
      if (sharding->use_empty())
        sharding.erase();
  }
};
} // namespace
