//===- MapLoopsToGpu.cpp - A kernel's loops as flat gpu.launch grids ------===//

#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/GPU/Utils/GPUUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMMAPLOOPSTOGPU
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// Ops worth recomputing inside a kernel rather than passing in: they are
/// free, and views must not cross (a bare pointer would lose the offset).
static bool isSunk(Operation *op) {
  return op->hasTrait<OpTrait::ConstantLike>() || isa<ViewLikeOpInterface>(op) ||
         (op->getDialect() && op->getDialect()->getNamespace() == "arith" &&
          isMemoryEffectFree(op));
}

/// Recomputes inside `launch` every view (and view of a view) it reads, so
/// that only whole buffers cross; upstream sinking would keep a view outside
/// when its base buffer is not otherwise used in the kernel.
void mlir::loom::sinkViewsIntoLaunch(gpu::LaunchOp launch) {
  bool changed = true;
  while (changed) {
    changed = false;
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(launch.getBody(), captured);
    for (Value value : captured) {
      Operation *def = value.getDefiningOp();
      if (!def || !isa<ViewLikeOpInterface>(def))
        continue;
      OpBuilder b = OpBuilder::atBlockBegin(&launch.getBody().front());
      Operation *clone = b.clone(*def);
      value.replaceUsesWithIf(clone->getResult(0), [&](OpOperand &use) {
        return launch->isProperAncestor(use.getOwner());
      });
      changed = true;
    }
  }
  (void)sinkOperationsIntoLaunchOp(launch, isSunk);
}

static Value constantIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

namespace {
struct LoomMapLoopsToGpu
    : public loom::impl::LoomMapLoopsToGpuBase<LoomMapLoopsToGpu> {
  using Base::Base;
  void runOnOperation() override;
  LogicalResult mapParallel(scf::ParallelOp loop);
  void wrapInSingleThread(ArrayRef<Operation *> ops);
};
} // namespace

LogicalResult LoomMapLoopsToGpu::mapParallel(scf::ParallelOp loop) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  SmallVector<int64_t> lower, trips, steps;
  int64_t total = 1;
  for (auto [lb, ub, step] : llvm::zip(loop.getLowerBound(), loop.getUpperBound(),
                                       loop.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb), u = getConstantIntValue(ub),
                           s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0)
      return loop.emitError("loop bounds must be constants to map to the GPU");
    lower.push_back(*l);
    steps.push_back(*s);
    trips.push_back(std::max<int64_t>(0, (*u - *l + *s - 1) / *s));
    total *= trips.back();
  }
  int64_t blocks = std::max<int64_t>(1, (total + blockSize - 1) / blockSize);
  Value one = constantIndex(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, constantIndex(b, loc, blocks), one, one,
                                      constantIndex(b, loc, blockSize), one, one);
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value linear = arith::AddIOp::create(
      k, loc,
      arith::MulIOp::create(k, loc, launch.getBlockIds().x,
                            constantIndex(k, loc, blockSize)),
      launch.getThreadIds().x);
  Value inRange = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ult, linear,
                                        constantIndex(k, loc, total));
  scf::IfOp::create(k, loc, inRange, [&](OpBuilder &t, Location l) {
    // Row-major delinearization: the last loop varies fastest, as in memory.
    IRMapping mapping;
    Value rest = linear;
    for (int d = trips.size() - 1; d >= 0; --d) {
      Value trip = constantIndex(t, l, trips[d]);
      Value index = d == 0 ? rest : arith::RemUIOp::create(t, l, rest, trip);
      if (d != 0)
        rest = arith::DivUIOp::create(t, l, rest, trip);
      Value iv = arith::AddIOp::create(
          t, l, constantIndex(t, l, lower[d]),
          arith::MulIOp::create(t, l, index, constantIndex(t, l, steps[d])));
      mapping.map(loop.getInductionVars()[d], iv);
    }
    for (Operation &op : loop.getBody()->without_terminator())
      t.clone(op, mapping);
    scf::YieldOp::create(t, l);
  });
  gpu::TerminatorOp::create(k, loc);
  loop.erase();
  loom::sinkViewsIntoLaunch(launch);
  return success();
}

void LoomMapLoopsToGpu::wrapInSingleThread(ArrayRef<Operation *> ops) {
  OpBuilder b(ops.front());
  Location loc = ops.front()->getLoc();
  Value one = constantIndex(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, one, one, one, one, one, one);
  Block &body = launch.getBody().front();
  for (Operation *op : ops)
    op->moveBefore(&body, body.end());
  OpBuilder end = OpBuilder::atBlockEnd(&body);
  gpu::TerminatorOp::create(end, loc);
  loom::sinkViewsIntoLaunch(launch);
}

void LoomMapLoopsToGpu::runOnOperation() {
  func::FuncOp func = getOperation();
  if (func.isExternal())
    return;
  Block &entry = func.getBody().front();
  for (auto copy : llvm::make_early_inc_range(entry.getOps<memref::CopyOp>()))
    if (failed(loom::lowerCopyToLoop(copy)))
      return signalPassFailure();
  for (auto loop : llvm::make_early_inc_range(entry.getOps<scf::ParallelOp>()))
    if (failed(mapParallel(loop)))
      return signalPassFailure();
  // Whatever still touches memory on the host side runs on one GPU thread.
  SmallVector<Operation *> pending;
  auto flush = [&] {
    if (!pending.empty())
      wrapInSingleThread(pending);
    pending.clear();
  };
  llvm::SmallPtrSet<Operation *, 8> pendingSet;
  for (Operation &op : llvm::make_early_inc_range(entry.without_terminator())) {
    // Scalar arithmetic on what a pending op loaded stays with it.
    bool usesPending = llvm::any_of(op.getOperands(), [&](Value v) {
      return pendingSet.contains(v.getDefiningOp());
    });
    if (isa<gpu::LaunchOp>(op)) {
      flush();
      pendingSet.clear();
    } else if (isSunk(&op) && !usesPending) {
      // Pure and independent of the group: it stays, and is sunk (copied)
      // into whichever launches use it.
    } else {
      pending.push_back(&op);
      pendingSet.insert(&op);
    }
  }
  flush();
}
