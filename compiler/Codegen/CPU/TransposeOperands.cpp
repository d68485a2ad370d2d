//===- TransposeOperands.cpp - A matmul operand copied into its tiles' layout //

#include "Codegen/CPU/CpuMatmul.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

std::optional<loom::PaddedCopy> loom::paddedCopyOf(Value operand, Operation *matmul) {
  PaddedCopy padded;
  padded.wide = operand.getDefiningOp<memref::AllocOp>();
  if (!padded.wide)
    return std::nullopt;
  for (Operation *user : padded.wide->getUsers()) {
    if (user == matmul)
      continue;
    if (auto dealloc = dyn_cast<memref::DeallocOp>(user)) {
      padded.deallocs.push_back(dealloc);
      continue;
    }
    auto fill = dyn_cast<linalg::FillOp>(user);
    if (fill && !padded.fill && fill.getOutputs()[0] == operand &&
        (matchPattern(fill.value(), m_AnyZeroFloat()) || matchPattern(fill.value(), m_Zero()))) {
      padded.fill = fill;
      continue;
    }
    auto corner = dyn_cast<memref::SubViewOp>(user);
    if (!corner || padded.corner || !corner->hasOneUse() || !corner.hasZeroOffset() ||
        !corner.hasUnitStride())
      return std::nullopt;
    auto copy = dyn_cast<linalg::CopyOp>(*corner->getUsers().begin());
    if (!copy || copy.getOutputs()[0] != corner.getResult())
      return std::nullopt;
    padded.corner = corner;
    padded.copy = copy;
  }
  if (!padded.fill || !padded.copy || padded.fill->getBlock() != matmul->getBlock() ||
      padded.copy->getBlock() != matmul->getBlock() ||
      !padded.fill->isBeforeInBlock(padded.copy) || !padded.copy->isBeforeInBlock(matmul))
    return std::nullopt;
  return padded;
}

void loom::PaddedCopy::erase() {
  for (memref::DeallocOp dealloc : deallocs)
    dealloc.erase();
  copy.erase();
  corner.erase();
  fill.erase();
  wide.erase();
}

Value loom::boxOf(OpBuilder &builder, Location loc, Value value, ArrayRef<unsigned> dims,
                  ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes) {
  auto type = cast<MemRefType>(value.getType());
  SmallVector<int64_t> offsetsAll(type.getRank(), 0), sizesAll(type.getShape()),
      strides(type.getRank(), 1);
  for (auto [dim, offset, size] : llvm::zip(dims, offsets, sizes)) {
    offsetsAll[dim] = offset;
    sizesAll[dim] = size;
  }
  return memref::SubViewOp::create(builder, loc, value, offsetsAll, sizesAll, strides);
}

/// `value`'s box of `sizes` at `offsets` in its last two dims (whole in the
/// others).
static Value lastTwoDims(OpBuilder &builder, Location loc, Value value,
                         std::array<int64_t, 2> offsets, std::array<int64_t, 2> sizes) {
  unsigned rank = cast<MemRefType>(value.getType()).getRank();
  return loom::boxOf(builder, loc, value, {rank - 2, rank - 1}, offsets, sizes);
}

/// The transposes of `original`'s last two dims into the leading corner of
/// `copy`, and zeros in the rest of `copy`: the bulk in whole blocks of
/// `block` (those the tiles vectorize; first), then the rows and columns
/// past them, each piece its own transpose.
static SmallVector<linalg::TransposeOp>
transposeIntoPadded(OpBuilder &builder, Location loc, Value original, Value copy,
                    ArrayRef<int64_t> permutation, int64_t block) {
  ArrayRef<int64_t> shape = cast<MemRefType>(original.getType()).getShape();
  ArrayRef<int64_t> padded = cast<MemRefType>(copy.getType()).getShape();
  int64_t rank = shape.size(), rows = shape[rank - 2], cols = shape[rank - 1];
  // The copy is [..., cols padded, rows padded]: zero what the original
  // does not reach (padToWholeTiles had zeroed all of it, then copied).
  Type element = cast<MemRefType>(copy.getType()).getElementType();
  Value zero = arith::ConstantOp::create(builder, loc, builder.getZeroAttr(element));
  int64_t paddedCols = padded[rank - 2], paddedRows = padded[rank - 1];
  if (paddedCols > cols)
    linalg::FillOp::create(builder, loc, zero,
                           lastTwoDims(builder, loc, copy, {cols, 0},
                                       {paddedCols - cols, paddedRows}));
  if (paddedRows > rows)
    linalg::FillOp::create(builder, loc, zero,
                           lastTwoDims(builder, loc, copy, {0, rows}, {cols, paddedRows - rows}));
  auto whole = [&](int64_t size) { return size > block ? size - size % block : size; };
  int64_t bulkRows = whole(rows), bulkCols = whole(cols);
  SmallVector<linalg::TransposeOp> pieces;
  auto piece = [&](int64_t row, int64_t col, int64_t height, int64_t width) {
    if (height == 0 || width == 0)
      return;
    Value from = lastTwoDims(builder, loc, original, {row, col}, {height, width});
    Value to = lastTwoDims(builder, loc, copy, {col, row}, {width, height});
    pieces.push_back(linalg::TransposeOp::create(builder, loc, from, to, permutation));
  };
  piece(0, 0, bulkRows, bulkCols);
  piece(0, bulkCols, bulkRows, cols - bulkCols);
  piece(bulkRows, 0, rows - bulkRows, cols);
  return pieces;
}

linalg::TransposeOp loom::copyTransposedOperand(linalg::GenericOp op, unsigned which) {
  unsigned m = op.getNumLoops() - 3, n = m + 1, k = m + 2;
  unsigned wantOuter = which == 0 ? k : n, wantInner = which == 0 ? m : k;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned rank = maps[which].getNumResults();
  auto inner = dyn_cast<AffineDimExpr>(maps[which].getResult(rank - 1));
  auto outer = dyn_cast<AffineDimExpr>(maps[which].getResult(rank - 2));
  if (!inner || !outer || inner.getPosition() != wantInner ||
      outer.getPosition() != wantOuter)
    return {};
  OpOperand *operand = op.getDpsInputOperand(which);
  auto type = cast<MemRefType>(operand->get().getType());
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 2], shape[rank - 1]);
  SmallVector<int64_t> permutation = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(permutation[rank - 2], permutation[rank - 1]);
  OpBuilder builder(op);
  Location loc = op.getLoc();
  Value copy = memref::AllocOp::create(
      builder, loc, MemRefType::get(shape, type.getElementType()));
  linalg::TransposeOp transpose;
  if (std::optional<PaddedCopy> padded = paddedCopyOf(operand->get(), op)) {
    // Padded to whole tiles: transposed from the original, straight into
    // the padded layout (padToWholeTiles's zeroed copy had been written
    // and read once more: an f32 vocabulary projection [512, 768] @
    // transpose([50257, 768]) copied its 154 MB weight twice).
    int64_t block = type.getElementType().isF32() ? 16 : 32;
    transpose = transposeIntoPadded(builder, loc, padded->original(), copy, permutation, block)
                    .front();
    operand->set(copy);
    padded->erase();
  } else {
    transpose = linalg::TransposeOp::create(builder, loc, operand->get(), copy, permutation);
    operand->set(copy);
  }
  SmallVector<AffineExpr> exprs(maps[which].getResults());
  std::swap(exprs[rank - 2], exprs[rank - 1]);
  maps[which] = AffineMap::get(maps[which].getNumDims(), 0, exprs, op.getContext());
  op.setIndexingMapsAttr(builder.getAffineMapArrayAttr(maps));
  builder.setInsertionPointAfter(op);
  memref::DeallocOp::create(builder, loc, copy);
  return transpose;
}
