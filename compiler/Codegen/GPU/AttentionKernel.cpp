//===- AttentionKernel.cpp - loom.attention as FlashAttention launches ----===//
//
// A kernel the attention lowering marked `loom.gpu_attention` (one
// loom.attention or loom.attention_grad and nothing else) gets its body,
// the CPU's blocked loops, replaced by launches in the manner of
// FlashAttention-2: blocks of 4 warps per 64 rows of one batch entry
// (sequences and heads collapsed), each warp 16 rows held as mma.sync
// A fragments, walking blocks of columns with its accumulators in
// registers (the block's column operands shared through shared memory:
// Columns). The forward (one launch, query rows) per
// key block:
//
//   S = Q K^T on m16n8k16 (K's rows are the B fragments' columns, read as
//       pairs straight from global memory), rounded to the operand type,
//       times the scale rounded again, -inf above the diagonal (causal);
//   m' = max(m, rowmax S)   (a row is spread over the 4 lanes of a quad:
//       two xor shuffles)
//   P = exp(S - m') (ex2.approx); l = l exp(m - m') + rowsum P (P unrounded);
//       O = O exp(m - m')
//   O += P V on m16n8k16: the accumulators of S are, pair for pair, the
//       A fragments of P, rounded in pairs (the PTX ISA's m16n8 C layout
//       and m16n8k16 A layout agree), V's B fragments two rows apart.
//
// and at the end writes O / l, rounded (and, where the op has that result,
// each row's log-sum-exp). The backward (two launches) makes the CPU
// lowering's pass, FlashAttention-2's: per 16 query rows the softmax
// gradient's row sums (rowsum(dO * O)), then dq in one pass over the key
// blocks with p = exp(s - lse); then per 16 key rows, with the keys as
// rows (K Q^T and V dO^T), dk and dv from the stored lse and row sums. With more than
// 64 features in all, the backward reloads its rows' fragments (L1 hits)
// at every column block instead of holding them, so that the accumulators
// fit (dk and dv: 128 registers at heads of 128).
//
// The forward's probabilities are rounded before their normalization
// (online, as FlashAttention does), where the op (and the CPU) rounds
// exp(s - m) / l with the row's final maximum and sum: the results agree
// within the operand type's rounding (docs/precision.md), not bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/AttentionWarp.h"
#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/Passes.h"
#include "Codegen/GPU/TensorCoreKernel.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMBUILDGPUATTENTION
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
using namespace mlir::loom::attention;

/// The column operands of a launch's products, read block by block (K and
/// V in the forward and the backward's query side, Q and dO on its key
/// side). Unstaged, each warp reads them from global memory itself (B
/// fragments as pairs along a row, or element by element down a column).
/// Staged, the block's 4 warps share them through shared memory: two
/// stages of [block][width] per operand (the launch's workgroup buffers,
/// in `sources` order), their rows' 16-byte chunks XOR-swizzled as the
/// cp.async matmul pipeline's (swizzleChunk); all 128 threads copy a block
/// with `cp.async` (16 bytes each, bypassing L1) while the warps multiply
/// the previous one, and the warps read B fragments with `ldmatrix.x4`,
/// as they are where the operand's rows are the product's columns, or
/// transposed where they are its k. Each element then crosses from global
/// memory once per block instead of once per warp, in 16-byte copies, and
/// the block's warps walk the column blocks together (masks zero what
/// lies past a warp's own diagonal).
struct Columns {
  static constexpr int64_t kChunk = 8; // 16-bit elements in 16 bytes

  Warp &w;
  int64_t block;
  /// The operands (global buffers) and their widths (features).
  SmallVector<std::pair<Value, int64_t>> sources;
  bool staged;

  /// A loop over the column blocks from `start` to `end` carrying `init`;
  /// `body` gets the block's first column and its stage (null unstaged).
  /// Staged, block i + 1's copies go out (into the stage block i - 1
  /// used, which every warp has left: the barrier ending each step) before
  /// block i's are awaited: at most one group pending means block i's
  /// landed, for this thread; the barrier, for all.
  scf::ForOp loop(Value start, Value end, ValueRange init,
                  function_ref<SmallVector<Value>(Value c0, Value stage, ValueRange carried)>
                      body) const {
    if (!staged)
      return w.loop(start, end, block, init, [&](Value c0, ValueRange carried) {
        return body(c0, Value(), carried);
      });
    const loom::IndexMath &im = w.im;
    OpBuilder &b = w.b;
    auto ifBelow = [&](Value column, function_ref<void()> then) {
      Value below = arith::CmpIOp::create(b, w.loc, arith::CmpIPredicate::ult, column, end);
      auto ifOp = scf::IfOp::create(b, w.loc, below, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      then();
    };
    ifBelow(start, [&] { issue(im.cst(b, 0), start); });
    NVVM::CpAsyncCommitGroupOp::create(b, w.loc);
    return w.loop(start, end, block, init, [&](Value c0, ValueRange carried) {
      Value stage = im.remc(b, im.divc(b, arith::SubIOp::create(b, w.loc, c0, start), block), 2);
      Value next = im.addc(b, c0, block);
      ifBelow(next, [&] { issue(im.xorv(b, stage, im.cst(b, 1)), next); });
      NVVM::CpAsyncCommitGroupOp::create(b, w.loc);
      NVVM::CpAsyncWaitGroupOp::create(b, w.loc, 1);
      gpu::BarrierOp::create(b, w.loc);
      SmallVector<Value> results = body(c0, stage, carried);
      gpu::BarrierOp::create(b, w.loc);
      return results;
    });
  }
  /// `tiles` (block / 8 of them) += the warp's rows (A fragments) times
  /// operand `which`'s rows from `c0` transposed. Staged: per ldmatrix.x4
  /// the b0, b1 of two 8-column tiles (matrix i: rows 8 (i / 2) on,
  /// features 8 (i % 2) on).
  void multiplyRows(ArrayRef<Tile> rows, unsigned which, Value c0, Value stage,
                    MutableArrayRef<Tile> tiles) const {
    auto [source, width] = sources[which];
    if (!staged)
      return w.multiplyByRowsOf(rows, source, c0, width, tiles);
    const loom::IndexMath &im = w.im;
    OpBuilder &b = w.b;
    Value laneRow = im.remc(b, w.lane, 8), matrix = im.divc(b, w.lane, 8);
    for (int64_t kk = 0; kk < width; kk += 16)
      for (size_t n = 0; n < tiles.size(); n += 2) {
        Value row = im.add(b, im.addc(b, laneRow, n * 8), im.mulc(b, im.divc(b, matrix, 2), 8));
        Value chunk = im.addc(b, im.remc(b, matrix, 2), kk / kChunk);
        Tile regs = ldmatrix(which, stage, row, chunk, /*transpose=*/false);
        tiles[n] = loom::mmaSync(b, w.loc, w.spec.element, rows[kk / 16], {regs[0], regs[1]},
                                 tiles[n]);
        tiles[n + 1] = loom::mmaSync(b, w.loc, w.spec.element, rows[kk / 16],
                                     {regs[2], regs[3]}, tiles[n + 1]);
      }
  }
  /// `out` (width / 8 tiles) += the accumulator tiles `c` (as A fragments,
  /// rounded) times operand `which`'s rows from `c0`. Staged: per
  /// ldmatrix.x4.trans the b0, b1 of two 8-feature tiles (matrix i: rows
  /// 8 (i % 2) on, features 8 (i / 2) on).
  void multiplyColumns(ArrayRef<Tile> c, unsigned which, Value c0, Value stage,
                       MutableArrayRef<Tile> out) const {
    auto [source, width] = sources[which];
    if (!staged)
      return w.multiplyAccumulators(c, source, c0, width, out);
    const loom::IndexMath &im = w.im;
    OpBuilder &b = w.b;
    Value laneRow = im.remc(b, w.lane, 16), half = im.divc(b, w.lane, 16);
    for (size_t j = 0; j < c.size() / 2; ++j) {
      Tile a = w.aFragment(c[2 * j], c[2 * j + 1]);
      Value row = im.addc(b, laneRow, j * 16);
      for (int64_t n = 0; n < width / 8; n += 2) {
        Tile regs = ldmatrix(which, stage, row, im.addc(b, half, n), /*transpose=*/true);
        out[n] = loom::mmaSync(b, w.loc, w.spec.element, a, {regs[0], regs[1]}, out[n]);
        out[n + 1] = loom::mmaSync(b, w.loc, w.spec.element, a, {regs[2], regs[3]}, out[n + 1]);
      }
    }
  }

private:
  /// The copies of rows c0 .. c0 + block of the operands into `stage`.
  void issue(Value stage, Value c0) const {
    const loom::IndexMath &im = w.im;
    OpBuilder &b = w.b;
    for (auto [i, source] : llvm::enumerate(sources)) {
      auto [buffer, width] = source;
      int64_t perRow = width / kChunk;
      for (int64_t copy = 0; copy < block * perRow / (32 * kWarps); ++copy) {
        Value index = im.addc(b, w.tid, copy * 32 * kWarps);
        Value row = im.divc(b, index, perRow), chunk = im.remc(b, index, perRow);
        Value column = im.mulc(b, loom::swizzleChunk(b, im, row, chunk, perRow), kChunk);
        nvgpu::DeviceAsyncCopyOp::create(
            b, w.loc, w.shared[i], ValueRange{stage, row, column}, buffer,
            w.at(im.add(b, c0, row), im.mulc(b, chunk, kChunk)), b.getIndexAttr(kChunk),
            Value(), b.getUnitAttr());
      }
    }
  }
  /// An ldmatrix.x4 of operand `which`'s stage at the lane's row and
  /// chunk: 4 registers.
  Tile ldmatrix(unsigned which, Value stage, Value row, Value chunk, bool transpose) const {
    const loom::IndexMath &im = w.im;
    OpBuilder &b = w.b;
    int64_t width = sources[which].second;
    Value column = im.mulc(b, loom::swizzleChunk(b, im, row, chunk, width / kChunk), kChunk);
    Value tiles = nvgpu::LdMatrixOp::create(
        b, w.loc, VectorType::get({4, 2}, w.spec.element), w.shared[which],
        ValueRange{stage, row, column}, b.getBoolAttr(transpose), b.getI32IntegerAttr(4));
    Tile regs;
    for (int64_t i = 0; i < 4; ++i)
      regs.push_back(loom::pairAsRegister(
          b, w.loc, w.spec.element,
          vector::ExtractOp::create(b, w.loc, tiles, ArrayRef<int64_t>{i})));
    return regs;
  }
};

/// The warp's rows of a buffer as A fragments, for a loop's every
/// iteration: loaded once before the loop, or, with `reload`, again where
/// used, after a warp barrier (which LLVM may not move loads across, so it
/// cannot hoist them out of the loop). Reloading is for wide heads, where
/// the registers must hold the accumulators instead (an L1 hit each time).
struct RowOperand {
  RowOperand(Warp &w, Value buffer, int64_t width, bool reload)
      : w(w), buffer(buffer), width(width), reload(reload) {
    if (!reload)
      held = w.rowFragments(buffer, width);
  }
  SmallVector<Tile> get() const {
    if (!reload)
      return held;
    NVVM::SyncWarpOp::create(
        w.b, w.loc,
        arith::ConstantOp::create(w.b, w.loc, w.b.getI32IntegerAttr(-1)));
    return w.rowFragments(buffer, width);
  }

  Warp &w;
  Value buffer;
  int64_t width;
  bool reload;
  SmallVector<Tile> held;
};

/// Whether the backward reloads its row operands (RowOperand) rather than
/// hold them: with more than 64 features in all of a side's two.
bool reloadsRows(const AttentionSpec &spec) {
  return spec.features + spec.valueFeatures > 128;
}


/// The forward: 16 query rows of a warp against every key block up to
/// the diagonal (staged: the block's last row's), the online softmax
/// carried, O / l stored at the end.
void buildForwardWarp(Warp &w, int64_t keyBlock, bool staged) {
  const AttentionSpec &spec = w.spec;
  SmallVector<Tile> queries = w.rowFragments(spec.query, spec.features);
  int64_t outputTiles = spec.valueFeatures / 8;
  SmallVector<Value> init = flat(w.zeroTiles(outputTiles));
  init.append({w.minusInf(), w.minusInf(), w.f32Constant(0.0), w.f32Constant(0.0)});
  Columns columns{w, keyBlock, {{spec.key, spec.features}, {spec.value, spec.valueFeatures}},
                  staged};
  Value end = staged ? w.blockKeyEnd(keyBlock) : w.keyEnd(keyBlock);
  auto loop = columns.loop(w.im.cst(w.b, 0), end, init,
                           [&](Value k0, Value stage, ValueRange carried) {
    SmallVector<Tile> s = w.zeroTiles(keyBlock / 8);
    columns.multiplyRows(queries, 0, k0, stage, s);
    SmallVector<Tile> output = tilesOf(carried.take_front(outputTiles * 4));
    Value maxima[2] = {carried[outputTiles * 4], carried[outputTiles * 4 + 1]};
    Value sums[2] = {carried[outputTiles * 4 + 2], carried[outputTiles * 4 + 3]};
    w.softmaxBlock(k0, s, output, maxima, sums);
    // O += P V: P's A fragments are the score tiles.
    columns.multiplyColumns(s, 1, k0, stage, output);
    SmallVector<Value> next = flat(output);
    next.append({maxima[0], maxima[1], sums[0], sums[1]});
    return next;
  });
  ValueRange results = loop.getResults();
  Value sums[2] = {w.quadSum(results[outputTiles * 4 + 2]),
                   w.quadSum(results[outputTiles * 4 + 3])};
  w.storeRows(spec.outputs[0], tilesOf(results.take_front(outputTiles * 4)),
              [&](Value x, int64_t half) { return w.div(x, sums[half]); });
  w.storeLse({results[outputTiles * 4], results[outputTiles * 4 + 1]}, sums);
}

/// The backward's query side: per warp of 16 query rows, one pass over
/// the key blocks: p = exp(s - lse) from the forward's log-sum-exp, ds and
/// dq += ds K, with dot = rowsum(dO * O) taken first. lse and the dots go
/// to the flat statistics buffer for the key side.
void buildQueryGradWarp(Warp &w, int64_t keyBlock, bool staged) {
  const AttentionSpec &spec = w.spec;
  RowOperand queries(w, spec.query, spec.features, reloadsRows(spec));
  RowOperand grads(w, spec.resultGrad, spec.valueFeatures, reloadsRows(spec));
  Columns columns{w, keyBlock, {{spec.key, spec.features}, {spec.value, spec.valueFeatures}},
                  staged};
  Value end = staged ? w.blockKeyEnd(keyBlock) : w.keyEnd(keyBlock);
  // The softmax gradient's row sums, from the result (no pass over keys).
  std::array<Value, 2> dot = w.rowDots(spec.resultGrad, spec.output, spec.valueFeatures);
  std::array<Value, 2> lse = w.loadRowsLse();
  int64_t gradTiles = spec.features / 8;
  auto backward = columns.loop(w.im.cst(w.b, 0), end, flat(w.zeroTiles(gradTiles)),
                               [&](Value k0, Value stage, ValueRange carried) {
    // p before dp's product (its exponentials' temporaries not live with
    // dp: at heads of 128 the other order spilled).
    SmallVector<Tile> p = w.zeroTiles(keyBlock / 8);
    columns.multiplyRows(queries.get(), 0, k0, stage, p);
    for (size_t n = 0; n < p.size(); ++n)
      for (int64_t e = 0; e < 4; ++e)
        p[n][e] = w.rounded(w.probability(
            w.score(p[n][e], w.above(w.row(e / 2), w.column(k0, n, e))), lse[e / 2]));
    // dp = dO V^T in f32 (the five ops' rule keeps it f32).
    SmallVector<Tile> ds = w.zeroTiles(keyBlock / 8);
    columns.multiplyRows(grads.get(), 1, k0, stage, ds);
    for (size_t n = 0; n < p.size(); ++n)
      for (int64_t e = 0; e < 4; ++e)
        ds[n][e] = w.scoreGrad(p[n][e], ds[n][e], dot[e / 2],
                               w.above(w.row(e / 2), w.column(k0, n, e)));
    SmallVector<Tile> dq = tilesOf(carried);
    columns.multiplyColumns(ds, 0, k0, stage, dq);
    return flat(dq);
  });
  w.storeRows(spec.outputs[0], tilesOf(backward.getResults()),
              [](Value x, int64_t) { return x; });
  w.storeStatistics(lse, dot);
}

/// The backward's key side: per warp of 16 key rows, one pass over the
/// query blocks from its diagonal (causal) with the log-sum-exp and dots
/// the query side stored: p^T and ds^T formed again (the transposed
/// products K Q^T and V dO^T), dv += p^T dO and dk += ds^T Q.
void buildKeyGradWarp(Warp &w, int64_t queryBlock, bool staged) {
  const AttentionSpec &spec = w.spec;
  const loom::IndexMath &im = w.im;
  RowOperand keys(w, spec.key, spec.features, reloadsRows(spec));
  RowOperand values(w, spec.value, spec.valueFeatures, reloadsRows(spec));
  Columns columns{w, queryBlock,
                  {{spec.query, spec.features}, {spec.resultGrad, spec.valueFeatures}}, staged};
  int64_t keyTiles = spec.features / 8, valueTiles = spec.valueFeatures / 8;
  // Causal: from the query block of the warp's (staged: the block's) first
  // key on.
  Value start = im.cst(w.b, 0);
  if (spec.causal) {
    Value first = staged ? im.mulc(w.b, im.divc(w.b, w.rowBase, kRowsPerBlock), kRowsPerBlock)
                         : w.rowBase;
    start = im.mulc(w.b, im.divc(w.b, first, queryBlock), queryBlock);
  }
  SmallVector<Value> init = flat(w.zeroTiles(keyTiles));
  llvm::append_range(init, flat(w.zeroTiles(valueTiles)));
  auto loop = columns.loop(start, im.cst(w.b, spec.queries), init,
                           [&](Value q0, Value stage, ValueRange carried) {
    // Columns are queries here: (row key, column query).
    SmallVector<Tile> p = w.zeroTiles(queryBlock / 8);
    columns.multiplyRows(keys.get(), 0, q0, stage, p);
    SmallVector<Tile> ds = w.zeroTiles(queryBlock / 8);
    columns.multiplyRows(values.get(), 1, q0, stage, ds);
    w.keyBlockGrads(q0, p, ds);
    SmallVector<Tile> dk = tilesOf(carried.take_front(keyTiles * 4));
    SmallVector<Tile> dv = tilesOf(carried.drop_front(keyTiles * 4));
    columns.multiplyColumns(p, 1, q0, stage, dv);
    columns.multiplyColumns(ds, 0, q0, stage, dk);
    SmallVector<Value> next = flat(dk);
    llvm::append_range(next, flat(dv));
    return next;
  });
  ValueRange results = loop.getResults();
  auto same = [](Value x, int64_t) { return x; };
  w.storeRows(spec.outputs[1], tilesOf(results.take_front(keyTiles * 4)), same);
  w.storeRows(spec.outputs[2], tilesOf(results.drop_front(keyTiles * 4)), same);
}

/// The operands of `kernel` by its mark, or failure (with an error).
FailureOr<AttentionSpec> readSpec(func::FuncOp kernel, DictionaryAttr mark) {
  // The launches take buffers (a kernel on tensors, from loom-opt, had been
  // told its arguments "do not match the mark").
  if (failed(loom::requireBufferized(kernel, "loom-build-gpu-attention")))
    return failure();
  auto position = [&](StringRef name) -> int64_t {
    auto attr = mark.getAs<IntegerAttr>(name);
    return attr ? attr.getInt() : -1;
  };
  // The outputs follow the inputs; plan scratch (the CPU lowering's block
  // buffers) is unused, but for one f32 buffer the backward keeps the rows'
  // log-sum-exp and softmax gradient sums in between its two launches.
  SmallVector<Value> buffers;
  SmallVector<Value> scratch;
  for (BlockArgument argument : kernel.getArguments())
    (kernel.getArgAttr(argument.getArgNumber(), loom::attr::kScratch) ? scratch : buffers)
        .push_back(argument);
  bool backward = mark.contains("result_grad");
  int64_t inputs = position("inputs");
  // A forward's outputs: the result and, where autodiff asked for it, the
  // rows' log-sum-exp.
  int64_t outputs = static_cast<int64_t>(buffers.size()) - inputs;
  SmallVector<int64_t> positions{position("query"), position("key"), position("value")};
  if (backward)
    positions.append({position("output"), position("lse"), position("result_grad")});
  if (inputs < 0 || (backward ? outputs != 3 : outputs != 1 && outputs != 2) ||
      llvm::any_of(positions, [&](int64_t i) { return i < 0 || i >= inputs; }))
    return kernel.emitError("loom.gpu_attention: the kernel's arguments do not "
                            "match the mark"),
           failure();
  AttentionSpec spec;
  spec.query = buffers[positions[0]];
  spec.key = buffers[positions[1]];
  spec.value = buffers[positions[2]];
  if (backward) {
    spec.output = buffers[positions[3]];
    spec.lse = buffers[positions[4]];
    spec.resultGrad = buffers[positions[5]];
  }
  spec.outputs.assign(buffers.begin() + inputs, buffers.end());
  if (!backward && outputs == 2)
    spec.lse = spec.outputs.pop_back_val();
  auto typeOf = [](Value v) { return dyn_cast_or_null<MemRefType>(v.getType()); };
  MemRefType q = typeOf(spec.query), k = typeOf(spec.key), v = typeOf(spec.value);
  SmallVector<Value> all{spec.query, spec.key, spec.value};
  if (backward)
    all.append({spec.output, spec.resultGrad});
  all.append(spec.outputs);
  if (!q || q.getRank() < 2 || llvm::any_of(all, [&](Value value) {
        MemRefType type = typeOf(value);
        return !type || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
               type.getRank() != q.getRank() || type.getElementType() != q.getElementType();
      }))
    return kernel.emitError("loom.gpu_attention: its buffers must be contiguous "
                            "buffers of one rank and type"),
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
  auto tensorOf = [&](Value value) {
    MemRefType type = typeOf(value);
    return RankedTensorType::get(type.getShape(), type.getElementType());
  };
  // Forward: the output is [b..., queries, value features]; backward: the
  // result's gradient is, and the gradients have their operands' shapes.
  SmallVector<int64_t> outputShape(q.getShape());
  outputShape.back() = spec.valueFeatures;
  auto shapeOf = [&](Value value) { return typeOf(value).getShape(); };
  bool shapes =
      loom::gpuRunsAttention(tensorOf(spec.query), tensorOf(spec.key), tensorOf(spec.value),
                             Float32Type::get(kernel.getContext())) &&
      k.getShape().back() == spec.features && v.getShape()[rows] == spec.keys &&
      k.getShape().take_front(rows) == q.getShape().take_front(rows) &&
      v.getShape().take_front(rows) == q.getShape().take_front(rows);
  if (backward)
    shapes = shapes && shapeOf(spec.resultGrad) == ArrayRef<int64_t>(outputShape) &&
             shapeOf(spec.output) == ArrayRef<int64_t>(outputShape) &&
             shapeOf(spec.outputs[0]) == q.getShape() &&
             shapeOf(spec.outputs[1]) == k.getShape() &&
             shapeOf(spec.outputs[2]) == v.getShape();
  else
    shapes = shapes && shapeOf(spec.outputs[0]) == ArrayRef<int64_t>(outputShape);
  if (!shapes)
    return kernel.emitError("loom.gpu_attention: shapes the GPU attention "
                            "kernel does not run"),
           failure();
  // The rows' log-sum-exp: f32 [b..., queries], contiguous.
  if (spec.lse) {
    MemRefType lse = typeOf(spec.lse);
    if (!lse || !lse.getElementType().isF32() || !lse.getLayout().isIdentity() ||
        lse.getShape() != q.getShape().drop_back())
      return kernel.emitError("loom.gpu_attention: the rows' log-sum-exp must be "
                              "a contiguous f32 buffer of the queries' rows"),
             failure();
  }
  if (backward) {
    // The largest f32 scratch buffer (the CPU's widened operands are each
    // at least 16 x batch x queries) holds the 2 x batch x queries.
    Value largest;
    for (Value buffer : scratch) {
      MemRefType type = typeOf(buffer);
      if (type && type.hasStaticShape() && type.getLayout().isIdentity() &&
          type.getElementType().isF32() &&
          (!largest || type.getNumElements() > typeOf(largest).getNumElements()))
        largest = buffer;
    }
    if (!largest || typeOf(largest).getNumElements() < 2 * spec.batch * spec.queries)
      return kernel.emitError("loom.gpu_attention: no f32 scratch buffer of "
                              "2 x batch x queries for the backward's statistics"),
             failure();
    spec.statistics = largest;
  }
  return spec;
}

/// One launch of blocks of 4 warps over `rows` (queries or keys) of every
/// batch entry, the block's 64 rows in y (the last first, with `lastFirst`:
/// causal query blocks have the most keys), batch entries in x (up to
/// 2^31 - 1 of them); `body` builds a warp's work.
void launchWarps(OpBuilder &b, Location loc, const AttentionSpec &spec, int64_t rows,
                 bool lastFirst, function_ref<void(Warp &)> body,
                 TypeRange workgroup = {}) {
  loom::IndexMath im{loc};
  int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  auto launch = gpu::LaunchOp::create(b, loc, im.cst(b, spec.batch), im.cst(b, blocks),
                                      im.cst(b, 1), im.cst(b, 32 * kWarps), im.cst(b, 1),
                                      im.cst(b, 1), Value(), Type(), ValueRange(), workgroup);
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value warp = im.divc(k, tid, 32), lane = im.remc(k, tid, 32);
  Value block = launch.getBlockIds().y;
  if (lastFirst)
    block = arith::SubIOp::create(k, loc, im.cst(k, blocks - 1), block);
  Value rowBase = im.add(k, im.mulc(k, block, kRowsPerBlock), im.mulc(k, warp, kRowsPerWarp));
  SmallVector<Value> batchIndices;
  ArrayRef<int64_t> shape = cast<MemRefType>(spec.query.getType()).getShape();
  Value rest = launch.getBlockIds().x;
  for (int64_t size : llvm::reverse(shape.drop_back(2))) {
    batchIndices.insert(batchIndices.begin(), im.remc(k, rest, size));
    rest = im.divc(k, rest, size);
  }
  auto buildWarp = [&](OpBuilder &builder) {
    Value g = im.divc(builder, lane, 4), t = im.remc(builder, lane, 4);
    Warp w{builder, loc, im, spec, batchIndices, launch.getBlockIds().x,
           g, t, im.mulc(builder, t, 2), rowBase, tid, lane,
           SmallVector<Value>(launch.getWorkgroupAttributions())};
    body(w);
  };
  if (rows % kRowsPerBlock == 0) {
    buildWarp(k);
  } else {
    // The last block's warps past the rows have nothing to do (the rows are
    // a multiple of a warp's 16; a launch with shared memory, whose warps
    // meet at barriers, has whole blocks).
    scf::IfOp::create(k, loc, im.below(k, rowBase, rows), [&](OpBuilder &then, Location l) {
      buildWarp(then);
      scf::YieldOp::create(then, l);
    });
  }
  gpu::TerminatorOp::create(k, loc);
  loom::sinkViewsIntoLaunch(launch);
}

/// The block of `rows` (keys or queries) a warp multiplies at once: the
/// largest of 64, 32 and 16 dividing `rows` and at most `most`.
int64_t columnBlock(int64_t rows, int64_t most) {
  for (int64_t block : {64, 32})
    if (block <= most && rows % block == 0)
      return block;
  return 16;
}

/// The workgroup buffers that stage `columns` (pairs of an operand and
/// its width) in blocks of `block` for a launch over `rows`, or none where
/// staging does not apply: blocks of 64 rows must be whole (the warps meet
/// at barriers), every thread must make the same number of 16-byte copies,
/// the operands' rows must be 16-byte aligned, and the two stages of every
/// operand must fit `limit` bytes (at most the 48 KiB of static shared
/// memory).
SmallVector<Type> stagingBuffers(const AttentionSpec &spec, int64_t rows, int64_t block,
                                 ArrayRef<std::pair<Value, int64_t>> columns, int64_t limit) {
  int64_t threads = 32 * kWarps, bytes = spec.element.getIntOrFloatBitWidth() / 8;
  int64_t total = 0;
  bool fits = rows % kRowsPerBlock == 0;
  for (auto [operand, width] : columns) {
    fits = fits && block * width / Columns::kChunk % threads == 0 &&
           loom::isAlignedRun(operand, Columns::kChunk);
    total += 2 * block * width * bytes;
  }
  SmallVector<Type> types;
  if (!fits || total > std::min<int64_t>(48 * 1024, limit))
    return types;
  MLIRContext *context = spec.element.getContext();
  for (auto [operand, width] : columns)
    types.push_back(MemRefType::get(
        {2, block, width}, spec.element, MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup)));
  return types;
}

/// Replaces `kernel`'s body by the attention launches (their column
/// operands staged in at most `stagingBytes` of shared memory where
/// stagingBuffers allows); with `warpgroupSharedBytes`, the forward on
/// wgmma in that much dynamic shared memory where its shapes allow.
LogicalResult buildAttentionKernel(func::FuncOp kernel, DictionaryAttr mark,
                                   int64_t stagingBytes, int64_t warpgroupSharedBytes) {
  FailureOr<AttentionSpec> read = readSpec(kernel, mark);
  if (failed(read))
    return failure();
  AttentionSpec &spec = *read;
  Block &body = kernel.front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
    op.dropAllUses();
    op.erase();
  }
  Location loc = kernel.getLoc();
  OpBuilder b = OpBuilder::atBlockEnd(&body);
  // sm_90a: the forward on wgmma where its shapes allow (the backward's
  // launches below too).
  // The rows' log-sum-exp and the backward's dots are read and written
  // flat, at batch entry x queries + query.
  auto flatten = [&](Value buffer) -> Value {
    ReassociationIndices all;
    for (int64_t d = 0; d < cast<MemRefType>(buffer.getType()).getRank(); ++d)
      all.push_back(d);
    return memref::CollapseShapeOp::create(b, loc, buffer, ArrayRef<ReassociationIndices>{all});
  };
  if (spec.lse)
    spec.lse = flatten(spec.lse);
  if (!spec.backward() && warpgroupSharedBytes > 0 &&
      buildWarpgroupAttention(b, loc, spec, warpgroupSharedBytes)) {
    func::ReturnOp::create(b, loc);
    return success();
  }
  if (!spec.backward()) {
    // With more than 64 features, blocks of 32 keys keep the warp's
    // registers (queries, scores, outputs) under the 255 a thread may have.
    int64_t most = std::max(spec.features, spec.valueFeatures) > 64 ? 32 : 64;
    int64_t keyBlock = columnBlock(spec.keys, most);
    SmallVector<Type> staging;
    if (stagingBytes > 0)
      staging = stagingBuffers(spec, spec.queries, keyBlock,
                               {{spec.key, spec.features}, {spec.value, spec.valueFeatures}}, stagingBytes);
    launchWarps(
        b, loc, spec, spec.queries, spec.causal,
        [&](Warp &w) { buildForwardWarp(w, keyBlock, !staging.empty()); }, staging);
  } else {
    spec.statistics = flatten(spec.statistics);
    // The query side first: its statistics are the key side's inputs.
    // Registers: the query side holds the queries' and dO's fragments, dq
    // and two column blocks (scores, dp); the key side the keys' and
    // values' fragments, dk, dv and two column blocks: blocks of 64 with
    // up to 32 features, else of 32 (no spills up to 64 features, ptxas).
    // Past 64 the fragments are reloaded (RowOperand) and both sides take
    // blocks of 16: heads of 128 then run without spills at 255 registers
    // (the query side's blocks of 32 spilled 32 bytes once its pass formed
    // p from the log-sum-exp).
    int64_t most = std::max(spec.features, spec.valueFeatures) > 32 ? 32 : 64;
    int64_t keyBlock = columnBlock(spec.keys, reloadsRows(spec) ? 16 : most);
    int64_t queryBlock = columnBlock(spec.queries, reloadsRows(spec) ? 16 : most);
    SmallVector<Type> keysStaged, queriesStaged;
    if (stagingBytes > 0) {
      keysStaged = stagingBuffers(spec, spec.queries, keyBlock,
                                  {{spec.key, spec.features}, {spec.value, spec.valueFeatures}}, stagingBytes);
      queriesStaged =
          stagingBuffers(spec, spec.keys, queryBlock,
                         {{spec.query, spec.features}, {spec.resultGrad, spec.valueFeatures}}, stagingBytes);
    }
    // Either side on wgmma where its shapes allow (sm_90a).
    bool warpgroup = warpgroupSharedBytes > 0;
    if (!warpgroup || !buildWarpgroupQueryGrad(b, loc, spec, warpgroupSharedBytes))
      launchWarps(
          b, loc, spec, spec.queries, spec.causal,
          [&](Warp &w) { buildQueryGradWarp(w, keyBlock, !keysStaged.empty()); }, keysStaged);
    if (!warpgroup || !buildWarpgroupKeyGrad(b, loc, spec, warpgroupSharedBytes))
      launchWarps(
          b, loc, spec, spec.keys, /*lastFirst=*/false,
          [&](Warp &w) { buildKeyGradWarp(w, queryBlock, !queriesStaged.empty()); },
          queriesStaged);
  }
  func::ReturnOp::create(b, loc);
  return success();
}

struct LoomBuildGpuAttention
    : public loom::impl::LoomBuildGpuAttentionBase<LoomBuildGpuAttention> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp kernel = getOperation();
    auto mark = kernel->getAttrOfType<DictionaryAttr>(loom::attr::kGpuAttention);
    if (mark && failed(buildAttentionKernel(kernel, mark, stageOperands ? stagingShared : 0,
                                            warpgroupMma ? sharedPerBlock : 0)))
      signalPassFailure();
  }
};
} // namespace
