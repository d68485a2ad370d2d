//===- CarryOutOfLoop.h - A loop's read-modify-write pair as an iter_arg -*- C++ -*-===//
//
// Shared by the register-tile accumulators (HoistAccumulators.cpp) and the
// reduction accumulators (PromoteLoopAccumulators.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_CPU_CARRYOUTOFLOOP_H
#define LOOM_CODEGEN_CPU_CARRYOUTOFLOOP_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::loom {

/// Moves `read` (whose result is `value`) before `loop` and `write` after
/// it, the value carried through the loop as a new last iter_arg: `stored`,
/// the write's value operand, is yielded each iteration and then bound to
/// the loop's new result. The caller has checked that nothing else in the
/// loop touches the place. Returns the new loop (`loop` is erased).
inline scf::ForOp carryOutOfLoop(RewriterBase &rewriter, scf::ForOp loop,
                                 Operation *read, Value value, Operation *write,
                                 OpOperand &stored) {
  rewriter.setInsertionPoint(loop);
  read->moveBefore(loop);
  auto carried = cast<scf::ForOp>(*loop.replaceWithAdditionalYields(
      rewriter, ValueRange{value}, /*replaceInitOperandUsesInLoop=*/true,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument>) {
        return SmallVector<Value>{stored.get()};
      }));
  write->moveAfter(carried);
  stored.assign(carried.getResults().back());
  return carried;
}

} // namespace mlir::loom

#endif // LOOM_CODEGEN_CPU_CARRYOUTOFLOOP_H
