//===- MapLoopsToGpu.cpp - A kernel's loops as flat gpu.launch grids ------===//

#include "Codegen/Common/Passes.h"
#include "Codegen/GPU/Passes.h"

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

#include "Codegen/GPU/GpuLoops.h"

#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/GPU/Utils/GPUUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMMAPLOOPSTOGPU
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using mlir::loom::constantIndex;

/// Ops worth recomputing inside a kernel rather than passing in: they are
/// free, and views must not cross (a bare pointer would lose the offset).
/// A global's address is a constant too: host-side code had taken a
/// constant tensor's `memref.get_global` into its single-thread launch,
/// away from the copy launch that read it.
static bool isSunk(Operation *op) {
  return op->hasTrait<OpTrait::ConstantLike>() ||
         isa<ViewLikeOpInterface, memref::GetGlobalOp>(op) ||
         (op->getDialect() && op->getDialect()->getNamespace() == "arith" &&
          isMemoryEffectFree(op));
}

/// The top-level parallel loops of `entry` that must run inside the host
/// code's single-thread launch instead of as launches of their own: those
/// that host-side scalar code spans, a value it computes before the loop
/// (from memory: not a constant or view) being used after it. A launch in
/// between would split that code into two launches, and a value cannot
/// pass from one to the other. (A sequential loop of one trip, folded
/// away, leaves such code: the slot assignment of an MoE block of one
/// token.)
static llvm::SmallPtrSet<Operation *, 4> spannedParallelLoops(Block &entry) {
  llvm::SmallPtrSet<Operation *, 16> hostValues;
  llvm::SmallPtrSet<Operation *, 4> spanned;
  for (Operation &op : entry.without_terminator()) {
    bool fromHost = llvm::any_of(op.getOperands(), [&](Value v) {
      return hostValues.contains(v.getDefiningOp());
    });
    if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
      bool usedAfter = llvm::any_of(hostValues, [&](Operation *def) {
        return llvm::any_of(def->getUsers(), [&](Operation *user) {
          Operation *top = entry.findAncestorOpInBlock(*user);
          return top && loop->isBeforeInBlock(top);
        });
      });
      if (usedAfter)
        spanned.insert(loop);
      continue;
    }
    if (op.getNumResults() && (fromHost || !isSunk(&op)) && !isa<gpu::LaunchOp>(op))
      hostValues.insert(&op);
  }
  return spanned;
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

std::optional<loom::LoopSpace> loom::getLoopSpace(scf::ParallelOp loop) {
  return getLoopSpace(loop.getLowerBound(), loop.getUpperBound(), loop.getStep());
}

std::optional<loom::LoopSpace> loom::getLoopSpace(ValueRange lowers, ValueRange uppers,
                                                  ValueRange steps) {
  LoopSpace space;
  for (auto [lb, ub, step] : llvm::zip(lowers, uppers, steps)) {
    std::optional<int64_t> l = getConstantIntValue(lb),
                           u = getConstantIntValue(ub),
                           s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0)
      return std::nullopt;
    space.lower.push_back(*l);
    space.steps.push_back(*s);
    space.trips.push_back(std::max<int64_t>(0, (*u - *l + *s - 1) / *s));
    space.total *= space.trips.back();
  }
  return space;
}

void loom::delinearize(OpBuilder &b, Location loc, Value linear, ValueRange ivs,
                       const LoopSpace &space, IRMapping &mapping) {
  Value rest = linear;
  for (int d = space.trips.size() - 1; d >= 0; --d) {
    Value trip = constantIndex(b, loc, space.trips[d]);
    Value index = d == 0 ? rest : arith::RemUIOp::create(b, loc, rest, trip);
    if (d != 0)
      rest = arith::DivUIOp::create(b, loc, rest, trip);
    mapping.map(ivs[d],
                arith::AddIOp::create(
                    b, loc, constantIndex(b, loc, space.lower[d]),
                    arith::MulIOp::create(b, loc, index,
                                          constantIndex(b, loc, space.steps[d]))));
  }
}

loom::LinearLaunch loom::createLinearLaunch(OpBuilder &b, Location loc,
                                            int64_t blocks, int64_t threads) {
  Value one = constantIndex(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, constantIndex(b, loc, blocks), one, one,
                                      constantIndex(b, loc, threads), one, one);
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value index = arith::AddIOp::create(
      k, loc,
      arith::MulIOp::create(k, loc, launch.getBlockIds().x,
                            constantIndex(k, loc, threads)),
      launch.getThreadIds().x);
  return {launch, index, k};
}

gpu::LaunchOp loom::createGuardedLaunch(
    OpBuilder &b, Location loc, int64_t count, int64_t threads,
    function_ref<void(OpBuilder &, Location, Value index)> body) {
  int64_t blocks = std::max<int64_t>(1, (count + threads - 1) / threads);
  LinearLaunch grid = createLinearLaunch(b, loc, blocks, threads);
  OpBuilder &k = grid.body;
  Value inRange = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ult, grid.index,
                                        constantIndex(k, loc, count));
  scf::IfOp::create(k, loc, inRange, [&](OpBuilder &t, Location l) {
    body(t, l, grid.index);
    scf::YieldOp::create(t, l);
  });
  gpu::TerminatorOp::create(k, loc);
  return grid.launch;
}

namespace {
struct LoomMapLoopsToGpu
    : public loom::impl::LoomMapLoopsToGpuBase<LoomMapLoopsToGpu> {
  using Base::Base;
  /// The kernels' 16-byte vector loads and stores must lower with the rest
  /// of a kernel in convert-gpu-to-nvvm, which converts every loaded
  /// dialect that has a to-LLVM interface.
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    vector::registerConvertVectorToLLVMInterface(registry);
  }
  void runOnOperation() override;
  LogicalResult mapParallel(scf::ParallelOp loop, bool threadPerIteration);
  void mapRowReduction(scf::ParallelOp loop, loom::RowReduction reduction,
                       const loom::LoopSpace &space);
  void mapElementwise(scf::ParallelOp loop, const loom::LoopSpace &space);
  void wrapInSingleThread(ArrayRef<Operation *> ops);
};
} // namespace

/// Recognizes `loop` as a row reduction: its body is one scf.for that
/// accumulates into an element that does not move with it.
std::optional<loom::RowReduction> loom::matchRowReduction(scf::ParallelOp loop) {
  Block *body = loop.getBody();
  if (body->getOperations().size() != 2)
    return std::nullopt;
  auto inner = dyn_cast<scf::ForOp>(body->front());
  return inner ? matchAccumulatingLoop(inner) : std::nullopt;
}

/// The accumulation of `inner`: its body stores one value into an
/// accumulator element that does not move with it, computed as
/// combine(the accumulator's load, x) with an associative, commutative
/// combine whose identity is known; nothing else in the body writes memory.
std::optional<loom::RowReduction> loom::matchAccumulatingLoop(scf::ForOp inner) {
  if (inner.getNumRegionIterArgs() != 0)
    return std::nullopt;
  std::optional<int64_t> lb = getConstantIntValue(inner.getLowerBound());
  std::optional<int64_t> ub = getConstantIntValue(inner.getUpperBound());
  std::optional<int64_t> step = getConstantIntValue(inner.getStep());
  if (!lb || !ub || !step || *lb != 0 || *step != 1 || *ub <= 0)
    return std::nullopt;
  RowReduction match{inner, nullptr, nullptr, nullptr, *ub};
  for (Operation &op : inner.getBody()->without_terminator()) {
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (match.accStore)
        return std::nullopt;
      match.accStore = store;
    } else if (!isMemoryEffectFree(&op) && !isa<memref::LoadOp>(op)) {
      return std::nullopt;
    }
  }
  if (!match.accStore)
    return std::nullopt;
  Value iv = inner.getInductionVar();
  if (llvm::is_contained(match.accStore.getIndices(), iv))
    return std::nullopt;
  Operation *combine = match.accStore.getValue().getDefiningOp();
  if (!combine || !isa<arith::AddFOp, arith::MaximumFOp, arith::MaxNumFOp>(combine))
    return std::nullopt;
  for (Value operand : combine->getOperands()) {
    auto load = operand.getDefiningOp<memref::LoadOp>();
    if (load && load.getMemRef() == match.accStore.getMemRef() &&
        load.getIndices() == match.accStore.getIndices() && load->hasOneUse())
      match.accLoad = load;
  }
  if (!match.accLoad || combine->getOperand(0) == combine->getOperand(1))
    return std::nullopt;
  // The accumulator is read and written only there.
  for (Operation &op : inner.getBody()->without_terminator())
    if (auto load = dyn_cast<memref::LoadOp>(op);
        load && load != match.accLoad &&
        load.getMemRef() == match.accStore.getMemRef())
      return std::nullopt;
  match.combine = combine;
  return match;
}

Value loom::combineIdentity(OpBuilder &b, Location loc, Operation *combine) {
  Type type = combine->getResult(0).getType();
  TypedAttr identity =
      isa<arith::AddFOp>(combine)
          ? TypedAttr(b.getFloatAttr(type, 0.0))
          : TypedAttr(b.getFloatAttr(
                type, APFloat::getInf(cast<FloatType>(type).getFloatSemantics(),
                                      /*Negative=*/true)));
  return arith::ConstantOp::create(b, loc, identity);
}

Value loom::emitCombine(OpBuilder &b, Location loc, Operation *combine, Value x,
                        Value y) {
  OperationState state(loc, combine->getName());
  state.addOperands({x, y});
  state.addTypes(combine->getResult(0).getType());
  state.addAttributes(combine->getAttrs());
  return b.create(state)->getResult(0);
}

Value loom::emitWarpCombine(OpBuilder &b, Location loc, Operation *combine,
                            Value partial) {
  for (int32_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
    auto shuffle = gpu::ShuffleOp::create(b, loc, partial, offset, kWarpSize,
                                          gpu::ShuffleMode::XOR);
    partial = emitCombine(b, loc, combine, partial, shuffle.getShuffleResult());
  }
  return partial;
}

/// One warp per row: lane l combines elements l, l + 32, ... of its row
/// into a private partial value (so a warp reads the row coalesced), the
/// warp combines its 32 partials with a butterfly of shuffles, and lane 0
/// folds the result into the accumulator. The order of the combination
/// differs from the CPU's sequential one, which only matters for sums
/// (within the reassociation tolerances of docs/precision.md).
void LoomMapLoopsToGpu::mapRowReduction(scf::ParallelOp loop,
                                        loom::RowReduction reduction,
                                        const loom::LoopSpace &space) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  int64_t rows = space.total;
  int64_t threads = loom::maxBlockThreads(blockSize);
  int64_t warps = threads / kWarpSize;
  int64_t blocks = std::max<int64_t>(1, (rows + warps - 1) / warps);
  Value one = constantIndex(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, constantIndex(b, loc, blocks), one,
                                      one, constantIndex(b, loc, threads), one, one);
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value row = arith::AddIOp::create(
      k, loc,
      arith::MulIOp::create(k, loc, launch.getBlockIds().x,
                            constantIndex(k, loc, warps)),
      arith::DivUIOp::create(k, loc, tid, constantIndex(k, loc, kWarpSize)));
  Value lane = arith::RemUIOp::create(k, loc, tid, constantIndex(k, loc, kWarpSize));
  Value inRange = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ult, row,
                                        constantIndex(k, loc, rows));
  Operation *combine = reduction.combine;
  // Every lane of a warp has the same row: the branch, and so the shuffles
  // inside it, are uniform across the warp.
  scf::IfOp::create(k, loc, inRange, [&](OpBuilder &t, Location l) {
    IRMapping mapping;
    loom::delinearize(t, l, row, loop.getInductionVars(), space, mapping);
    Value start = loom::combineIdentity(t, l, combine);
    auto strided = scf::ForOp::create(
        t, l, lane, constantIndex(t, l, reduction.length),
        constantIndex(t, l, kWarpSize), ValueRange{start});
    {
      OpBuilder f = OpBuilder::atBlockBegin(strided.getBody());
      mapping.map(reduction.inner.getInductionVar(), strided.getInductionVar());
      mapping.map(reduction.accLoad.getResult(), strided.getRegionIterArgs()[0]);
      for (Operation &op : reduction.inner.getBody()->without_terminator())
        if (&op != reduction.accLoad.getOperation() &&
            &op != reduction.accStore.getOperation())
          f.clone(op, mapping);
      scf::YieldOp::create(f, l, mapping.lookup(reduction.accStore.getValue()));
    }
    Value partial = loom::emitWarpCombine(t, l, combine, strided.getResult(0));
    Value first = arith::CmpIOp::create(t, l, arith::CmpIPredicate::eq, lane,
                                        constantIndex(t, l, 0));
    scf::IfOp::create(t, l, first, [&](OpBuilder &w, Location wl) {
      SmallVector<Value> indices;
      for (Value index : reduction.accStore.getIndices())
        indices.push_back(mapping.lookupOrDefault(index));
      Value memrefValue = mapping.lookupOrDefault(reduction.accStore.getMemRef());
      Value old = memref::LoadOp::create(w, wl, memrefValue, indices);
      Value total = loom::emitCombine(w, wl, combine, old, partial);
      memref::StoreOp::create(w, wl, total, memrefValue, indices);
      scf::YieldOp::create(w, wl);
    });
    scf::YieldOp::create(t, l);
  });
  gpu::TerminatorOp::create(k, loc);
  loop.erase();
  loom::sinkViewsIntoLaunch(launch);
}

/// One thread per iteration, or per `width` consecutive iterations of the
/// innermost loop when the body's accesses along it are contiguous and
/// aligned: then its loads and stores are 16-byte vector accesses, a quarter
/// or an eighth of the memory instructions, each a whole sector per lane
/// quad.
void LoomMapLoopsToGpu::mapElementwise(scf::ParallelOp loop,
                                       const loom::LoopSpace &space) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  SmallVector<Operation *> body;
  for (Operation &op : loop.getBody()->without_terminator())
    body.push_back(&op);
  int64_t last = space.trips.size() - 1;
  std::optional<loom::LaneVectorizer> lanes;
  int64_t width = 1;
  if (last >= 0) {
    lanes.emplace(body, loop.getInductionVars()[last]);
    width = lanes->width();
    if (space.steps[last] != 1 || space.lower[last] % width != 0 ||
        space.trips[last] % width != 0)
      width = 1;
  }
  // The thread grid: the innermost loop in steps of `width`.
  loom::LoopSpace threads = space;
  if (width > 1) {
    threads.trips[last] /= width;
    threads.steps[last] = width;
    threads.total /= width;
  }
  auto launch = loom::createGuardedLaunch(
      b, loc, threads.total, blockSize, [&](OpBuilder &t, Location l, Value linear) {
        IRMapping mapping;
        loom::delinearize(t, l, linear, loop.getInductionVars(), threads, mapping);
        if (width > 1) {
          SmallVector<IRMapping> laneMappings;
          lanes->emit(t, l, mapping.lookup(loop.getInductionVars()[last]), mapping,
                      laneMappings);
        } else {
          for (Operation &op : loop.getBody()->without_terminator())
            t.clone(op, mapping);
        }
      });
  loop.erase();
  loom::sinkViewsIntoLaunch(launch);
}

/// `threadPerIteration`: a loop made from a reduction over an outer axis.
/// It runs a thread per output (or per output and chunk of its terms, when
/// the outputs are few), never a warp per output: an output's terms are a
/// row apart in memory, so a warp's lanes would read them uncoalesced.
LogicalResult LoomMapLoopsToGpu::mapParallel(scf::ParallelOp loop,
                                             bool threadPerIteration) {
  std::optional<loom::LoopSpace> space = loom::getLoopSpace(loop);
  if (!space)
    return loop.emitError("loop bounds must be constants to map to the GPU");
  if (threadPerIteration) {
    if (!loom::mapSplitReduction(loop, *space, blockSize))
      mapElementwise(loop, *space);
  } else if (std::optional<loom::RowReduction> reduction = loom::matchRowReduction(loop)) {
    mapRowReduction(loop, *reduction, *space);
  } else {
    mapElementwise(loop, *space);
  }
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
  // Launches take buffers: a tensor value made inside one could not reach
  // its uses (loom-opt on tensor IR had given a dominance error).
  if (failed(loom::requireBufferized(func, "loom-map-loops-to-gpu")))
    return signalPassFailure();
  Block &entry = func.getBody().front();
  for (auto copy : llvm::make_early_inc_range(entry.getOps<memref::CopyOp>()))
    if (failed(loom::lowerCopyToLoop(copy)))
      return signalPassFailure();
  loom::fuseRowSteps(entry, blockSize);
  // Sequential nests that are reductions run in parallel too (see
  // GpuSequentialNests.cpp); a reduction over an outer axis becomes a
  // parallel loop of its own.
  llvm::SmallPtrSet<Operation *, 4> interchanged;
  for (auto loop : llvm::make_early_inc_range(entry.getOps<scf::ForOp>())) {
    if (scf::ParallelOp parallel = loom::interchangeIntoParallel(loop))
      interchanged.insert(parallel);
    else if (std::optional<loom::ScalarReduction> nest = loom::matchScalarReduction(loop))
      loom::mapScalarReduction(*nest, blockSize);
  }
  llvm::SmallPtrSet<Operation *, 4> spanned = spannedParallelLoops(entry);
  for (auto loop : llvm::make_early_inc_range(entry.getOps<scf::ParallelOp>()))
    if (!spanned.contains(loop) && failed(mapParallel(loop, interchanged.contains(loop))))
      return signalPassFailure();
  // Host-side scalar code nothing uses (an MoE routing of one token left
  // some) is dropped first: it would stay on the host reading what a
  // single-thread launch below computes.
  SmallVector<Operation *> bottomUp;
  for (Operation &op : llvm::reverse(entry.without_terminator()))
    bottomUp.push_back(&op);
  for (Operation *op : bottomUp)
    if (!op->hasTrait<OpTrait::ConstantLike>() && isOpTriviallyDead(op))
      op->erase();
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
    // A value a launch computes cannot reach the host or another launch.
    if (llvm::any_of(op.getOperands(), [&](Value v) { return v.getParentBlock() != &entry; })) {
      op.emitError("internal error: loom-map-loops-to-gpu: this operation "
                   "uses a value a GPU launch before it computes");
      return signalPassFailure();
    }
    if (isa<gpu::LaunchOp>(op)) {
      flush();
      pendingSet.clear();
    } else if (isSunk(&op) && !usesPending) {
      // Pure and independent of the group: it stays, and is sunk (copied)
      // into whichever launches use it.
    } else if (isa<nvgpu::TmaCreateDescriptorOp>(op)) {
      // A wgmma matmul's tensor map: the runtime makes it (the plan's
      // `tmap:` argument), not a GPU thread.
    } else {
      pending.push_back(&op);
      pendingSet.insert(&op);
    }
  }
  flush();
}
