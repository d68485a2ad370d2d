//===- AttentionWarp.h - One warp's share of a FlashAttention launch ------===//
//
// What both attention kernel builders share (AttentionKernel.cpp, mma.sync
// warps; AttentionWarpgroup.cpp, wgmma warpgroups): the operands read off
// the kernel's mark, and a warp's 16 rows in the m16n8 accumulator layout
// with the arithmetic of scores, the online softmax and the write-back.
// wgmma's m64nN accumulators are, warp by warp, the same layout.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_GPU_ATTENTIONWARP_H
#define LOOM_CODEGEN_GPU_ATTENTIONWARP_H

#include "Codegen/GPU/TensorCoreKernel.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <array>
#include <limits>
#include <optional>

namespace mlir::loom::attention {
constexpr int64_t kWarps = 4, kRowsPerWarp = 16;
constexpr int64_t kRowsPerBlock = kWarps * kRowsPerWarp;

/// What the mark and the kernel's arguments say.
struct AttentionSpec {
  Value query, key, value;
  /// The rows' log-sum-exp, f32 [b..., queries] (viewed flat by the
  /// launches): the forward's second output (when it has one), the
  /// backward's input.
  Value lse;
  /// The backward's: the forward's result and its gradient (null in a
  /// forward), and a flat f32 buffer of 2 x batch x queries for the rows'
  /// log-sum-exp and softmax gradient sums (dot), from the query side to
  /// the key side.
  Value output, resultGrad, statistics;
  /// The forward's output, or the query, key and value gradients.
  SmallVector<Value> outputs;
  Type element;
  int64_t batch = 1, queries = 0, keys = 0, features = 0, valueFeatures = 0;
  bool causal = false;
  std::optional<float> scale;
  bool backward() const { return static_cast<bool>(resultGrad); }
};

using Tile = SmallVector<Value, 4>;

/// One warp's arithmetic, at `b`'s insertion point inside a launch: 16 rows
/// (queries in the forward and the query-side backward, keys in the
/// key-side backward) against blocks of columns, in mma.sync m16n8k16
/// fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16"): with g =
/// lane / 4 and t = lane % 4, A's registers hold rows g and g + 8, columns
/// 2t, 2t + 1 and 2t + 8, 2t + 9; B's rows (k) 2t, 2t + 1 and 2t + 8, 2t + 9
/// of column g; the accumulators rows g and g + 8, columns 2t and 2t + 1.
struct Warp {
  OpBuilder &b;
  Location loc;
  IndexMath im;
  const AttentionSpec &spec;
  /// The batch entry: its indices (the collapsed batch dims) and number.
  SmallVector<Value> batchIndices;
  Value batch;
  Value g, t, t2, rowBase;
  /// The thread in the block and the lane in the warp.
  Value tid, lane;
  /// The launch's shared-memory buffers (its workgroup attributions).
  SmallVector<Value> shared;

  /// This warp, building at `builder` instead.
  Warp at(OpBuilder &builder) const {
    return Warp{builder, loc, im,    spec, batchIndices, batch, g, t, t2, rowBase,
                tid,     lane, shared};
  }
  Type f32() const { return b.getF32Type(); }
  Value f32Constant(double v) const {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value minusInf() const { return f32Constant(-std::numeric_limits<double>::infinity()); }
  SmallVector<Value> at(Value row, Value column) const {
    SmallVector<Value> indices(batchIndices);
    indices.append({row, column});
    return indices;
  }
  /// Elements (row, column) and (row, column + 1) of `buffer` as one mma
  /// register (column is even and rows have an even length: 4-byte
  /// aligned).
  Value pairAt(Value buffer, Value row, Value column) const {
    auto type = VectorType::get({2}, spec.element);
    Value pair = vector::LoadOp::create(b, loc, type, buffer, at(row, column),
                                        /*nontemporal=*/false, llvm::Align(4));
    return pairAsRegister(b, loc, spec.element, pair);
  }
  Value elementAt(Value buffer, Value row, Value column) const {
    return memref::LoadOp::create(b, loc, buffer, at(row, column));
  }
  /// `x` rounded to the operand type, held in f32.
  Value rounded(Value x) const {
    Value narrow = arith::TruncFOp::create(b, loc, spec.element, x);
    return arith::ExtFOp::create(b, loc, f32(), narrow);
  }
  Value narrowed(Value x) const {
    return arith::TruncFOp::create(b, loc, spec.element, x);
  }
  /// `combine` of `x` over the 4 lanes of a quad (a row's lanes).
  Value quadReduce(Value x, function_ref<Value(Value, Value)> combine) const {
    for (int32_t offset : {1, 2}) {
      auto shuffle = gpu::ShuffleOp::create(b, loc, x, offset, 32, gpu::ShuffleMode::XOR);
      x = combine(x, shuffle.getShuffleResult());
    }
    return x;
  }
  Value max(Value x, Value y) const { return arith::MaximumFOp::create(b, loc, x, y); }
  Value add(Value x, Value y) const { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) const { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) const { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) const { return arith::DivFOp::create(b, loc, x, y); }
  /// exp(x - m) as ex2.approx(x log2(e) - m log2(e)) (`scaledMax` = m
  /// log2(e), once a row): an fma and ex2, where the libdevice exp takes
  /// 12 instructions with the subtraction. Its few f32 ulps (about 2^-21
  /// relative) are what the forward can afford: P is rounded to 16 bits
  /// (a half-ulp of 2^-9 or 2^-12), and a rare flip of that rounding is
  /// one term's 16-bit rounding, which --check-kernels' terms rule allows.
  Value expMinus(Value x, Value scaledMax) const {
    // (`contract`: one fma.rn; math.fma would be split by
    // math-expand-ops.)
    auto contract = arith::FastMathFlags::contract;
    Value exponent = arith::SubFOp::create(
        b, loc, arith::MulFOp::create(b, loc, x, f32Constant(M_LOG2E), contract), scaledMax,
        contract);
    // (math.exp2 with `afn` still becomes libdevice's exp2f: the NVVM
    // intrinsic instead, which LLVM knows has no side effects.)
    return intrinsic("llvm.nvvm.ex2.approx.ftz.f32", exponent);
  }
  /// The f32 NVVM intrinsic `name` of `x`.
  Value intrinsic(StringRef name, Value x) const {
    return LLVM::CallIntrinsicOp::create(b, loc, f32(), b.getStringAttr(name), ValueRange{x})
        .getResult(0);
  }
  Value scaledByLog2E(Value m) const { return mul(m, f32Constant(M_LOG2E)); }
  /// The softmax's probability exp(x - lse) from a row's log-sum-exp, as
  /// ex2.approx(x log2(e) - lse log2(e)): 3 instructions where the
  /// libdevice exp takes about 12. The result is a few f32 ulps from the
  /// exact one, so its 16-bit rounding flips more often than the CPU's: on
  /// an H200, gpt-train's backward (T = 32, heads of 16) had 83 of 32768
  /// elements over --check-kernels' tolerance where the exact form (then
  /// exp(x - m) / l) had 4 (elements the softmax gradient's zero row sums
  /// cancel), the same 4 at T = 2048; the exact form took the backward 1.8
  /// times as long (T = 8192).
  Value probability(Value x, Value lse) const { return expMinus(x, scaledByLog2E(lse)); }
  /// A row's log-sum-exp from its maximum and sum: m + lg2.approx(l) ln(2)
  /// (a few f32 ulps from m + log(l)).
  Value logSumExp(Value m, Value l) const {
    return add(m, mul(intrinsic("llvm.nvvm.lg2.approx.ftz.f", l), f32Constant(M_LN2)));
  }
  Value quadSum(Value x) const {
    return quadReduce(x, [&](Value p, Value q) { return add(p, q); });
  }
  Value quadMax(Value x) const {
    return quadReduce(x, [&](Value p, Value q) { return max(p, q); });
  }
  /// Row g (half 0) or g + 8 (half 1) of the warp's rows.
  Value row(int64_t half) const { return im.addc(b, im.add(b, rowBase, g), 8 * half); }
  /// Column 2t + e % 2 of accumulator tile n of a block from `start`.
  Value column(Value start, int64_t n, int64_t e) const {
    return im.addc(b, im.add(b, start, t2), n * 8 + e % 2);
  }

  /// The warp's 16 rows of `buffer` (from rowBase) as A fragments, one per
  /// 16 columns of its `width`.
  SmallVector<Tile> rowFragments(Value buffer, int64_t width) const {
    SmallVector<Tile> fragments;
    Value r0 = row(0), r1 = row(1);
    for (int64_t kk = 0; kk < width; kk += 16) {
      Value c0 = im.addc(b, t2, kk), c8 = im.addc(b, t2, kk + 8);
      fragments.push_back({pairAt(buffer, r0, c0), pairAt(buffer, r1, c0),
                           pairAt(buffer, r0, c8), pairAt(buffer, r1, c8)});
    }
    return fragments;
  }
  /// `tiles` (one per 8 rows of `buffer` from `start`) += the warp's rows
  /// (`rows`, A fragments over `width` columns) times those rows of
  /// `buffer` transposed: B's column n is a row of `buffer`, so its
  /// registers are pairs along that row.
  void multiplyByRowsOf(ArrayRef<Tile> rows, Value buffer, Value start, int64_t width,
                        MutableArrayRef<Tile> tiles) const {
    for (int64_t kk = 0; kk < width; kk += 16) {
      Value c0 = im.addc(b, t2, kk), c8 = im.addc(b, t2, kk + 8);
      for (auto [n, tile] : llvm::enumerate(tiles)) {
        Value r = im.add(b, im.addc(b, start, n * 8), g);
        SmallVector<Value> fragment{pairAt(buffer, r, c0), pairAt(buffer, r, c8)};
        tile = mmaSync(b, loc, spec.element, rows[kk / 16], fragment, tile);
      }
    }
  }
  /// `out` (one tile per 8 columns of `buffer`, `width` of them) += the
  /// accumulator tiles `c` (16 rows x 8 * c.size() columns, rounded to the
  /// operand type as A fragments: the C layout of tiles 2j and 2j + 1 is
  /// the A layout of k step j) times the rows of `buffer` from `start`: B's
  /// registers are pairs down a column of `buffer`.
  void multiplyAccumulators(ArrayRef<Tile> c, Value buffer, Value start, int64_t width,
                            MutableArrayRef<Tile> out) const {
    for (size_t j = 0; j < c.size() / 2; ++j) {
      Tile a = aFragment(c[2 * j], c[2 * j + 1]);
      Value r = im.add(b, im.addc(b, start, j * 16), t2);
      for (int64_t n = 0; n < width / 8; ++n) {
        Value col = im.addc(b, g, n * 8);
        auto pair = [&](int64_t offset) {
          Value r0 = im.addc(b, r, offset);
          return packPair(b, loc, spec.element, elementAt(buffer, r0, col),
                                elementAt(buffer, im.addc(b, r0, 1), col));
        };
        SmallVector<Value> fragment{pair(0), pair(8)};
        out[n] = mmaSync(b, loc, spec.element, a, fragment, out[n]);
      }
    }
  }
  /// Accumulator tiles 2j and 2j + 1 (16 x 16) rounded to the operand
  /// type as the A fragment of k step j.
  Tile aFragment(const Tile &left, const Tile &right) const {
    // Rounded as a pair (one cvt.rn.bf16x2.f32; scalar roundings packed
    // afterwards take 6 instructions a pair).
    auto pack = [&](Value lo, Value hi) {
      Value wide = vector::FromElementsOp::create(b, loc, VectorType::get({2}, f32()),
                                                  ValueRange{lo, hi});
      return pairAsRegister(
          b, loc, spec.element,
          arith::TruncFOp::create(b, loc, VectorType::get({2}, spec.element), wide));
    };
    return {pack(left[0], left[1]), pack(left[2], left[3]), pack(right[0], right[1]),
            pack(right[2], right[3])};
  }
  /// Zeroed accumulator tiles.
  SmallVector<Tile> zeroTiles(int64_t count) const {
    return SmallVector<Tile>(count, Tile(4, f32Constant(0.0)));
  }
  /// A score as the five ops leave it: the product rounded to the operand
  /// type, times the scale rounded again; -inf where `masked`.
  Value score(Value product, Value masked) const {
    Value x = rounded(product);
    if (spec.scale)
      x = rounded(mul(x, f32Constant(*spec.scale)));
    if (masked)
      x = arith::SelectOp::create(b, loc, masked, minusInf(), x);
    return x;
  }
  /// Whether (query, key) lies above the diagonal (key > query): null when
  /// not causal.
  Value above(Value query, Value key) const {
    if (!spec.causal)
      return Value();
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, key, query);
  }
  /// Causal: the elements of `s` (the key block from c0: the forward's
  /// scores) above the diagonal set to -inf. Only the blocks the diagonal crosses in this warp's rows
  /// compare and select (a branch uniform in the warp): the rest, all but
  /// one or two of a row's blocks, skip the 3 instructions an element.
  /// `rowsAreKeys`: the key side's transposed tiles (rows keys, columns
  /// queries from c0); `fill`: the value above the diagonal (-inf when
  /// null). The backward masks its probabilities (fill 0) after forming
  /// them all: then the exponentials lie before the branch, not in the
  /// basic block of the wgmma wait that follows (there ptxas moved 27-31 of
  /// a step's 32 after the wait, undoing the overlap), and no select
  /// splits an exponent's multiply and subtract (one fma).
  void maskAboveDiagonal(Value c0, MutableArrayRef<Tile> s, bool rowsAreKeys = false,
                         Value fill = Value()) const {
    if (!spec.causal)
      return;
    // Some key of the block above some query of it: its last key after the
    // warp's first query, or (rows keys) the warp's last key after its
    // first query.
    Value crosses =
        rowsAreKeys
            ? arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                    im.addc(b, rowBase, kRowsPerWarp - 1), c0)
            : arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                    im.addc(b, c0, static_cast<int64_t>(s.size()) * 8 - 1),
                                    rowBase);
    SmallVector<Type> types;
    for (const Tile &tile : s)
      for (Value x : tile)
        types.push_back(x.getType());
    auto branch = scf::IfOp::create(b, loc, types, crosses, /*withElseRegion=*/true);
    auto yield = [&](OpBuilder &builder, ArrayRef<Tile> tiles) {
      SmallVector<Value> flat;
      for (const Tile &tile : tiles)
        llvm::append_range(flat, tile);
      scf::YieldOp::create(builder, loc, flat);
    };
    OpBuilder inThen = branch.getThenBodyBuilder();
    Warp inside = at(inThen);
    Value value = fill ? fill : inside.minusInf();
    SmallVector<Tile> masked(s.begin(), s.end());
    for (auto [n, tile] : llvm::enumerate(masked))
      for (int64_t e = 0; e < 4; ++e) {
        Value row = inside.row(e / 2), column = inside.column(c0, n, e);
        tile[e] = arith::SelectOp::create(
            inThen, loc, rowsAreKeys ? inside.above(column, row) : inside.above(row, column),
            value, tile[e]);
      }
    yield(inThen, masked);
    OpBuilder inElse = branch.getElseBodyBuilder();
    yield(inElse, s);
    for (auto [i, tile] : llvm::enumerate(s))
      for (int64_t e = 0; e < 4; ++e)
        tile[e] = branch.getResult(i * 4 + e);
  }
  /// One key block of the forward's online softmax, from k0: `s` (the
  /// product's accumulators, 8 keys a tile) becomes the scores (score,
  /// masked above the diagonal) and then P = exp(s - m') in f32 (aFragment
  /// rounds it, two at a time, as O += P V's operand); the row maxima m of
  /// rows g and g + 8 become m' (the quad's maximum), their sums l become
  /// l exp(m - m') plus this thread's part of rowsum P, unrounded (as the
  /// five ops' softmax sums and FlashAttention does: no rounding to undo
  /// for the sum), and `output` is rescaled by exp(m - m').
  void softmaxBlock(Value k0, MutableArrayRef<Tile> s, MutableArrayRef<Tile> output,
                    Value (&maxima)[2], Value (&sums)[2]) const {
    for (Tile &tile : s)
      for (int64_t e = 0; e < 4; ++e)
        tile[e] = score(tile[e], Value());
    maskAboveDiagonal(k0, s);
    Value scaledMaxima[2];
    for (int64_t half = 0; half < 2; ++half) {
      Value rowMax = maxima[half];
      for (const Tile &tile : s)
        rowMax = max(rowMax, max(tile[2 * half], tile[2 * half + 1]));
      rowMax = quadMax(rowMax);
      // While a row's scores are all -inf (masked, or past a 16-bit type's
      // range) its maximum is taken as 0, as FlashAttention's is: exp(-inf
      // - 0) = 0 keeps the sums 0 where -inf - -inf made the row NaN.
      Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, rowMax, minusInf());
      scaledMaxima[half] = scaledByLog2E(
          arith::SelectOp::create(b, loc, none, f32Constant(0.0), rowMax));
      Value rescale = expMinus(maxima[half], scaledMaxima[half]);
      maxima[half] = rowMax;
      sums[half] = mul(sums[half], rescale);
      for (Tile &tile : output)
        for (int64_t e = 2 * half; e < 2 * half + 2; ++e)
          tile[e] = mul(tile[e], rescale);
    }
    for (Tile &tile : s)
      for (int64_t e = 0; e < 4; ++e) {
        tile[e] = expMinus(tile[e], scaledMaxima[e / 2]);
        sums[e / 2] = add(sums[e / 2], tile[e]);
      }
  }
  /// The softmax gradient as the five ops' rules compute it: p (dp - dot),
  /// 0 where masked, times the scale rounded, rounded.
  Value scoreGrad(Value p, Value dp, Value dot, Value masked) const {
    Value x = mul(p, sub(dp, dot));
    if (masked)
      x = arith::SelectOp::create(b, loc, masked, f32Constant(0.0), x);
    if (spec.scale)
      x = mul(rounded(x), f32Constant(*spec.scale));
    return rounded(x);
  }
  /// Writes `tiles` (the warp's 16 rows x 8 * tiles.size() columns) to
  /// `buffer` as operand-type pairs, each value through `finish(value,
  /// half)` first.
  void storeRows(Value buffer, ArrayRef<Tile> tiles,
                 function_ref<Value(Value, int64_t)> finish) const {
    for (auto [n, tile] : llvm::enumerate(tiles))
      for (int64_t half = 0; half < 2; ++half) {
        Value pair = vector::FromElementsOp::create(
            b, loc, VectorType::get({2}, spec.element),
            ValueRange{narrowed(finish(tile[2 * half], half)),
                       narrowed(finish(tile[2 * half + 1], half))});
        vector::StoreOp::create(b, loc, pair, buffer,
                                at(row(half), im.addc(b, t2, n * 8)),
                                /*nontemporal=*/false, llvm::Align(4));
      }
  }
  /// Where query `row`'s log-sum-exp is in the flat spec.lse (batch x
  /// queries), and its statistic `which` (0 the log-sum-exp again, 1 the
  /// dot) in the backward's flat statistics buffer.
  Value rowIndex(Value query) const {
    return im.add(b, im.mulc(b, batch, spec.queries), query);
  }
  Value statIndex(int64_t which, Value query) const {
    return im.add(b, im.cst(b, which * spec.batch * spec.queries), rowIndex(query));
  }
  /// The log-sum-exp of the warp's rows g and g + 8.
  std::array<Value, 2> loadRowsLse() const {
    std::array<Value, 2> lse;
    for (int64_t half = 0; half < 2; ++half)
      lse[half] = memref::LoadOp::create(b, loc, spec.lse, rowIndex(row(half)));
    return lse;
  }
  /// Statistic `which` of queries `query` and `query` + 1 (`query` even:
  /// an accumulator tile's two columns), as one 8-byte load: the key side
  /// reads each column's two statistics every step, 16 loads a step at
  /// blocks of 32 queries where pairs take 8. (Both from the one buffer: a
  /// second base pointer held through its loop spilled at heads of 128.)
  std::array<Value, 2> loadStatPair(int64_t which, Value query) const {
    Value pair = vector::LoadOp::create(b, loc, VectorType::get({2}, f32()), spec.statistics,
                                        statIndex(which, query), /*nontemporal=*/false,
                                        llvm::Align(8));
    return {vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{0}),
            vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{1})};
  }
  /// `store(lead, half)` for rows g and g + 8, by each quad's first lane
  /// (a row's values are the same in its quad's lanes).
  void storeByQuadLead(function_ref<void(const Warp &lead, int64_t half)> store) const {
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, t, im.cst(b, 0));
    scf::IfOp::create(b, loc, first, [&](OpBuilder &then, Location l) {
      Warp lead = at(then);
      for (int64_t half = 0; half < 2; ++half)
        store(lead, half);
      scf::YieldOp::create(then, l);
    });
  }
  /// Stores the rows' log-sum-exp and dots into the statistics buffer.
  void storeStatistics(const std::array<Value, 2> &lse, const std::array<Value, 2> &dots) const {
    storeByQuadLead([&](const Warp &lead, int64_t half) {
      Value stat[2] = {lse[half], dots[half]};
      for (auto [which, value] : llvm::enumerate(stat))
        memref::StoreOp::create(lead.b, loc, value, spec.statistics,
                                ValueRange{lead.statIndex(which, lead.row(half))});
    });
  }
  /// Stores the rows' log-sum-exp from their maxima and (quad-summed) sums
  /// into spec.lse, where the forward has that output.
  void storeLse(const Value (&maxima)[2], const Value (&sums)[2]) const {
    if (!spec.lse)
      return;
    Value lse[2] = {logSumExp(maxima[0], sums[0]), logSumExp(maxima[1], sums[1])};
    storeByQuadLead([&](const Warp &lead, int64_t half) {
      memref::StoreOp::create(lead.b, loc, lse[half], spec.lse,
                              ValueRange{lead.rowIndex(lead.row(half))});
    });
  }
  /// The key side's block of queries from `q0` (columns): the transposed
  /// scores `p` and dp `ds` (rows keys) become p = exp(s - lse) rounded
  /// and ds = p (dp - dot), from the lse and dots the query side stored.
  void keyBlockGrads(Value q0, MutableArrayRef<Tile> p, MutableArrayRef<Tile> ds) const {
    for (size_t n = 0; n < p.size(); ++n) {
      std::array<Value, 2> lse = loadStatPair(0, column(q0, n, 0));
      std::array<Value, 2> dot = loadStatPair(1, column(q0, n, 0));
      for (int64_t e = 0; e < 4; ++e) {
        Value query = column(q0, n, e);
        Value masked = above(query, row(e / 2));
        p[n][e] = rounded(probability(score(p[n][e], masked), lse[e % 2]));
        ds[n][e] = scoreGrad(p[n][e], ds[n][e], dot[e % 2], masked);
      }
    }
  }
  /// The lse and dots of the key side's block of queries from `q0` (the
  /// columns of `tiles` tiles), a tile's two columns' in one 8-byte load
  /// each: per tile lse, lse, dot, dot.
  SmallVector<Value> loadKeyBlockStats(Value q0, int64_t tiles) const {
    SmallVector<Value> stats;
    for (int64_t n = 0; n < tiles; ++n)
      for (int64_t which = 0; which < 2; ++which)
        llvm::append_range(stats, loadStatPair(which, column(q0, n, 0)));
    return stats;
  }
  /// A block's p = exp(s - lse) from its scores (tiles from c0: rows
  /// queries, or keys where `rowsAreKeys`), rounded, in place, `lse(n, e)`
  /// that of element e of tile n; then 0 above the diagonal. The mask comes
  /// after the exponentials (maskAboveDiagonal).
  void blockProbabilities(Value c0, MutableArrayRef<Tile> p, bool rowsAreKeys,
                          function_ref<Value(size_t n, int64_t e)> lse) const {
    for (auto [n, tile] : llvm::enumerate(p))
      for (int64_t e = 0; e < 4; ++e)
        tile[e] = rounded(probability(score(tile[e], Value()), lse(n, e)));
    maskAboveDiagonal(c0, p, rowsAreKeys, f32Constant(0.0));
  }
  /// Its ds = p (dp - dot) in place of dp (`ds`), `dot(n, e)` that of
  /// element e of tile n; then 0 above the diagonal.
  void blockScoreGrads(Value c0, ArrayRef<Tile> p, MutableArrayRef<Tile> ds, bool rowsAreKeys,
                       function_ref<Value(size_t n, int64_t e)> dot) const {
    for (size_t n = 0; n < p.size(); ++n)
      for (int64_t e = 0; e < 4; ++e)
        ds[n][e] = scoreGrad(p[n][e], ds[n][e], dot(n, e), Value());
    maskAboveDiagonal(c0, ds, rowsAreKeys, f32Constant(0.0));
  }
  /// The sums over `width` features of `x * y` (row-major buffers of the
  /// operand type, like the result) for rows g and g + 8 of the warp, in
  /// f32, the same in every lane of a quad: each lane takes the pairs at
  /// columns 2t + 8i, then the quad adds them up. The backward's softmax
  /// gradient row sums, `rowsum(dO * O)`, as FlashAttention-2 takes them.
  std::array<Value, 2> rowDots(Value x, Value y, int64_t width) const {
    std::array<Value, 2> sums;
    for (int64_t half = 0; half < 2; ++half) {
      Value r = row(half), sum = f32Constant(0.0);
      for (int64_t c = 0; c < width; c += 8) {
        Value column = im.addc(b, t2, c);
        auto pair = [&](Value buffer) {
          auto type = VectorType::get({2}, spec.element);
          Value narrow = vector::LoadOp::create(b, loc, type, buffer, at(r, column),
                                                /*nontemporal=*/false, llvm::Align(4));
          return arith::ExtFOp::create(b, loc, VectorType::get({2}, f32()), narrow);
        };
        Value product = arith::MulFOp::create(b, loc, pair(x), pair(y));
        for (int64_t e = 0; e < 2; ++e)
          sum = add(sum, vector::ExtractOp::create(b, loc, product, ArrayRef<int64_t>{e}));
      }
      sums[half] = quadSum(sum);
    }
    return sums;
  }
  /// A loop over blocks of `step` from `lower` to `upper` carrying `init`.
  scf::ForOp loop(Value lower, Value upper, int64_t step, ValueRange init,
                  function_ref<SmallVector<Value>(Value start, ValueRange carried)> body) {
    auto forOp = scf::ForOp::create(b, loc, lower, upper, im.cst(b, step), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    scf::YieldOp::create(b, loc, body(forOp.getInductionVar(), forOp.getRegionIterArgs()));
    return forOp;
  }
  /// The end of the keys rows from rowBase read (queries rows): all, or
  /// (causal) through the block of `step` keys holding the last row.
  Value keyEnd(int64_t step) const { return keyEndAfter(rowBase, kRowsPerWarp, step); }
  /// keyEnd for the block's rows: the block's warps all walk to the
  /// diagonal of its last row.
  Value blockKeyEnd(int64_t step) const {
    Value blockBase = im.mulc(b, im.divc(b, rowBase, kRowsPerBlock), kRowsPerBlock);
    return keyEndAfter(blockBase, kRowsPerBlock, step);
  }
  Value keyEndAfter(Value first, int64_t rows, int64_t step) const {
    Value all = im.cst(b, spec.keys);
    if (!spec.causal)
      return all;
    Value blocks = im.divc(b, im.addc(b, first, rows + step - 1), step);
    return arith::MinUIOp::create(b, loc, im.mulc(b, blocks, step), all);
  }
};

/// Flattens tiles into values (to carry through a loop) and back.
inline SmallVector<Value> flat(ArrayRef<Tile> tiles) {
  SmallVector<Value> values;
  for (const Tile &tile : tiles)
    values.append(tile.begin(), tile.end());
  return values;
}
inline SmallVector<Tile> tilesOf(ValueRange values) {
  SmallVector<Tile> tiles;
  for (size_t i = 0; i < values.size(); i += 4)
    tiles.push_back(Tile(values.slice(i, 4)));
  return tiles;
}

/// Builds the sm_90a forward on wgmma (AttentionWarpgroup.cpp) at `b`
/// when `spec`'s shapes allow it within `sharedPerBlock` bytes of dynamic
/// shared memory; false, building nothing, otherwise.
bool buildWarpgroupAttention(OpBuilder &b, Location loc, const AttentionSpec &spec,
                             int64_t sharedPerBlock);
/// Builds the backward's key side (dk, dv) on wgmma alike, from the query
/// side's statistics in `spec.statistics` (flat).
bool buildWarpgroupKeyGrad(OpBuilder &b, Location loc, const AttentionSpec &spec,
                           int64_t sharedPerBlock);
/// Builds the backward's query side (dq, and the statistics it writes to
/// `spec.statistics`) on wgmma alike.
bool buildWarpgroupQueryGrad(OpBuilder &b, Location loc, const AttentionSpec &spec,
                             int64_t sharedPerBlock);

} // namespace mlir::loom::attention

#endif // LOOM_CODEGEN_GPU_ATTENTIONWARP_H
