//===- StripDropout.cpp - A dropout outside a training step is the identity ===//

#include "Loom/IR/LoomOps.h"
#include "Loom/Transforms/Passes.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSTRIPDROPOUT
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomStripDropout : public loom::impl::LoomStripDropoutBase<LoomStripDropout> {
  void runOnOperation() override {
    // Erased before partitioning and outlining, with their positions, so
    // that a forward has no kernel for them (the lowering's identity had
    // left a copy and the aranges).
    SmallVector<loom::DropoutOp> keyless;
    getOperation().walk([&](loom::DropoutOp op) {
      if (op.getKeys().empty())
        keyless.push_back(op);
    });
    for (loom::DropoutOp op : keyless) {
      SmallVector<Value> positions(op.getPositions());
      op.replaceAllUsesWith(op.getInput());
      op.erase();
      for (Value position : positions)
        if (Operation *def = position.getDefiningOp(); def && isa<loom::ArangeOp>(def) &&
                                                         def->use_empty())
          def->erase();
    }
  }
};
} // namespace
