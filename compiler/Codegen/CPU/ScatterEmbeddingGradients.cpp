//===- ScatterEmbeddingGradients.cpp - One-hot sums as row scatters -------===//
//
// An embedding's gradient is a one-hot sum (GradientsToLinalg):
// out[v, d] = sum_p (id(p) == v ? dy[p, d] : 0) over loops (v, d, p...).
// As loops it tests every (v, p) pair at every d: V times a scatter's work,
// 7 ms of a 150 ms training step at examples/gpt.loom's vocabulary of 1024
// (LLVM keeps the select in the vectorized row loop; it does not unswitch
// it). On the CPU it becomes what it means: for each position p in order,
// dy's row p added into the output row id(p). Each output element still
// sums its terms in position order from the fill before it, so the
// results are the same bits.
//
//===----------------------------------------------------------------------===//

#include "Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMSCATTEREMBEDDINGGRADIENTS
#include "Codegen/CPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
/// The parts of a one-hot sum's body: the row an id selects and the ops
/// that compute it from the ids' element alone, the term added and its ops
/// (from dy's element alone), and the addition.
struct OneHotSum {
  Value row;
  SmallVector<Operation *> rowOps;
  SmallVector<Operation *> termOps;
  arith::AddFOp add;
};
} // namespace

/// Whether `op` loads from a buffer defined outside `generic` that the
/// generic does not write (a vocab-parallel table's first row id): as
/// good as pure for reordering the generic's loops.
static bool readsOtherBuffer(Operation *op, linalg::GenericOp generic) {
  auto load = dyn_cast<memref::LoadOp>(op);
  if (!load)
    return false;
  Value buffer = load.getMemRef();
  return !generic->isAncestor(buffer.getParentBlock()->getParentOp()) &&
         !llvm::is_contained(generic.getDpsInits(), buffer);
}

/// The body ops `value` is computed from, in block order, when they are
/// pure (or read other buffers) and read no block argument but
/// `argument`; nothing otherwise.
static std::optional<SmallVector<Operation *>> sliceOf(Value value, BlockArgument argument,
                                                       linalg::GenericOp generic) {
  Block *block = argument.getOwner();
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> work{value};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto blockArgument = dyn_cast<BlockArgument>(v)) {
      if (blockArgument.getOwner() == block && blockArgument != argument)
        return std::nullopt;
      continue;
    }
    Operation *op = v.getDefiningOp();
    if (op->getBlock() != block || slice.contains(op))
      continue;
    if ((!isPure(op) && !readsOtherBuffer(op, generic)) || isa<linalg::IndexOp>(op) ||
        op->getNumRegions() != 0)
      return std::nullopt;
    slice.insert(op);
    llvm::append_range(work, op->getOperands());
  }
  SmallVector<Operation *> ordered;
  for (Operation &op : *block)
    if (slice.contains(&op))
      ordered.push_back(&op);
  return ordered;
}

/// `op`'s body parts if it is a one-hot sum: loops (v, d, p...) with v and
/// d parallel and the positions reduced, ids read at (p...), dy at
/// (p..., d), the output [V, D] at (v, d), and the body
/// `select(row(id) == index(0), acc + term(dy), acc)`.
static std::optional<OneHotSum> matchOneHotSum(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return std::nullopt;
  unsigned loops = op.getNumLoops();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (loops < 3 || iterators[0] != utils::IteratorType::parallel ||
      iterators[1] != utils::IteratorType::parallel ||
      llvm::any_of(ArrayRef(iterators).drop_front(2),
                   [](auto it) { return it != utils::IteratorType::reduction; }))
    return std::nullopt;
  MLIRContext *context = op.getContext();
  SmallVector<AffineExpr> positions;
  for (unsigned d = 2; d < loops; ++d)
    positions.push_back(getAffineDimExpr(d, context));
  SmallVector<AffineExpr> positionsAndD(positions);
  positionsAndD.push_back(getAffineDimExpr(1, context));
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (maps[0] != AffineMap::get(loops, 0, positions, context) ||
      maps[1] != AffineMap::get(loops, 0, positionsAndD, context) ||
      maps[2] != AffineMap::get(loops, 0,
                                {getAffineDimExpr(0, context), getAffineDimExpr(1, context)},
                                context))
    return std::nullopt;

  Block &body = op.getRegion().front();
  BlockArgument acc = body.getArgument(2);
  auto select = body.getTerminator()->getOperand(0).getDefiningOp<arith::SelectOp>();
  if (!select || select.getFalseValue() != acc)
    return std::nullopt;
  auto hit = select.getCondition().getDefiningOp<arith::CmpIOp>();
  auto add = select.getTrueValue().getDefiningOp<arith::AddFOp>();
  if (!hit || hit.getPredicate() != arith::CmpIPredicate::eq || !add)
    return std::nullopt;
  auto isOutputRow = [](Value v) {
    auto index = v.getDefiningOp<linalg::IndexOp>();
    return index && index.getDim() == 0;
  };
  Value row = isOutputRow(hit.getRhs()) ? hit.getLhs()
              : isOutputRow(hit.getLhs()) ? hit.getRhs()
                                          : Value();
  Value term = add.getLhs() == acc ? add.getRhs() : add.getRhs() == acc ? add.getLhs() : Value();
  if (!row || !term || !row.getType().isIndex())
    return std::nullopt;
  std::optional<SmallVector<Operation *>> rowOps = sliceOf(row, body.getArgument(0), op);
  std::optional<SmallVector<Operation *>> termOps = sliceOf(term, body.getArgument(1), op);
  if (!rowOps || !termOps)
    return std::nullopt;
  return OneHotSum{row, std::move(*rowOps), std::move(*termOps), add};
}

/// `ops` cloned at `b`'s insertion point through `mapping`.
static void cloneAll(OpBuilder &b, ArrayRef<Operation *> ops, IRMapping &mapping) {
  for (Operation *op : ops)
    b.clone(*op, mapping);
}

/// The row of `source` [..., D] at the indices `leading` of its other
/// dims, as a 1-D view of its D elements.
static Value rowOf(OpBuilder &b, Location loc, Value source, ValueRange leading) {
  auto type = cast<MemRefType>(source.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(leading.begin(), leading.end());
  offsets.push_back(b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes(rank - 1, b.getIndexAttr(1));
  sizes.push_back(b.getIndexAttr(type.getShape().back()));
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  auto rowType = memref::SubViewOp::inferRankReducedResultType({type.getShape().back()}, type,
                                                                offsets, sizes, strides);
  return memref::SubViewOp::create(b, loc, cast<MemRefType>(rowType), source, offsets, sizes,
                                   strides);
}

/// `op` (a one-hot sum) as a loop nest over the positions, each adding
/// dy's row into the output row its id selects, if the output has that row
/// (a vocab-parallel table's ids of other ranks' rows select none).
static void scatter(RewriterBase &rewriter, linalg::GenericOp op, const OneHotSum &sum) {
  Location loc = op.getLoc();
  Value ids = op.getDpsInputs()[0], dy = op.getDpsInputs()[1], out = op.getDpsInits()[0];
  Block &body = op.getRegion().front();
  ArrayRef<int64_t> positions = cast<MemRefType>(ids.getType()).getShape();
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  SmallVector<Value> lower(positions.size(), zero), steps(positions.size(), one), upper;
  for (int64_t size : positions)
    upper.push_back(arith::ConstantIndexOp::create(rewriter, loc, size));
  scf::buildLoopNest(rewriter, loc, lower, upper, steps,
                     [&](OpBuilder &b, Location l, ValueRange position) {
    IRMapping mapping;
    mapping.map(body.getArgument(0), memref::LoadOp::create(b, l, ids, position).getResult());
    cloneAll(b, sum.rowOps, mapping);
    Value row = mapping.lookup(sum.row);
    Value rows = arith::ConstantIndexOp::create(
        b, l, cast<MemRefType>(out.getType()).getShape().front());
    Value held = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, row, rows);
    scf::IfOp::create(b, l, held, [&](OpBuilder &ib, Location il) {
      Value outRow = rowOf(ib, il, out, ValueRange{row});
      Value dyRow = rowOf(ib, il, dy, position);
      AffineMap identity = ib.getMultiDimIdentityMap(1);
      linalg::GenericOp::create(
          ib, il, ValueRange{dyRow}, ValueRange{outRow}, ArrayRef<AffineMap>{identity, identity},
          ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            IRMapping rowMapping;
            rowMapping.map(body.getArgument(1), args[0]);
            rowMapping.map(body.getArgument(2), args[1]);
            cloneAll(nb, sum.termOps, rowMapping);
            linalg::YieldOp::create(nb, nl, nb.clone(*sum.add, rowMapping)->getResult(0));
          });
      scf::YieldOp::create(ib, il);
    });
  });
  rewriter.eraseOp(op);
}

namespace {
struct LoomScatterEmbeddingGradients
    : public loom::impl::LoomScatterEmbeddingGradientsBase<LoomScatterEmbeddingGradients> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, OneHotSum>> sums;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<OneHotSum> sum = matchOneHotSum(op))
        sums.emplace_back(op, *sum);
    });
    IRRewriter rewriter(&getContext());
    for (auto &[op, sum] : sums) {
      rewriter.setInsertionPoint(op);
      scatter(rewriter, op, sum);
    }
  }
};
} // namespace
