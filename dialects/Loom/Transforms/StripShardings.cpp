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
    SmallVector<Operation *> dead;
    getOperation().walk([&](Operation *op) {
      if (auto annotation = dyn_cast<shard::ShardOp>(op)) {
        annotation.replaceAllUsesWith(annotation.getSrc());
        dead.push_back(op);
      } else if (isa<shard::ShardingOp>(op)) {
        dead.push_back(op);
      }
    });
    // Annotations first: they are the shardings' only users.
    for (Operation *op : dead)
      if (isa<shard::ShardOp>(op))
        op->erase();
    for (Operation *op : dead)
      if (isa<shard::ShardingOp>(op) && op->use_empty())
        op->erase();
  }
};
} // namespace
