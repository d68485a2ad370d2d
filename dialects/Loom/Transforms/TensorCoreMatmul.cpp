//===- TensorCoreMatmul.cpp - 16-bit matmuls on mma.sync tensor cores -----===//
//
// A block of warps computes a block tile of the output (64 x 64 with 4
// warps, 128 x 64 with 4 or 128 x 128 with 8, chosen per shape by
// chooseTensorCoreTile): each warp a 32 x 32 or 64 x 32 part, as 16 x 8
// tiles of `mma.sync.m16n8k16` with f32 accumulators in registers. The
// block walks K in steps of 32, staging A (blockM x 32) and B (32 x blockN)
// in shared memory, zero-filled outside the operands so that any shape
// works; the fragments are read from shared memory in the register
// layout the PTX ISA specifies for m16n8k16 ("Matrix Fragments for
// mma.m16n8k16 with floating point type"): with g = lane / 4 and
// t = lane % 4, A's registers hold rows g and g + 8, columns 2t, 2t + 1 and
// 2t + 8, 2t + 9; B's hold rows (k) 2t, 2t + 1 and 2t + 8, 2t + 9 of column
// g; the accumulators rows g and g + 8, columns 2t and 2t + 1.
//
//===----------------------------------------------------------------------===//

#include "Loom/Transforms/GpuMatmul.h"
#include "Loom/Transforms/MatmulLike.h"
#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

using namespace mlir;

namespace {
// Shared-memory rows are padded so that the fragment reads of one warp
// spread over more banks.
constexpr int64_t kPadA = 8, kPadB = 8;
constexpr int64_t kBlockK = 32;

/// The candidate block tiles, largest first: a block of warpsM x warpsN
/// warps, each computing (blockM / warpsM) x (blockN / warpsN) as 16 x 8
/// mma tiles. Every candidate keeps 32 or 64 f32 accumulators per thread.
constexpr loom::TensorCoreTile kCandidates[] = {
    {128, 128, 2, 4}, // 8 warps of 64 x 32
    {128, 64, 2, 2},  // 4 warps of 64 x 32
    {64, 64, 2, 2},   // 4 warps of 32 x 32
};
} // namespace

int64_t loom::TensorCoreTile::sharedBytes(int64_t elementBytes) const {
  return (blockM * (kBlockK + kPadA) + kBlockK * (blockN + kPadB)) * elementBytes;
}

loom::TensorCoreTile loom::chooseTensorCoreTile(int64_t m, int64_t n,
                                                int64_t batches,
                                                int64_t multiprocessors) {
  // The largest tile that still gives every multiprocessor a block (one
  // full wave) and wastes at most a quarter of its work on padding past
  // the matrix edge; the smallest tile otherwise. Bigger tiles read each
  // operand element from global memory fewer times (M*N*K/blockN +
  // M*N*K/blockM elements in all), smaller ones spread small matmuls over
  // more multiprocessors.
  for (const TensorCoreTile &tile : kCandidates) {
    int64_t rows = (m + tile.blockM - 1) / tile.blockM;
    int64_t cols = (n + tile.blockN - 1) / tile.blockN;
    int64_t blocks = rows * cols * batches;
    double useful = double(m * n) / double(rows * tile.blockM * cols * tile.blockN);
    if (blocks >= multiprocessors && useful >= 0.75)
      return tile;
  }
  return kCandidates[std::size(kCandidates) - 1];
}

bool loom::isTensorCoreMatmul(linalg::GenericOp op) {
  if (!isMatmulLike(op) || op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return false;
  auto element = [](Value v) {
    return cast<ShapedType>(v.getType()).getElementType();
  };
  Type a = element(op.getDpsInputs()[0]), b = element(op.getDpsInputs()[1]);
  if (a != b || !(a.isBF16() || a.isF16()) || !element(op.getDpsInits()[0]).isF32())
    return false;
  // The body must be exactly acc + extf(a) * extf(b).
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 5)
    return false;
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value acc = body.getArgument(2);
  Value product = add.getLhs() == acc   ? add.getRhs()
                  : add.getRhs() == acc ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  auto extOf = [&](Value v, unsigned arg) {
    auto ext = v.getDefiningOp<arith::ExtFOp>();
    return ext && ext.getIn() == body.getArgument(arg);
  };
  return (extOf(mul.getLhs(), 0) && extOf(mul.getRhs(), 1)) ||
         (extOf(mul.getLhs(), 1) && extOf(mul.getRhs(), 0));
}

void loom::buildTensorCoreMatmul(linalg::GenericOp op, int64_t multiprocessors) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *context = b.getContext();
  loom::GpuMatmul mm(op);
  int64_t M = mm.m, N = mm.n, K = mm.k, batches = mm.batches;
  Value a = mm.a, bMat = mm.b, c = mm.c;
  Type element = cast<MemRefType>(a.getType()).getElementType();
  Type f32 = b.getF32Type(), i16 = b.getI16Type(), i32 = b.getI32Type();
  TensorCoreTile tile = chooseTensorCoreTile(M, N, batches, multiprocessors);
  const int64_t kBlockM = tile.blockM, kBlockN = tile.blockN;
  const int64_t kWarpM = tile.blockM / tile.warpsM;
  const int64_t kWarpN = tile.blockN / tile.warpsN;
  const int64_t kThreads = 32 * tile.warpsM * tile.warpsN;
  const int64_t kTilesM = kWarpM / 16, kTilesN = kWarpN / 8;

  auto cst = [&](OpBuilder &builder, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, v);
  };
  auto workgroup = gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup);
  auto aTileType = MemRefType::get({kBlockM, kBlockK + kPadA}, element,
                                   MemRefLayoutAttrInterface(), workgroup);
  auto bTileType = MemRefType::get({kBlockK, kBlockN + kPadB}, element,
                                   MemRefLayoutAttrInterface(), workgroup);
  auto launch = gpu::LaunchOp::create(
      b, loc, cst(b, (N + kBlockN - 1) / kBlockN),
      cst(b, (M + kBlockM - 1) / kBlockM), cst(b, batches), cst(b, kThreads),
      cst(b, 1), cst(b, 1), Value(), Type(), ValueRange(),
      TypeRange{aTileType, bTileType});
  Value aTile = launch.getWorkgroupAttributions()[0];
  Value bTile = launch.getWorkgroupAttributions()[1];

  OpBuilder k(launch.getBody());
  k.setInsertionPointToStart(&launch.getBody().front());
  auto add = [&](OpBuilder &builder, Value x, Value y) -> Value {
    return arith::AddIOp::create(builder, loc, x, y);
  };
  auto addc = [&](OpBuilder &builder, Value x, int64_t y) -> Value {
    return y ? add(builder, x, cst(builder, y)) : x;
  };
  auto mulc = [&](OpBuilder &builder, Value x, int64_t y) -> Value {
    return arith::MulIOp::create(builder, loc, x, cst(builder, y));
  };
  auto divc = [&](OpBuilder &builder, Value x, int64_t y) -> Value {
    return arith::DivUIOp::create(builder, loc, x, cst(builder, y));
  };
  auto remc = [&](OpBuilder &builder, Value x, int64_t y) -> Value {
    return arith::RemUIOp::create(builder, loc, x, cst(builder, y));
  };
  auto below = [&](OpBuilder &builder, Value v, int64_t bound) -> Value {
    return arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ult, v,
                                 cst(builder, bound));
  };
  auto both = [&](OpBuilder &builder, Value x, Value y) -> Value {
    return arith::AndIOp::create(builder, loc, x, y);
  };

  Value tid = launch.getThreadIds().x;
  Value warp = divc(k, tid, 32), lane = remc(k, tid, 32);
  Value g = divc(k, lane, 4), t = remc(k, lane, 4);
  Value warpRow = mulc(k, divc(k, warp, tile.warpsN), kWarpM);
  Value warpCol = mulc(k, remc(k, warp, tile.warpsN), kWarpN);
  Value row0 = mulc(k, launch.getBlockIds().y, kBlockM);
  Value col0 = mulc(k, launch.getBlockIds().x, kBlockN);
  mm.setBatchFromBlock(k, loc, launch.getBlockIds().z);
  auto indices = [&](OpBuilder &builder, unsigned which, Value m, Value n,
                     Value kk) { return mm.indices(builder, loc, which, m, n, kk); };
  Value zero = cst(k, 0);

  // Where accumulator e (0..3) of tile (mi, ni) of this thread lives.
  auto accRow = [&](OpBuilder &builder, int64_t mi, int64_t e) {
    return addc(builder, add(builder, row0, add(builder, warpRow, g)),
                mi * 16 + (e >= 2 ? 8 : 0));
  };
  auto accCol = [&](OpBuilder &builder, int64_t ni, int64_t e) {
    return addc(builder,
                add(builder, col0, add(builder, warpCol, mulc(builder, t, 2))),
                ni * 8 + (e & 1));
  };
  // The accumulators start from C (the generic's init).
  SmallVector<Value> inits;
  for (int64_t mi = 0; mi < kTilesM; ++mi)
    for (int64_t ni = 0; ni < kTilesN; ++ni)
      for (int64_t e = 0; e < 4; ++e) {
        Value r = accRow(k, mi, e), col = accCol(k, ni, e);
        Value inside = both(k, below(k, r, M), below(k, col, N));
        inits.push_back(
            scf::IfOp::create(
                k, loc, inside,
                [&](OpBuilder &then, Location l) {
                  Value v = memref::LoadOp::create(
                      then, l, c, indices(then, 2, r, col, zero));
                  scf::YieldOp::create(then, l, v);
                },
                [&](OpBuilder &otherwise, Location l) {
                  scf::YieldOp::create(
                      otherwise, l,
                      ValueRange{arith::ConstantOp::create(
                          otherwise, l, otherwise.getZeroAttr(f32))});
                })
                .getResult(0));
      }

  auto kLoop = scf::ForOp::create(k, loc, zero, cst(k, K), cst(k, kBlockK), inits);
  OpBuilder l = OpBuilder::atBlockBegin(kLoop.getBody());
  Value k0 = kLoop.getInductionVar();
  // Stage the tiles: each thread copies 16 elements of each, zero outside.
  auto stage = [&](Value buffer, Value source, unsigned which, int64_t rows,
                   int64_t cols, bool isA) {
    for (int64_t i = 0; i < rows * cols / kThreads; ++i) {
      Value index = addc(l, tid, i * kThreads);
      Value r = divc(l, index, cols), col = remc(l, index, cols);
      Value m = isA ? add(l, row0, r) : zero;
      Value n = isA ? zero : add(l, col0, col);
      Value kk = add(l, k0, isA ? col : r);
      Value inside = isA ? both(l, below(l, m, M), below(l, kk, K))
                         : both(l, below(l, n, N), below(l, kk, K));
      Value v = scf::IfOp::create(
                    l, loc, inside,
                    [&](OpBuilder &then, Location tl) {
                      scf::YieldOp::create(
                          then, tl,
                          ValueRange{memref::LoadOp::create(
                              then, tl, source, indices(then, which, m, n, kk))});
                    },
                    [&](OpBuilder &otherwise, Location tl) {
                      scf::YieldOp::create(
                          otherwise, tl,
                          ValueRange{arith::ConstantOp::create(
                              otherwise, tl, otherwise.getZeroAttr(element))});
                    })
                    .getResult(0);
      memref::StoreOp::create(l, loc, v, buffer, ValueRange{r, col});
    }
  };
  stage(aTile, a, 0, kBlockM, kBlockK, /*isA=*/true);
  stage(bTile, bMat, 1, kBlockK, kBlockN, /*isA=*/false);
  gpu::BarrierOp::create(l, loc);

  // Two 16-bit elements in one 32-bit register, the first in the low half:
  // an i32 for bf16, a vector<2xf16> for f16 (what nvvm.mma.sync takes).
  auto pack = [&](Value lo, Value hi) -> Value {
    auto bits = [&](Value v) -> Value {
      return arith::ExtUIOp::create(
          l, loc, i32, arith::BitcastOp::create(l, loc, i16, v));
    };
    Value high = arith::ShLIOp::create(
        l, loc, bits(hi),
        arith::ConstantOp::create(l, loc, l.getI32IntegerAttr(16)));
    Value packed = arith::OrIOp::create(l, loc, bits(lo), high);
    if (element.isBF16())
      return packed;
    return LLVM::BitcastOp::create(l, loc, VectorType::get({2}, element), packed);
  };
  auto loadA = [&](Value r, Value col) {
    return memref::LoadOp::create(l, loc, aTile, ValueRange{r, col}).getResult();
  };
  auto loadB = [&](Value r, Value col) {
    return memref::LoadOp::create(l, loc, bTile, ValueRange{r, col}).getResult();
  };
  Value t2 = mulc(l, t, 2);
  auto structType = LLVM::LLVMStructType::getLiteral(context, {f32, f32, f32, f32});
  NVVM::MMATypes ptxType =
      element.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  SmallVector<Value> accs(kLoop.getRegionIterArgs());
  for (int64_t kk = 0; kk < kBlockK; kk += 16) {
    SmallVector<SmallVector<Value, 4>> aFrags, bFrags;
    for (int64_t mi = 0; mi < kTilesM; ++mi) {
      Value r = addc(l, add(l, warpRow, g), mi * 16);
      Value r8 = addc(l, r, 8);
      Value c0 = addc(l, t2, kk), c8 = addc(l, t2, kk + 8);
      aFrags.push_back({pack(loadA(r, c0), loadA(r, addc(l, c0, 1))),
                        pack(loadA(r8, c0), loadA(r8, addc(l, c0, 1))),
                        pack(loadA(r, c8), loadA(r, addc(l, c8, 1))),
                        pack(loadA(r8, c8), loadA(r8, addc(l, c8, 1)))});
    }
    for (int64_t ni = 0; ni < kTilesN; ++ni) {
      Value col = addc(l, add(l, warpCol, g), ni * 8);
      Value k0r = addc(l, t2, kk), k8r = addc(l, t2, kk + 8);
      bFrags.push_back({pack(loadB(k0r, col), loadB(addc(l, k0r, 1), col)),
                        pack(loadB(k8r, col), loadB(addc(l, k8r, 1), col))});
    }
    for (int64_t mi = 0; mi < kTilesM; ++mi)
      for (int64_t ni = 0; ni < kTilesN; ++ni) {
        int64_t base = (mi * kTilesN + ni) * 4;
        SmallVector<Value> cFrag(accs.begin() + base, accs.begin() + base + 4);
        auto mma = NVVM::MmaOp::create(
            l, loc, structType, aFrags[mi], bFrags[ni], cFrag, {16, 8, 16},
            std::nullopt, std::nullopt,
            std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
            std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                           NVVM::MMALayout::col});
        for (int64_t e = 0; e < 4; ++e)
          accs[base + e] = LLVM::ExtractValueOp::create(l, loc, mma, e);
      }
  }
  // Everyone is done with the tiles before they are overwritten.
  gpu::BarrierOp::create(l, loc);
  scf::YieldOp::create(l, loc, accs);

  for (int64_t mi = 0; mi < kTilesM; ++mi)
    for (int64_t ni = 0; ni < kTilesN; ++ni)
      for (int64_t e = 0; e < 4; ++e) {
        Value r = accRow(k, mi, e), col = accCol(k, ni, e);
        Value inside = both(k, below(k, r, M), below(k, col, N));
        Value v = kLoop.getResult((mi * kTilesN + ni) * 4 + e);
        scf::IfOp::create(k, loc, inside, [&](OpBuilder &then, Location tl) {
          memref::StoreOp::create(then, tl, v, c, indices(then, 2, r, col, zero));
          scf::YieldOp::create(then, tl);
        });
      }
  gpu::TerminatorOp::create(k, loc);
  op.erase();
  loom::sinkViewsIntoLaunch(launch);
}
