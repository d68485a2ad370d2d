//===- FuseUpdateLoops.cpp - A bucket's optimizer update as one launch ----===//
//
// An update bucket's kernel (loom.update_bucket, one per bucket from
// loom-optimizer-step and loom-outline-kernels) holds every param's update
// chain: elementwise parallel loops, a few per param, each param's of its
// own shape. loom-map-loops-to-gpu would make each loop a launch; here
// they become one loop, so the bucket is one memory-bound launch, as
// apex's multi-tensor Adam is:
//
// 1. Adjacent loops of the same shape (one param's chain: m, v, p) fuse
//    into one (upstream's naivelyFuseParallelOps), so each element's state
//    is read once and its new values written once.
// 2. The loops left, one per param, become one flat loop over all their
//    iterations: iteration t runs loop k's iteration t - offset_k (the
//    offsets are the running sums of the loops' sizes), through an
//    scf.index_switch on k.
//
// Both need loops whose every store is at the loop's own indices and whose
// loads are at those indices or at indices that do not change in the loop
// (the per-step scalars: lr, bias corrections) of buffers the loop does
// not store; and, to flatten, loops that read and write nothing another
// of them writes (a kernel's distinct arguments never share bytes: the
// plan places the buffers of one step apart). Then each element of each
// loop is computed by one thread from values no other thread writes, in
// any order. Any other loop ends a run.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/Passes.h"
#include "Loom/IR/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMFUSEUPDATELOOPS
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
/// The memref a load or store reaches through its views.
Value rootOf(Value memref) {
  while (Operation *def = memref.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      memref = view.getViewSource();
    else
      break;
  }
  return memref;
}

/// What a loop stores and loads, if it is one the file header allows: zero
/// lower bounds, unit steps, no reductions, and only memref loads and
/// stores as memory accesses.
struct ElementwiseLoop {
  scf::ParallelOp loop;
  SmallVector<Value> stored, loaded;
  int64_t iterations = 1;
};

std::optional<ElementwiseLoop> asElementwise(scf::ParallelOp loop) {
  ElementwiseLoop info;
  info.loop = loop;
  if (!loop.getInitVals().empty())
    return std::nullopt;
  for (auto [lower, upper, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lower),
                           u = getConstantIntValue(upper),
                           s = getConstantIntValue(step);
    if (!l || !u || !s || *l != 0 || *s != 1 || *u <= 0)
      return std::nullopt;
    info.iterations *= *u;
  }
  SmallVector<Value> ivs(loop.getInductionVars());
  bool ok = true;
  loop.getBody()->walk([&](Operation *op) {
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      ok &= llvm::equal(store.getIndices(), ivs);
      info.stored.push_back(rootOf(store.getMemRef()));
    } else if (auto load = dyn_cast<memref::LoadOp>(op)) {
      bool invariant = llvm::all_of(load.getIndices(), [&](Value index) {
        return loop.isDefinedOutsideOfLoop(index);
      });
      ok &= invariant || llvm::equal(load.getIndices(), ivs);
      info.loaded.push_back(rootOf(load.getMemRef()));
    } else if (!isMemoryEffectFree(op) && !isa<scf::ReduceOp>(op)) {
      ok = false;
    }
  });
  // A value read at fixed indices must not be one the loop writes.
  loop.getBody()->walk([&](memref::LoadOp load) {
    if (!llvm::equal(load.getIndices(), ivs) &&
        llvm::is_contained(info.stored, rootOf(load.getMemRef())))
      ok = false;
  });
  if (!ok)
    return std::nullopt;
  return info;
}

/// Whether the loops of `run` may run in any order, element by element: no
/// loop reads or writes a buffer another one writes.
bool independent(ArrayRef<ElementwiseLoop> run) {
  llvm::SmallDenseMap<Value, size_t, 16> writer;
  for (auto [i, loop] : llvm::enumerate(run))
    for (Value v : loop.stored)
      if (!writer.try_emplace(v, i).second && writer[v] != i)
        return false;
  for (auto [i, loop] : llvm::enumerate(run))
    for (Value v : loop.loaded)
      if (auto it = writer.find(v); it != writer.end() && it->second != i)
        return false;
  return true;
}

/// Replaces the loops of `run` (two or more, in program order, with only
/// effect-free ops between them) by one flat loop after the last of them.
void flatten(ArrayRef<ElementwiseLoop> run) {
  scf::ParallelOp last = run.back().loop;
  Location loc = last.getLoc();
  OpBuilder b(last);
  SmallVector<int64_t> offsets{0};
  for (const ElementwiseLoop &loop : run)
    offsets.push_back(offsets.back() + loop.iterations);
  auto cst = [&](OpBuilder &builder, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, v);
  };
  auto flat = scf::ParallelOp::create(b, loc, ValueRange{cst(b, 0)},
                                      ValueRange{cst(b, offsets.back())},
                                      ValueRange{cst(b, 1)});
  OpBuilder body = OpBuilder::atBlockBegin(flat.getBody());
  Value t = flat.getInductionVars()[0];
  // Which loop iteration t belongs to: the number of offsets it reaches.
  Value which = cst(body, 0);
  for (int64_t offset : ArrayRef<int64_t>(offsets).slice(1, run.size() - 1)) {
    Value past = arith::CmpIOp::create(body, loc, arith::CmpIPredicate::uge, t,
                                       cst(body, offset));
    which = arith::AddIOp::create(
        body, loc, which,
        arith::IndexCastUIOp::create(body, loc, body.getIndexType(), past));
  }
  SmallVector<int64_t> cases = llvm::to_vector(llvm::seq<int64_t>(0, run.size()));
  auto dispatch = scf::IndexSwitchOp::create(body, loc, TypeRange(), which,
                                             cases, cases.size());
  auto fill = [&](Region &region, scf::ParallelOp loop, int64_t offset) {
    OpBuilder c = OpBuilder::atBlockBegin(&region.emplaceBlock());
    // Delinearize t - offset over the loop's bounds, innermost last.
    Value local = arith::SubIOp::create(c, loc, t, cst(c, offset));
    SmallVector<Value> ivs(loop.getNumLoops());
    for (int64_t d = loop.getNumLoops() - 1; d >= 0; --d) {
      int64_t bound = *getConstantIntValue(loop.getUpperBound()[d]);
      ivs[d] = d == 0 ? local : arith::RemUIOp::create(c, loc, local, cst(c, bound));
      if (d > 0)
        local = arith::DivUIOp::create(c, loc, local, cst(c, bound));
    }
    IRMapping mapping;
    mapping.map(loop.getInductionVars(), ivs);
    for (Operation &op : loop.getBody()->without_terminator())
      c.clone(op, mapping);
    scf::YieldOp::create(c, loc);
  };
  for (auto [i, loop] : llvm::enumerate(run))
    fill(dispatch.getCaseRegions()[i], loop.loop, offsets[i]);
  // The default region is never taken (which < run.size()).
  OpBuilder otherwise = OpBuilder::atBlockBegin(&dispatch.getDefaultRegion().emplaceBlock());
  scf::YieldOp::create(otherwise, loc);
  for (ElementwiseLoop loop : run)
    loop.loop.erase();
}

struct LoomFuseUpdateLoops
    : public loom::impl::LoomFuseUpdateLoopsBase<LoomFuseUpdateLoops> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func->hasAttr(loom::attr::kUpdateBucket) || func.isExternal())
      return;
    // Step 1. A kernel's distinct arguments never share bytes: the plan
    // places the buffers one step reads and writes apart (their lifetimes
    // all include the step).
    scf::naivelyFuseParallelOps(func.getBody(), [](Value a, Value b) {
      return rootOf(a) == rootOf(b);
    });
    // Step 2, per run of elementwise loops with nothing between them that
    // has an effect.
    SmallVector<ElementwiseLoop> run;
    auto close = [&] {
      if (run.size() > 1 && independent(run))
        flatten(run);
      run.clear();
    };
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
      if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
        if (std::optional<ElementwiseLoop> info = asElementwise(loop)) {
          run.push_back(*info);
          continue;
        }
        close();
        continue;
      }
      if (!isMemoryEffectFree(&op))
        close();
    }
    close();
  }
};
} // namespace
