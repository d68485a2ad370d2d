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
// (each thread sums its own element, in the CPU's order; for few elements
// of many terms, a thread per element and chunk of its terms), the second a
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

scf::ParallelOp loom::interchangeIntoParallel(scf::ForOp outer) {
  // A perfect nest of loops whose innermost body holds the scf.parallel
  // alone.
  SmallVector<scf::ForOp> fors = perfectForNest(outer);
  if (fors.empty())
    return nullptr;
  Block *innermost = fors.back().getBody();
  auto parallel = innermost->getOperations().size() == 2
                      ? dyn_cast<scf::ParallelOp>(innermost->front())
                      : scf::ParallelOp();
  if (!parallel || parallel.getNumReductions() != 0 || !getLoopSpace(parallel))
    return nullptr;
  for (Value bound : llvm::concat<Value>(parallel.getLowerBound(),
                                         parallel.getUpperBound(),
                                         parallel.getStep()))
    if (!outer.isDefinedOutsideOfLoop(bound))
      return nullptr;
  // Interchange is legal when each parallel iteration touches its own
  // elements of whatever the nest writes: every access to a written buffer
  // goes through the same view with the same indices, among them every
  // parallel induction variable. Then the iterations of the sequential
  // loops run, per element, in the order they ran before.
  struct Access {
    Value memref;
    SmallVector<Value> indices;
    bool operator==(const Access &other) const {
      return memref == other.memref && indices == other.indices;
    }
  };
  llvm::DenseMap<Value, Access> written; // by the buffer under the views
  bool ok = true;
  parallel.getBody()->walk([&](Operation *inner) {
    if (auto store = dyn_cast<memref::StoreOp>(inner)) {
      Access access{store.getMemRef(), SmallVector<Value>(store.getIndices())};
      auto [it, inserted] = written.try_emplace(viewRoot(store.getMemRef()), access);
      ok &= outer.isDefinedOutsideOfLoop(store.getMemRef()) && it->second == access &&
            llvm::all_of(parallel.getInductionVars(), [&](Value iv) {
              return llvm::is_contained(access.indices, iv);
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
      ok &= Access{load.getMemRef(), SmallVector<Value>(load.getIndices())} ==
            it->second;
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
    if (!outer.isDefinedOutsideOfLoop(index))
      return std::nullopt;
  // The partial sums are folded in with f32 atomics (`atom.global.add.f32`):
  // f32 accumulators only, which is what reductions accumulate in.
  if (!outer.isDefinedOutsideOfLoop(reduction->accStore.getMemRef()) ||
      !reduction->accStore.getValue().getType().isF32())
    return std::nullopt;
  SmallVector<Value> lowers, uppers, steps;
  for (scf::ForOp loop : fors) {
    lowers.push_back(loop.getLowerBound());
    uppers.push_back(loop.getUpperBound());
    steps.push_back(loop.getStep());
  }
  std::optional<LoopSpace> space = getLoopSpace(lowers, uppers, steps);
  if (!space)
    return std::nullopt;
  return ScalarReduction{fors, *reduction, *space};
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

/// `for i = from to `to` step `step`` running iteration i of `nest`
/// (flattened, row-major) with the accumulator carried from `init`;
/// returns the combined value. `mapping` maps what the body uses from
/// outside (an enclosing parallel loop's induction variables).
static Value accumulate(OpBuilder &b, Location loc, ScalarReduction &nest,
                        Value from, Value to, Value step, Value init,
                        IRMapping &mapping) {
  RowReduction &reduction = nest.reduction;
  auto loop = scf::ForOp::create(b, loc, from, to, step, ValueRange{init});
  OpBuilder f = OpBuilder::atBlockBegin(loop.getBody());
  SmallVector<Value> ivs;
  for (scf::ForOp each : nest.fors)
    ivs.push_back(each.getInductionVar());
  delinearize(f, loc, loop.getInductionVar(), ivs, nest.space, mapping);
  Operation *accLoad = reduction.accLoad, *accStore = reduction.accStore;
  mapping.map(accLoad->getResult(0), loop.getRegionIterArgs()[0]);
  for (Operation &op : reduction.inner.getBody()->without_terminator())
    if (&op != accLoad && &op != accStore)
      f.clone(op, mapping);
  scf::YieldOp::create(f, loc, mapping.lookup(accStore->getOperand(0)));
  return loop.getResult(0);
}

/// Folds `partial` into the nest's accumulator element (its indices through
/// `mapping`).
static void foldIntoAccumulator(OpBuilder &b, Location loc, ScalarReduction &nest,
                                Value partial, const IRMapping &mapping) {
  memref::StoreOp store = nest.reduction.accStore;
  SmallVector<Value> indices;
  for (Value index : store.getIndices())
    indices.push_back(mapping.lookupOrDefault(index));
  atomicCombine(b, loc, nest.reduction.combine, partial,
                mapping.lookupOrDefault(store.getMemRef()), indices);
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
  LinearLaunch grid = createLinearLaunch(b, loc, blocks, threads);
  gpu::LaunchOp launch = grid.launch;
  Value first = grid.index;
  OpBuilder &k = grid.body;
  Operation *combine = nest.reduction.combine;
  // Each thread combines the terms first, first + grid, ... of the nest's
  // iterations in row-major order, from the combine's identity.
  IRMapping mapping;
  Value sum = accumulate(k, loc, nest, first, constantIndex(k, loc, nest.space.total),
                         constantIndex(k, loc, blocks * threads),
                         combineIdentity(k, loc, combine), mapping);
  // A warp's partials combine by shuffles; lane 0 folds the warp's into the
  // accumulator. The order of the atomic folds varies from run to run, so a
  // sum's last bits may too (docs/precision.md).
  Value partial = emitWarpCombine(k, loc, combine, sum);
  Value lane = arith::RemUIOp::create(k, loc, launch.getThreadIds().x,
                                      constantIndex(k, loc, kWarpSize));
  Value leader = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::eq, lane,
                                       constantIndex(k, loc, 0));
  scf::IfOp::create(k, loc, leader, [&](OpBuilder &w, Location wl) {
    foldIntoAccumulator(w, wl, nest, partial, mapping);
    scf::YieldOp::create(w, wl);
  });
  gpu::TerminatorOp::create(k, loc);
  outer.erase();
  sinkViewsIntoLaunch(launch);
}

bool loom::mapSplitReduction(scf::ParallelOp loop, const LoopSpace &space,
                             int64_t blockSize) {
  Block *body = loop.getBody();
  auto inner = body->getOperations().size() == 2 ? dyn_cast<scf::ForOp>(body->front())
                                                 : scf::ForOp();
  if (!inner)
    return false;
  std::optional<ScalarReduction> nest = matchScalarReduction(inner);
  // (An empty loop, of no iterations, has nothing to split.)
  if (!nest || space.total <= 0)
    return false;
  // Enough threads to stream from memory (512 on each of 128-odd
  // multiprocessors) with at least 64 terms a chunk; not worth it for a
  // short sum or enough outputs already.
  constexpr int64_t kThreadsWanted = 65536, kTermsPerChunk = 64;
  int64_t chunks = std::min((kThreadsWanted + space.total - 1) / space.total,
                            nest->space.total / kTermsPerChunk);
  if (chunks < 2)
    return false;
  int64_t length = (nest->space.total + chunks - 1) / chunks;
  int64_t threads = maxBlockThreads(blockSize);
  int64_t total = space.total * chunks;
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  // Neighbouring threads take neighbouring outputs (coalesced), each one
  // chunk of that output's terms, in the CPU's order within the chunk.
  auto launch = createGuardedLaunch(b, loc, total, threads, [&](OpBuilder &t, Location l,
                                                                Value linear) {
    Value output = arith::RemUIOp::create(t, l, linear, constantIndex(t, l, space.total));
    Value chunk = arith::DivUIOp::create(t, l, linear, constantIndex(t, l, space.total));
    IRMapping mapping;
    delinearize(t, l, output, loop.getInductionVars(), space, mapping);
    Value from = arith::MulIOp::create(t, l, chunk, constantIndex(t, l, length));
    Value to = arith::MinUIOp::create(
        t, l, arith::AddIOp::create(t, l, from, constantIndex(t, l, length)),
        constantIndex(t, l, nest->space.total));
    Value sum = accumulate(t, l, *nest, from, to, constantIndex(t, l, 1),
                           combineIdentity(t, l, nest->reduction.combine), mapping);
    foldIntoAccumulator(t, l, *nest, sum, mapping);
  });
  loop.erase();
  sinkViewsIntoLaunch(launch);
  return true;
}
