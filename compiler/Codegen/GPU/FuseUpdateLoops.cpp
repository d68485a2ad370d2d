//===- FuseUpdateLoops.cpp - A bucket's optimizer update as one launch ----===//
//
// An update bucket's kernel (loom.update_kernel, one per bucket from
// loom-optimizer-step and loom-outline-kernels) holds every param's update
// chain: elementwise parallel loops, a few per param, each param's of its
// own shape. loom-map-loops-to-gpu would make each loop a launch; here
// they become one loop, so the bucket is one memory-bound launch, as
// apex's multi-tensor Adam is:
//
// 1. Adjacent loops of the same shape (one param's chain: m, v, p) fuse
//    into one group, their bodies run one after the other at each element,
//    so each element's state is read once and its new values written once.
// 2. The groups, about one per param, become one flat loop over all their
//    iterations: iteration t runs group k's element t - offset_k (the
//    offsets are the running sums of the groups' sizes), through an
//    scf.index_switch on k. A launch's parameters hold 4352 bytes, so a
//    flat loop takes at most kMaxCaptured buffers and scalars; a bigger
//    bucket becomes several launches, as apex chunks its tensor lists.
//
// Copy kernels (a gradient bucket's packing and unpacking: views and copies
// of static 1-D buffers) are made such loops first, one per copy, and
// groups may then write disjoint static pieces of one buffer: a bucket of
// 150 gradients is one launch, not 150 (and one kernel for ptxas, not
// 150, which keeps a deep model's cubin as quick to build as a shallow
// one's).
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

#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/Passes.h"
#include "Loom/IR/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMFUSEUPDATELOOPS
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
using loom::viewRoot;

/// What a loop stores and loads, if it is one the file header allows: zero
/// lower bounds, unit steps, no reductions, and only memref loads and
/// stores as memory accesses.
struct ElementwiseLoop {
  scf::ParallelOp loop;
  /// The buffers stored, loaded, and loaded at fixed indices (their
  /// roots), and the memrefs (views) the loop stores and loads at its own
  /// indices.
  SmallVector<Value, 4> stored, loaded, loadedAtFixed, storedAtOwn, loadedAtOwn;
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
      info.stored.push_back(viewRoot(store.getMemRef()));
      info.storedAtOwn.push_back(store.getMemRef());
    } else if (auto load = dyn_cast<memref::LoadOp>(op)) {
      bool invariant = llvm::all_of(load.getIndices(), [&](Value index) {
        return loop.isDefinedOutsideOfLoop(index);
      });
      bool own = llvm::equal(load.getIndices(), ivs);
      ok &= invariant || own;
      info.loaded.push_back(viewRoot(load.getMemRef()));
      if (own)
        info.loadedAtOwn.push_back(load.getMemRef());
      else
        info.loadedAtFixed.push_back(viewRoot(load.getMemRef()));
    } else if (!isMemoryEffectFree(op) && !isa<scf::ReduceOp>(op)) {
      ok = false;
    }
  });
  // A value read at fixed indices must not be one the loop writes.
  ok &= llvm::none_of(info.loadedAtFixed, [&](Value buffer) {
    return llvm::is_contained(info.stored, buffer);
  });
  if (!ok)
    return std::nullopt;
  return info;
}

/// The values a loop's body uses from outside it (constants aside): what
/// its launch takes as parameters.
llvm::SmallPtrSet<Value, 16> capturedBy(scf::ParallelOp loop) {
  llvm::SmallPtrSet<Value, 16> captured;
  loop.getBody()->walk([&](Operation *op) {
    for (Value operand : op->getOperands())
      if (loop.isDefinedOutsideOfLoop(operand) &&
          !matchPattern(operand, m_Constant()))
        captured.insert(operand);
  });
  return captured;
}

/// A launch's parameters take at most 4352 bytes (PTX ISA before 8.1); a
/// captured value is one 8-byte parameter (a buffer's bare pointer, or a
/// scalar), and the launch keeps some room for its own. apex's
/// multi-tensor Adam chunks its tensor lists for the same reason.
constexpr size_t kMaxCaptured = 480;

/// Whether `a` and `b` together hold at most kMaxCaptured values.
bool fits(const llvm::SmallPtrSet<Value, 16> &a,
          const llvm::SmallPtrSet<Value, 16> &b) {
  size_t count = a.size();
  for (Value v : b)
    count += !a.contains(v);
  return count <= kMaxCaptured;
}

/// Loops fused into one: the same bounds, their bodies run one after the
/// other at each element.
struct LoopGroup {
  SmallVector<ElementwiseLoop> loops;
  llvm::SmallPtrSet<Value, 16> captured;
  int64_t iterations() const { return loops.front().iterations; }
};

SmallVector<int64_t> boundsOf(scf::ParallelOp loop) {
  return llvm::map_to_vector(loop.getUpperBound(), [](Value v) {
    return *getConstantIntValue(v);
  });
}

/// Whether `later` may run right after `earlier` at each element: the same
/// bounds, and neither reads at fixed indices what the other writes (at its
/// own element, a read of the other's result is the value the unfused
/// loops read).
bool fusible(const ElementwiseLoop &earlier, const ElementwiseLoop &later) {
  if (boundsOf(earlier.loop) != boundsOf(later.loop))
    return false;
  auto readsAtFixedIndices = [](const ElementwiseLoop &reader,
                                const ElementwiseLoop &writer) {
    return llvm::any_of(reader.loadedAtFixed, [&](Value buffer) {
      return llvm::is_contained(writer.stored, buffer);
    });
  };
  // At its own element, one loop may read what the other writes only
  // through the same view: another view of the buffer (a shifted piece)
  // would be another thread's element.
  auto sameViews = [](ArrayRef<Value> accessed, const ElementwiseLoop &writer) {
    return llvm::all_of(accessed, [&](Value memref) {
      return !llvm::is_contained(writer.stored, viewRoot(memref)) ||
             llvm::is_contained(writer.storedAtOwn, memref);
    });
  };
  return !readsAtFixedIndices(later, earlier) &&
         !readsAtFixedIndices(earlier, later) &&
         sameViews(later.loadedAtOwn, earlier) &&
         sameViews(later.storedAtOwn, earlier) &&
         sameViews(earlier.loadedAtOwn, later);
}

/// The elements [begin, end) of its root that a 1-D view holds: the root
/// itself, or a static unit-stride subview of it; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> staticSpan(Value view) {
  auto type = dyn_cast<MemRefType>(view.getType());
  if (!type || type.getRank() != 1 || !type.hasStaticShape())
    return std::nullopt;
  if (view == viewRoot(view))
    return std::make_pair(int64_t(0), type.getDimSize(0));
  auto subview = view.getDefiningOp<memref::SubViewOp>();
  if (!subview || subview.getSource() != viewRoot(view) ||
      subview.getStaticOffsets().size() != 1 ||
      ShapedType::isDynamic(subview.getStaticOffsets()[0]) ||
      subview.getStaticStrides()[0] != 1)
    return std::nullopt;
  int64_t begin = subview.getStaticOffsets()[0];
  return std::make_pair(begin, begin + type.getDimSize(0));
}

/// Whether the groups may run in any order, element by element: no group
/// reads or writes a buffer another one writes, but for groups that write
/// disjoint static pieces of one buffer (a gradient bucket's parts), which
/// no group reads.
bool independent(ArrayRef<LoopGroup> groups) {
  struct Write {
    size_t group;
    std::optional<std::pair<int64_t, int64_t>> span;
  };
  llvm::SmallDenseMap<Value, SmallVector<Write, 4>, 16> writes;
  for (auto [i, group] : llvm::enumerate(groups))
    for (const ElementwiseLoop &loop : group.loops)
      for (Value view : loop.storedAtOwn) {
        auto span = staticSpan(view);
        for (const Write &other : writes[viewRoot(view)])
          if (other.group != i &&
              (!span || !other.span || (span->first < other.span->second &&
                                        other.span->first < span->second)))
            return false;
        writes[viewRoot(view)].push_back({i, span});
      }
  for (auto [index, group] : llvm::enumerate(groups))
    for (const ElementwiseLoop &loop : group.loops)
      for (Value v : loop.loaded)
        if (auto it = writes.find(v);
            it != writes.end() && llvm::any_of(it->second, [&, i = index](const Write &w) {
              return w.group != i;
            }))
          return false;
  return true;
}

/// Replaces the loops of `groups` (in program order, with only effect-free
/// ops between them) by one flat loop after the last of them: group k's
/// iterations from offset_k, its loops' bodies one after the other at the
/// same element, chosen by an index_switch when there are several groups.
void flatten(ArrayRef<LoopGroup> groups) {
  scf::ParallelOp last = groups.back().loops.back().loop;
  Location loc = last.getLoc();
  OpBuilder b(last);
  SmallVector<int64_t> offsets{0};
  for (const LoopGroup &group : groups)
    offsets.push_back(offsets.back() + group.iterations());
  auto cst = [&](OpBuilder &builder, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, v);
  };
  auto flat = scf::ParallelOp::create(b, loc, ValueRange{cst(b, 0)},
                                      ValueRange{cst(b, offsets.back())},
                                      ValueRange{cst(b, 1)});
  OpBuilder body = OpBuilder::atBlockBegin(flat.getBody());
  Value t = flat.getInductionVars()[0];
  // Group k's loops at element t - offset_k, delinearized over their
  // bounds, innermost last.
  auto fill = [&](OpBuilder &c, const LoopGroup &group, int64_t offset) {
    SmallVector<int64_t> bounds = boundsOf(group.loops.front().loop);
    Value local = offset ? arith::SubIOp::create(c, loc, t, cst(c, offset)).getResult()
                         : t;
    SmallVector<Value> ivs(bounds.size());
    for (int64_t d = bounds.size() - 1; d >= 0; --d) {
      ivs[d] = d == 0 ? local : arith::RemUIOp::create(c, loc, local, cst(c, bounds[d]));
      if (d > 0)
        local = arith::DivUIOp::create(c, loc, local, cst(c, bounds[d]));
    }
    for (ElementwiseLoop loop : group.loops) {
      IRMapping mapping;
      mapping.map(loop.loop.getInductionVars(), ivs);
      for (Operation &op : loop.loop.getBody()->without_terminator())
        c.clone(op, mapping);
    }
  };
  if (groups.size() == 1) {
    fill(body, groups.front(), 0);
  } else {
    // Which group t belongs to: the number of offsets it reaches.
    Value which = cst(body, 0);
    for (int64_t offset : ArrayRef<int64_t>(offsets).slice(1, groups.size() - 1)) {
      Value past = arith::CmpIOp::create(body, loc, arith::CmpIPredicate::uge, t,
                                         cst(body, offset));
      which = arith::AddIOp::create(
          body, loc, which,
          arith::IndexCastUIOp::create(body, loc, body.getIndexType(), past));
    }
    SmallVector<int64_t> cases = llvm::to_vector(llvm::seq<int64_t>(0, groups.size()));
    auto dispatch = scf::IndexSwitchOp::create(body, loc, TypeRange(), which,
                                               cases, cases.size());
    for (auto [i, group] : llvm::enumerate(groups)) {
      OpBuilder c = OpBuilder::atBlockBegin(&dispatch.getCaseRegions()[i].emplaceBlock());
      fill(c, group, offsets[i]);
      scf::YieldOp::create(c, loc);
    }
    // The default region is never taken (which < groups.size()).
    OpBuilder otherwise = OpBuilder::atBlockBegin(&dispatch.getDefaultRegion().emplaceBlock());
    scf::YieldOp::create(otherwise, loc);
  }
  for (const LoopGroup &group : groups)
    for (ElementwiseLoop loop : group.loops)
      loop.loop.erase();
}

/// Fuses and flattens `run` (elementwise loops in program order with only
/// effect-free ops between them): neighbours of one shape into groups,
/// then consecutive independent groups into flat loops of at most
/// kMaxCaptured parameters.
void fuseRun(ArrayRef<ElementwiseLoop> run) {
  SmallVector<LoopGroup, 4> groups;
  for (const ElementwiseLoop &loop : run) {
    llvm::SmallPtrSet<Value, 16> captured = capturedBy(loop.loop);
    if (!groups.empty() &&
        llvm::all_of(groups.back().loops,
                     [&](const ElementwiseLoop &member) { return fusible(member, loop); }) &&
        fits(groups.back().captured, captured)) {
      groups.back().loops.push_back(loop);
      groups.back().captured.insert(captured.begin(), captured.end());
      continue;
    }
    LoopGroup group;
    group.loops.push_back(loop);
    group.captured = std::move(captured);
    groups.push_back(std::move(group));
  }
  SmallVector<LoopGroup, 4> chunk;
  llvm::SmallPtrSet<Value, 16> chunkCaptured;
  auto emit = [&] {
    if (chunk.size() > 1 || (chunk.size() == 1 && chunk.front().loops.size() > 1))
      flatten(chunk);
    chunk.clear();
    chunkCaptured.clear();
  };
  for (LoopGroup &group : groups) {
    if (!chunk.empty()) {
      SmallVector<LoopGroup, 4> extended(chunk.begin(), chunk.end());
      extended.push_back(group);
      if (!fits(chunkCaptured, group.captured) || !independent(extended))
        emit();
    }
    chunkCaptured.insert(group.captured.begin(), group.captured.end());
    chunk.push_back(group);
  }
  emit();
}

/// A copy kernel: its body is only views, constants and copies of static
/// 1-D buffers (a gradient bucket's packing and unpacking).
bool isCopyKernel(func::FuncOp func) {
  bool copies = false;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      copies = true;
      if (!staticSpan(copy.getSource()) || !staticSpan(copy.getTarget()))
        return false;
    } else if (!isa<memref::SubViewOp>(op) && !matchPattern(&op, m_Constant())) {
      return false;
    }
  }
  return copies;
}

/// Prepares a copy kernel for fusion. A whole scratch buffer copied into an
/// argument at the end (how a concatenation bufferizes), and only ever
/// written, is replaced by that argument, so the pieces go there directly;
/// then each copy becomes an elementwise loop.
void loopCopies(func::FuncOp func) {
  Block &body = func.getBody().front();
  auto last = dyn_cast<memref::CopyOp>(body.getTerminator()->getPrevNode());
  if (last) {
    auto scratch = dyn_cast<BlockArgument>(last.getSource());
    bool onlyWritten =
        scratch && func.getArgAttr(scratch.getArgNumber(), loom::attr::kScratch) &&
        last.getSource().getType() == last.getTarget().getType() &&
        llvm::all_of(scratch.getUsers(), [&](Operation *user) {
          if (user == last)
            return true;
          auto subview = dyn_cast<memref::SubViewOp>(user);
          return subview && llvm::all_of(subview->getUsers(), [&](Operation *use) {
                   auto copy = dyn_cast<memref::CopyOp>(use);
                   return copy && copy.getTarget() == subview.getResult();
                 });
        });
    if (onlyWritten) {
      Value target = last.getTarget();
      last.erase();
      scratch.replaceAllUsesWith(target);
    }
  }
  for (auto copy : llvm::make_early_inc_range(body.getOps<memref::CopyOp>())) {
    OpBuilder b(copy);
    Location loc = copy.getLoc();
    int64_t size = cast<MemRefType>(copy.getSource().getType()).getDimSize(0);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value upper = arith::ConstantIndexOp::create(b, loc, size);
    auto loop = scf::ParallelOp::create(b, loc, ValueRange{zero}, ValueRange{upper},
                                        ValueRange{one});
    OpBuilder inner = OpBuilder::atBlockBegin(loop.getBody());
    Value i = loop.getInductionVars()[0];
    Value element = memref::LoadOp::create(inner, loc, copy.getSource(), ValueRange{i});
    memref::StoreOp::create(inner, loc, element, copy.getTarget(), ValueRange{i});
    copy.erase();
  }
}

struct LoomFuseUpdateLoops
    : public loom::impl::LoomFuseUpdateLoopsBase<LoomFuseUpdateLoops> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (isCopyKernel(func))
      loopCopies(func);
    else if (!func->hasAttr(loom::attr::kUpdateKernel))
      return;
    // Runs of elementwise loops with nothing between them that has an
    // effect.
    SmallVector<ElementwiseLoop> run;
    auto close = [&] {
      fuseRun(run);
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
