//===- AttentionKernel.cpp - loom.attention as one FlashAttention launch --===//
//
// A kernel the attention lowering marked `loom.gpu_attention` (one
// loom.attention and nothing else) gets its body, the CPU's blocked loops,
// replaced by one launch in the manner of FlashAttention-2: a block of 4
// warps per 64 queries of one batch entry (sequences and heads collapsed),
// each warp 16 query rows. A warp holds its queries as mma.sync A
// fragments, walks the keys in blocks of 64 (32 or 16 where they do not
// divide the keys) and per block:
//
//   S = Q K^T on m16n8k16 (K's rows are the B fragments' columns, read as
//       pairs straight from global memory), rounded to the operand type,
//       times the scale rounded again, -inf above the diagonal (causal);
//   m' = max(m, rowmax S)   (a row is spread over the 4 lanes of a quad:
//       two xor shuffles)
//   P = exp(S - m'), rounded; l = l exp(m - m') + rowsum P; O = O exp(m - m')
//   O += P V on m16n8k16: the accumulators of S are, pair for pair, the
//       A fragments of P (the PTX ISA's m16n8 C layout and m16n8k16 A
//       layout agree), V's B fragments two rows apart.
//
// and at the end writes O / l, rounded. Causal warps stop at their
// diagonal key block, and blocks start with the last queries (the most
// work). The registers hold everything: no shared memory, no barriers.
//
// The probabilities are rounded before their normalization (online, as
// FlashAttention does), where the op (and the CPU) rounds exp(s - m) / l
// with the row's final maximum and sum: the results agree within the
// operand type's rounding (docs/precision.md), not bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/Passes.h"
#include "Codegen/GPU/TensorCoreKernel.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMBUILDGPUATTENTION
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
constexpr int64_t kWarps = 4, kRowsPerWarp = 16;
constexpr int64_t kQueriesPerBlock = kWarps * kRowsPerWarp;

/// What the mark and the kernel's arguments say.
struct AttentionSpec {
  Value query, key, value, output;
  Type element;
  int64_t batch = 1, queries = 0, keys = 0, features = 0, valueFeatures = 0;
  bool causal = false;
  std::optional<float> scale;
};

/// The builder of one warp's work, at `b`'s insertion point inside the
/// launch.
struct WarpBuilder {
  OpBuilder &b;
  Location loc;
  loom::IndexMath im;
  const AttentionSpec &spec;
  int64_t keyBlock;
  /// The batch entry's indices (the collapsed batch dims), the lane's
  /// group g = lane / 4 and t = lane % 4, and the warp's first query row.
  SmallVector<Value> batchIndices;
  Value g, t, rowBase;

  Type f32() const { return b.getF32Type(); }
  Value f32Constant(double v) const {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
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
    return loom::pairAsRegister(b, loc, spec.element, pair);
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
  Value mul(Value x, Value y) const { return arith::MulFOp::create(b, loc, x, y); }

  /// The warp's queries as A fragments, one per 16 features.
  SmallVector<SmallVector<Value, 4>> queryFragments() const {
    SmallVector<SmallVector<Value, 4>> fragments;
    Value r0 = im.add(b, rowBase, g), r1 = im.addc(b, r0, 8);
    Value t2 = im.mulc(b, t, 2);
    for (int64_t kk = 0; kk < spec.features; kk += 16) {
      Value c0 = im.addc(b, t2, kk), c8 = im.addc(b, t2, kk + 8);
      fragments.push_back({pairAt(spec.query, r0, c0), pairAt(spec.query, r1, c0),
                           pairAt(spec.query, r0, c8), pairAt(spec.query, r1, c8)});
    }
    return fragments;
  }

  /// The end of the keys the warp reads: all, or (causal) through the key
  /// block holding its last row.
  Value keyEnd() const {
    Value all = im.cst(b, spec.keys);
    if (!spec.causal)
      return all;
    Value blocks = im.divc(b, im.addc(b, rowBase, kRowsPerWarp + keyBlock - 1), keyBlock);
    return arith::MinUIOp::create(b, loc, im.mulc(b, blocks, keyBlock), all);
  }

  /// One key block from `k0`: `carried` is the output accumulators
  /// (valueFeatures / 8 tiles of 4), the two rows' maxima and the two rows'
  /// partial sums (this lane's columns); returns them updated.
  SmallVector<Value> keyBlockStep(Value k0, ArrayRef<SmallVector<Value, 4>> queries,
                                  ValueRange carried) const {
    int64_t scoreTiles = keyBlock / 8, outputTiles = spec.valueFeatures / 8;
    Value zero = f32Constant(0.0);
    SmallVector<SmallVector<Value, 4>> s(scoreTiles, SmallVector<Value, 4>(4, zero));
    Value t2 = im.mulc(b, t, 2);
    for (int64_t kk = 0; kk < spec.features; kk += 16) {
      Value c0 = im.addc(b, t2, kk), c8 = im.addc(b, t2, kk + 8);
      for (int64_t n = 0; n < scoreTiles; ++n) {
        Value keyRow = im.add(b, im.addc(b, k0, n * 8), g);
        SmallVector<Value> keyFragment{pairAt(spec.key, keyRow, c0),
                                       pairAt(spec.key, keyRow, c8)};
        s[n] = loom::mmaSync(b, loc, spec.element, queries[kk / 16], keyFragment, s[n]);
      }
    }
    // The scores as the five ops round them; accumulator e of a tile is
    // row g (e < 2) or g + 8, column 2t + e % 2.
    Value scale = spec.scale ? f32Constant(*spec.scale) : Value();
    Value minusInf = f32Constant(-std::numeric_limits<double>::infinity());
    Value row[2] = {im.add(b, rowBase, g), im.addc(b, im.add(b, rowBase, g), 8)};
    for (int64_t n = 0; n < scoreTiles; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value x = rounded(s[n][e]);
        if (scale)
          x = rounded(mul(x, scale));
        if (spec.causal) {
          Value column = im.addc(b, im.add(b, k0, t2), n * 8 + e % 2);
          Value above = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                              column, row[e / 2]);
          x = arith::SelectOp::create(b, loc, above, minusInf, x);
        }
        s[n][e] = x;
      }
    int64_t accs = outputTiles * 4;
    SmallVector<Value> output(carried.take_front(accs));
    Value maxima[2] = {carried[accs], carried[accs + 1]};
    Value sums[2] = {carried[accs + 2], carried[accs + 3]};
    Value rescale[2];
    for (int64_t half = 0; half < 2; ++half) {
      Value rowMax = maxima[half];
      for (int64_t n = 0; n < scoreTiles; ++n)
        rowMax = max(rowMax, max(s[n][2 * half], s[n][2 * half + 1]));
      rowMax = quadReduce(rowMax, [&](Value x, Value y) { return max(x, y); });
      // Every row sees key 0 in the first block, so rowMax is finite from
      // there on and exp(-inf - rowMax) = 0 starts the sums.
      rescale[half] = math::ExpOp::create(
          b, loc, arith::SubFOp::create(b, loc, maxima[half], rowMax));
      maxima[half] = rowMax;
      sums[half] = mul(sums[half], rescale[half]);
    }
    for (int64_t n = 0; n < scoreTiles; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value p = rounded(math::ExpOp::create(
            b, loc, arith::SubFOp::create(b, loc, s[n][e], maxima[e / 2])));
        sums[e / 2] = add(sums[e / 2], p);
        s[n][e] = p;
      }
    for (int64_t i = 0; i < accs; ++i)
      output[i] = mul(output[i], rescale[(i % 4) / 2]);
    // O += P V, 16 keys at a time: P's A fragment is score tiles 2j and
    // 2j + 1; V's B fragment rows (keys) 2t, 2t + 1 and 2t + 8, 2t + 9 of
    // column (feature) g.
    for (int64_t j = 0; j < keyBlock / 16; ++j) {
      auto pack = [&](Value lo, Value hi) {
        return loom::packPair(b, loc, spec.element, narrowed(lo), narrowed(hi));
      };
      SmallVector<Value> probabilities{
          pack(s[2 * j][0], s[2 * j][1]), pack(s[2 * j][2], s[2 * j][3]),
          pack(s[2 * j + 1][0], s[2 * j + 1][1]), pack(s[2 * j + 1][2], s[2 * j + 1][3])};
      Value keyRow = im.add(b, im.addc(b, k0, j * 16), t2);
      for (int64_t n = 0; n < outputTiles; ++n) {
        Value column = im.addc(b, g, n * 8);
        auto valuePair = [&](int64_t offset) {
          Value r = im.addc(b, keyRow, offset);
          return loom::packPair(b, loc, spec.element, elementAt(spec.value, r, column),
                                elementAt(spec.value, im.addc(b, r, 1), column));
        };
        SmallVector<Value> valueFragment{valuePair(0), valuePair(8)};
        SmallVector<Value, 4> sumsOut = loom::mmaSync(
            b, loc, spec.element, probabilities, valueFragment,
            ArrayRef<Value>(output).slice(n * 4, 4));
        llvm::copy(sumsOut, output.begin() + n * 4);
      }
    }
    output.append({maxima[0], maxima[1], sums[0], sums[1]});
    return output;
  }

  /// The warp's whole work: the key loop, then O / l rounded into the
  /// output, rows g and g + 8, columns 2t and 2t + 1 of each tile.
  void build() {
    SmallVector<SmallVector<Value, 4>> queries = queryFragments();
    int64_t accs = spec.valueFeatures / 8 * 4;
    SmallVector<Value> init(accs, f32Constant(0.0));
    Value minusInf = f32Constant(-std::numeric_limits<double>::infinity());
    init.append({minusInf, minusInf, f32Constant(0.0), f32Constant(0.0)});
    auto loop = scf::ForOp::create(b, loc, im.cst(b, 0), keyEnd(), im.cst(b, keyBlock), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      scf::YieldOp::create(
          b, loc, keyBlockStep(loop.getInductionVar(), queries, loop.getRegionIterArgs()));
    }
    ValueRange results = loop.getResults();
    Value sums[2];
    for (int64_t half = 0; half < 2; ++half)
      sums[half] = quadReduce(results[accs + 2 + half], [&](Value x, Value y) { return add(x, y); });
    Value t2 = im.mulc(b, t, 2);
    for (int64_t n = 0; n < spec.valueFeatures / 8; ++n)
      for (int64_t half = 0; half < 2; ++half) {
        Value row = im.addc(b, im.add(b, rowBase, g), 8 * half);
        Value column = im.addc(b, t2, n * 8);
        auto normalized = [&](int64_t e) {
          return narrowed(arith::DivFOp::create(b, loc, results[n * 4 + e], sums[half]));
        };
        Value pair = vector::FromElementsOp::create(
            b, loc, VectorType::get({2}, spec.element),
            ValueRange{normalized(2 * half), normalized(2 * half + 1)});
        vector::StoreOp::create(b, loc, pair, spec.output, at(row, column),
                                /*nontemporal=*/false, llvm::Align(4));
      }
  }
};

/// The operands of `kernel` by its mark, or failure (with an error).
FailureOr<AttentionSpec> readSpec(func::FuncOp kernel, DictionaryAttr mark) {
  auto position = [&](StringRef name) -> int64_t {
    auto attr = mark.getAs<IntegerAttr>(name);
    return attr ? attr.getInt() : -1;
  };
  // The output buffer follows the inputs; plan scratch (the CPU lowering's
  // block buffers) is unused here.
  SmallVector<Value> buffers;
  for (BlockArgument argument : kernel.getArguments())
    if (!kernel.getArgAttr(argument.getArgNumber(), loom::attr::kScratch))
      buffers.push_back(argument);
  int64_t inputs = position("inputs");
  int64_t query = position("query"), key = position("key"), value = position("value");
  if (inputs < 0 || static_cast<int64_t>(buffers.size()) != inputs + 1 ||
      llvm::any_of(SmallVector<int64_t>{query, key, value},
                   [&](int64_t i) { return i < 0 || i >= inputs; }))
    return kernel.emitError("loom.gpu_attention: the kernel's arguments do not "
                            "match the mark"),
           failure();
  AttentionSpec spec;
  spec.query = buffers[query];
  spec.key = buffers[key];
  spec.value = buffers[value];
  spec.output = buffers[inputs];
  auto typeOf = [](Value v) { return dyn_cast<MemRefType>(v.getType()); };
  MemRefType q = typeOf(spec.query), k = typeOf(spec.key), v = typeOf(spec.value),
             o = typeOf(spec.output);
  if (!q || !k || !v || !o ||
      llvm::any_of(SmallVector<MemRefType>{q, k, v, o}, [&](MemRefType type) {
        return !type.hasStaticShape() || !type.getLayout().isIdentity() ||
               type.getRank() != q.getRank() || type.getElementType() != q.getElementType();
      }) ||
      q.getRank() < 2)
    return kernel.emitError("loom.gpu_attention: query, key, value and output "
                            "must be contiguous buffers of one rank and type"),
           failure();
  int64_t rows = q.getRank() - 2;
  spec.element = q.getElementType();
  for (int64_t size : q.getShape().take_front(rows))
    spec.batch *= size;
  spec.queries = q.getShape()[rows];
  spec.keys = k.getShape()[rows];
  spec.features = q.getShape().back();
  spec.valueFeatures = v.getShape().back();
  spec.causal = mark.contains("causal");
  if (auto scale = mark.getAs<FloatAttr>("scale"))
    spec.scale = scale.getValueAsDouble();
  auto tensorOf = [](MemRefType type) {
    return RankedTensorType::get(type.getShape(), type.getElementType());
  };
  if (!loom::gpuRunsAttention(tensorOf(q), tensorOf(k), tensorOf(v),
                              Float32Type::get(kernel.getContext())) ||
      k.getShape().back() != spec.features || v.getShape()[rows] != spec.keys ||
      o.getShape()[rows] != spec.queries || o.getShape().back() != spec.valueFeatures)
    return kernel.emitError("loom.gpu_attention: shapes the GPU attention "
                            "kernel does not run"),
           failure();
  return spec;
}

/// Replaces `kernel`'s body by the attention launch.
LogicalResult buildAttentionKernel(func::FuncOp kernel, DictionaryAttr mark) {
  FailureOr<AttentionSpec> read = readSpec(kernel, mark);
  if (failed(read))
    return failure();
  const AttentionSpec &spec = *read;
  Block &body = kernel.front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
    op.dropAllUses();
    op.erase();
  }
  Location loc = kernel.getLoc();
  OpBuilder b = OpBuilder::atBlockEnd(&body);
  loom::IndexMath im{loc};
  int64_t queryBlocks = (spec.queries + kQueriesPerBlock - 1) / kQueriesPerBlock;
  // Batch entries along x (up to 2^31 - 1 of them), query blocks along y.
  auto launch = gpu::LaunchOp::create(b, loc, im.cst(b, spec.batch), im.cst(b, queryBlocks),
                                      im.cst(b, 1), im.cst(b, 32 * kWarps), im.cst(b, 1),
                                      im.cst(b, 1));
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value warp = im.divc(k, tid, 32), lane = im.remc(k, tid, 32);
  // The last queries first: causal ones have the most keys to read.
  Value queryBlock = arith::SubIOp::create(k, loc, im.cst(k, queryBlocks - 1),
                                           launch.getBlockIds().y);
  Value rowBase = im.add(k, im.mulc(k, queryBlock, kQueriesPerBlock),
                         im.mulc(k, warp, kRowsPerWarp));
  SmallVector<Value> batchIndices;
  ArrayRef<int64_t> shape = cast<MemRefType>(spec.query.getType()).getShape();
  Value rest = launch.getBlockIds().x;
  for (int64_t size : llvm::reverse(shape.drop_back(2))) {
    batchIndices.insert(batchIndices.begin(), im.remc(k, rest, size));
    rest = im.divc(k, rest, size);
  }
  int64_t keyBlock = spec.keys % 64 == 0 ? 64 : spec.keys % 32 == 0 ? 32 : 16;
  // With more than 64 features, blocks of 32 keys keep the warp's
  // registers (queries, scores, outputs) under the 255 a thread may have.
  if (std::max(spec.features, spec.valueFeatures) > 64 && keyBlock == 64)
    keyBlock = 32;
  auto buildWarp = [&](OpBuilder &builder) {
    WarpBuilder warpBuilder{builder, loc, im, spec, keyBlock, batchIndices,
                            im.divc(builder, lane, 4), im.remc(builder, lane, 4), rowBase};
    warpBuilder.build();
  };
  if (spec.queries % kQueriesPerBlock == 0) {
    buildWarp(k);
  } else {
    // The last block's warps past the queries have nothing to do (the
    // queries are a multiple of a warp's 16 rows).
    scf::IfOp::create(k, loc, im.below(k, rowBase, spec.queries),
                      [&](OpBuilder &then, Location l) {
                        buildWarp(then);
                        scf::YieldOp::create(then, l);
                      });
  }
  gpu::TerminatorOp::create(k, loc);
  func::ReturnOp::create(b, loc);
  return success();
}

struct LoomBuildGpuAttention
    : public loom::impl::LoomBuildGpuAttentionBase<LoomBuildGpuAttention> {
  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    auto mark = kernel->getAttrOfType<DictionaryAttr>(loom::attr::kGpuAttention);
    if (mark && failed(buildAttentionKernel(kernel, mark)))
      signalPassFailure();
  }
};
} // namespace
