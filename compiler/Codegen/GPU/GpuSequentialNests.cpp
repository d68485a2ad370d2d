//===- GpuSequentialNests.cpp - Sequential loop nests made parallel -------===//
//
// linalg's loops leave two kinds of top-level scf.for nests that
// loom-map-loops-to-gpu would otherwise run on one GPU thread: a reduction
// over an outer axis (`for b { parallel (i, j) { acc[i, j] += x[b, i, j] } }`,
// a bias's or a batch's gradient) and a full reduction to one element
// (`for ... { acc[] += f(x[...]) }`, a loss, a norm). On one thread they
// take seconds at a training step's sizes, and a sequential f32 sum of
// millions of terms loses its low digits (a 4M-element mse came out 0.36%
// low). Here the first becomes a parallel loop around the sequential one
// (each thread sums its own element, in the CPU's order), the second a
// grid-strided launch whose warps combine partial sums and fold them into
// the accumulator atomically.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/GpuLoops.h"

#include "Codegen/GPU/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::loom;

/// The loops of a perfect nest from `outer` down, none carrying values: each
/// body but the last holds only the next loop (and its terminator). Empty
/// when one of them carries values.
static SmallVector<scf::ForOp> perfectForNest(scf::ForOp outer) {
  SmallVector<scf::ForOp> fors;
  for (scf::ForOp loop = outer; loop;) {
    if (loop.getNumRegionIterArgs() != 0)
      return {};
    fors.push_back(loop);
    Block *body = loop.getBody();
    loop = body->getOperations().size() == 2 ? dyn_cast<scf::ForOp>(body->front())
                                             : scf::ForOp();
  }
  return fors;
}

/// Whether `value` is defined outside `op` (so it is the same at every
/// iteration of the loops inside `op`).
static bool isDefinedOutside(Value value, Operation *op) {
  return !op->isAncestor(value.getParentRegion()->getParentOp());
}

scf::ParallelOp loom::interchangeIntoParallel(scf::ForOp outer) {
  // The chain of loops whose bodies hold only the next loop, ending at the
  // scf.parallel that the last one holds alone.
  SmallVector<scf::ForOp> fors;
  Operation *op = outer;
  while (auto loop = dyn_cast<scf::ForOp>(op)) {
    Block *body = loop.getBody();
    if (loop.getNumRegionIterArgs() != 0 || body->getOperations().size() != 2)
      return nullptr;
    fors.push_back(loop);
    op = &body->front();
  }
  auto parallel = dyn_cast<scf::ParallelOp>(op);
  if (!parallel || parallel.getNumReductions() != 0 || !getLoopSpace(parallel))
    return nullptr;
  for (Value bound : llvm::concat<Value>(parallel.getLowerBound(),
                                         parallel.getUpperBound(),
                                         parallel.getStep()))
    if (!isDefinedOutside(bound, outer))
      return nullptr;
  // Interchange is legal when each parallel iteration touches its own
  // elements of whatever the nest writes: every access to a written buffer
  // uses the same indices, among them every parallel induction variable.
  // Then the iterations of the sequential loops run, per element, in the
  // order they ran before.
  llvm::DenseMap<Value, SmallVector<Value>> written;
  bool ok = true;
  parallel.getBody()->walk([&](Operation *inner) {
    if (auto store = dyn_cast<memref::StoreOp>(inner)) {
      SmallVector<Value> indices(store.getIndices());
      auto [it, inserted] = written.try_emplace(viewRoot(store.getMemRef()), indices);
      ok &= isDefinedOutside(store.getMemRef(), outer) && it->second == indices &&
            llvm::all_of(parallel.getInductionVars(), [&](Value iv) {
              return llvm::is_contained(indices, iv);
            });
    } else if (!isa<memref::LoadOp, scf::ForOp, scf::IfOp, scf::YieldOp,
                    scf::ReduceOp>(inner) &&
               !isMemoryEffectFree(inner)) {
      ok = false;
    }
  });
  if (!ok || written.empty())
    return nullptr;
  parallel.getBody()->walk([&](memref::LoadOp load) {
    auto it = written.find(viewRoot(load.getMemRef()));
    if (it != written.end())
      ok &= SmallVector<Value>(load.getIndices()) == it->second;
  });
  if (!ok)
    return nullptr;

  OpBuilder b(outer);
  auto interchanged = scf::ParallelOp::create(
      b, outer.getLoc(), parallel.getLowerBound(), parallel.getUpperBound(),
      parallel.getStep());
  b.setInsertionPoint(interchanged.getBody()->getTerminator());
  IRMapping mapping;
  b.clone(*outer, mapping);
  auto moved = cast<scf::ParallelOp>(mapping.lookup(parallel.getOperation()));
  for (auto [from, to] :
       llvm::zip(moved.getInductionVars(), interchanged.getInductionVars()))
    from.replaceAllUsesWith(to);
  Block *body = moved.getBody();
  moved->getBlock()->getOperations().splice(
      moved->getIterator(), body->getOperations(), body->begin(),
      std::prev(body->end()));
  moved.erase();
  outer.erase();
  return interchanged;
}

std::optional<ScalarReduction> loom::matchScalarReduction(scf::ForOp outer) {
  SmallVector<scf::ForOp> fors = perfectForNest(outer);
  if (fors.empty())
    return std::nullopt;
  std::optional<RowReduction> reduction = matchAccumulatingLoop(fors.back());
  if (!reduction)
    return std::nullopt;
  // One accumulator element for the whole nest, which nothing else in the
  // body reads (matchAccumulatingLoop checked the innermost body).
  for (Value index : reduction->accStore.getIndices())
    if (!isDefinedOutside(index, outer))
      return std::nullopt;
  if (!isDefinedOutside(reduction->accStore.getMemRef(), outer))
    return std::nullopt;
  ScalarReduction match{fors, *reduction, {}};
  for (scf::ForOp loop : fors) {
    std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound());
    std::optional<int64_t> upper = getConstantIntValue(loop.getUpperBound());
    std::optional<int64_t> step = getConstantIntValue(loop.getStep());
    if (!lower || !upper || !step || *step <= 0)
      return std::nullopt;
    match.space.lower.push_back(*lower);
    match.space.steps.push_back(*step);
    match.space.trips.push_back(std::max<int64_t>(0, (*upper - *lower + *step - 1) / *step));
    match.space.total *= match.space.trips.back();
  }
  return match;
}

/// Folds `value` into `memref[indices]` atomically with `combine`'s kind
/// (`atom.global.add.f32` for sums; LLVM expands the maxima into a
/// compare-and-swap loop).
static void atomicCombine(OpBuilder &b, Location loc, Operation *combine,
                          Value value, Value memref, ValueRange indices) {
  arith::AtomicRMWKind kind = isa<arith::AddFOp>(combine) ? arith::AtomicRMWKind::addf
                              : isa<arith::MaximumFOp>(combine)
                                  ? arith::AtomicRMWKind::maximumf
                                  : arith::AtomicRMWKind::maxnumf;
  memref::AtomicRMWOp::create(b, loc, kind, value, memref, indices);
}

void loom::mapScalarReduction(ScalarReduction nest, int64_t blockSize) {
  scf::ForOp outer = nest.fors.front();
  OpBuilder b(outer);
  Location loc = outer.getLoc();
  int64_t threads = maxBlockThreads(blockSize);
  // At least 16 terms a thread, so that partial sums are worth their
  // atomics, and at most 1024 blocks (8 per multiprocessor on the largest
  // GPUs): enough loads in flight to stream from memory.
  constexpr int64_t kTermsPerThread = 16, kMaxBlocks = 1024;
  int64_t blocks = std::clamp<int64_t>(
      nest.space.total / (threads * kTermsPerThread), 1, kMaxBlocks);
  Value one = constantIndex(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, constantIndex(b, loc, blocks), one,
                                      one, constantIndex(b, loc, threads), one, one);
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value first = arith::AddIOp::create(
      k, loc,
      arith::MulIOp::create(k, loc, launch.getBlockIds().x,
                            constantIndex(k, loc, threads)),
      launch.getThreadIds().x);
  RowReduction &reduction = nest.reduction;
  Operation *combine = reduction.combine;
  // Each thread combines the terms first, first + grid, ... of the nest's
  // iterations in row-major order, from the combine's identity.
  auto strided = scf::ForOp::create(
      k, loc, first, constantIndex(k, loc, nest.space.total),
      constantIndex(k, loc, blocks * threads),
      ValueRange{combineIdentity(k, loc, combine)});
  IRMapping mapping;
  {
    OpBuilder f = OpBuilder::atBlockBegin(strided.getBody());
    SmallVector<Value> ivs;
    for (scf::ForOp loop : nest.fors)
      ivs.push_back(loop.getInductionVar());
    delinearize(f, loc, strided.getInductionVar(), ivs, nest.space, mapping);
    mapping.map(reduction.accLoad.getResult(), strided.getRegionIterArgs()[0]);
    for (Operation &op : reduction.inner.getBody()->without_terminator())
      if (&op != reduction.accLoad.getOperation() &&
          &op != reduction.accStore.getOperation())
        f.clone(op, mapping);
    scf::YieldOp::create(f, loc, mapping.lookup(reduction.accStore.getValue()));
  }
  // A warp's partials combine by shuffles; lane 0 folds the warp's into the
  // accumulator. The order of the atomic folds varies from run to run, so a
  // sum's last bits may too (docs/precision.md).
  Value partial = emitWarpCombine(k, loc, combine, strided.getResult(0));
  Value lane = arith::RemUIOp::create(k, loc, launch.getThreadIds().x,
                                      constantIndex(k, loc, kWarpSize));
  Value leader = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::eq, lane,
                                       constantIndex(k, loc, 0));
  scf::IfOp::create(k, loc, leader, [&](OpBuilder &w, Location wl) {
    SmallVector<Value> indices;
    for (Value index : reduction.accStore.getIndices())
      indices.push_back(mapping.lookupOrDefault(index));
    atomicCombine(w, wl, combine, partial,
                  mapping.lookupOrDefault(reduction.accStore.getMemRef()), indices);
    scf::YieldOp::create(w, wl);
  });
  gpu::TerminatorOp::create(k, loc);
  outer.erase();
  sinkViewsIntoLaunch(launch);
}
