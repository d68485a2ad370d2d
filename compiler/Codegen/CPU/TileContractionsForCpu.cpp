//===- TileContractionsForCpu.cpp - Vectorized register tiles for matmuls -===//

#include "Codegen/Common/MatmulLike.h"
#include "Codegen/CPU/CpuMatmul.h"
#include "Codegen/CPU/Passes.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Dialect/Linalg/TransformOps/DialectExtension.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/TransformOps/MemRefTransformOps.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/Transforms/TransformInterpreterUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/TransformOps/VectorTransformOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Dialect/X86Vector/TransformOps/X86VectorTransformOps.h"
#include "mlir/Dialect/X86Vector/Transforms.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMTILECONTRACTIONSFORCPU
#include "Codegen/CPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using loom::MatmulLoop;
using loom::RegisterTile;

/// The largest candidate that divides `size`, or 0.
static int64_t largestDivisor(int64_t size, ArrayRef<int64_t> candidates) {
  for (int64_t c : candidates)
    if (size % c == 0)
      return c;
  return 0;
}

/// Cache tile sizes over the op's `loops`, or nothing when the shape does
/// not allow whole register tiles; a packed op's panel columns, register
/// rows and pairs whole (0). Measured on AVX-512 with 8 x 32 register tiles
/// (benchmarks/cpu): 128 x 128 x 256 cache tiles keep a 128 KiB panel of B
/// in L2 and the k loop long enough to amortize the accumulators' loads and
/// stores (f32 1024^3 unpacked: 154 GFLOP/s with 64^3 tiles, 175 with these).
static std::optional<SmallVector<int64_t>> cacheTiles(linalg::GenericOp op, RegisterTile tile,
                                                      ArrayRef<MatmulLoop> loops) {
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  int64_t m = 0, n = 0, k = 0;
  bool pairs = false;
  for (auto [loop, size] : llvm::zip(loops, bounds)) {
    switch (loop) {
    case MatmulLoop::M: m = size; break;
    case MatmulLoop::MBlock: m = size * tile.rows; break;
    case MatmulLoop::N: n = size; break;
    case MatmulLoop::NPanel: n = size * tile.cols; break;
    case MatmulLoop::K: k = size; break;
    case MatmulLoop::KPair: pairs = true; break;
    default: break;
    }
  }
  int64_t tm = 0, tn = 0;
  for (int64_t c : {128, 64, 32, 16, 8, 4})
    if (c % tile.rows == 0 && !tm && m % c == 0)
      tm = c;
  for (int64_t c : {128, 64, 32, 16})
    if (c % tile.cols == 0 && !tn && n % c == 0)
      tn = c;
  // 256 k per cache tile: 128 pairs.
  int64_t tk = largestDivisor(k, pairs ? ArrayRef<int64_t>{128, 64, 32, 16, 8, 4, 2, 1}
                                       : ArrayRef<int64_t>{256, 128, 64, 32, 16, 8, 4, 2, 1});
  // A k with no larger power-of-two divisor (63) stays whole up to 512: cut
  // into single steps, the accumulators would be read and written per k.
  if (tk < 8 && k <= 512)
    tk = k;
  if (!tm || !tn)
    return std::nullopt;
  SmallVector<int64_t> tiles;
  for (MatmulLoop loop : loops) {
    switch (loop) {
    case MatmulLoop::Batch: tiles.push_back(1); break;
    case MatmulLoop::M: tiles.push_back(tm); break;
    case MatmulLoop::MBlock: tiles.push_back(tm / tile.rows); break;
    case MatmulLoop::N: tiles.push_back(tn); break;
    case MatmulLoop::NPanel: tiles.push_back(tn / tile.cols); break;
    case MatmulLoop::K: tiles.push_back(tk); break;
    case MatmulLoop::MRow: case MatmulLoop::NColumn: case MatmulLoop::KPair:
      tiles.push_back(0); break;
    }
  }
  return tiles;
}

/// The register tile inside a cache tile: `tile` over (m, n), one k step,
/// a packed op's register rows, panel columns and pairs whole (0).
static SmallVector<int64_t> registerTiles(RegisterTile tile, ArrayRef<MatmulLoop> loops) {
  SmallVector<int64_t> tiles;
  for (MatmulLoop loop : loops) {
    switch (loop) {
    case MatmulLoop::M: tiles.push_back(tile.rows); break;
    case MatmulLoop::N: tiles.push_back(tile.cols); break;
    case MatmulLoop::MRow: case MatmulLoop::NColumn: case MatmulLoop::KPair:
      tiles.push_back(0); break;
    default: tiles.push_back(1); break;
    }
  }
  return tiles;
}

/// A batched matmul whose B has no batch dims ([b..., M, K] @ [K, N], the
/// usual weight form) as one 2-D matmul over the batch's rows, [b... * M,
/// K] @ [K, N], where the register tiles do not divide M but divide the
/// rows together: A and C are contiguous, so their collapsed views are the
/// same bytes. Each batch entry's M had been padded on its own (or, before
/// that, left untiled): `[12, 100, 256] @ [256, 256]` f32 3.7 ms padded,
/// gpt.loom at T = 60 44 ms a run. Returns the new op, or `op`.
static linalg::GenericOp collapseBatchIntoRows(linalg::GenericOp op, RegisterTile tile) {
  unsigned loops = op.getNumLoops(), batch = loops - 3;
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  if (batch == 0 || llvm::any_of(bounds, ShapedType::isDynamic) ||
      bounds[batch] % tile.rows == 0 || !isa<func::FuncOp>(op->getParentOp()))
    return op;
  int64_t rows = 1;
  for (unsigned d = 0; d <= batch; ++d)
    rows *= bounds[d];
  if (rows % tile.rows != 0)
    return op;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  MLIRContext *context = op.getContext();
  auto dims = [&](ArrayRef<unsigned> positions) {
    SmallVector<AffineExpr> exprs;
    for (unsigned p : positions)
      exprs.push_back(getAffineDimExpr(p, context));
    return AffineMap::get(loops, 0, exprs, context);
  };
  SmallVector<unsigned> aDims = llvm::to_vector(llvm::seq<unsigned>(0, batch + 1)),
                        cDims = aDims;
  aDims.push_back(batch + 2); // (batch..., m, k)
  cDims.push_back(batch + 1); // (batch..., m, n)
  Value a = op.getDpsInputs()[0], b = op.getDpsInputs()[1], c = op.getDpsInits()[0];
  auto contiguous = [](Value v) {
    auto type = dyn_cast<MemRefType>(v.getType());
    return type && type.getLayout().isIdentity() && type.hasStaticShape();
  };
  bool bReadsNoBatch = llvm::all_of(maps[1].getResults(), [&](AffineExpr e) {
    auto d = dyn_cast<AffineDimExpr>(e);
    return d && d.getPosition() > batch;
  });
  if (maps[0] != dims(aDims) || maps[2] != dims(cDims) || !bReadsNoBatch || !contiguous(a) ||
      !contiguous(c))
    return op;
  OpBuilder builder(op);
  Location loc = op.getLoc();
  SmallVector<ReassociationIndices> rowsThenLast = {
      llvm::to_vector(llvm::seq<int64_t>(0, batch + 1)), {int64_t(batch + 1)}};
  Value flatA = memref::CollapseShapeOp::create(builder, loc, a, rowsThenLast);
  Value flatC = memref::CollapseShapeOp::create(builder, loc, c, rowsThenLast);
  // Loops (m, n, k): B's results move from (n, k) at batch + 1, batch + 2.
  SmallVector<AffineExpr> bExprs;
  for (AffineExpr e : maps[1].getResults())
    bExprs.push_back(getAffineDimExpr(cast<AffineDimExpr>(e).getPosition() - batch, context));
  auto d = [&](unsigned p) { return getAffineDimExpr(p, context); };
  SmallVector<AffineMap> flatMaps = {AffineMap::get(3, 0, {d(0), d(2)}, context),
                                     AffineMap::get(3, 0, bExprs, context),
                                     AffineMap::get(3, 0, {d(0), d(1)}, context)};
  SmallVector<utils::IteratorType> iterators = {utils::IteratorType::parallel,
                                                utils::IteratorType::parallel,
                                                utils::IteratorType::reduction};
  auto flat = linalg::GenericOp::create(builder, loc, TypeRange{}, ValueRange{flatA, b},
                                        ValueRange{flatC}, flatMaps, iterators);
  IRMapping mapping;
  op.getRegion().cloneInto(&flat.getRegion(), mapping);
  for (NamedAttribute attr : op->getDiscardableAttrs())
    flat->setAttr(attr.getName(), attr.getValue());
  op.erase();
  return flat;
}

/// Whether `op` is where padToWholeTiles and splitOffTails may rewrite it:
/// in its function, or in the sequential loops of one (an attention's
/// blocks), whose iteration-local temporaries loom-hoist-kernel-allocs makes
/// plan scratch.
static bool inRewritableRegion(linalg::GenericOp op) {
  for (Operation *parent = op->getParentOp(); !isa<func::FuncOp>(parent);
       parent = parent->getParentOp())
    if (!isa<scf::ForOp, scf::IfOp>(parent))
      return false;
  return true;
}

/// Splits `op` along its loop `dim` at `at`: `op` keeps [0, at) and a copy
/// after it takes [at, end), each on views of the operands that loop
/// indexes. Returns the copy; null (and `op` as it was) where an operand
/// indexes the loop other than as one of its dims.
static linalg::GenericOp splitLoop(linalg::GenericOp op, unsigned dim, int64_t at) {
  int64_t end = op.getStaticLoopRanges()[dim];
  SmallVector<std::optional<unsigned>> dimOf; // per operand: its dim the loop indexes
  for (AffineMap map : op.getIndexingMapsArray()) {
    std::optional<unsigned> found;
    for (auto [j, result] : llvm::enumerate(map.getResults())) {
      auto d = dyn_cast<AffineDimExpr>(result);
      if (d && d.getPosition() == dim)
        found = j;
      else if (result.isFunctionOfDim(dim))
        return {};
    }
    dimOf.push_back(found);
  }
  Location loc = op.getLoc();
  auto views = [&](OpBuilder &b, int64_t offset, int64_t size) {
    SmallVector<Value> operands;
    for (auto [operand, j] : llvm::zip(op->getOperands(), dimOf)) {
      if (!j) {
        operands.push_back(operand);
        continue;
      }
      operands.push_back(loom::boxOf(b, loc, operand, {*j}, {offset}, {size}));
    }
    return operands;
  };
  OpBuilder before(op);
  SmallVector<Value> head = views(before, 0, at);
  OpBuilder after(op->getContext());
  after.setInsertionPointAfter(op);
  SmallVector<Value> tailOperands = views(after, at, end - at);
  auto tail = cast<linalg::GenericOp>(after.clone(*op));
  tail->setOperands(tailOperands);
  op->setOperands(head);
  return tail;
}

/// The stride of `value` (a memref) along the loop `dim` of `op`, when one
/// of its dims is indexed by that loop alone.
static std::optional<int64_t> strideAlong(linalg::GenericOp op, OpOperand &operand,
                                          unsigned dim) {
  auto type = dyn_cast<MemRefType>(operand.get().getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!type || failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  AffineMap map = op.getMatchingIndexingMap(&operand);
  for (auto [j, result] : llvm::enumerate(map.getResults()))
    if (auto expr = dyn_cast<AffineDimExpr>(result); expr && expr.getPosition() == dim)
      return strides[j];
  return std::nullopt;
}

/// Whether `op` is a matrix-vector product whose outputs LLVM vectorizes
/// best as dot products: one output column or one output row (n = 1 or
/// m = 1), both operands contiguous along k. Left untiled, each output
/// element's loop over k carries its sum in a register
/// (loom-promote-loop-accumulators, which lets it reassociate) and reads
/// the two operands as two streams; padded to a register tile, it computed
/// 32 columns (or 8 rows) to keep one ([4096, 512] @ [512, 1] f32: 1.18 ms
/// against torch's 0.55).
/// Whether each batch loop of `op` (past 1) is read by both operands: its
/// single rows ([B, 1, K] @ [B, K, N]) share no B. Against one B for the
/// whole batch ([B, 1, K] @ [K, N], the rows of a decoding batch) the
/// register tiles take the batch's rows together, each B panel read once:
/// as B row products each read all of B (64 x [1, 512] @ [512, 512] f32:
/// 315 -> 777 us).
static bool batchedOnBothSides(linalg::GenericOp op) {
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  for (unsigned d = 0; d + 3 < bounds.size(); ++d)
    if (bounds[d] != 1 && llvm::any_of(op.getDpsInputOperands(), [&](OpOperand *operand) {
          return !op.getMatchingIndexingMap(operand).isFunctionOfDim(d);
        }))
      return false;
  return true;
}

static bool isRowDots(linalg::GenericOp op) {
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  if (bounds.size() < 3 ||
      (bounds[bounds.size() - 2] != 1 && bounds[bounds.size() - 3] != 1))
    return false;
  // One row: only where no other row shares its B.
  if (bounds[bounds.size() - 2] != 1 && !batchedOnBothSides(op))
    return false;
  unsigned k = bounds.size() - 1;
  return llvm::all_of(op.getDpsInputOperands(), [&](OpOperand *operand) {
    return strideAlong(op, *operand, k) == 1;
  });
}

/// Whether `op` is a product of a few output rows ([1, K] @ [K, N], a
/// decoding step's projection; [2, K] @ [K, N]) whose B and output rows
/// are contiguous along n. Its loops go (k, m, n) instead, each k adding
/// a[m, k] times B's row k to each output row, which LLVM vectorizes along
/// n, each row of B read once. The register tile padded the rows to 8 and
/// copied all of B into panels first ([1, 512] @ [512, 4096] f32: 0.94 ms
/// against torch's 0.25; now 0.13).
static bool isRowAxpy(linalg::GenericOp op) {
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  // Up to 4 f32 rows, 2 of 16 bits, the most for which the loops beat the
  // register tiles (one thread, Zen 4, [m, 768] @ [768, 3072]: f32 m = 4
  // 0.92 -> 0.53 ms, bf16 m = 2 0.33 -> 0.20, but bf16 m = 4 0.32 -> 0.40,
  // its pair dot products being the faster).
  int64_t mostRows =
      cast<MemRefType>(op.getDpsInputs()[0].getType()).getElementType().isF32() ? 4 : 2;
  if (bounds.size() < 3 || bounds[bounds.size() - 3] > mostRows ||
      bounds[bounds.size() - 2] < 16 || !batchedOnBothSides(op))
    return false;
  unsigned n = bounds.size() - 2;
  for (OpOperand &operand : op->getOpOperands()) {
    bool indexesN = llvm::any_of(op.getMatchingIndexingMap(&operand).getResults(),
                                 [&](AffineExpr e) { return e.isFunctionOfDim(n); });
    if (indexesN && strideAlong(op, operand, n) != 1)
      return false;
  }
  return true;
}

/// Moves a row axpy's (isRowAxpy) k loop outside its m and n loops.
static void interchangeRowAxpy(linalg::GenericOp op) {
  unsigned loops = op.getNumLoops();
  SmallVector<unsigned> order = llvm::to_vector(llvm::seq<unsigned>(0, loops));
  // (m, n, k) -> (k, m, n): each row of B is read once for all the rows.
  order[loops - 3] = loops - 1;
  order[loops - 2] = loops - 3;
  order[loops - 1] = loops - 2;
  IRRewriter rewriter(op);
  (void)linalg::interchangeGenericOp(rewriter, op, order);
}

/// Whether `op` multiplies 16-bit floats (bf16, f16).
static bool sixteenBitOperands(linalg::GenericOp op) {
  return llvm::all_of(op.getDpsInputs(), [](Value v) {
    Type element = cast<MemRefType>(v.getType()).getElementType();
    return isa<FloatType>(element) && element.getIntOrFloatBitWidth() == 16;
  });
}

/// Below a few register tiles' work, padding (or splitting) a matmul costs
/// what it saves.
constexpr int64_t kLeastPaddedWork = 16 * 1024;

/// Splits off the last columns of a 16-bit `op` past its whole cache or
/// register tiles (and then its last rows) into matmuls of their own, which
/// padToWholeTiles pads: the bulk runs in place. Padding all of it copies
/// the whole B and accumulator (bf16 [64, 256] @ [256, 50257]: 16.4 ms
/// padded, 12.2 split; 8 heads of bf16 q @ transpose(k) at T = 1000: 11.8
/// and 9.4). f32 columns are not split: the split accumulator's rows are
/// not 64-byte aligned (1000 floats), and its stores there ran slower than
/// the copies (f32 vocabulary projection 66 ms split, 26 padded). f32 rows
/// are, with `f32Rows` (the caller's: for an op whose operands are not
/// copied into panels, which each piece would copy again, or whose B is
/// small beside its accumulator) and columns in
/// whole register tiles: the rows keep their stride, and the bulk's
/// accumulator is the result itself (a tied vocabulary's gradient,
/// transpose(dlogits) @ x with 50257 rows, had filled, and copied back, a
/// padded 154 MB one). Returns the pieces split off.
static SmallVector<linalg::GenericOp> splitOffTails(linalg::GenericOp op, RegisterTile tile,
                                                    bool f32Rows) {
  SmallVector<linalg::GenericOp> tails;
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  auto f32Operand = [](Value v) {
    return cast<MemRefType>(v.getType()).getElementType().isF32();
  };
  int64_t work = 1;
  for (int64_t bound : bounds)
    work = ShapedType::isDynamic(bound) ? work : work * bound;
  bool rowsOnly = f32Rows && work >= kLeastPaddedWork &&
                  llvm::all_of(op->getOperands(), f32Operand);
  if (!inRewritableRegion(op) || llvm::any_of(bounds, ShapedType::isDynamic) ||
      !llvm::all_of(op->getOperands(),
                    [](Value v) { return isa<MemRefType>(v.getType()); }) ||
      !(sixteenBitOperands(op) || rowsOnly))
    return tails;
  SmallVector<loom::MatmulLoop> loops = loom::unpackedLoops(op);
  auto loopOf = [&](MatmulLoop kind) -> std::optional<unsigned> {
    auto it = llvm::find(loops, kind);
    if (it == loops.end() || llvm::count(loops, kind) != 1)
      return std::nullopt;
    return static_cast<unsigned>(it - loops.begin());
  };
  std::optional<unsigned> m = loopOf(MatmulLoop::M), n = loopOf(MatmulLoop::N),
                          k = loopOf(MatmulLoop::K);
  // A K that padToWholeTiles pads would be copied once per piece.
  if (!m || !n || !k ||
      (bounds[*k] > 512 && !largestDivisor(bounds[*k], {256, 128, 64, 32, 16, 8})))
    return tails;
  // The bulk in whole cache tiles (cacheTiles' 128), where there are
  // several: a 1000-column bulk in 992 would get 32-column cache tiles; a
  // smaller one in whole register tiles. (The pieces come back here.)
  auto splitPoint = [](int64_t size, int64_t registerTile) -> int64_t {
    constexpr int64_t kCacheTile = 128;
    if (size % kCacheTile == 0)
      return 0;
    if (size > kCacheTile)
      return size - size % kCacheTile;
    return size > registerTile && size % registerTile ? size - size % registerTile : 0;
  };
  if (rowsOnly && bounds[*n] % tile.cols)
    return tails;
  if (int64_t at = rowsOnly ? 0 : splitPoint(bounds[*n], tile.cols))
    if (linalg::GenericOp columns = splitLoop(op, *n, at))
      tails.push_back(columns);
  if (int64_t at = splitPoint(bounds[*m], tile.rows))
    if (linalg::GenericOp rows = splitLoop(op, *m, at))
      tails.push_back(rows);
  return tails;
}

/// `op`'s loops rounded up to whole register tiles: M to the tile's rows,
/// N to its columns, and a K past 512 without a divisor of 8 (which
/// cacheTiles would step one k at a time) to a multiple of 64; `op` itself
/// where nothing needs it. A matmul not in whole tiles had been left to
/// LLVM's vectorizer, gathering B's columns: 1023^3 f32 70x slower than
/// 1024^3, a [64, 256] @ [256, 50257] vocabulary projection 48x, a GEMV
/// 13x (benchmarks/cpu's odd shapes). Each operand a padded loop indexes
/// is copied into a zeroed temporary (zeros meet zeros in the padded k, and
/// padded rows and columns are never copied back), the op runs on the
/// temporaries as any whole-tile matmul, and the accumulator's copy comes
/// back. Also inside sequential loops: gpt.loom at T = 60 fuses its
/// attention into one block of 60, whose products had run untiled (39 of
/// its 44 ms a run). Also an f32 `q @ transpose(k)` (both operands along
/// k), once left in place for LLVM to vectorize: with its padded
/// accumulator kept in registers (hoistViewAccumulators) it runs 1.6-10x
/// faster (8 heads of 64 at T = 1000: 23 ms in place, 14 padded; of 32:
/// 88 and 8.8).
static void padToWholeTiles(linalg::GenericOp op, RegisterTile tile) {
  if (!inRewritableRegion(op))
    return;
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  auto floatMemref = [](Value v) {
    auto type = dyn_cast<MemRefType>(v.getType());
    return type && isa<FloatType>(type.getElementType());
  };
  if (llvm::any_of(bounds, ShapedType::isDynamic) ||
      !llvm::all_of(op->getOperands(), floatMemref))
    return;
  SmallVector<loom::MatmulLoop> loops = loom::unpackedLoops(op);
  SmallVector<int64_t> padded(bounds);
  int64_t work = 1;
  for (auto [loop, size, pad] : llvm::zip(loops, bounds, padded)) {
    work *= size;
    if (loop == MatmulLoop::M)
      pad = llvm::alignTo(size, tile.rows);
    else if (loop == MatmulLoop::N)
      pad = llvm::alignTo(size, tile.cols);
    else if (loop == MatmulLoop::K && size > 512 &&
             !largestDivisor(size, {256, 128, 64, 32, 16, 8}))
      pad = llvm::alignTo(size, 64);
  }
  if (padded == bounds || work < kLeastPaddedWork)
    return;
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<Value> temporaries;
  SmallVector<std::pair<Value, Value>> copiesBack; // (padded view, original)
  // An accumulator zeroed just before (the usual matmul) need not be copied
  // in: its zeroed temporary is the same start, and the copy back writes
  // all of it (a [8, 1000, 1024] f32 score tensor's fill and copy had
  // cost a third of its product).
  // (Through the view collapseBatchIntoRows made: the fill zeroes the
  // buffer whose collapsed rows the op accumulates into.)
  Value acc = op.getDpsInits().front();
  if (auto view = acc.getDefiningOp<memref::CollapseShapeOp>())
    acc = view.getSrc();
  linalg::FillOp fill = loom::zeroFillOf(acc, op);
  bool zeroed = static_cast<bool>(fill);
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = cast<MemRefType>(operand.get().getType());
    AffineMap map = op.getMatchingIndexingMap(&operand);
    SmallVector<int64_t> shape;
    for (auto [j, result] : llvm::enumerate(map.getResults())) {
      auto dim = dyn_cast<AffineDimExpr>(result);
      shape.push_back(dim ? padded[dim.getPosition()] : type.getDimSize(j));
    }
    if (ArrayRef<int64_t>(shape) == type.getShape())
      continue;
    Value wide = memref::AllocOp::create(b, loc, MemRefType::get(shape, type.getElementType()));
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(type.getElementType()));
    linalg::FillOp::create(b, loc, zero, wide);
    SmallVector<int64_t> offsets(shape.size(), 0), strides(shape.size(), 1);
    Value view = memref::SubViewOp::create(b, loc, wide, offsets, type.getShape(), strides);
    bool init = op.isDpsInit(&operand);
    if (!(init && zeroed))
      linalg::CopyOp::create(b, loc, operand.get(), view);
    if (init)
      copiesBack.push_back({view, operand.get()});
    temporaries.push_back(wide);
    operand.set(wide);
  }
  if (zeroed && !copiesBack.empty())
    fill.erase();
  b.setInsertionPointAfter(op);
  for (auto [view, original] : copiesBack)
    linalg::CopyOp::create(b, loc, view, original);
  for (Value temporary : temporaries)
    memref::DeallocOp::create(b, loc, temporary);
}

/// A 16-bit matmul reading its operands widened to f32 first, into
/// temporaries (the new op; `op` itself when no operand is only widened):
/// its body then multiplies f32 values. For one the tiles leave (a small
/// batched one, attention's p @ v), LLVM then vectorizes it as it does the
/// f32 matmul's loops, where the per-element widening of 16-bit loads
/// inside the reduction ran 13x slower (gpt-train's bf16 p @ v: 1.2 ms
/// against 0.09); a large one then runs on the f32 tiles. The products and
/// sums are the same bits.
static linalg::GenericOp widenMatmulOperands(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  Type f32 = Float32Type::get(op.getContext());
  SmallVector<Value> inputs;
  OpBuilder builder(op);
  Location loc = op.getLoc();
  SmallVector<Value> copies;
  for (OpOperand *operand : op.getDpsInputOperands()) {
    auto type = cast<MemRefType>(operand->get().getType());
    BlockArgument arg = body.getArgument(operand->getOperandNumber());
    bool onlyWidened = !type.getElementType().isF32() && isa<FloatType>(type.getElementType()) &&
                       llvm::all_of(arg.getUsers(), [&](Operation *user) {
                         auto ext = dyn_cast<arith::ExtFOp>(user);
                         return ext && ext.getType() == f32;
                       });
    if (!onlyWidened) {
      inputs.push_back(operand->get());
      continue;
    }
    Value copy = memref::AllocOp::create(builder, loc, MemRefType::get(type.getShape(), f32));
    unsigned rank = type.getRank();
    SmallVector<AffineMap> identity(2, builder.getMultiDimIdentityMap(rank));
    SmallVector<utils::IteratorType> parallel(rank, utils::IteratorType::parallel);
    linalg::GenericOp::create(builder, loc, ValueRange{operand->get()}, ValueRange{copy},
                              identity, parallel,
                              [&](OpBuilder &b, Location l, ValueRange args) {
                                linalg::YieldOp::create(
                                    b, l, arith::ExtFOp::create(b, l, f32, args[0]).getResult());
                              });
    inputs.push_back(copy);
    copies.push_back(copy);
  }
  if (copies.empty())
    return op;
  auto wide = linalg::GenericOp::create(
      builder, loc, op.getResultTypes(), inputs, op.getDpsInits(), op.getIndexingMapsArray(),
      op.getIteratorTypesArray(), [&](OpBuilder &b, Location l, ValueRange args) {
        IRMapping mapping;
        for (auto [old, now] : llvm::zip(body.getArguments(), args))
          mapping.map(old, now);
        for (Operation &inner : body) {
          auto ext = dyn_cast<arith::ExtFOp>(inner);
          if (ext && mapping.lookup(ext.getIn()).getType() == f32) {
            mapping.map(ext.getResult(), mapping.lookup(ext.getIn()));
            continue;
          }
          b.clone(inner, mapping);
        }
      });
  wide->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op->replaceAllUsesWith(wide->getResults());
  op->erase();
  builder.setInsertionPointAfter(wide);
  for (Value copy : copies)
    memref::DeallocOp::create(builder, loc, copy);
  return wide;
}

static std::string sizes(ArrayRef<int64_t> values) {
  std::string text = "[";
  for (auto [i, v] : llvm::enumerate(values))
    text += (i ? ", " : "") + std::to_string(v);
  return text + "]";
}

/// The result types of a `tile_using_for` making `loops` loops: the tiled
/// op's handle and each loop's.
static std::string tiledHandles(size_t loops) {
  std::string handles = "!transform.any_op";
  for (size_t i = 0; i < loops; ++i)
    handles += ", !transform.any_op";
  return handles;
}

/// The number of loops tiling by `tiles` makes (a size of 0: not tiled).
static size_t tiledLoops(ArrayRef<int64_t> tiles) {
  return llvm::count_if(tiles, [](int64_t size) { return size != 0; });
}

/// The schedule's per-op part: cache tiles, register tiles inside them and
/// the register tile vectorized. A pair contraction's vectorized body (a
/// multiply of extended bf16 pairs summed over j) becomes one mixed-precision
/// vector.contract, which the pass then unrolls into avx512_bf16 dots.
static void appendTiling(llvm::raw_ostream &os, unsigned id, ArrayRef<int64_t> tiles,
                         ArrayRef<int64_t> registers, bool pairs) {
  size_t tiled = tiledLoops(tiles);
  std::string handles = tiledHandles(tiled);
  os << "    %op" << id << " = transform.structured.match attributes{loom.cpu_tile = "
     << id << " : i64} in %root : (!transform.any_op) -> !transform.any_op\n"
     << "    %c" << id << ", %cl" << id << ":" << tiled
     << " = transform.structured.tile_using_for %op" << id << " tile_sizes "
     << sizes(tiles) << " : (!transform.any_op) -> (" << handles << ")\n"
     << "    %r" << id << ", %rl" << id << ":" << tiled
     << " = transform.structured.tile_using_for %c" << id << " tile_sizes "
     << sizes(registers) << " : (!transform.any_op) -> (" << handles << ")\n"
     << "    transform.structured.vectorize %r" << id << " : !transform.any_op\n";
  if (pairs)
    os << "    transform.apply_patterns to %rl" << id << "#0 {\n"
       << "      transform.apply_patterns.vector.transfer_permutation_patterns\n"
       << "      transform.apply_patterns.vector.reduction_to_contract\n"
       << "      transform.apply_patterns.vector.fold_arith_extension\n"
       << "    } : !transform.any_op\n";
}

/// The copy marked `loom.cpu_pack = id` tiled by `tiles`: its tile is
/// %pt<id>, its loops %pl<id>.
static void appendCopyTiling(llvm::raw_ostream &os, unsigned id, ArrayRef<int64_t> tiles) {
  size_t loops = tiledLoops(tiles);
  os << "    %p" << id << " = transform.structured.match attributes{loom.cpu_pack = "
     << id << " : i64} in %root : (!transform.any_op) -> !transform.any_op\n"
     << "    %pt" << id << ", %pl" << id << ":" << loops
     << " = transform.structured.tile_using_for %p" << id << " tile_sizes " << sizes(tiles)
     << " : (!transform.any_op) -> (" << tiledHandles(loops) << ")\n";
}

/// The copy of an operand into its panels, vectorized: per (panel, k) one
/// contiguous run of the panel's `whole` innermost dims (B: its columns,
/// with pairs two rows interleaved; A: a register tile's rows).
/// Where the run is strided in the source (f32 B panels from a
/// K-contiguous B), the copy goes in 16 x 16 blocks of (k, columns)
/// instead, which lowerBlockTransposes turns into shuffles: a run of
/// strided elements was 16 scalar loads and inserts, a sixth of the
/// backward's `dy @ w^T` kernel (gpt.loom-sized, 2.88 -> 2.55 ms). (A's
/// 8-row blocks the same way, as 8 x 16 shuffles, ran no faster.)
static void appendPackTiling(llvm::raw_ostream &os, unsigned id, linalg::TransposeOp pack,
                             size_t whole) {
  auto type = cast<MemRefType>(pack.getInit().getType());
  ArrayRef<int64_t> shape = type.getShape();
  ArrayRef<int64_t> permutation = pack.getPermutation();
  size_t rank = shape.size();
  constexpr int64_t kBlock = 16;
  bool stridedRun = whole == 1 && permutation.back() != int64_t(rank - 1);
  SmallVector<int64_t> tiles(rank - whole, 1);
  tiles.append(whole, 0);
  if (stridedRun && type.getElementType().isF32() && rank >= 2 &&
      shape[rank - 2] % kBlock == 0 && shape.back() % kBlock == 0) {
    tiles[rank - 2] = kBlock;
    tiles[rank - 1] = kBlock;
  }
  appendCopyTiling(os, id, tiles);
  os << "    transform.structured.vectorize %pt" << id << " : !transform.any_op\n";
}

/// A transposing copy (copyTransposedOperand's) in blocks of its last two
/// dims (a dim of at most a block whole), so that the lines of its strided
/// reads stay in L1 for the block: element by element down a column, each
/// read was a line of its own (a bf16 [512, 1024] operand's copy took 1 ms,
/// a third of its matmul). 16-bit blocks are 32 x 32, which
/// vectorizeHalfBlockTransposes turns into vectors; f32 blocks are 16 x 16
/// and vectorized, for lowerBlockTransposes' shuffles
/// (16 rows in, 16 out, unpack and permute shuffles between):
/// as loops, LLVM vectorized them with a scatter per 16 elements, a fifth
/// of the f32 attention backward's time at gpt.loom's size.
static void appendTransposeTiling(llvm::raw_ostream &os, unsigned id,
                                  linalg::TransposeOp copy) {
  auto type = cast<MemRefType>(copy.getInit().getType());
  ArrayRef<int64_t> shape = type.getShape();
  bool vectorized = type.getElementType().isF32();
  int64_t block = vectorized ? 16 : 32;
  SmallVector<int64_t> tiles(shape.size() - 2, 1);
  for (int64_t size : shape.take_back(2)) {
    tiles.push_back(size > block ? block : 0);
    // Static blocks only: a partial block would need masks.
    vectorized &= size <= block || size % block == 0;
  }
  if (tiledLoops(tiles) != 0) {
    appendCopyTiling(os, id, tiles);
    if (vectorized)
      os << "    transform.structured.vectorize %pt" << id << " : !transform.any_op\n";
  } else if (vectorized) { // one block
    os << "    %p" << id << " = transform.structured.match attributes{loom.cpu_pack = " << id
       << " : i64} in %root : (!transform.any_op) -> !transform.any_op\n"
       << "    transform.structured.vectorize %p" << id << " : !transform.any_op\n";
  }
}

/// Rounds of foldAliasesAndCanonicalize's greedy driver at most (the
/// upstream pass's default).
static constexpr int64_t kMostFoldingRounds = 10;

/// The tiles' memref aliases (subviews of subviews, expand_shapes) folded
/// into their loads and stores, with canonicalization, as
/// `transform.apply_patterns {fold_memref_alias_ops; canonicalization}`
/// did, but for at most kMostFoldingRounds rounds: upstream's folding need
/// not converge (LLVM 22: a transfer_read with a broadcast dim of a
/// memref.expand_shape of a kernel argument, as the batch of one of a
/// rank-2 attention makes, is rewritten back and forth forever), and the
/// transform op has no limit, so loomc hung. As with the upstream pass,
/// what the last round leaves is kept: every round leaves valid IR.
static void foldAliasesAndCanonicalize(ModuleOp module) {
  MLIRContext *context = module.getContext();
  RewritePatternSet patterns(context);
  memref::populateFoldMemRefAliasOpPatterns(patterns);
  for (Dialect *dialect : context->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName op : context->getRegisteredOperations())
    op.getCanonicalizationPatterns(patterns, context);
  GreedyRewriteConfig config;
  config.setMaxIterations(kMostFoldingRounds);
  (void)applyPatternsGreedily(module, std::move(patterns), config);
}

/// After tiling (and foldAliasesAndCanonicalize): the accumulators'
/// transfers hoisted out of the k loops (@cleanup; the pass then makes the
/// dots), then the remaining contractions lowered (@lower), the transposed
/// blocks (lowerBlockTransposes), and the transfers (@lower_transfers).
static constexpr const char *kScheduleTail = R"(    transform.yield
  }
  transform.named_sequence @cleanup(%root: !transform.any_op {transform.readonly}) {
    %funcs = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_cse to %funcs : !transform.any_op
    %hoisted = transform.structured.hoist_redundant_vector_transfers %funcs : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
  transform.named_sequence @lower(%root: !transform.any_op {transform.readonly}) {
    %funcs = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_outerproduct
    } : !transform.any_op
    transform.yield
  }
  transform.named_sequence @lower_transfers(%root: !transform.any_op {transform.readonly}) {
    %funcs = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.transfer_to_scf max_transfer_rank = 1 full_unroll = true
    } : !transform.any_op
    // Widen (extf) before broadcasting: 4 + 16 conversions per k step, not
    // 2 x 64 (what the vectorized body of a bf16 matmul starts with).
    transform.apply_patterns to %funcs {
      transform.apply_patterns.vector.sink_ops
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }
}
)";

/// Whether `read`'s vector reaches a vector.contract, directly or through
/// the slices that unrolling the contraction made of it. (A B panel's
/// packing copy also reads [..., cols, 2] bf16 vectors; cut to dot shapes,
/// its two rows' interleave became scalar shuffles.)
static bool feedsPairContraction(vector::TransferReadOp read) {
  return llvm::any_of(read->getUsers(), [](Operation *user) {
    if (isa<vector::ContractionOp>(user))
      return true;
    return isa<vector::ExtractStridedSliceOp>(user) &&
           llvm::any_of(user->getUsers(), llvm::IsaPred<vector::ContractionOp>);
  });
}

/// A bf16 pair contraction's vector shapes cut to what one avx512_bf16 dot
/// takes: one row of A's pair (broadcast to all lanes) against 16 columns
/// of B's pairs, into 16 f32 lanes. Only the pair contractions and the
/// bf16 reads feeding them have a native shape; everything else is left.
static std::optional<SmallVector<int64_t>> dotShape(Operation *op) {
  if (auto contract = dyn_cast<vector::ContractionOp>(op)) {
    if (!contract.getLhsType().getElementType().isBF16())
      return std::nullopt;
    SmallVector<int64_t> shape(contract.getIteratorTypes().size(), 1);
    // (batch..., m, n, k2, j): 16 of n, both members of the pair.
    shape[shape.size() - 3] = 16;
    shape.back() = 2;
    return shape;
  }
  if (auto read = dyn_cast<vector::TransferReadOp>(op)) {
    VectorType type = read.getVectorType();
    if (!type.getElementType().isBF16() || type.getRank() < 3 || type.getShape().back() != 2 ||
        !feedsPairContraction(read))
      return std::nullopt;
    SmallVector<int64_t> shape(type.getRank(), 1);
    shape[shape.size() - 2] = std::min<int64_t>(16, type.getShape()[type.getRank() - 2]);
    shape.back() = 2;
    return shape;
  }
  return std::nullopt;
}

namespace {
struct LoomTileContractionsForCpu
    : public loom::impl::LoomTileContractionsForCpuBase<LoomTileContractionsForCpu> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<transform::TransformDialect, vector::VectorDialect,
                    linalg::LinalgDialect, scf::SCFDialect,
                    x86vector::X86VectorDialect, amx::AMXDialect>();
    linalg::registerTransformDialectExtension(registry);
    vector::registerTransformDialectExtension(registry);
    memref::registerTransformDialectExtension(registry);
  }

  /// Whether a matmul reads packed f32 A blocks and B panels: when k and
  /// n are long enough to amortize the copies and A and B together outgrow
  /// a quarter of L2, where their rows K and N elements apart evict each
  /// other from L1 (f32 on an Emerald Rapids core, benchmarks/cpu: 1024^3
  /// 70-110 -> 110-130 GFLOP/s, 2048^3 70-105 -> 110-134; 256^3 155 ->
  /// 138, where the copies cost more than they save; 512^3 equal). The
  /// copies are plan temporaries: above 32 MiB together (2048^2 f32 each)
  /// of operands not copied anyway, the op reads its operands in place
  /// rather than add them to the arena.
  static bool packsOperands(linalg::GenericOp op) {
    auto type = [&](unsigned i) { return cast<MemRefType>(op.getDpsInputs()[i].getType()); };
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    unsigned loops = bounds.size();
    int64_t m = bounds[loops - 3], n = bounds[loops - 2], k = bounds.back();
    // An operand copied anyway (across the tiles' grain, for
    // copyTransposedOperand; padded, for padToWholeTiles) costs the arena
    // nothing more packed (an f32 vocabulary projection's 154 MB B had been
    // read in place, 50272 floats between its rows: 1060 -> 864 ms for its
    // gradient program).
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    auto copiedAnyway = [&](unsigned i, unsigned innerLoop) {
      auto inner = dyn_cast<AffineDimExpr>(maps[i].getResults().back());
      return (inner && inner.getPosition() == innerLoop) ||
             loom::paddedCopyOf(op.getDpsInputs()[i], op);
    };
    constexpr int64_t kQuarterOfL2 = 512 * 1024, kMostCopied = 32 * 1024 * 1024;
    int64_t copied = 0;
    if (!copiedAnyway(0, loops - 3))
      copied += type(0).getNumElements() * 4;
    if (!copiedAnyway(1, loops - 1))
      copied += type(1).getNumElements() * 4;
    return k >= 128 && n >= 128 && (m * k + k * n) * 4 > kQuarterOfL2 && copied <= kMostCopied;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    RegisterTile tile = loom::registerTileFor(vectorBits);
    // Tag each op with its own configuration, then build one schedule.
    std::string body;
    llvm::raw_string_ostream os(body);
    unsigned count = 0, dots = 0, amxMatmuls = 0, epilogues = 0;
    SmallVector<linalg::GenericOp> matmuls;
    SmallVector<linalg::GenericOp> rowAxpys;
    module.walk([&](linalg::GenericOp op) {
      if (!loom::isMatmulLike(op) || isRowDots(op))
        return;
      if (isRowAxpy(op))
        rowAxpys.push_back(op);
      else
        matmuls.push_back(op);
    });
    for (linalg::GenericOp op : rowAxpys)
      interchangeRowAxpy(op);
    unsigned packs = 0;
    auto i64 = IntegerType::get(module.getContext(), 64);
    // A transposing operand copy (if any), tiled by the schedule as a
    // blocked transpose.
    // A copy the schedule tiles: tagged with the id its handle matches.
    auto tagPack = [&](linalg::TransposeOp copy) {
      unsigned packId = packs++;
      copy->setAttr("loom.cpu_pack", IntegerAttr::get(i64, packId));
      return packId;
    };
    auto tileTranspose = [&](linalg::TransposeOp copy) {
      if (copy)
        appendTransposeTiling(os, tagPack(copy), copy);
    };
    // (The pieces splitOffTails makes join the list.)
    for (size_t i = 0; i < matmuls.size(); ++i) {
      linalg::GenericOp op = collapseBatchIntoRows(matmuls[i], tile);
      // (AMX takes its own shapes, in tiles of 16.)
      if (!(bf16Amx && loom::isAmxMatmul(op))) {
        // Packed, each piece copies B into panels again: worth it where
        // that is less than the accumulator's copies the split saves.
        auto bytes = [](Value v) {
          auto type = cast<MemRefType>(v.getType());
          return type.getNumElements() * type.getElementTypeBitWidth() / 8;
        };
        bool f32Rows = !packsOperands(op) ||
                       2 * bytes(op.getDpsInputs()[1]) < bytes(op.getDpsInits()[0]);
        llvm::append_range(matmuls, splitOffTails(op, tile, f32Rows));
        padToWholeTiles(op, tile);
      }
      std::optional<loom::PackedMatmul> packed;
      auto elementType = [&](unsigned i) {
        return cast<MemRefType>(op.getDpsInputs()[i].getType()).getElementType();
      };
      bool halves = elementType(0).getIntOrFloatBitWidth() == 16 &&
                    elementType(1).getIntOrFloatBitWidth() == 16 && isa<FloatType>(elementType(0));
      auto f32 = [&] { return elementType(0).isF32() && elementType(1).isF32(); };
      // A large f32 matmul copies A into blocks from either layout; the
      // other paths read A in (m, k) order, an M-contiguous A copied so.
      if (f32() && packsOperands(op))
        packed = loom::packMatmul(op, tile, /*pairs=*/false, /*packA=*/true);
      if (packed)
        op = packed->op;
      else
        tileTranspose(loom::copyTransposedOperand(op, /*which=*/0));
      if (bf16Amx && loom::isAmxMatmul(op)) {
        FailureOr<bool> rewritten = loom::rewriteAsAmxMatmul(op);
        if (failed(rewritten))
          return signalPassFailure();
        if (*rewritten) {
          ++amxMatmuls;
          continue;
        }
      }
      // Both operands broadcast over batch dims ([2, 1, 16, 32] @ [1, 3,
      // 32, 32]) leave unit dims in the dot tiles that the packed-dot
      // patterns do not take (LLVM 22): those go the widened FMA way.
      // An operand of fewer batch dims broadcasts too ([2, 1, 8, 8] @ [3, 8,
      // 32]: its dot tile had kept a unit dim, and the kernel failed to
      // translate to LLVM IR): one operand must index every batch loop.
      SmallVector<AffineMap> maps = op.getIndexingMapsArray();
      auto everyBatch = [&](AffineMap map) {
        return llvm::all_of(llvm::seq<unsigned>(0, op.getNumLoops() - 3),
                            [&](unsigned d) { return map.isFunctionOfDim(d); });
      };
      // Nor may an operand broadcast a batch dim inside its shape ([2, 1, 8,
      // 32] @ [2, 3, 32, 32]: the same translation failure).
      bool onDots = bf16Dot && loom::isBf16PairMatmul(op) &&
                    loom::isPlainDims(maps[0]) && loom::isPlainDims(maps[1]) &&
                    (everyBatch(maps[0]) || everyBatch(maps[1]));
      // Without dots, a 16-bit matmul is an f32 one on widened copies (one
      // pass over each operand), which the FMA tiles run at their f32 speed:
      // bf16 2048^3 on Emerald Rapids 131 GFLOP/s, its dots 78; the tiles'
      // own per-k widening (4 + 16 conversions per k step) ran 87 at 256^3
      // against 138, and gpt-train's bf16 forward's kernels 2.8 ms against
      // 2.4 (its 64-wide matmuls).
      if (halves && !onDots)
        op = widenMatmulOperands(op);
      if (onDots)
        packed = loom::packMatmul(op, tile, /*pairs=*/true, /*packA=*/false);
      else if (!packed && f32() && packsOperands(op)) // (widened 16-bit operands)
        packed = loom::packMatmul(op, tile, /*pairs=*/false, /*packA=*/true);
      SmallVector<MatmulLoop> loops = packed ? packed->loops : loom::unpackedLoops(op);
      if (packed)
        op = packed->op;
      bool pairs = llvm::is_contained(loops, MatmulLoop::KPair);
      std::optional<SmallVector<int64_t>> tiles = cacheTiles(op, tile, loops);
      if (!tiles) {
        if (!packed)
          widenMatmulOperands(op);
        continue;
      }
      if (!packed)
        tileTranspose(loom::copyTransposedOperand(op, /*which=*/1));
      // With k whole in the cache tile, a register tile's accumulator is
      // final after its k loop: the epilogue can run there.
      SmallVector<int64_t> bounds = op.getStaticLoopRanges();
      bool wholeK = llvm::all_of(llvm::seq<size_t>(0, loops.size()), [&](size_t i) {
        return loops[i] != MatmulLoop::K || (*tiles)[i] == bounds[i];
      });
      if (wholeK)
        epilogues += loom::markMatmulEpilogue(op);
      unsigned id = count++;
      dots += pairs;
      op->setAttr("loom.cpu_tile", IntegerAttr::get(i64, id));
      appendTiling(os, id, *tiles, registerTiles(tile, loops), pairs);
      for (linalg::TransposeOp pack : packed ? packed->packs : SmallVector<linalg::TransposeOp>{})
        appendPackTiling(os, tagPack(pack), pack, pairs ? 2 : 1);
    }
    // A kernel's own transposes: of the last two dims (the backward's
    // weight gradient made [n, k] for its [k, n] param) in blocks as the
    // operand copies do (gpt.loom-sized f32 step: [256, 1024] 0.74 ->
    // 0.044 ms); one that keeps the last dim (attention's heads, [b, t, h,
    // d] -> [b, h, t, d]) as a copy of whole rows, each one vector (LLVM
    // had copied them element by element: [8, 64, 8, 32] 37 -> 11.5 us).
    module.walk([&](linalg::TransposeOp transpose) {
      auto type = cast<MemRefType>(transpose.getInit().getType());
      ArrayRef<int64_t> permutation = transpose.getPermutation();
      if (transpose->hasAttr("loom.cpu_pack") || !type.hasStaticShape() || permutation.size() < 2)
        return;
      // Rows of whole zmm registers, at most 16 of them: LLVM's x86
      // backend aborted on a row of 65 bf16 ("Do not know how to soft
      // promote this operator's operand", differential seed 92020).
      int64_t rowBits = type.getShape().back() * type.getElementTypeBitWidth();
      constexpr int64_t kRegisterBits = 512, kMostRowBits = 16 * kRegisterBits;
      if (mlir::loom::swapsLastTwoDims(permutation)) {
        tileTranspose(transpose);
      } else if (permutation.back() == int64_t(permutation.size() - 1) &&
                 rowBits % kRegisterBits == 0 && rowBits <= kMostRowBits) {
        appendPackTiling(os, tagPack(transpose), transpose, /*whole=*/1);
      }
    });
    if (count == 0 && packs == 0 && amxMatmuls == 0)
      return;
    std::string schedule =
        "module attributes {transform.with_named_sequence} {\n"
        "  transform.named_sequence @__transform_main(%root: !transform.any_op "
        "{transform.readonly}) {\n" +
        body + kScheduleTail;
    OwningOpRef<ModuleOp> transforms =
        parseSourceString<ModuleOp>(schedule, module.getContext());
    if (!transforms) {
      module.emitError("internal error: the CPU tiling schedule does not parse");
      return signalPassFailure();
    }
    auto apply = [&](StringRef name) {
      Operation *entry = transforms->lookupSymbol(name);
      return transform::applyTransformNamedSequence(module, entry, *transforms,
                                                    transform::TransformOptions());
    };
    if (failed(apply("__transform_main")))
      return signalPassFailure();
    foldAliasesAndCanonicalize(module);
    if (failed(apply("cleanup")))
      return signalPassFailure();
    module.walk([](linalg::GenericOp op) { op->removeAttr("loom.cpu_tile"); });
    vectorizeHalfBlockTransposes(module);
    module.walk([](linalg::TransposeOp op) { op->removeAttr("loom.cpu_pack"); });
    loom::hoistViewAccumulators(module);
    if (dots && failed(makeBf16Dots(module)))
      return signalPassFailure();
    if (epilogues && failed(loom::fuseMatmulEpilogues(module)))
      return signalPassFailure();
    if (amxMatmuls && failed(flattenAmxPanelCopies(module)))
      return signalPassFailure();
    if (emulateAmx && failed(loom::emulateAmxTiles(module)))
      return signalPassFailure();
    if (failed(apply("lower")) || failed(lowerBlockTransposes(module)) ||
        failed(apply("lower_transfers")))
      return signalPassFailure();
    restoreContraction(module);
  }

  /// The 32 x 32 16-bit blocks of the transposing copies
  /// (appendTransposeTiling) as vectors: per 16 source columns, its 32
  /// rows interleaved in pairs (rows 2p and 2p + 1: 16 32-bit pairs a
  /// column), the 16 x 16 32-bit pairs transposed (lowerBlockTransposes'
  /// shuffles), and each row of pairs stored as one destination row of 32:
  /// a destination row's elements 2p and 2p + 1 are source rows 2p and 2p
  /// + 1. Element by element, a bf16 weight gradient's `x^T` copy was a
  /// quarter of its matmul (`transpose(a) @ b`, a [512, 1024]: 166 against
  /// 227 GFLOP/s untransposed).
  static void vectorizeHalfBlockTransposes(ModuleOp module) {
    constexpr int64_t kRows = 32, kPairs = 16;
    SmallVector<linalg::TransposeOp> blocks;
    module.walk([&](linalg::TransposeOp copy) {
      auto source = dyn_cast<MemRefType>(copy.getInput().getType());
      auto dest = dyn_cast<MemRefType>(copy.getInit().getType());
      if (!copy->hasAttr("loom.cpu_pack") || !source || !dest ||
          source.getElementTypeBitWidth() != 16 || !source.hasStaticShape() ||
          !mlir::loom::swapsLastTwoDims(copy.getPermutation()))
        return;
      ArrayRef<int64_t> shape = source.getShape();
      int64_t rank = shape.size();
      auto innermostUnit = [](MemRefType type) {
        SmallVector<int64_t> strides;
        int64_t offset;
        return succeeded(type.getStridesAndOffset(strides, offset)) && strides.back() == 1;
      };
      if (shape[rank - 2] == kRows && shape[rank - 1] == kRows &&
          llvm::all_of(shape.drop_back(2), [](int64_t size) { return size == 1; }) &&
          innermostUnit(source) && innermostUnit(dest))
        blocks.push_back(copy);
    });
    for (linalg::TransposeOp copy : blocks) {
      OpBuilder b(copy);
      Location loc = copy.getLoc();
      auto source = cast<MemRefType>(copy.getInput().getType());
      Type element = source.getElementType();
      int64_t rank = source.getRank();
      auto index = [&](int64_t value) {
        return arith::ConstantIndexOp::create(b, loc, value).getResult();
      };
      auto at = [&](int64_t row, int64_t col) {
        SmallVector<Value> indices(rank - 2, index(0));
        indices.push_back(index(row));
        indices.push_back(index(col));
        return indices;
      };
      auto half = VectorType::get({kPairs}, element);
      auto pairs = VectorType::get({kPairs}, b.getI32Type());
      auto square = VectorType::get({kPairs, kPairs}, b.getI32Type());
      for (int64_t col = 0; col < kRows; col += kPairs) {
        Value block = ub::PoisonOp::create(b, loc, square);
        for (int64_t p = 0; p < kPairs; ++p) {
          Value even = vector::LoadOp::create(b, loc, half, copy.getInput(), at(2 * p, col));
          Value odd = vector::LoadOp::create(b, loc, half, copy.getInput(), at(2 * p + 1, col));
          Value both = vector::InterleaveOp::create(b, loc, even, odd);
          block = vector::InsertOp::create(
              b, loc, vector::BitCastOp::create(b, loc, pairs, both), block, p);
        }
        Value columns = vector::TransposeOp::create(b, loc, block, ArrayRef<int64_t>{1, 0});
        auto row = VectorType::get({kRows}, element);
        for (int64_t c = 0; c < kPairs; ++c) {
          Value line = vector::ExtractOp::create(b, loc, columns, c);
          vector::StoreOp::create(b, loc, vector::BitCastOp::create(b, loc, row, line),
                                  copy.getInit(), at(col + c, 0));
        }
      }
      copy.erase();
    }
  }

  /// The 16 x 16 32-bit blocks of the transposing copies (f32 ones, and
  /// the 16-bit ones' pairs) as upstream's 16 x 16 shuffle transpose: 8 x
  /// 16 unpacks and 128-bit lane permutes, no scalar moves. Those blocks
  /// only: with a module-wide lowering the register tiles' broadcast
  /// transposes (4 x 16 x 1 on AVX2) became 64-element shuffles too, which
  /// LLVM otherwise folds into broadcasts.
  static LogicalResult lowerBlockTransposes(ModuleOp module) {
    SmallVector<Operation *> blocks;
    module.walk([&](vector::TransposeOp transpose) {
      VectorType type = transpose.getSourceVectorType();
      SmallVector<int64_t> sizes;
      llvm::copy_if(type.getShape(), std::back_inserter(sizes),
                    [](int64_t size) { return size != 1; });
      if (type.getElementTypeBitWidth() == 32 && sizes == SmallVector<int64_t>{16, 16})
        blocks.push_back(transpose);
    });
    if (blocks.empty())
      return success();
    RewritePatternSet patterns(module.getContext());
    vector::populateVectorTransposeLoweringPatterns(
        patterns, vector::VectorTransposeLowering::Shuffle16x16);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    if (failed(applyOpPatternsGreedily(blocks, std::move(patterns), config)))
      return module.emitError("internal error: the transposed blocks do not lower");
    return success();
  }

  /// The pair contractions, unrolled to one dot's shape, become
  /// x86vector.avx512.dot (upstream's packed-type dot product patterns).
  static LogicalResult makeBf16Dots(ModuleOp module) {
    MLIRContext *context = module.getContext();
    RewritePatternSet unroll(context);
    vector::populateVectorUnrollPatterns(
        unroll, vector::UnrollVectorOptions().setNativeShapeFn(dotShape));
    if (failed(applyPatternsGreedily(module, std::move(unroll))))
      return module.emitError("internal error: the bf16 dot tiles do not unroll");
    RewritePatternSet dots(context);
    x86vector::populateVectorContractToPackedTypeDotProductPatterns(dots);
    // B's 16 pairs are 64 contiguous bytes: one 1-D read, not 16.
    vector::populateFlattenVectorTransferPatterns(dots);
    if (failed(applyPatternsGreedily(module, std::move(dots))))
      return module.emitError("internal error: the bf16 dots do not form");
    return success();
  }

  /// The copies into an AMX matmul's VNNI panels (AmxMatmul.cpp) write
  /// their rows of pairs as flat vectors (a K-contiguous B's block of 16
  /// panel rows as one 1 KiB run): in the functions that hold AMX tiles
  /// only (their other matmuls' transfers stay as the tiles made them).
  static LogicalResult flattenAmxPanelCopies(ModuleOp module) {
    RewritePatternSet patterns(module.getContext());
    vector::populateFlattenVectorTransferPatterns(patterns);
    FrozenRewritePatternSet frozen(std::move(patterns));
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.walk([](amx::TileLoadOp) { return WalkResult::interrupt(); }).wasInterrupted() &&
          failed(applyPatternsGreedily(func, frozen)))
        return module.emitError("internal error: the AMX panel copies do not flatten");
    }
    return success();
  }

  /// The matmul body allowed contraction (fastmath<contract>), but the
  /// vectorized reduction's add lost the flag: restore it on the register
  /// tiles' multiply-add pairs so that LLVM emits FMAs. Only the tiled
  /// matmuls are vector code at this point.
  static void restoreContraction(ModuleOp module) {
    auto contract = arith::FastMathFlags::contract;
    module.walk([&](arith::AddFOp add) {
      if (!isa<VectorType>(add.getType()))
        return;
      for (Value operand : add->getOperands()) {
        if (auto cast = operand.getDefiningOp<vector::ShapeCastOp>())
          operand = cast.getSource();
        auto mul = operand.getDefiningOp<arith::MulFOp>();
        if (!mul || !arith::bitEnumContainsAll(mul.getFastmath(), contract))
          continue;
        add.setFastmath(add.getFastmath() | contract);
      }
    });
  }
};
} // namespace
