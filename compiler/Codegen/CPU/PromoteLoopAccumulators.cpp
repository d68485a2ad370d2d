//===- PromoteLoopAccumulators.cpp - Reduction accumulators in registers --===//
//
// convert-linalg-to-loops turns a row reduction (a softmax's max and sum, a
// norm's mean) into an innermost loop that loads the output element, adds
// one term and stores it back each iteration. The kernels' pointers carry
// no noalias, so LLVM must assume the input loads may read that element
// and keeps it in memory: every step waits on a store-to-load forward. A
// linalg op's inputs never alias its output, so the element can live in a
// register for the loop: loaded before, carried as an iter_arg, stored
// after. Loops that touch the memref anywhere else are left alone. A sum
// so carried may be reassociated, which is what lets LLVM vectorize it:
// a softmax's row sums, a norm's, a loss's.
//
//===----------------------------------------------------------------------===//

#include "Codegen/CPU/CarryOutOfLoop.h"
#include "Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMPROMOTELOOPACCUMULATORS
#include "Codegen/CPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// The load of `store`'s element earlier in its block, when it is the only
/// other access to the memref inside `loop`.
static memref::LoadOp accumulatorLoad(scf::ForOp loop, memref::StoreOp store) {
  memref::LoadOp load;
  for (Operation *user : store.getMemRef().getUsers()) {
    if (user == store.getOperation() || !loop->isProperAncestor(user))
      continue;
    auto candidate = dyn_cast<memref::LoadOp>(user);
    if (!candidate || load || candidate->getBlock() != store->getBlock() ||
        !candidate->isBeforeInBlock(store) ||
        candidate.getIndices() != store.getIndices())
      return nullptr;
    load = candidate;
  }
  return load;
}

/// When `promoted` now carries its sum `carried` straight into an inner
/// loop's sum (a full reduction's nest, promoted level by level), starts
/// the inner sum from zero and adds its result to `carried` after it: each
/// loop level sums its own terms before they meet the running total, so a
/// sum of millions of terms is a tree of short sums instead of one long
/// chain whose running total swallows the terms' low bits (a 4194304-term
/// mse was 7e-5 low as one chain). Another reassociation of the same sum.
static void blockNestedSum(IRRewriter &rewriter, scf::ForOp promoted,
                           BlockArgument carried) {
  auto yield = cast<scf::YieldOp>(promoted.getBody()->getTerminator());
  auto inner = yield.getOperands().back().getDefiningOp<scf::ForOp>();
  if (!inner || inner->getBlock() != promoted.getBody() || !carried.hasOneUse())
    return;
  unsigned k = cast<OpResult>(yield.getOperands().back()).getResultNumber();
  if (inner.getInitArgs()[k] != carried)
    return;
  BlockArgument innerCarried = inner.getRegionIterArgs()[k];
  auto innerYield = cast<scf::YieldOp>(inner.getBody()->getTerminator());
  auto add = innerYield.getOperands()[k].getDefiningOp<arith::AddFOp>();
  if (!add || !innerCarried.hasOneUse() ||
      !llvm::is_contained(add->getOperands(), Value(innerCarried)) ||
      !bitEnumContainsAll(add.getFastmath(), arith::FastMathFlags::reassoc))
    return;
  rewriter.setInsertionPoint(inner);
  // -0 is addf's identity (0 + -0 is 0).
  Value zero = arith::ConstantOp::create(
      rewriter, inner.getLoc(),
      rewriter.getFloatAttr(carried.getType(), -0.0));
  inner.getInitArgsMutable()[k].assign(zero);
  rewriter.setInsertionPoint(yield);
  auto total = arith::AddFOp::create(rewriter, inner.getLoc(), carried,
                                     inner.getResult(k), add.getFastmath());
  yield.getResultsMutable()[yield.getNumOperands() - 1].assign(total);
}

/// Promotes one accumulator of `loop`; false when it has none.
static bool promoteOne(IRRewriter &rewriter, scf::ForOp loop) {
  for (auto store : loop.getBody()->getOps<memref::StoreOp>()) {
    if (!loop.isDefinedOutsideOfLoop(store.getMemRef()) ||
        !llvm::all_of(store.getIndices(),
                      [&](Value v) { return loop.isDefinedOutsideOfLoop(v); }))
      continue;
    memref::LoadOp load = accumulatorLoad(loop, store);
    if (!load)
      continue;
    scf::ForOp promoted = loom::carryOutOfLoop(rewriter, loop, load, load.getResult(),
                                               store, store.getValueMutable());
    // A sum may be reassociated: LLVM then vectorizes it (partial sums
    // per lane, added at the end) instead of one add after another.
    BlockArgument carried = promoted.getRegionIterArgs().back();
    // Not a 16-bit sum (`accumulate bf16`/`f16`): each of its partial sums
    // is rounded to 8 or 11 bits, so another association is another result,
    // not a last-bit difference; it stays the sequential sum precision.md
    // promises (reassociated, it depended on the CPU's vector width).
    auto floatType = dyn_cast<FloatType>(carried.getType());
    if (floatType && floatType.getWidth() < 32)
      return true;
    auto yield = cast<scf::YieldOp>(promoted.getBody()->getTerminator());
    if (auto add = yield.getOperands().back().getDefiningOp<arith::AddFOp>())
      if (llvm::is_contained(add->getOperands(), Value(carried)))
        add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
    blockNestedSum(rewriter, promoted, carried);
    return true;
  }
  return false;
}

namespace {
struct LoomPromoteLoopAccumulators
    : public loom::impl::LoomPromoteLoopAccumulatorsBase<LoomPromoteLoopAccumulators> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // The walk is post-order, innermost loops first; after a promotion
    // the loops changed, so walk again (a promoted pair may then leave
    // the next loop out too).
    for (Region &region : getOperation()->getRegions())
      for (Operation &function : region.getOps()) {
        bool changed = true;
        while (changed) {
          changed = false;
          function.walk([&](scf::ForOp loop) {
            if (!promoteOne(rewriter, loop))
              return WalkResult::advance();
            changed = true;
            return WalkResult::interrupt();
          });
        }
      }
  }
};
} // namespace
