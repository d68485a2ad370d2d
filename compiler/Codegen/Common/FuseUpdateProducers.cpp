//===- FuseUpdateProducers.cpp - An update's shared terms recomputed ------===//
//
// A param's update reads its clipped gradient g * c in two places (Adam's
// moments, SGD's momentum and step). Upstream's elementwise fusion fuses a
// producer only into its one consumer, so g * c stayed a loop of its own
// writing a temporary: on the GPU a second launch per update bucket (the
// temporary breaks loom-fuse-update-loops' single flat loop), on the CPU a
// store and two loads per element for one multiply.
//
//===----------------------------------------------------------------------===//

#include "Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMFUSEUPDATEPRODUCERS
#include "Codegen/Common/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomFuseUpdateProducers
    : public loom::impl::LoomFuseUpdateProducersBase<LoomFuseUpdateProducers> {
  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    if (!kernel->hasAttr(loom::attr::kUpdateKernel))
      return;
    RewritePatternSet patterns(&getContext());
    // An elementwise temporary, into each of its consumers: an update's
    // terms are a few flops an element, cheaper recomputed than stored.
    // Not a result (a new moment that the new param also reads): that is
    // stored anyway, and read from there it can be written in place.
    linalg::populateElementwiseOpsFusionPatterns(patterns, [](OpOperand *operand) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      return producer && producer.getNumReductionLoops() == 0 &&
             llvm::none_of(producer->getUsers(), [](Operation *user) {
               return isa<func::ReturnOp>(user);
             });
    });
    if (failed(applyPatternsGreedily(kernel, std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
