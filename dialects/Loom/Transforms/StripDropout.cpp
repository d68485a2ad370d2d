//===- StripDropout.cpp - A dropout outside a training step is the identity ===//

#include "Loom/IR/LoomOps.h"
#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

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
      // An output that is an input or param itself is refused (its buffer
      // is theirs): `output y = dropout(x, p)` had been "output 'y' is
      // input 'x' itself", of a script that never wrote y = x. It stays a
      // copy, x * 1.
      Value replacement = op.getInput();
      bool returned = llvm::any_of(op->getUsers(), [](Operation *user) {
        return isa<func::ReturnOp>(user);
      });
      if (returned && isa<BlockArgument>(replacement)) {
        OpBuilder b(op);
        auto type = cast<RankedTensorType>(replacement.getType());
        Value one = loom::ConstantOp::create(b, op.getLoc(),
                                             RankedTensorType::get({}, type.getElementType()),
                                             b.getF64FloatAttr(1.0));
        replacement = loom::MulOp::create(b, op.getLoc(), type, replacement, one);
      }
      op.replaceAllUsesWith(replacement);
      op.erase();
      for (Value position : positions)
        if (Operation *def = position.getDefiningOp(); def && isa<loom::ArangeOp>(def) &&
                                                         def->use_empty())
          def->erase();
    }
  }
};
} // namespace
