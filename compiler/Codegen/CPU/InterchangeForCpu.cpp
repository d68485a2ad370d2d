//===- InterchangeForCpu.cpp - The output's contiguous dim innermost ------===//
//
// convert-linalg-to-loops nests a linalg.generic's loops in iterator order,
// and the language's reductions put the reduced dims last: the gradient of
// an embedding, out[v, d] = sum_p (ids[p] == v ? dy[p, d] : 0) over
// (v, d, p), and a bias's, out[d] = sum_n dy[n, d] over (d, n), then read
// dy a column at a time, D elements apart, and nothing vectorizes. Moving
// the output's contiguous parallel dim innermost, (v, p, d) and (n, d),
// makes the innermost loop a contiguous row that LLVM vectorizes. (It does
// not unswitch the embedding's loop-invariant id test: every (v, p) pair
// still runs its row, with a select; loom-scatter-embedding-gradients,
// before this pass, makes the embedding's gradient a scatter.) Each
// output element still sums its terms in the same order, so the results
// are the same bits. Matmul-like ops are left to the register tiles.
// The other way round for short rows: a column sum of [N, 2] puts its
// reduction innermost, where it is summed in partial sums.
//
//===----------------------------------------------------------------------===//

#include "Codegen/CPU/Passes.h"
#include "Codegen/Common/MatmulLike.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMINTERCHANGEFORCPU
#include "Codegen/CPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// The loop order that puts `op`'s output-contiguous parallel dim last, or
/// nothing when it is last already or there is none: one output, whose
/// map's last result is a parallel loop dim that a reduction dim follows
/// and that is the innermost dim of every input it indexes.
static std::optional<SmallVector<unsigned>> interchangeFor(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || !op.hasPureBufferSemantics() ||
      (op.getNumDpsInputs() == 2 && loom::isMatmulLike(op)))
    return std::nullopt;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (out.getNumResults() == 0)
    return std::nullopt;
  auto inner = dyn_cast<AffineDimExpr>(out.getResults().back());
  auto iterators = op.getIteratorTypesArray();
  if (!inner)
    return std::nullopt;
  unsigned dim = inner.getPosition();
  if (iterators[dim] != utils::IteratorType::parallel ||
      dim + 1 == op.getNumLoops() ||
      llvm::none_of(ArrayRef(iterators).drop_front(dim + 1), [](auto it) {
        return it == utils::IteratorType::reduction;
      }))
    return std::nullopt;
  // Every input that moves with the dim must have it innermost too (a row
  // sum's output dim is the rows, which its input holds C apart), and one
  // must move with it.
  bool read = false;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (!map.isFunctionOfDim(dim))
      continue;
    auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
    if (!last || last.getPosition() != dim)
      return std::nullopt;
    read = true;
  }
  if (!read)
    return std::nullopt;
  SmallVector<unsigned> order;
  for (unsigned d = 0; d < op.getNumLoops(); ++d)
    if (d != dim)
      order.push_back(d);
  order.push_back(dim);
  return order;
}

/// The loop order that puts `op`'s reduction dims innermost when its one
/// output's rows are at most 32 bytes and a reduction comes before a
/// parallel dim (a sum over axis 0 of [N, 2] or [N, 8] f32), or nothing.
/// There each output element summed its N terms in one chain through
/// memory (1.4e-4 off for N = 100003, against 1.4e-6 summed along the
/// rows); innermost, the reduction is summed in partial sums
/// (loom-promote-loop-accumulators). The columns lie in few cache lines,
/// so reading them one by one costs little.
static std::optional<SmallVector<unsigned>> reductionInnermost(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || !op.hasPureBufferSemantics() ||
      loom::isMatmulLike(op))
    return std::nullopt;
  auto outType = cast<MemRefType>(op.getDpsInitOperand(0)->get().getType());
  if (!outType.getElementType().isIntOrFloat() || outType.getRank() == 0 ||
      ShapedType::isDynamic(outType.getShape().back()) ||
      outType.getShape().back() * outType.getElementTypeBitWidth() / 8 > 32)
    return std::nullopt;
  auto iterators = op.getIteratorTypesArray();
  SmallVector<unsigned> parallel, reduction;
  for (unsigned d = 0; d < op.getNumLoops(); ++d)
    (iterators[d] == utils::IteratorType::reduction ? reduction : parallel).push_back(d);
  if (reduction.empty() || parallel.empty() || reduction.front() > parallel.back())
    return std::nullopt;
  SmallVector<unsigned> order(parallel);
  order.append(reduction);
  return order;
}

namespace {
struct LoomInterchangeForCpu
    : public loom::impl::LoomInterchangeForCpuBase<LoomInterchangeForCpu> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : ops) {
      std::optional<SmallVector<unsigned>> order = interchangeFor(op);
      if (!order)
        order = reductionInnermost(op);
      if (!order)
        continue;
      rewriter.setInsertionPoint(op);
      if (failed(linalg::interchangeGenericOp(rewriter, op, *order)))
        return signalPassFailure();
    }
  }
};
} // namespace
