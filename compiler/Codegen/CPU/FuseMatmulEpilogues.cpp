//===- FuseMatmulEpilogues.cpp - A matmul's elementwise consumer per tile -===//

#include "Codegen/CPU/CpuMatmul.h"
#include "Codegen/Common/MatmulLike.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

static constexpr llvm::StringLiteral kEpilogueAttr = "loom.cpu_epilogue";

/// The op after `op`, past the deallocations of its temporaries.
static Operation *nextAfterDeallocs(Operation *op) {
  Operation *next = op->getNextNode();
  while (next && isa<memref::DeallocOp>(next))
    next = next->getNextNode();
  return next;
}

linalg::GenericOp loom::findMatmulEpilogue(linalg::GenericOp matmul, unsigned *accOperandNumber) {
  // The accumulator itself, under packMatmul's view of it.
  Value acc = matmul.getDpsInits()[0];
  if (auto view = acc.getDefiningOp<memref::ReinterpretCastOp>())
    acc = view.getSource();
  auto epilogue = dyn_cast_or_null<linalg::GenericOp>(nextAfterDeallocs(matmul));
  auto accType = dyn_cast<MemRefType>(acc.getType());
  if (!epilogue || !accType || !accType.getLayout().isIdentity() || !accType.hasStaticShape() ||
      epilogue.getNumDpsInits() != 1 || epilogue.getNumLoops() != unsigned(accType.getRank()) ||
      epilogue.getNumParallelLoops() != epilogue.getNumLoops())
    return {};
  // Per element: no iteration indices (a strip's would be its own), the
  // accumulator read and the output written at the element itself.
  if (!epilogue.getRegion().front().getOps<linalg::IndexOp>().empty())
    return {};
  OpOperand *out = epilogue.getDpsInitOperand(0);
  // Nor may the output be a view of a buffer the matmul reads: per tile,
  // the epilogue would write over operand rows later tiles still read
  // (a bf16 attention's output bufferized into its probabilities' bytes,
  // which its P @ V reads: every row wrong, fuzzer seed 131073).
  if (!epilogue.getMatchingIndexingMap(out).isIdentity() || out->get() == acc ||
      mlir::loom::writesMatmulOperand(matmul, out->get()) ||
      cast<MemRefType>(out->get().getType()).getShape() != accType.getShape())
    return {};
  std::optional<unsigned> accOperand;
  for (OpOperand *input : epilogue.getDpsInputOperands()) {
    AffineMap map = epilogue.getMatchingIndexingMap(input);
    if (!map.isProjectedPermutation() || !isa<MemRefType>(input->get().getType()))
      return {};
    if (input->get() == acc && map.isIdentity())
      accOperand = input->getOperandNumber();
  }
  // The accumulator is the matmul's own: filled, accumulated (through its
  // view), read here, nowhere else.
  auto ownUse = [&](Operation *user) {
    if (user == matmul || user == epilogue || isa<linalg::FillOp>(user))
      return true;
    return isa<memref::ReinterpretCastOp>(user) &&
           llvm::all_of(user->getUsers(), [&](Operation *u) { return u == matmul; });
  };
  if (!accOperand || !llvm::all_of(acc.getUsers(), ownUse))
    return {};
  if (accOperandNumber)
    *accOperandNumber = *accOperand;
  return epilogue;
}

bool loom::markMatmulEpilogue(linalg::GenericOp matmul) {
  unsigned accOperand;
  linalg::GenericOp epilogue = findMatmulEpilogue(matmul, &accOperand);
  if (!epilogue)
    return false;
  epilogue->setAttr(kEpilogueAttr,
                    IntegerAttr::get(IntegerType::get(matmul.getContext(), 64), accOperand));
  return true;
}

/// Whether `op` is inside a loop that carries vectors: a register tile's k
/// loop, whose writes of the accumulator (if any stayed in it) are not final.
static bool insideKLoop(Operation *op) {
  for (auto loop = op->getParentOfType<scf::ForOp>(); loop;
       loop = loop->getParentOfType<scf::ForOp>())
    if (llvm::any_of(loop.getInitArgs(), [](Value v) { return isa<VectorType>(v.getType()); }))
      return true;
  return false;
}

/// `value` viewed through the reinterpret_casts packMatmul made, down to
/// `acc`: the view's static strides and offset, or nothing.
static std::optional<std::pair<SmallVector<int64_t>, int64_t>> viewOf(Value value, Value acc) {
  auto view = value.getDefiningOp<memref::ReinterpretCastOp>();
  if (value != acc && (!view || view.getSource() != acc))
    return std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(cast<MemRefType>(value.getType()).getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) || llvm::any_of(strides, ShapedType::isDynamic))
    return std::nullopt;
  return std::make_pair(strides, offset);
}

/// The box of the accumulator a tile's write covers: per accumulator dim,
/// the written vector's size along it (1 where none), found by stride (a
/// view dim is an accumulator dim split: same stride). Nothing when the
/// write is not such a box.
static std::optional<SmallVector<int64_t>> writtenBox(vector::TransferWriteOp write,
                                                      ArrayRef<int64_t> viewStrides,
                                                      MemRefType accType) {
  SmallVector<int64_t> accStrides;
  int64_t accOffset;
  if (failed(accType.getStridesAndOffset(accStrides, accOffset)))
    return std::nullopt;
  SmallVector<int64_t> box(accType.getRank(), 1);
  ArrayRef<int64_t> shape = write.getVectorType().getShape();
  unsigned first = viewStrides.size() - shape.size();
  for (auto [i, size] : llvm::enumerate(shape)) {
    if (size == 1)
      continue;
    auto dim = llvm::find(accStrides, viewStrides[first + i]) - accStrides.begin();
    if (dim == int64_t(accStrides.size()) || box[dim] != 1)
      return std::nullopt;
    box[dim] = size;
  }
  return box;
}

/// The epilogue restricted to the box of `sizes` at `indices` of its
/// iteration space (the accumulator's), vectorized: each operand's subview
/// there (a broadcast operand's along the dims it has), the same maps and
/// body, read, computed and written as vectors of the box's shape.
LogicalResult loom::emitMatmulEpilogueBox(RewriterBase &rewriter, Location loc,
                                          linalg::GenericOp epilogue, ValueRange indices,
                                          ArrayRef<int64_t> sizes) {
  SmallVector<Value> operands;
  for (OpOperand &operand : epilogue->getOpOperands()) {
    AffineMap map = epilogue.getMatchingIndexingMap(&operand);
    SmallVector<OpFoldResult> offsets, subSizes, strides;
    for (AffineExpr e : map.getResults()) {
      unsigned dim = cast<AffineDimExpr>(e).getPosition();
      offsets.push_back(indices[dim]);
      subSizes.push_back(rewriter.getIndexAttr(sizes[dim]));
      strides.push_back(rewriter.getIndexAttr(1));
    }
    operands.push_back(
        memref::SubViewOp::create(rewriter, loc, operand.get(), offsets, subSizes, strides));
  }
  unsigned inputs = epilogue.getNumDpsInputs();
  auto box = linalg::GenericOp::create(rewriter, loc, TypeRange{},
                                       ArrayRef(operands).take_front(inputs),
                                       ArrayRef(operands).drop_front(inputs),
                                       epilogue.getIndexingMapsArray(),
                                       epilogue.getIteratorTypesArray());
  IRMapping mapping;
  epilogue.getRegion().cloneInto(&box.getRegion(), mapping);
  if (failed(linalg::vectorize(rewriter, box)))
    return failure();
  rewriter.eraseOp(box);
  return success();
}

LogicalResult loom::fuseMatmulEpilogues(Operation *root) {
  SmallVector<linalg::GenericOp> epilogues;
  root->walk([&](linalg::GenericOp op) {
    if (op->hasAttr(kEpilogueAttr))
      epilogues.push_back(op);
  });
  IRRewriter rewriter(root->getContext());
  for (linalg::GenericOp epilogue : epilogues) {
    Value acc = epilogue->getOperand(epilogue->getAttrOfType<IntegerAttr>(kEpilogueAttr).getInt());
    epilogue->removeAttr(kEpilogueAttr);
    auto accType = cast<MemRefType>(acc.getType());
    // Every write of the accumulator besides the fill: a register tile's,
    // after its k loop, of a box of acc, through acc or a strided view.
    SmallVector<std::pair<vector::TransferWriteOp, SmallVector<int64_t>>> writes;
    bool fusable = true;
    auto visit = [&](Operation *user) {
      // The fill, the views and the tiles' loads of the accumulator.
      if (isa<linalg::FillOp, memref::ReinterpretCastOp, vector::TransferReadOp>(user) ||
          user == epilogue)
        return;
      auto write = dyn_cast<vector::TransferWriteOp>(user);
      std::optional<std::pair<SmallVector<int64_t>, int64_t>> view;
      std::optional<SmallVector<int64_t>> box;
      if (write && !insideKLoop(write) && write.getPermutationMap().isMinorIdentity() &&
          (view = viewOf(write.getBase(), acc)))
        box = writtenBox(write, view->first, accType);
      if (!box) {
        fusable = false;
        return;
      }
      writes.push_back({write, *box});
    };
    for (Operation *user : acc.getUsers()) {
      visit(user);
      if (auto view = dyn_cast<memref::ReinterpretCastOp>(user))
        for (Operation *viewUser : view->getUsers())
          visit(viewUser);
    }
    if (!fusable || writes.empty())
      continue;
    for (auto &[write, box] : writes) {
      rewriter.setInsertionPointAfter(write);
      Location loc = write.getLoc();
      auto [strides, offset] = *viewOf(write.getBase(), acc);
      // The box's first element: its linear position in acc, then its
      // indices there.
      Value linear = arith::ConstantIndexOp::create(rewriter, loc, offset);
      for (auto [index, stride] : llvm::zip(write.getIndices(), strides)) {
        Value term = arith::MulIOp::create(rewriter, loc, index,
                                           arith::ConstantIndexOp::create(rewriter, loc, stride));
        linear = arith::AddIOp::create(rewriter, loc, linear, term);
      }
      auto indices = affine::AffineDelinearizeIndexOp::create(
          rewriter, loc, linear, accType.getShape(), /*hasOuterBound=*/true);
      if (failed(emitMatmulEpilogueBox(rewriter, loc, epilogue, indices.getResults(), box)))
        return epilogue.emitError("internal error: a matmul epilogue does not vectorize");
    }
    rewriter.eraseOp(epilogue);
  }
  return success();
}
