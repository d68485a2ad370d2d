//===- GpuRowGroups.cpp - A softmax's or a norm's loops in one launch -----===//
//
// linalg leaves a row-wise kernel (softmax, layernorm, rmsnorm) as a run of
// loops over the same rows: fills of per-row accumulators, row reductions,
// scalar steps per row (a mean from a sum) and a final elementwise loop.
// Each would be a launch of its own; here the run becomes one launch with a
// block per row that runs the loops' bodies for its row in order, with a
// barrier between steps (a barrier orders the block's global memory
// accesses too), so a step sees what the earlier ones wrote for its row.
// That is only the loops' meaning when no step touches, in a buffer the run
// writes, an element of another row: checked before fusing.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/GpuLoops.h"

#include "Codegen/GPU/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

using namespace mlir;
using namespace mlir::loom;

namespace {
enum class StepKind { Scalar, Reduction, Elementwise };

/// One loop of a run, as a step of the fused launch.
struct RowStep {
  scf::ParallelOp loop;
  StepKind kind;
  std::optional<RowReduction> reduction;
  /// The ops run along the row (a reduction's without the accumulator's
  /// load and store), and the induction variable they move with.
  SmallVector<Operation *> body;
  Value iv;
  int64_t length = 1, lower = 0, step = 1; // along the row
};
} // namespace

/// Whether a loop body runs straight through: loads, stores and ops without
/// memory effects.
static bool isStraightLine(Block &block) {
  return llvm::all_of(block.without_terminator(), [](Operation &op) {
    return isa<memref::LoadOp, memref::StoreOp>(op) || isMemoryEffectFree(&op);
  });
}

/// What `loop` is as a step over `rows`, if anything: a reduction over
/// exactly these rows, a loop over exactly these rows (a scalar step, run
/// by one thread of the row's block), or over these rows and one more
/// innermost dimension (an elementwise step along the row).
static std::optional<RowStep> classify(scf::ParallelOp loop,
                                       const LoopSpace &rows) {
  std::optional<LoopSpace> space = getLoopSpace(loop);
  if (!space)
    return std::nullopt;
  RowStep step{loop, StepKind::Scalar, std::nullopt, {}, nullptr};
  size_t n = rows.trips.size();
  if (*space == rows) {
    if ((step.reduction = matchRowReduction(loop))) {
      step.kind = StepKind::Reduction;
      for (Operation &op : step.reduction->inner.getBody()->without_terminator())
        if (&op != step.reduction->accLoad && &op != step.reduction->accStore)
          step.body.push_back(&op);
      step.iv = step.reduction->inner.getInductionVar();
      step.length = step.reduction->length;
      return step;
    }
    if (!isStraightLine(*loop.getBody()))
      return std::nullopt;
    return step;
  }
  if (space->trips.size() != n + 1 || !isStraightLine(*loop.getBody()))
    return std::nullopt;
  for (size_t d = 0; d < n; ++d)
    if (space->lower[d] != rows.lower[d] || space->trips[d] != rows.trips[d] ||
        space->steps[d] != rows.steps[d])
      return std::nullopt;
  step.kind = StepKind::Elementwise;
  for (Operation &op : loop.getBody()->without_terminator())
    step.body.push_back(&op);
  step.iv = loop.getInductionVars()[n];
  step.length = space->trips[n];
  step.lower = space->lower[n];
  step.step = space->steps[n];
  return step;
}

/// Whether the steps may share a block per row: every buffer a step writes
/// is accessed, in all steps, through one view and at indices that start
/// with the step's row induction variables, so different rows touch
/// different elements. (Distinct kernel arguments are distinct plan buffers:
/// the plan gives buffers used by one step disjoint memory.)
static bool isRowLocal(MutableArrayRef<RowStep> steps, size_t rowRank) {
  llvm::DenseMap<Value, Value> written; // root -> the view it is written by
  bool ok = true;
  for (RowStep &step : steps)
    step.loop.walk([&](memref::StoreOp store) {
      auto [it, inserted] =
          written.try_emplace(viewRoot(store.getMemRef()), store.getMemRef());
      ok &= inserted || it->second == store.getMemRef();
    });
  for (RowStep &step : steps) {
    ValueRange rowIvs = ValueRange(step.loop.getInductionVars()).take_front(rowRank);
    auto check = [&](Value memref, ValueRange indices) {
      auto it = written.find(viewRoot(memref));
      if (it == written.end())
        return;
      // A unit dim's index 0 names the same place in every row: the
      // canonicalizer folds that dim out of the loops, not out of the
      // buffers (a softmax of [1, T, N] was 5 launches).
      auto type = cast<MemRefType>(memref.getType());
      SmallVector<Value> rowIndices;
      for (auto [dim, index] : llvm::enumerate(indices))
        if (type.getDimSize(dim) != 1 || getConstantIntValue(index) != 0)
          rowIndices.push_back(index);
      ok &= it->second == memref && rowIndices.size() >= rowRank &&
            llvm::equal(ArrayRef(rowIndices).take_front(rowRank), rowIvs);
    };
    step.loop.walk([&](Operation *op) {
      if (auto load = dyn_cast<memref::LoadOp>(op))
        check(load.getMemRef(), load.getIndices());
      else if (auto store = dyn_cast<memref::StoreOp>(op))
        check(store.getMemRef(), store.getIndices());
    });
  }
  return ok;
}

namespace {
/// What the steps of one launch share: the row's values each thread loads
/// from buffers the steps do not write, kept in registers from the step that
/// first loads them to the last (the row is read from memory once), and the
/// row positions they are loaded at.
struct RowRegisters {
  llvm::DenseSet<Value> written; // roots of the buffers the steps write
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, Value> ivs;
  std::map<std::vector<const void *>, Value> loads;
};
} // namespace

/// Chunks per thread up to which a step is unrolled and its loads from
/// buffers the steps do not write are kept in registers (8 chunks of 16
/// bytes: 32 registers per buffer).
static constexpr int64_t kMaxChunksInRegisters = 8;

/// Emits a thread's share of a step along its row: chunks of `width`
/// consecutive elements, chunk c at element (c * threads + tid) * width, so
/// that a warp's lanes read adjacent chunks. `emitChunk` builds one chunk's
/// body from the row loop's induction variable and the carried values,
/// returning the new ones (and a loader of vectors, or null). Up to
/// kMaxChunksInRegisters chunks that cover the row exactly are unrolled at
/// the launch's top level, where a chunk's loads can serve later steps;
/// otherwise a loop over the chunks, with a guard past the row's end.
static SmallVector<Value> emitAlongRow(
    OpBuilder &b, Location loc, const RowStep &step, int64_t width,
    int64_t threads, Value tid, RowRegisters &registers, ValueRange init,
    const std::function<SmallVector<Value>(OpBuilder &, Value, ValueRange,
                                           const LaneVectorizer::VectorLoader &)>
        &emitChunk) {
  int64_t span = width * threads;
  int64_t chunks = (step.length + span - 1) / span;
  bool exact = step.length % span == 0;
  auto ivAt = [&](OpBuilder &f, Location fl, Value position) -> Value {
    if (step.lower == 0 && step.step == 1)
      return position;
    return arith::AddIOp::create(
        f, fl, constantIndex(f, fl, step.lower),
        arith::MulIOp::create(f, fl, position, constantIndex(f, fl, step.step)));
  };
  if (exact && chunks <= kMaxChunksInRegisters && width > 1) {
    LaneVectorizer::VectorLoader loader =
        [&](OpBuilder &f, Location fl, VectorType type, Value memref,
            ValueRange indices) -> Value {
      if (registers.written.contains(viewRoot(memref)))
        return LaneVectorizer::load(f, fl, type, memref, indices);
      std::vector<const void *> key{memref.getAsOpaquePointer(),
                                    type.getAsOpaquePointer()};
      for (Value index : indices)
        key.push_back(index.getAsOpaquePointer());
      Value &loaded = registers.loads[key];
      if (!loaded)
        loaded = LaneVectorizer::load(f, fl, type, memref, indices);
      return loaded;
    };
    SmallVector<Value> carried(init);
    for (int64_t c = 0; c < chunks; ++c) {
      Value &iv = registers.ivs[{c, width, step.lower, step.step}];
      if (!iv)
        iv = ivAt(b, loc,
                  arith::AddIOp::create(
                      b, loc, constantIndex(b, loc, c * span),
                      arith::MulIOp::create(b, loc, tid,
                                            constantIndex(b, loc, width))));
      carried = emitChunk(b, iv, carried, loader);
    }
    return carried;
  }
  auto loop = scf::ForOp::create(
      b, loc, constantIndex(b, loc, 0), constantIndex(b, loc, chunks),
      constantIndex(b, loc, 1), init,
      [&](OpBuilder &f, Location fl, Value chunk, ValueRange carried) {
        Value position = arith::AddIOp::create(
            f, fl,
            arith::MulIOp::create(f, fl, chunk, constantIndex(f, fl, span)),
            arith::MulIOp::create(f, fl, tid, constantIndex(f, fl, width)));
        if (exact) {
          scf::YieldOp::create(
              f, fl, emitChunk(f, ivAt(f, fl, position), carried, nullptr));
          return;
        }
        Value inRow = arith::CmpIOp::create(
            f, fl, arith::CmpIPredicate::ult, position,
            constantIndex(f, fl, step.length));
        auto guard = scf::IfOp::create(
            f, fl, inRow,
            [&](OpBuilder &t, Location tl) {
              scf::YieldOp::create(
                  t, tl, emitChunk(t, ivAt(t, tl, position), carried, nullptr));
            },
            [&](OpBuilder &e, Location el) {
              scf::YieldOp::create(e, el, carried);
            });
        scf::YieldOp::create(f, fl, guard.getResults());
      });
  return SmallVector<Value>(loop.getResults());
}

/// Emits `step`'s ops for one chunk at the row loop's induction variable
/// `iv` (lanes iv .. iv + width - 1), in `mapping` (which maps the row's
/// ivs); for a reduction, folds each lane into `partial` and returns it.
static Value emitChunkBody(OpBuilder &b, Location loc, RowStep &step,
                           const LaneVectorizer &lanes, int64_t width,
                           Value iv, IRMapping mapping, Value partial,
                           const LaneVectorizer::VectorLoader &loader) {
  RowReduction *reduction = step.reduction ? &*step.reduction : nullptr;
  if (width == 1) {
    mapping.map(step.iv, iv);
    if (reduction)
      mapping.map(reduction->accLoad.getResult(), partial);
    for (Operation *op : step.body)
      b.clone(*op, mapping);
    return reduction ? mapping.lookup(reduction->accStore.getValue()) : Value();
  }
  SmallVector<IRMapping> laneMappings;
  // Lane l folds into what lane l - 1 left: the lanes' elements are combined
  // in order.
  lanes.emit(
      b, loc, iv, mapping, laneMappings,
      [&](Operation *op, int64_t lane, IRMapping &laneMapping) {
        if (!reduction || op != reduction->combine)
          return;
        laneMapping.map(reduction->accLoad.getResult(),
                        lane == 0 ? partial
                                  : laneMappings[lane - 1].lookup(
                                        reduction->accStore.getValue()));
      },
      loader);
  return reduction
             ? laneMappings.back().lookup(reduction->accStore.getValue())
             : Value();
}

static void emitRowGroup(MutableArrayRef<RowStep> steps, const LoopSpace &rows,
                         int64_t blockSize) {
  size_t rowRank = rows.trips.size();
  // Per step, the chunk width (16-byte vectors where the accesses allow).
  SmallVector<std::optional<LaneVectorizer>> vectorizers;
  SmallVector<int64_t> widths;
  int64_t chunksPerRow = 1;
  for (const RowStep &step : steps) {
    if (step.kind == StepKind::Scalar) {
      vectorizers.emplace_back(std::nullopt);
      widths.push_back(1);
      continue;
    }
    vectorizers.emplace_back(LaneVectorizer(step.body, step.iv));
    int64_t width = vectorizers.back()->width();
    if (step.step != 1 || step.lower % width != 0 || step.length % width != 0)
      width = 1;
    widths.push_back(width);
    chunksPerRow = std::max(chunksPerRow, step.length / width);
  }
  // Enough threads that each takes about 4 chunks of the longest step, a
  // warp at least, at most block-size.
  int64_t maxThreads = loom::maxBlockThreads(blockSize);
  int64_t threads = std::clamp<int64_t>(
      llvm::PowerOf2Ceil((chunksPerRow + 3) / 4), kWarpSize, maxThreads);
  int64_t warps = threads / kWarpSize;

  SmallVector<Location> locs;
  for (RowStep &step : steps)
    locs.push_back(step.loop.getLoc());
  MLIRContext *context = steps.front().loop.getContext();
  Location loc = FusedLoc::get(context, locs);
  // A slot per warp for each reduction's cross-warp combination.
  SmallVector<Type> workgroup;
  auto space = gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup);
  if (warps > 1)
    for (const RowStep &step : steps)
      if (step.reduction)
        workgroup.push_back(MemRefType::get(
            {warps}, step.reduction->combine->getResult(0).getType(),
            MemRefLayoutAttrInterface(), space));

  // At the last loop: whatever the loops use is defined before it.
  OpBuilder b(steps.back().loop);
  Value one = constantIndex(b, loc, 1);
  auto launch = gpu::LaunchOp::create(
      b, loc, constantIndex(b, loc, rows.total), one, one,
      constantIndex(b, loc, threads), one, one, /*dynamicSharedMemorySize=*/
      nullptr, /*asyncTokenType=*/nullptr, /*asyncDependencies=*/{}, workgroup);
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  IRMapping rowMapping;
  delinearize(k, loc, launch.getBlockIds().x,
              ValueRange(steps.front().loop.getInductionVars()).take_front(rowRank), rows,
              rowMapping);
  SmallVector<Value> rowIndices;
  for (Value iv : ValueRange(steps.front().loop.getInductionVars()).take_front(rowRank))
    rowIndices.push_back(rowMapping.lookup(iv));
  Value zero = constantIndex(k, loc, 0);
  Value first =
      arith::CmpIOp::create(k, loc, arith::CmpIPredicate::eq, tid, zero);
  Value lane = arith::RemUIOp::create(k, loc, tid, constantIndex(k, loc, kWarpSize));
  Value warp = arith::DivUIOp::create(k, loc, tid, constantIndex(k, loc, kWarpSize));
  unsigned slots = 0;
  RowRegisters registers;
  for (RowStep &step : steps)
    step.loop.walk([&](memref::StoreOp store) {
      registers.written.insert(viewRoot(store.getMemRef()));
    });
  // Row scalars every thread holds (a reduction's result), by the buffer
  // element they are stored to: later steps' loads of it read the value.
  std::map<std::vector<const void *>, std::pair<Value, Value>> forwarded;
  auto keyOf = [](Value memref, ValueRange indices) {
    std::vector<const void *> key{memref.getAsOpaquePointer()};
    for (Value index : indices)
      key.push_back(index.getAsOpaquePointer());
    return key;
  };
  std::optional<std::pair<std::vector<const void *>, std::pair<Value, Value>>>
      pending;
  auto emitStep = [&](size_t index) {
    RowStep &step = steps[index];
    Location l = step.loop.getLoc();
    IRMapping mapping;
    mapping.map(ValueRange(step.loop.getInductionVars()).take_front(rowRank), rowIndices);
    int64_t width = widths[index];
    if (step.kind == StepKind::Scalar) {
      scf::IfOp::create(k, l, first, [&](OpBuilder &t, Location tl) {
        for (Operation &op : step.loop.getBody()->without_terminator())
          t.clone(op, mapping);
        scf::YieldOp::create(t, tl);
      });
      return;
    }
    if (step.kind == StepKind::Elementwise) {
      emitAlongRow(k, l, step, width, threads, tid, registers, {},
                   [&](OpBuilder &f, Value iv, ValueRange,
                       const LaneVectorizer::VectorLoader &loader) {
                     emitChunkBody(f, l, step, *vectorizers[index], width, iv,
                                   mapping, Value(), loader);
                     return SmallVector<Value>();
                   });
      return;
    }
    // A reduction: each thread's partial, the warp's by shuffles, then the
    // block's through a slot per warp, folded into the accumulator once.
    RowReduction &reduction = *step.reduction;
    Operation *combine = reduction.combine;
    SmallVector<Value> accIndices;
    for (Value index : reduction.accStore.getIndices())
      accIndices.push_back(mapping.lookupOrDefault(index));
    Value accMemref = mapping.lookupOrDefault(reduction.accStore.getMemRef());
    Value old = memref::LoadOp::create(k, l, accMemref, accIndices);
    Value identity = combineIdentity(k, l, combine);
    Value partial = emitAlongRow(
        k, l, step, width, threads, tid, registers, identity,
        [&](OpBuilder &f, Value iv, ValueRange carried,
            const LaneVectorizer::VectorLoader &loader) {
          return SmallVector<Value>{
              emitChunkBody(f, l, step, *vectorizers[index], width, iv,
                            mapping, carried[0], loader)};
        })[0];
    Value total = emitWarpCombine(k, l, combine, partial);
    if (warps > 1) {
      Value slot = launch.getWorkgroupAttributions()[slots++];
      Value leader =
          arith::CmpIOp::create(k, l, arith::CmpIPredicate::eq, lane, zero);
      scf::IfOp::create(k, l, leader, [&](OpBuilder &t, Location tl) {
        memref::StoreOp::create(t, tl, total, slot, ValueRange{warp});
        scf::YieldOp::create(t, tl);
      });
      gpu::BarrierOp::create(k, l);
      // Every thread combines the slots in the same order: one total.
      total = memref::LoadOp::create(k, l, slot, ValueRange{zero});
      for (int64_t w = 1; w < warps; ++w)
        total = emitCombine(
            k, l, combine, total,
            memref::LoadOp::create(k, l, slot,
                                   ValueRange{constantIndex(k, l, w)}));
    }
    // Every thread folds the total into the accumulator's old value, which
    // it read before the barrier above (or the one here, for one warp), so
    // before thread 0 stores the result.
    Value result = emitCombine(k, l, combine, old, total);
    if (warps == 1)
      gpu::BarrierOp::create(k, l);
    scf::IfOp::create(k, l, first, [&](OpBuilder &t, Location tl) {
      memref::StoreOp::create(t, tl, result, accMemref, accIndices);
      scf::YieldOp::create(t, tl);
    });
    pending = {keyOf(accMemref, accIndices), {result, viewRoot(accMemref)}};
  };
  Block &body = launch.getBody().front();
  for (size_t index = 0; index < steps.size(); ++index) {
    if (index > 0)
      gpu::BarrierOp::create(k, steps[index].loop.getLoc());
    // A step that writes a buffer ends forwarding of its elements.
    steps[index].loop.walk([&](memref::StoreOp store) {
      Value root = viewRoot(store.getMemRef());
      for (auto it = forwarded.begin(); it != forwarded.end();)
        it = it->second.second == root ? forwarded.erase(it) : std::next(it);
    });
    Operation *last = &body.back();
    emitStep(index);
    SmallVector<memref::LoadOp> loads;
    for (Operation *op = last->getNextNode(); op; op = op->getNextNode())
      op->walk([&](memref::LoadOp load) { loads.push_back(load); });
    for (memref::LoadOp load : loads) {
      auto it = forwarded.find(keyOf(load.getMemRef(), load.getIndices()));
      if (it == forwarded.end())
        continue;
      load.getResult().replaceAllUsesWith(it->second.first);
      load.erase();
    }
    // (After the step: its own reads of the accumulator are of the old value.)
    if (pending)
      forwarded.insert(*pending);
    pending.reset();
  }
  gpu::TerminatorOp::create(k, loc);
  for (RowStep &step : steps)
    step.loop.erase();
  sinkViewsIntoLaunch(launch);
}

void loom::fuseRowSteps(Block &entry, int64_t blockSize) {
  // Runs of consecutive top-level loops; pure ops between them (constants,
  // index arithmetic, views) do not break a run.
  SmallVector<SmallVector<scf::ParallelOp>> runs(1);
  for (Operation &op : entry.without_terminator()) {
    if (auto loop = dyn_cast<scf::ParallelOp>(op))
      runs.back().push_back(loop);
    else if (!isMemoryEffectFree(&op) && !runs.back().empty())
      runs.emplace_back();
  }
  for (ArrayRef<scf::ParallelOp> run : runs) {
    // (A row reduction over no rows would still launch a block.)
    SmallVector<bool> fused(run.size(), false);
    for (size_t i = 0; i < run.size(); ++i) {
      // A run is built around a row reduction: the rows are its rows.
      std::optional<LoopSpace> rows = getLoopSpace(run[i]);
      if (fused[i] || !rows || rows->total == 0 || !matchRowReduction(run[i]))
        continue;
      size_t begin = i, end = i + 1;
      while (begin > 0 && !fused[begin - 1]) {
        std::optional<RowStep> step = classify(run[begin - 1], *rows);
        if (!step || step->kind == StepKind::Reduction)
          break;
        --begin;
      }
      while (end < run.size() && classify(run[end], *rows))
        ++end;
      SmallVector<RowStep, 4> steps;
      for (size_t j = begin; j < end; ++j)
        steps.push_back(*classify(run[j], *rows));
      if (steps.size() < 2 || !isRowLocal(steps, rows->trips.size()))
        continue;
      emitRowGroup(steps, *rows, blockSize);
      std::fill(fused.begin() + begin, fused.begin() + end, true);
      i = end - 1;
    }
  }
}
