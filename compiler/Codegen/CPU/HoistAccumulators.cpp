//===- HoistAccumulators.cpp - Register-tile accumulators out of the k loop ===//

#include "Codegen/CPU/CarryOutOfLoop.h"
#include "Codegen/CPU/CpuMatmul.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"

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

void loom::hoistViewAccumulators(Operation *root) {
  IRRewriter rewriter(root->getContext());
  bool changed = true;
  // Innermost loops first; a hoisted pair may then hoist out of the next.
  while (changed) {
    changed = false;
    root->walk([&](scf::ForOp loop) {
      for (auto write : llvm::make_early_inc_range(loop.getBody()->getOps<vector::TransferWriteOp>())) {
        // Only the views packMatmul made; upstream hoists the rest.
        if (!write.getBase().getDefiningOp<memref::ReinterpretCastOp>() ||
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
