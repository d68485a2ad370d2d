//===- AmxMatmul.cpp - bf16 matmuls on AMX tiles, and their emulation -----===//

#include "Codegen/CPU/CpuMatmul.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;

// One AMX tile is 16 rows of 64 bytes: A 16 x 32 bf16 (m, k), B 16 x 32
// bf16 (k/2, then n's 16 pairs), C 16 x 16 f32.
static constexpr int64_t kTileRows = 16, kTileK = 32;

bool loom::isPlainDims(AffineMap map) {
  return llvm::all_of(map.getResults(), [](AffineExpr e) { return isa<AffineDimExpr>(e); });
}

linalg::FillOp loom::zeroFillOf(Value acc, linalg::GenericOp matmul) {
  linalg::FillOp fill;
  for (Operation *user : acc.getUsers()) {
    auto candidate = dyn_cast<linalg::FillOp>(user);
    if (candidate && candidate->getBlock() == matmul->getBlock() &&
        candidate->isBeforeInBlock(matmul) && matchPattern(candidate.value(), m_PosZeroFloat()) &&
        (!fill || fill->isBeforeInBlock(candidate)))
      fill = candidate;
  }
  if (!fill)
    return {};
  // Between them: only views whose one reader is the matmul (an op that
  // writes acc there, a bias added before the products, would be lost).
  for (Operation *user : acc.getUsers()) {
    bool viewForMatmul =
        isa<ViewLikeOpInterface>(user) &&
        llvm::all_of(user->getUsers(), [&](Operation *u) { return u == matmul; });
    if (user != fill && user != matmul &&
        (user->getBlock() != matmul->getBlock() ||
         (fill->isBeforeInBlock(user) && user->isBeforeInBlock(matmul))) &&
        !viewForMatmul)
      return {};
  }
  return fill;
}

static unsigned dimOf(AffineExpr e) { return cast<AffineDimExpr>(e).getPosition(); }

/// Whether `b` has static strides and a unit innermost one.
static bool isInnermostContiguous(Value b) {
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(cast<MemRefType>(b.getType()).getStridesAndOffset(strides, offset)) &&
         !llvm::any_of(strides, ShapedType::isDynamic) && strides.back() == 1;
}

bool loom::isAmxMatmul(linalg::GenericOp op) {
  if (!isBf16PairMatmul(op))
    return false;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (!llvm::all_of(maps, loom::isPlainDims))
    return false;
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  unsigned m = bounds.size() - 3, n = m + 1, k = m + 2;
  // A tile's rows are A's (and C's) second-innermost dim: m.
  auto endsIn = [](AffineMap map, unsigned outer, unsigned inner) {
    unsigned rank = map.getNumResults();
    return rank >= 2 && dimOf(map.getResult(rank - 2)) == outer &&
           dimOf(map.getResult(rank - 1)) == inner;
  };
  // B's panels are copied by loops that read its rows (or columns) as
  // vectors: B ends in (k, n) or (n, k), its innermost stride 1.
  return bounds[m] % kTileRows == 0 && bounds[n] % kTileRows == 0 && bounds[k] % kTileK == 0 &&
         endsIn(maps[0], m, k) && endsIn(maps[2], m, n) &&
         (endsIn(maps[1], k, n) || endsIn(maps[1], n, k)) &&
         isInnermostContiguous(op.getDpsInputs()[1]);
}

namespace {
/// The loop nest of one AMX matmul: per batch, per block of N, per block of
/// K, per row block of 16 x `rowTiles` outputs and per `colTiles` panels of
/// 16 columns, the accumulator tiles loaded, carried through the k loop and
/// stored. `ivs` holds each of the op's loops (batch..., m, n, k) where its
/// value is known.
struct AmxKernelBuilder {
  OpBuilder &builder;
  Location loc;
  SmallVector<AffineMap> maps; // A, B's batch results, C
  Value a, panelRows, c;
  SmallVector<int64_t> bounds;
  int64_t rowTiles = 1, colTiles = 1, blockPanels = 1, kBlock = kTileK;
  /// Whether C starts at zero (its fill erased): the first K block's
  /// accumulators are tile_zero, not loads.
  bool zeroInit = false;
  /// C's elementwise consumer, run on each tile after the last K block's
  /// store (the tile still in L1), or null.
  linalg::GenericOp epilogue = {};
  SmallVector<Value> ivs = {};

  unsigned m() const { return bounds.size() - 3; }
  unsigned n() const { return m() + 1; }
  unsigned k() const { return m() + 2; }

  Value constant(int64_t value) { return arith::ConstantIndexOp::create(builder, loc, value); }
  Value add(Value value, int64_t offset) {
    return arith::AddIOp::create(builder, loc, value, constant(offset));
  }

  /// An operand's indices at the loops' current values.
  SmallVector<Value> indices(AffineMap map) {
    SmallVector<Value> result;
    for (AffineExpr e : map.getResults())
      result.push_back(ivs[dimOf(e)]);
    return result;
  }

  /// `body` inside `for iv = lower to upper step step`, carrying `carried`.
  scf::ForOp loop(Value lower, Value upper, int64_t step, ValueRange carried,
                  function_ref<SmallVector<Value>(Value, ValueRange)> body) {
    return scf::ForOp::create(builder, loc, lower, upper, constant(step), carried,
                              [&](OpBuilder &b, Location, Value iv, ValueRange args) {
                                OpBuilder::InsertionGuard guard(builder);
                                builder.setInsertionPointToStart(b.getInsertionBlock());
                                scf::YieldOp::create(builder, loc, body(iv, args));
                              });
  }
  void loop(int64_t upper, int64_t step, function_ref<void(Value)> body) {
    loop(constant(0), constant(upper), step, {}, [&](Value iv, ValueRange) {
      body(iv);
      return SmallVector<Value>{};
    });
  }

  /// `body` in a loop nest over [0, upper) for each of `uppers`, outermost
  /// first, given the induction variables.
  void forEach(ArrayRef<int64_t> uppers, function_ref<void(ValueRange)> body,
               SmallVector<Value> outer = {}) {
    if (outer.size() == uppers.size())
      return body(outer);
    loop(uppers[outer.size()], 1, [&](Value iv) {
      SmallVector<Value> inner = outer;
      inner.push_back(iv);
      forEach(uppers, body, inner);
    });
  }

  /// B's VNNI panel rows [..., N/16, K/2, 32] copied from B [..., K, N] or,
  /// `kContiguous`, [..., N, K] (`a @ transpose(w)`, the backward's `dy @
  /// w^T`). N-contiguous: per k pair and 16 columns, the two rows' runs
  /// interleaved, k pairs outermost so that B is read in order (panel by
  /// panel, each of B's lines was read twice, 32 bytes a time, K/2 rows
  /// apart). K-contiguous: in blocks of 16 columns x 32 k, each column's 16
  /// k pairs one 64-byte load as 16 i32, the 16 x 16 pairs transposed
  /// (lowerBlockTransposes' shuffles), each k pair's 16 columns one 64-byte
  /// store; the vectorized copy read every pair apart (16 4-byte loads put
  /// together a panel row: 256^3, 764 GFLOP/s against 1113).
  void copyPairPanels(Value b, bool kContiguous) {
    ArrayRef<int64_t> shape = cast<MemRefType>(b.getType()).getShape();
    unsigned batch = shape.size() - 2;
    auto times = [&](Value value, int64_t factor) {
      return arith::MulIOp::create(builder, loc, value, constant(factor)).getResult();
    };
    Type bf16 = builder.getBF16Type();
    Value padding = arith::ConstantOp::create(builder, loc, bf16, builder.getZeroAttr(bf16));
    SmallVector<int64_t> uppers(shape.drop_back(2));
    if (!kContiguous) {
      // Batch dims, k pairs, panels.
      uppers.append({shape[batch] / 2, shape[batch + 1] / kTileRows});
      auto run = VectorType::get({kTileRows}, bf16);
      return forEach(uppers, [&](ValueRange ivs) {
        Value pair = ivs[batch], panel = ivs[batch + 1];
        SmallVector<Value> at(ivs.take_front(batch));
        at.append({times(pair, 2), times(panel, kTileRows)});
        Value even = vector::TransferReadOp::create(builder, loc, run, b, at, padding, {true});
        at[batch] = arith::AddIOp::create(builder, loc, at[batch], constant(1));
        Value odd = vector::TransferReadOp::create(builder, loc, run, b, at, padding, {true});
        SmallVector<Value> to(ivs.take_front(batch));
        to.append({panel, pair, constant(0)});
        vector::TransferWriteOp::create(builder, loc,
                                        vector::InterleaveOp::create(builder, loc, even, odd),
                                        panelRows, to, ArrayRef<bool>{true});
      });
    }
    // Batch dims, panels, blocks of 16 k pairs. 2-D transfers and a
    // vector.transpose, which canonicalization keeps (inserts and extracts of
    // single rows it folds into scalars).
    uppers.append({shape[batch] / kTileRows, shape[batch + 1] / kTileK});
    auto rows = VectorType::get({kTileRows, kTileK}, bf16);
    auto square = VectorType::get({kTileRows, kTileRows}, builder.getI32Type());
    SmallVector<bool> inBounds(2, true);
    forEach(uppers, [&](ValueRange ivs) {
      Value panel = ivs[batch], block = ivs[batch + 1];
      SmallVector<Value> from(ivs.take_front(batch));
      from.append({times(panel, kTileRows), times(block, kTileK)});
      Value columns =
          vector::TransferReadOp::create(builder, loc, rows, b, from, padding, inBounds);
      Value byColumn = vector::BitCastOp::create(builder, loc, square, columns);
      Value byPair = vector::TransposeOp::create(builder, loc, byColumn, ArrayRef<int64_t>{1, 0});
      SmallVector<Value> to(ivs.take_front(batch));
      to.append({panel, times(block, kTileRows), constant(0)});
      Value byRow = vector::BitCastOp::create(builder, loc, rows, byPair);
      vector::TransferWriteOp::create(builder, loc, byRow, panelRows, to, inBounds);
    });
  }

  Type tileType(int64_t cols, Type element) {
    return amx::TileType::get({kTileRows, cols}, element);
  }

  /// The batch loops, then the blocks.
  void build() {
    forEach(ArrayRef(bounds).take_front(m()), [&](ValueRange batch) {
      llvm::copy(batch, ivs.begin());
      buildBlocks();
    });
  }
  void buildBlocks() {
    loop(bounds[n()] / kTileRows, blockPanels, [&](Value block) {
      // The first K block (zeroed accumulators) and the last (the epilogue)
      // peeled off the middle ones.
      int64_t kBlocks = bounds[k()] / kBlock;
      auto rowBlocks = [&](Value kStart, bool first, bool last) {
        loop(bounds[m()], rowTiles * kTileRows, [&](Value row) {
          loop(blockPanels, colTiles, [&](Value panel) {
            accumulate(row, arith::AddIOp::create(builder, loc, block, panel), kStart, first, last);
          });
        });
      };
      rowBlocks(constant(0), true, kBlocks == 1);
      if (kBlocks > 2)
        loop(constant(kBlock), constant(bounds[k()] - kBlock), kBlock, {},
             [&](Value kStart, ValueRange) {
               rowBlocks(kStart, false, false);
               return SmallVector<Value>{};
             });
      if (kBlocks > 1)
        rowBlocks(constant(bounds[k()] - kBlock), false, true);
    });
  }

  /// The rowTiles x colTiles accumulator tiles at (row, panel): loaded from
  /// C (zeroed, in the `first` K block of a zeroInit C), k from kStart to
  /// kStart + kBlock in steps of 32, stored (and, in the `last` block, the
  /// epilogue run on each).
  void accumulate(Value row, Value panel, Value kStart, bool first, bool last) {
    Type accType = tileType(kTileRows, builder.getF32Type());
    Type operandType = tileType(kTileK, builder.getBF16Type());
    SmallVector<Value> rows, panels;
    for (int64_t r = 0; r < rowTiles; ++r)
      rows.push_back(r ? add(row, r * kTileRows) : row);
    for (int64_t p = 0; p < colTiles; ++p)
      panels.push_back(p ? add(panel, p) : panel);
    auto cIndices = [&](int64_t r, int64_t p) {
      ivs[m()] = rows[r];
      ivs[n()] = arith::MulIOp::create(builder, loc, panels[p], constant(kTileRows));
      return indices(maps[2]);
    };
    SmallVector<Value> accumulators;
    for (int64_t r = 0; r < rowTiles; ++r)
      for (int64_t p = 0; p < colTiles; ++p)
        accumulators.push_back(
            first && zeroInit
                ? Value(amx::TileZeroOp::create(builder, loc, accType))
                : Value(amx::TileLoadOp::create(builder, loc, accType, c, cIndices(r, p))));
    scf::ForOp kLoop = loop(
        kStart, add(kStart, kBlock), kTileK, accumulators, [&](Value kk, ValueRange accs) {
          ivs[k()] = kk;
          SmallVector<Value> aTiles, bTiles;
          for (int64_t r = 0; r < rowTiles; ++r) {
            ivs[m()] = rows[r];
            aTiles.push_back(amx::TileLoadOp::create(builder, loc, operandType, a, indices(maps[0])));
          }
          // B's row of 16 pairs for k is panel row k / 2.
          Value pairRow = arith::DivUIOp::create(builder, loc, kk, constant(2));
          for (int64_t p = 0; p < colTiles; ++p) {
            SmallVector<Value> bIndices = indices(maps[1]);
            bIndices.append({panels[p], pairRow, constant(0)});
            bTiles.push_back(
                amx::TileLoadOp::create(builder, loc, operandType, panelRows, bIndices));
          }
          SmallVector<Value> next;
          for (int64_t r = 0; r < rowTiles; ++r)
            for (int64_t p = 0; p < colTiles; ++p)
              next.push_back(amx::TileMulFOp::create(builder, loc, accType, aTiles[r], bTiles[p],
                                                     accs[r * colTiles + p]));
          return next;
        });
    for (int64_t r = 0; r < rowTiles; ++r)
      for (int64_t p = 0; p < colTiles; ++p) {
        auto store = amx::TileStoreOp::create(builder, loc, c, cIndices(r, p),
                                              kLoop.getResult(r * colTiles + p));
        if (last && epilogue)
          finalStores.push_back(store);
      }
  }
  /// The last K block's tile stores, for runEpilogue.
  SmallVector<amx::TileStoreOp> finalStores = {};

  /// The epilogue on each final 16 x 16 tile of C, right after its store
  /// (once the loops are built: vectorizing needs the ops in place).
  LogicalResult runEpilogue() {
    IRRewriter rewriter(builder.getContext());
    for (amx::TileStoreOp store : finalStores) {
      SmallVector<int64_t> sizes(store.getIndices().size(), 1);
      sizes[sizes.size() - 2] = sizes.back() = kTileRows;
      rewriter.setInsertionPointAfter(store);
      if (failed(loom::emitMatmulEpilogueBox(rewriter, loc, epilogue, store.getIndices(), sizes)))
        return failure();
    }
    return success();
  }
};

} // namespace

FailureOr<bool> loom::rewriteAsAmxMatmul(linalg::GenericOp op) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  unsigned m = bounds.size() - 3, n = m + 1, k = m + 2;
  Value a = op.getDpsInputs()[0], b = op.getDpsInputs()[1], c = op.getDpsInits()[0];
  // Found before packMatmul replaces the op: both look at C's users.
  linalg::GenericOp epilogue = loom::findMatmulEpilogue(op);
  linalg::FillOp fill = loom::zeroFillOf(c, op);
  // B's VNNI panels [..., N/16, K/2, 16, 2]: the dot path's packing, with
  // 16-column panels; its buffer (and its deallocation) are packMatmul's,
  // the copy into it the AMX loops' own (copyPairPanels). packMatmul
  // replaces the op with one reading views of A and C; those are dropped
  // with it, the tiles read A and C in place.
  std::optional<PackedMatmul> packed =
      packMatmul(op, RegisterTile{kTileRows, kTileRows}, /*pairs=*/true, /*packA=*/false);
  if (!packed)
    return false;
  linalg::TransposeOp pack = packed->packs.front();
  OpBuilder builder(packed->op);
  Location loc = packed->op.getLoc();
  // Each panel row (k/2) as one run of 32 bf16: a B tile is 16 such rows.
  Value panels = pack.getInit();
  unsigned rank = cast<MemRefType>(panels.getType()).getRank();
  SmallVector<ReassociationIndices> rows;
  for (unsigned d = 0; d + 2 < rank; ++d)
    rows.push_back({int64_t(d)});
  rows.push_back({int64_t(rank - 2), int64_t(rank - 1)});
  Value panelRows = memref::CollapseShapeOp::create(builder, loc, panels, rows);
  // B's batch indices are its map's results other than k and n, in order.
  unsigned bResults = maps[1].getNumResults();
  bool kContiguous = dimOf(maps[1].getResult(bResults - 1)) == k;
  maps[1] = maps[1].dropResults(llvm::SmallBitVector(bResults).set(bResults - 2, bResults));

  AmxKernelBuilder kernel{builder, loc, maps, a, panelRows, c, bounds};
  kernel.copyPairPanels(b, kContiguous);
  pack.erase();
  // 2 x 2 accumulator tiles (32 x 32 outputs) where m and n allow: per 32 k,
  // 4 tile products from 2 A and 2 B tiles (8 of AMX's 8 tile registers).
  kernel.rowTiles = bounds[m] % (2 * kTileRows) == 0 ? 2 : 1;
  kernel.colTiles = bounds[n] % (2 * kTileRows) == 0 ? 2 : 1;
  // N in blocks whose B panels (K x 16 bf16 each) fit in half of a 2 MiB L2,
  // so that every row block of A reuses them from there.
  int64_t panelCount = bounds[n] / kTileRows;
  kernel.blockPanels = kernel.colTiles;
  while (panelCount % (2 * kernel.blockPanels) == 0 &&
         2 * kernel.blockPanels * bounds[k] * kTileRows * 2 <= 1024 * 1024)
    kernel.blockPanels *= 2;
  // K whole up to 8192: each block of accumulator tiles stays in tile
  // registers through all of k, A's strip and B's panel pair streaming from
  // L2 (at most 512 KiB each). Blocks of 256 k (A's strip in L1, the tiles
  // stored and reloaded per block) ran slower at every size, and more so
  // the larger: Sapphire Rapids, 512/1024/2048/4096^3 in blocks of 256,
  // 512, 1024, 2048 against whole: 971 -> 1003, 865 -> 924, 600 -> 669 ->
  // 845 -> 922, 701 -> 811 GFLOP/s. Past 8192, blocks of 4096 (the
  // accumulators reloaded per block) keep those streams within L2.
  kernel.kBlock = bounds[k];
  if (bounds[k] > 8192)
    kernel.kBlock = *llvm::find_if(ArrayRef<int64_t>{4096, 2048, 1024, 512, 256, 128, 64, 32},
                                   [&](int64_t block) { return bounds[k] % block == 0; });
  kernel.zeroInit = bool(fill);
  kernel.epilogue = epilogue;
  kernel.ivs.resize(bounds.size());
  kernel.build();
  if (failed(kernel.runEpilogue()))
    return packed->op.emitError(
        "internal error: a matmul epilogue does not vectorize on AMX tiles");
  packed->op.erase();
  if (fill)
    fill.erase();
  if (epilogue)
    epilogue.erase();
  return true;
}

namespace {
/// An AMX tile as the vector of the same shape and element type.
struct TileAsVector : TypeConverter {
  TileAsVector() {
    addConversion([](Type type) { return type; });
    addConversion([](amx::TileType type) -> Type {
      return VectorType::get(type.getShape(), type.getElementType());
    });
  }
};

struct EmulateTileZero : OpConversionPattern<amx::TileZeroOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(amx::TileZeroOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<VectorType>(getTypeConverter()->convertType(op.getType()));
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, rewriter.getZeroAttr(type));
    return success();
  }
};

/// tileloadd: row r is the 2-D memref's row (index + r) from the column
/// index on, the second-innermost stride apart: a 2-D transfer_read.
struct EmulateTileLoad : OpConversionPattern<amx::TileLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(amx::TileLoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (op.getStride() || op.getMemRefType().getRank() < 2)
      return rewriter.notifyMatchFailure(op, "emulated tiles load from a 2-D view");
    auto type = cast<VectorType>(getTypeConverter()->convertType(op.getType()));
    Value padding = arith::ConstantOp::create(rewriter, op.getLoc(), type.getElementType(),
                                              rewriter.getZeroAttr(type.getElementType()));
    SmallVector<bool> inBounds(2, true);
    rewriter.replaceOpWithNewOp<vector::TransferReadOp>(op, type, adaptor.getBase(),
                                                        adaptor.getIndices(), padding, inBounds);
    return success();
  }
};

struct EmulateTileStore : OpConversionPattern<amx::TileStoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(amx::TileStoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (op.getStride() || op.getMemRefType().getRank() < 2)
      return rewriter.notifyMatchFailure(op, "emulated tiles store to a 2-D view");
    SmallVector<bool> inBounds(2, true);
    rewriter.replaceOpWithNewOp<vector::TransferWriteOp>(op, adaptor.getVal(), adaptor.getBase(),
                                                         adaptor.getIndices(), inBounds);
    return success();
  }
};

/// tdpbf16ps, as Intel defines it: C[m][n] += sum over pairs p of
/// A[m][2p] * B[p][2n] + A[m][2p+1] * B[p][2n+1], in f32. B's rows are
/// regrouped as k = 2p + j (a transpose of its (n, j) pairs) and the whole
/// is one f32 matmul contraction of the widened tiles.
struct EmulateTileMulF : OpConversionPattern<amx::TileMulFOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(amx::TileMulFOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto lhsType = cast<VectorType>(adaptor.getLhs().getType());
    int64_t rows = lhsType.getShape()[0], k = lhsType.getShape()[1];
    int64_t pairs = cast<VectorType>(adaptor.getRhs().getType()).getShape()[0];
    int64_t cols = k / 2;
    Type f32 = rewriter.getF32Type();
    Value lhs = arith::ExtFOp::create(rewriter, loc, VectorType::get({rows, k}, f32),
                                      adaptor.getLhs());
    Type bf16 = lhsType.getElementType();
    Value rhs = vector::ShapeCastOp::create(
        rewriter, loc, VectorType::get({pairs, cols, 2}, bf16), adaptor.getRhs());
    rhs = vector::TransposeOp::create(rewriter, loc, rhs, ArrayRef<int64_t>{0, 2, 1});
    rhs = vector::ShapeCastOp::create(rewriter, loc, VectorType::get({2 * pairs, cols}, bf16), rhs);
    rhs = arith::ExtFOp::create(rewriter, loc, VectorType::get({2 * pairs, cols}, f32), rhs);
    MLIRContext *context = op.getContext();
    AffineExpr dm, dn, dk;
    bindDims(context, dm, dn, dk);
    auto map = [&](ArrayRef<AffineExpr> exprs) { return AffineMap::get(3, 0, exprs, context); };
    rewriter.replaceOpWithNewOp<vector::ContractionOp>(
        op, lhs, rhs, adaptor.getAcc(),
        rewriter.getAffineMapArrayAttr({map({dm, dk}), map({dk, dn}), map({dm, dn})}),
        rewriter.getArrayAttr({vector::IteratorTypeAttr::get(context, vector::IteratorType::parallel),
                               vector::IteratorTypeAttr::get(context, vector::IteratorType::parallel),
                               vector::IteratorTypeAttr::get(context, vector::IteratorType::reduction)}));
    return success();
  }
};
} // namespace

LogicalResult loom::emulateAmxTiles(Operation *root) {
  MLIRContext *context = root->getContext();
  TileAsVector converter;
  ConversionTarget target(*context);
  target.addIllegalDialect<amx::AMXDialect>();
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  RewritePatternSet patterns(context);
  patterns.add<EmulateTileZero, EmulateTileLoad, EmulateTileStore, EmulateTileMulF>(converter,
                                                                                   context);
  scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
  return applyPartialConversion(root, target, std::move(patterns));
}
