//===- HoistAccumulators.cpp - Register-tile accumulators out of the k loop ===//

#include "Codegen/CPU/CarryOutOfLoop.h"
#include "Codegen/CPU/CpuMatmul.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

/// The read of `write`'s vector at the same place, in the same block, before
/// it, when nothing else in `loop` touches their memref.
static vector::TransferReadOp matchingRead(scf::ForOp loop, vector::TransferWriteOp write) {
  Value base = write.getBase();
  vector::TransferReadOp read;
  for (Operation *user : base.getUsers()) {
    if (!loop->isProperAncestor(user))
      continue;
    if (user == write.getOperation())
      continue;
    auto candidate = dyn_cast<vector::TransferReadOp>(user);
    if (!candidate || read || candidate->getBlock() != write->getBlock() ||
        !candidate->isBeforeInBlock(write) ||
        candidate.getVectorType() != write.getVectorType() ||
        candidate.getPermutationMap() != write.getPermutationMap() ||
        candidate.getIndices() != write.getIndices() || candidate.getMask() ||
        write.getMask())
      return nullptr;
    read = candidate;
  }
  return read;
}

/// Whether a view of `base` (made outside `loop`) is used inside it: an
/// access the base's own users would not show.
static bool viewReachesInto(scf::ForOp loop, Value base) {
  SmallVector<Value> pending{base};
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (value != base && loop->isProperAncestor(user))
        return true;
      if (isa<ViewLikeOpInterface>(user) && !loop->isProperAncestor(user))
        llvm::append_range(pending, user->getResults());
    }
  }
  return false;
}

void loom::hoistViewAccumulators(Operation *root) {
  IRRewriter rewriter(root->getContext());
  bool changed = true;
  // Innermost loops first; a hoisted pair may then hoist out of the next.
  while (changed) {
    changed = false;
    root->walk([&](scf::ForOp loop) {
      for (auto write : llvm::make_early_inc_range(loop.getBody()->getOps<vector::TransferWriteOp>())) {
        // The views packMatmul made, and padToWholeTiles' temporaries, where
        // no view of them reaches into the loop; upstream hoists the rest
        // (but left a padded [4096, 512] @ [512, 16]'s accumulators in
        // memory, stored every k step: 3.2 ms against 1.2 for 32 columns).
        // Also a kernel's own result, where splitOffTails left a bulk's
        // accumulator (upstream takes allocations only; the plan gives a
        // kernel's arguments disjoint bytes but for a result over its own
        // argument, which a contraction's inputs never are).
        Value base = write.getBase();
        Operation *source = base.getDefiningOp();
        auto argument = dyn_cast<BlockArgument>(base);
        bool kernelResult = argument && isa<func::FuncOp>(argument.getOwner()->getParentOp());
        bool whole = kernelResult || isa_and_nonnull<memref::AllocOp>(source);
        if (!(whole || isa_and_nonnull<memref::ReinterpretCastOp>(source)) ||
            (whole && viewReachesInto(loop, base)) ||
            !loop.isDefinedOutsideOfLoop(write.getBase()) ||
            !llvm::all_of(write.getIndices(),
                          [&](Value v) { return loop.isDefinedOutsideOfLoop(v); }))
          continue;
        vector::TransferReadOp read = matchingRead(loop, write);
        if (!read || !loop.isDefinedOutsideOfLoop(read.getPadding()))
          continue;
        loom::carryOutOfLoop(rewriter, loop, read, read.getResult(), write,
                             write.getValueToStoreMutable());
        changed = true;
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
  }
}
