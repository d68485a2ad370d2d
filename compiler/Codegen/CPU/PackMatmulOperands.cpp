//===- PackMatmulOperands.cpp - B in register-tile panels, C and A as views ===//

#include "Codegen/Common/MatmulLike.h"
#include "Codegen/CPU/CpuMatmul.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

/// `value` viewed with each dim `d` of `splits` cut into [size / f, f]
/// (strides [f s, s]), or null when its layout is not static strides. A
/// reinterpret_cast rather than memref.expand_shape: fold-memref-alias-ops
/// does not terminate on the tiles' subviews of an expand_shape (MLIR 22).
static Value splitDims(OpBuilder &builder, Location loc, Value value,
                       ArrayRef<std::pair<unsigned, int64_t>> splits) {
  auto type = cast<MemRefType>(value.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      llvm::any_of(strides, ShapedType::isDynamic))
    return {};
  SmallVector<int64_t> shape, viewStrides;
  for (auto [i, size] : llvm::enumerate(type.getShape())) {
    // (A structured binding cannot be captured before C++20.)
    auto split = llvm::find_if(splits, [dim = i](auto s) { return s.first == dim; });
    if (split == splits.end()) {
      shape.push_back(size);
      viewStrides.push_back(strides[i]);
      continue;
    }
    shape.append({size / split->second, split->second});
    viewStrides.append({split->second * strides[i], strides[i]});
  }
  auto viewType = MemRefType::get(
      shape, type.getElementType(),
      StridedLayoutAttr::get(type.getContext(), offset, viewStrides));
  SmallVector<OpFoldResult> sizes, strideValues;
  for (int64_t size : shape)
    sizes.push_back(builder.getIndexAttr(size));
  for (int64_t stride : viewStrides)
    strideValues.push_back(builder.getIndexAttr(stride));
  OpFoldResult offsetValue = builder.getIndexAttr(offset);
  if (ShapedType::isDynamic(offset))
    offsetValue = memref::ExtractStridedMetadataOp::create(builder, loc, value).getOffset();
  return memref::ReinterpretCastOp::create(builder, loc, viewType, value, offsetValue,
                                           sizes, strideValues);
}

/// The position of `map`'s result that is exactly dim `dim`, or -1.
static int resultOf(AffineMap map, unsigned dim) {
  for (auto [i, expr] : llvm::enumerate(map.getResults()))
    if (auto d = dyn_cast<AffineDimExpr>(expr); d && d.getPosition() == dim)
      return int(i);
  return -1;
}

bool loom::isBf16PairMatmul(linalg::GenericOp op) {
  if (!isTensorCoreMatmul(op) ||
      !cast<MemRefType>(op.getDpsInputs()[0].getType()).getElementType().isBF16())
    return false;
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  AffineMap a = op.getIndexingMapsArray()[0];
  // The pairs of A are adjacent in memory: A reads k from its last dim.
  return bounds.back() % 2 == 0 && resultOf(a, bounds.size() - 1) == int(a.getNumResults()) - 1;
}

SmallVector<loom::MatmulLoop> loom::unpackedLoops(linalg::GenericOp op) {
  SmallVector<MatmulLoop> loops(op.getNumLoops() - 3, MatmulLoop::Batch);
  loops.append({MatmulLoop::M, MatmulLoop::N, MatmulLoop::K});
  return loops;
}

/// A copy of `view` into a new buffer with its dims permuted.
static linalg::TransposeOp packInto(OpBuilder &builder, Location loc, Value view,
                                    ArrayRef<int64_t> permutation) {
  auto viewType = cast<MemRefType>(view.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : permutation)
    shape.push_back(viewType.getShape()[p]);
  Value packed = memref::AllocOp::create(builder, loc,
                                         MemRefType::get(shape, viewType.getElementType()));
  return linalg::TransposeOp::create(builder, loc, view, packed, permutation);
}

/// `value`'s box of `size` at `offset` along `dim`, whole in the others.
static Value sliceAlong(OpBuilder &builder, Location loc, Value value, unsigned dim,
                        int64_t offset, int64_t size) {
  return loom::boxOf(builder, loc, value, {dim}, {offset}, {size});
}

/// B's panels (`viewType`'s dims permuted by `permutation`, the panels'
/// dim at `panelDim`) packed from a padded copy's original: the whole
/// panels straight from it, the last from a zeroed copy of its last `n %
/// cols` rows along `bn`. Appends the packs; null when a view has no
/// static strides.
static Value packPaddedPanels(OpBuilder &builder, Location loc, loom::PaddedCopy &padded,
                              MemRefType viewType, unsigned bn, int64_t cols,
                              ArrayRef<std::pair<unsigned, int64_t>> bSplits,
                              ArrayRef<int64_t> permutation, unsigned panelDim,
                              SmallVectorImpl<linalg::TransposeOp> &packs,
                              SmallVectorImpl<Value> &temporaries) {
  Value original = padded.original();
  auto originalType = cast<MemRefType>(original.getType());
  int64_t n = originalType.getDimSize(bn), whole = n - n % cols;
  SmallVector<int64_t> shape;
  for (int64_t p : permutation)
    shape.push_back(viewType.getShape()[p]);
  Value packed = memref::AllocOp::create(builder, loc,
                                         MemRefType::get(shape, viewType.getElementType()));
  auto pack = [&](Value from, int64_t firstPanel, int64_t panels) {
    Value view = splitDims(builder, loc, from, bSplits);
    if (!view)
      return false;
    Value into = sliceAlong(builder, loc, packed, panelDim, firstPanel, panels);
    packs.push_back(linalg::TransposeOp::create(builder, loc, view, into, permutation));
    return true;
  };
  if (whole && !pack(sliceAlong(builder, loc, original, bn, 0, whole), 0, whole / cols))
    return {};
  // The last panel: a zeroed copy of the rows past the whole panels.
  SmallVector<int64_t> tailShape(originalType.getShape());
  tailShape[bn] = cols;
  Value tail = memref::AllocOp::create(
      builder, loc, MemRefType::get(tailShape, originalType.getElementType()));
  temporaries.push_back(tail);
  Value zero = arith::ConstantOp::create(builder, loc,
                                         builder.getZeroAttr(originalType.getElementType()));
  linalg::FillOp::create(builder, loc, zero, tail);
  linalg::CopyOp::create(builder, loc, sliceAlong(builder, loc, original, bn, whole, n - whole),
                         sliceAlong(builder, loc, tail, bn, 0, n - whole));
  if (!pack(tail, whole / cols, 1))
    return {};
  return packed;
}

std::optional<loom::PackedMatmul> loom::packMatmul(linalg::GenericOp op, RegisterTile tile,
                                                    bool pairs, bool packA) {
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  unsigned loops = bounds.size(), m = loops - 3, n = m + 1, k = m + 2;
  int64_t rows = tile.rows, cols = tile.cols;
  if (bounds[m] % rows || bounds[n] % cols)
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned rankA = maps[0].getNumResults(), rankB = maps[1].getNumResults();
  int bk = resultOf(maps[1], k), bn = resultOf(maps[1], n), cn = resultOf(maps[2], n);
  int am = resultOf(maps[0], m), cm = resultOf(maps[2], m);
  // B ends in (k, n) or (n, k); its other results are batch dims.
  bool kContiguous = bk == int(rankB) - 1 && bn == int(rankB) - 2;
  if (rankB < 2 || cn < 0 || !(kContiguous || (bn == int(rankB) - 1 && bk == int(rankB) - 2)))
    return std::nullopt;
  // A packed ends in (m, k), or, without pairs, in (k, m) (the backward's
  // `x^T @ dy`), whose blocks are copied from it as directly: a block's
  // rows at one k are contiguous there.
  int ak = resultOf(maps[0], k);
  bool mContiguous = am == int(rankA) - 1 && ak == int(rankA) - 2;
  if (packA && (cm < 0 || (pairs && mContiguous) ||
                !(mContiguous || (am == int(rankA) - 2 && ak == int(rankA) - 1))))
    return std::nullopt;

  OpBuilder builder(op);
  Location loc = op.getLoc();
  Value a = op.getDpsInputs()[0], b = op.getDpsInputs()[1], c = op.getDpsInits()[0];
  SmallVector<std::pair<unsigned, int64_t>> aSplits, cSplits;
  if (packA) {
    aSplits.push_back({unsigned(am), rows});
    cSplits.push_back({unsigned(cm), rows});
  }
  if (pairs)
    aSplits.push_back({rankA - 1, 2});
  cSplits.push_back({unsigned(cn), cols});
  Value viewA = aSplits.empty() ? a : splitDims(builder, loc, a, aSplits);
  Value viewC = splitDims(builder, loc, c, cSplits);
  SmallVector<std::pair<unsigned, int64_t>> bSplits = {{unsigned(bn), cols}};
  if (pairs)
    bSplits.push_back({unsigned(bk), 2});
  // B padded to whole panels along n alone (padToWholeTiles's zeroed copy):
  // its whole panels are packed from the original, the last from a
  // panel-sized zeroed copy (the whole padded copy had been made and packed
  // again: an f32 vocabulary projection's 154 MB weight twice).
  std::optional<PaddedCopy> paddedB = pairs ? std::nullopt : paddedCopyOf(b, op);
  if (paddedB) {
    ArrayRef<int64_t> original = cast<MemRefType>(paddedB->original().getType()).getShape();
    ArrayRef<int64_t> wide = cast<MemRefType>(b.getType()).getShape();
    for (size_t d = 0; d < wide.size(); ++d)
      if (int(d) != bn && original[d] != wide[d]) {
        paddedB.reset();
        break;
      }
  }
  Value viewB = splitDims(builder, loc, b, bSplits);
  if (!viewA || !viewB || !viewC)
    return std::nullopt;

  // B's panels: [..., N/cols, K, cols] (pairs: [..., N/cols, K/2, cols, 2]),
  // so that a register tile's B is one contiguous stream over k.
  unsigned batch = rankB - 2;
  unsigned kDims = pairs ? 2 : 1;
  // Positions in B's view of (no, ni) and of (k[, j]).
  unsigned noAt = kContiguous ? batch : batch + kDims;
  unsigned kAt = kContiguous ? batch + 2 : batch;
  SmallVector<int64_t> permutation = llvm::to_vector(llvm::seq<int64_t>(0, batch));
  permutation.append({noAt, kAt});
  if (pairs)
    permutation.append({noAt + 1, kAt + 1});
  else
    permutation.push_back(noAt + 1);
  SmallVector<linalg::TransposeOp> packs;
  SmallVector<Value> temporaries; // a padded B's last panel's copy
  Value packedB;
  if (paddedB) {
    packedB = packPaddedPanels(builder, loc, *paddedB, cast<MemRefType>(viewB.getType()),
                               unsigned(bn), cols, bSplits, permutation, batch, packs,
                               temporaries);
    if (Operation *view = viewB.getDefiningOp())
      view->erase();
    if (!packedB)
      return std::nullopt;
  } else {
    packs.push_back(packInto(builder, loc, viewB, permutation));
    packedB = packs.back().getInit();
  }
  // A's blocks: its view (batch..., mo, mi, k[, j]), or (batch..., k, mo,
  // mi), as (batch..., mo, k, mi[, j]).
  Value packedA = viewA;
  if (packA) {
    unsigned batchA = rankA - 2;
    SmallVector<int64_t> order = llvm::to_vector(llvm::seq<int64_t>(0, batchA));
    if (mContiguous)
      order.append({batchA + 1, batchA, batchA + 2});
    else
      order.append({batchA, batchA + 2, batchA + 1});
    if (pairs)
      order.push_back(batchA + 3);
    packs.push_back(packInto(builder, loc, viewA, order));
    packedA = packs.back().getInit();
  }

  // The loops (batch..., m or (mo, mi), no, ni, k or (k2, j)).
  MLIRContext *context = op.getContext();
  unsigned mDims = packA ? 2 : 1;
  unsigned packedN = m + mDims, packedK = packedN + 2;
  unsigned packedLoops = packedK + kDims;
  auto dim = [&](unsigned d) { return getAffineDimExpr(d, context); };
  auto remap = [&](AffineExpr e) -> SmallVector<AffineExpr> {
    // A broadcast batch dim reads index 0 (a constant, no loop): kept. It
    // was taken for a loop, and a [2, 16, 32] @ [1, 32, 32] read its B
    // panels past their one batch (NaN, garbage, or a crash).
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d)
      return {e};
    unsigned pos = d.getPosition();
    if (pos == m)
      return packA ? SmallVector<AffineExpr>{dim(m), dim(m + 1)} : SmallVector<AffineExpr>{dim(m)};
    if (pos == n)
      return {dim(packedN), dim(packedN + 1)};
    if (pos == k)
      return pairs ? SmallVector<AffineExpr>{dim(packedK), dim(packedK + 1)}
                   : SmallVector<AffineExpr>{dim(packedK)};
    return {dim(pos)};
  };
  auto rewrite = [&](AffineMap map, unsigned drop) {
    SmallVector<AffineExpr> exprs;
    for (AffineExpr e : map.getResults().drop_back(drop))
      llvm::append_range(exprs, remap(e));
    return exprs;
  };
  SmallVector<AffineExpr> aExprs = rewrite(maps[0], packA ? 2 : 0);
  if (packA) {
    aExprs.append({dim(m), dim(packedK), dim(m + 1)});
    if (pairs)
      aExprs.push_back(dim(packedK + 1));
  }
  SmallVector<AffineExpr> bExprs = rewrite(maps[1], 2);
  bExprs.append({dim(packedN), dim(packedK), dim(packedN + 1)});
  if (pairs)
    bExprs.push_back(dim(packedK + 1));
  SmallVector<AffineExpr> cExprs = rewrite(maps[2], 0);
  SmallVector<AffineMap> packedMaps = {AffineMap::get(packedLoops, 0, aExprs, context),
                                       AffineMap::get(packedLoops, 0, bExprs, context),
                                       AffineMap::get(packedLoops, 0, cExprs, context)};
  SmallVector<utils::IteratorType> iterators(packedK, utils::IteratorType::parallel);
  iterators.append(kDims, utils::IteratorType::reduction);
  auto packedOp = linalg::GenericOp::create(builder, loc, TypeRange{},
                                            ValueRange{packedA, packedB}, ValueRange{viewC},
                                            packedMaps, iterators);
  IRMapping mapping;
  op.getRegion().cloneInto(&packedOp.getRegion(), mapping);
  builder.setInsertionPointAfter(op);
  // The packed buffers (B's panels whole where its pieces were packed
  // into views of them).
  SmallVector<Value> buffers(temporaries);
  for (linalg::TransposeOp pack : packs) {
    Value buffer = pack.getInit();
    while (auto view = buffer.getDefiningOp<ViewLikeOpInterface>())
      buffer = view.getViewSource();
    if (!llvm::is_contained(buffers, buffer))
      buffers.push_back(buffer);
  }
  for (Value buffer : buffers)
    memref::DeallocOp::create(builder, loc, buffer);
  op.erase();
  if (paddedB)
    paddedB->erase();

  SmallVector<MatmulLoop> roles(m, MatmulLoop::Batch);
  if (packA)
    roles.append({MatmulLoop::MBlock, MatmulLoop::MRow});
  else
    roles.push_back(MatmulLoop::M);
  roles.append({MatmulLoop::NPanel, MatmulLoop::NColumn, MatmulLoop::K});
  if (pairs)
    roles.push_back(MatmulLoop::KPair);
  return PackedMatmul{packedOp, packs, roles};
}
