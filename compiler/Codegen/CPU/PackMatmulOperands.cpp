//===- PackMatmulOperands.cpp - B in register-tile panels, C and A as views ===//

#include "Codegen/Common/MatmulLike.h"
#include "Codegen/CPU/CpuMatmul.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
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
    auto split = llvm::find_if(splits, [&](auto s) { return s.first == i; });
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

std::optional<loom::PackedMatmul> loom::packMatmul(linalg::GenericOp op, RegisterTile tile,
                                                    bool pairs) {
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  unsigned loops = bounds.size(), m = loops - 3, n = m + 1, k = m + 2;
  int64_t cols = tile.cols;
  if (bounds[m] % tile.rows || bounds[n] % cols)
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned rankA = maps[0].getNumResults(), rankB = maps[1].getNumResults();
  int bk = resultOf(maps[1], k), bn = resultOf(maps[1], n), cn = resultOf(maps[2], n);
  // B ends in (k, n) or (n, k); its other results are batch dims.
  bool kContiguous = bk == int(rankB) - 1 && bn == int(rankB) - 2;
  if (rankB < 2 || cn < 0 || !(kContiguous || (bn == int(rankB) - 1 && bk == int(rankB) - 2)))
    return std::nullopt;

  OpBuilder builder(op);
  Location loc = op.getLoc();
  Value a = op.getDpsInputs()[0], b = op.getDpsInputs()[1], c = op.getDpsInits()[0];
  Value viewA = pairs ? splitDims(builder, loc, a, {{rankA - 1, 2}}) : a;
  Value viewC = splitDims(builder, loc, c, {{unsigned(cn), cols}});
  SmallVector<std::pair<unsigned, int64_t>> bSplits = {{unsigned(bn), cols}};
  if (pairs)
    bSplits.push_back({unsigned(bk), 2});
  Value viewB = splitDims(builder, loc, b, bSplits);
  if (!viewA || !viewB || !viewC)
    return std::nullopt;

  // The panels: [..., N/cols, K, cols] (pairs: [..., N/cols, K/2, cols, 2]),
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
  auto bType = cast<MemRefType>(b.getType());
  auto viewBType = cast<MemRefType>(viewB.getType());
  SmallVector<int64_t> packedShape;
  for (int64_t p : permutation)
    packedShape.push_back(viewBType.getShape()[p]);
  Value packed = memref::AllocOp::create(
      builder, loc, MemRefType::get(packedShape, bType.getElementType()));
  auto pack = linalg::TransposeOp::create(builder, loc, viewB, packed, permutation);

  // The loops (batch..., m, no, ni, k[, j]): n splits in two, k moves one
  // on, j comes last.
  MLIRContext *context = op.getContext();
  unsigned packedLoops = loops + 1 + (pairs ? 1 : 0);
  auto dim = [&](unsigned d) { return getAffineDimExpr(d, context); };
  auto remap = [&](AffineExpr e) -> SmallVector<AffineExpr> {
    auto d = dyn_cast<AffineDimExpr>(e);
    unsigned pos = d.getPosition();
    if (pos == n)
      return {dim(n), dim(n + 1)};
    if (pos == k)
      return pairs ? SmallVector<AffineExpr>{dim(k + 1), dim(k + 2)}
                   : SmallVector<AffineExpr>{dim(k + 1)};
    return {dim(pos)};
  };
  auto rewrite = [&](AffineMap map, unsigned drop) {
    SmallVector<AffineExpr> exprs;
    for (AffineExpr e : map.getResults().drop_back(drop))
      llvm::append_range(exprs, remap(e));
    return exprs;
  };
  SmallVector<AffineExpr> aExprs = rewrite(maps[0], 0);
  SmallVector<AffineExpr> bExprs = rewrite(maps[1], 2);
  bExprs.append({dim(n), dim(k + 1), dim(n + 1)});
  if (pairs)
    bExprs.push_back(dim(k + 2));
  SmallVector<AffineExpr> cExprs = rewrite(maps[2], 0);
  SmallVector<AffineMap> packedMaps = {AffineMap::get(packedLoops, 0, aExprs, context),
                                       AffineMap::get(packedLoops, 0, bExprs, context),
                                       AffineMap::get(packedLoops, 0, cExprs, context)};
  SmallVector<utils::IteratorType> iterators(m + 3, utils::IteratorType::parallel);
  iterators.append(1 + (pairs ? 1 : 0), utils::IteratorType::reduction);
  auto packedOp = linalg::GenericOp::create(builder, loc, TypeRange{},
                                            ValueRange{viewA, packed}, ValueRange{viewC},
                                            packedMaps, iterators);
  IRMapping mapping;
  op.getRegion().cloneInto(&packedOp.getRegion(), mapping);
  builder.setInsertionPointAfter(op);
  memref::DeallocOp::create(builder, loc, packed);
  op.erase();
  return PackedMatmul{packedOp, pack, pairs};
}
