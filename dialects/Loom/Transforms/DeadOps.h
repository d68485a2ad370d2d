//===- DeadOps.h - Erasing what nothing reads ------------------*- C++ -*-===//
//
// Passes that rewrite a function's body leave ops whose results nothing
// reads any more (an unused MoE block's routing, a narrow value rebuilt
// wide); they erase them last to first, so that an op's operands die with
// it in the same sweep.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_DEADOPS_H
#define LOOM_TRANSFORMS_DEADOPS_H

#include "mlir/IR/Block.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::loom {

/// Erases the ops of `block` that are trivially dead (side-effect free,
/// results unread), last to first.
inline void eraseDeadOps(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

} // namespace mlir::loom

#endif // LOOM_TRANSFORMS_DEADOPS_H
