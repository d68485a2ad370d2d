//===- HoistInvariantLoads.cpp - Loads a loop does not change, before it --===//
//
// convert-linalg-to-loops loads an input element in the innermost loop
// even when the loop does not move its indices: an embedding's id, read
// once per column of the row it picks. The kernels' pointers carry no
// noalias, so LLVM must assume the loop's stores may change that element,
// keeps the load (and the row address computed from it) in the loop, and
// does not vectorize it: an embedding lookup copied a float at a time.
// A linalg op's inputs never alias its output, and the plan gives a
// kernel's arguments disjoint bytes (a result written over an argument is
// that argument's own value: loom-kernel-destinations), so a load whose
// memref and indices are defined outside the loop, from a buffer the loop
// never writes through any view of the same base, moves before the loop.
//
//===----------------------------------------------------------------------===//

#include "Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMHOISTINVARIANTLOADS
#include "Codegen/CPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// The buffer `memref` is a view of: a kernel argument or an allocation.
static Value baseOf(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>())
    memref = view.getViewSource();
  return memref;
}

/// Whether some op inside `loop` may write to `base` (or to memory it
/// cannot name: a call, an op with unknown effects).
static bool writesBase(scf::ForOp loop, Value base) {
  WalkResult result = loop.getBody()->walk([&](Operation *op) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects) {
      return op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ? WalkResult::advance()
                                                                : WalkResult::interrupt();
    }
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances) {
      if (!isa<MemoryEffects::Write, MemoryEffects::Free>(effect.getEffect()))
        continue;
      Value written = effect.getValue();
      if (!written || baseOf(written) == base)
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

/// Hoists the invariant loads of `loop`'s own block.
static void hoistLoads(scf::ForOp loop) {
  // A loop of no trips would not have loaded at all.
  std::optional<APInt> trips = loop.getStaticTripCount();
  if (!trips || trips->isZero())
    return;
  for (auto load : llvm::make_early_inc_range(loop.getBody()->getOps<memref::LoadOp>()))
    if (loop.isDefinedOutsideOfLoop(load.getMemRef()) &&
        llvm::all_of(load.getIndices(),
                     [&](Value v) { return loop.isDefinedOutsideOfLoop(v); }) &&
        !writesBase(loop, baseOf(load.getMemRef())))
      load->moveBefore(loop);
}

namespace {
struct LoomHoistInvariantLoads
    : public loom::impl::LoomHoistInvariantLoadsBase<LoomHoistInvariantLoads> {
  void runOnOperation() override {
    // Post-order: innermost loops first, so a load hoisted out of one can
    // leave the next loop out too when that one keeps its indices as well.
    getOperation()->walk([](scf::ForOp loop) { hoistLoads(loop); });
  }
};
} // namespace
