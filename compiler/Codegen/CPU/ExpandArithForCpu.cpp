//===- ExpandArithForCpu.cpp - arith ops LLVM lacks, max and min kept -----===//
//
// Upstream's arith-expand also rewrites every maxnumf, minnumf, maximumf and
// minimumf into compares and selects, which LLVM's loop vectorizer does not
// recognize as a reduction: a softmax's row maximum stayed a scalar loop.
// Left alone, arith-to-llvm makes them llvm.maxnum and friends, whose
// reductions LLVM vectorizes (maxnum without fast-math flags, with a NaN
// check per vector). What LLVM cannot lower by itself still expands here:
// bf16 conversions (integer arithmetic, rounding to nearest even: no
// soft-float calls) and the ceiling and floor divisions.
//
//===----------------------------------------------------------------------===//

#include "Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMEXPANDARITHFORCPU
#include "Codegen/CPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomExpandArithForCpu
    : public loom::impl::LoomExpandArithForCpuBase<LoomExpandArithForCpu> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    arith::populateCeilFloorDivExpandOpsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
