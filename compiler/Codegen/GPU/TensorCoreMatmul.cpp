//===- TensorCoreMatmul.cpp - 16-bit matmuls on mma.sync tensor cores -----===//
//
// A block of warps computes a block tile of the output (64 x 64 with 4
// warps, 128 x 64 with 4 or 128 x 128 with 8, chosen per shape by
// chooseTensorCoreTile): each warp a 32 x 32 or 64 x 32 part, as 16 x 8
// tiles of `mma.sync.m16n8k16` with f32 accumulators in registers
// (TensorCoreKernel). Operands whose rows are 16-byte aligned run the
// cp.async + ldmatrix pipeline of TensorCorePipeline.cpp; any other layout
// runs the general kernel here: the block walks K in steps of 32, staging
// A (blockM x 32) and B (32 x blockN) in shared memory element by element,
// zero-filled outside the operands, and reads the fragments in the register
// layout the PTX ISA specifies for m16n8k16 ("Matrix Fragments for
// mma.m16n8k16 with floating point type"): with g = lane / 4 and
// t = lane % 4, A's registers hold rows g and g + 8, columns 2t, 2t + 1 and
// 2t + 8, 2t + 9; B's hold rows (k) 2t, 2t + 1 and 2t + 8, 2t + 9 of column
// g; the accumulators rows g and g + 8, columns 2t and 2t + 1.
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/Tf32.h"
#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/TensorCoreKernel.h"
#include "Codegen/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace {
/// The candidate block tiles, largest first: a block of warpsM x warpsN
/// warps, each computing (blockM / warpsM) x (blockN / warpsN) as 16 x 8
/// mma tiles. Every candidate keeps 32 or 64 f32 accumulators per thread.
constexpr loom::TensorCoreTile kCandidates[] = {
    {128, 128, 2, 4}, // 8 warps of 64 x 32
    {128, 64, 2, 2},  // 4 warps of 64 x 32
    {64, 64, 2, 2},   // 4 warps of 32 x 32
};
} // namespace

loom::TensorCoreTile loom::chooseTensorCoreTile(int64_t m, int64_t n,
                                                int64_t batches,
                                                int64_t multiprocessors) {
  // The largest tile that still gives every multiprocessor a block (one
  // full wave) and wastes at most a quarter of its work on padding past
  // the matrix edge; the smallest tile otherwise. Bigger tiles read each
  // operand element from global memory fewer times (M*N*K/blockN +
  // M*N*K/blockM elements in all), smaller ones spread small matmuls over
  // more multiprocessors.
  for (const TensorCoreTile &tile : kCandidates)
    if (tileFillsWave(m, n, batches, tile.blockM, tile.blockN, multiprocessors))
      return tile;
  return kCandidates[std::size(kCandidates) - 1];
}

namespace {
// Shared-memory rows are padded so that the fragment reads of one warp
// spread over more banks.
constexpr int64_t kPadA = 8, kPadB = 8;
constexpr int64_t kBlockK = 32;

/// The general kernel: element-by-element staging, any operand layout.
void buildStagedTensorCoreMatmul(linalg::GenericOp op, loom::TensorCoreTile tile) {
  MLIRContext *context = op.getContext();
  Type element = cast<MemRefType>(op.getDpsInputs()[0].getType()).getElementType();
  auto workgroup = gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup);
  auto aTileType = MemRefType::get({tile.blockM, kBlockK + kPadA}, element,
                                   MemRefLayoutAttrInterface(), workgroup);
  auto bTileType = MemRefType::get({kBlockK, tile.blockN + kPadB}, element,
                                   MemRefLayoutAttrInterface(), workgroup);
  loom::TensorCoreKernel kernel(op, tile, {aTileType, bTileType});
  // The kernel's view of the operands: it knows the block's batch indices.
  const loom::GpuMatmul &mm = kernel.mm;
  const loom::IndexMath &im = kernel.im;
  Location loc = kernel.loc;
  OpBuilder &k = kernel.k;
  Value aTile = kernel.workgroupBuffer(0), bTile = kernel.workgroupBuffer(1);
  int64_t M = mm.m, N = mm.n, K = mm.k;
  Value zero = im.cst(k, 0);

  auto kLoop = scf::ForOp::create(k, loc, zero, im.cst(k, K), im.cst(k, kBlockK),
                                  kernel.loadAccumulators());
  OpBuilder l = OpBuilder::atBlockBegin(kLoop.getBody());
  Value k0 = kLoop.getInductionVar();
  // Stage the tiles: each thread copies 16 elements of each, zero outside.
  auto stage = [&](Value buffer, Value source, unsigned which, int64_t rows,
                   int64_t cols, bool isA) {
    for (int64_t i = 0; i < rows * cols / kernel.threads; ++i) {
      Value index = im.addc(l, kernel.tid, i * kernel.threads);
      Value r = im.divc(l, index, cols), col = im.remc(l, index, cols);
      Value m = isA ? im.add(l, kernel.row0, r) : zero;
      Value n = isA ? zero : im.add(l, kernel.col0, col);
      Value kk = im.add(l, k0, isA ? col : r);
      Value inside = isA ? im.both(l, im.below(l, m, M), im.below(l, kk, K))
                         : im.both(l, im.below(l, n, N), im.below(l, kk, K));
      Value v = scf::IfOp::create(
                    l, loc, inside,
                    [&](OpBuilder &then, Location tl) {
                      scf::YieldOp::create(
                          then, tl,
                          ValueRange{memref::LoadOp::create(
                              then, tl, source,
                              mm.indices(then, tl, which, m, n, kk))});
                    },
                    [&](OpBuilder &otherwise, Location tl) {
                      scf::YieldOp::create(
                          otherwise, tl,
                          ValueRange{arith::ConstantOp::create(
                              otherwise, tl, otherwise.getZeroAttr(element))});
                    })
                    .getResult(0);
      // tf32 operands are rounded once, here, as the CPU kernels do.
      if (element.isF32())
        v = loom::roundToTf32(l, loc, v);
      memref::StoreOp::create(l, loc, v, buffer, ValueRange{r, col});
    }
  };
  stage(aTile, mm.a, 0, tile.blockM, kBlockK, /*isA=*/true);
  stage(bTile, mm.b, 1, kBlockK, tile.blockN, /*isA=*/false);
  gpu::BarrierOp::create(l, loc);

  auto loadA = [&](Value r, Value col) {
    return memref::LoadOp::create(l, loc, aTile, ValueRange{r, col}).getResult();
  };
  auto loadB = [&](Value r, Value col) {
    return memref::LoadOp::create(l, loc, bTile, ValueRange{r, col}).getResult();
  };
  SmallVector<Value> accs(kLoop.getRegionIterArgs());
  if (element.isF32()) {
    // m16n8k8 tf32: A's registers rows g and g + 8, columns t and t + 4; B's
    // rows t and t + 4 of column g (PTX ISA, "Matrix Fragments for
    // mma.m16n8k8"), each an f32 whose low 13 bits are 0.
    auto bits = [&](Value v) -> Value {
      return arith::BitcastOp::create(l, loc, l.getI32Type(), v);
    };
    for (int64_t kk = 0; kk < kBlockK; kk += 8) {
      SmallVector<SmallVector<Value, 4>> aFrags, bFrags;
      Value c0 = im.addc(l, kernel.t, kk), c4 = im.addc(l, kernel.t, kk + 4);
      for (int64_t mi = 0; mi < kernel.tilesM; ++mi) {
        Value r = im.addc(l, im.add(l, kernel.warpRow, kernel.g), mi * 16);
        Value r8 = im.addc(l, r, 8);
        aFrags.push_back({bits(loadA(r, c0)), bits(loadA(r8, c0)),
                          bits(loadA(r, c4)), bits(loadA(r8, c4))});
      }
      for (int64_t ni = 0; ni < kernel.tilesN; ++ni) {
        Value col = im.addc(l, im.add(l, kernel.warpCol, kernel.g), ni * 8);
        bFrags.push_back({bits(loadB(c0, col)), bits(loadB(c4, col))});
      }
      kernel.multiply(l, aFrags, bFrags, accs);
    }
  } else {
    Value t2 = im.mulc(l, kernel.t, 2);
    for (int64_t kk = 0; kk < kBlockK; kk += 16) {
      SmallVector<SmallVector<Value, 4>> aFrags, bFrags;
      for (int64_t mi = 0; mi < kernel.tilesM; ++mi) {
        Value r = im.addc(l, im.add(l, kernel.warpRow, kernel.g), mi * 16);
        Value r8 = im.addc(l, r, 8);
        Value c0 = im.addc(l, t2, kk), c8 = im.addc(l, t2, kk + 8);
        auto pair = [&](Value row, Value col) {
          return kernel.pack(l, loadA(row, col), loadA(row, im.addc(l, col, 1)));
        };
        aFrags.push_back({pair(r, c0), pair(r8, c0), pair(r, c8), pair(r8, c8)});
      }
      for (int64_t ni = 0; ni < kernel.tilesN; ++ni) {
        Value col = im.addc(l, im.add(l, kernel.warpCol, kernel.g), ni * 8);
        auto pair = [&](Value row) {
          return kernel.pack(l, loadB(row, col), loadB(im.addc(l, row, 1), col));
        };
        bFrags.push_back({pair(im.addc(l, t2, kk)), pair(im.addc(l, t2, kk + 8))});
      }
      kernel.multiply(l, aFrags, bFrags, accs);
    }
  }
  // Everyone is done with the tiles before they are overwritten.
  gpu::BarrierOp::create(l, loc);
  scf::YieldOp::create(l, loc, accs);
  kernel.finish(kLoop.getResults());
}
} // namespace

LogicalResult loom::buildTensorCoreMatmul(linalg::GenericOp op,
                                          const TensorCoreTarget &target) {
  if (target.warpgroupMma &&
      succeeded(buildWarpgroupTensorCoreMatmul(op, target)))
    return success();
  GpuMatmul mm(op);
  TensorCoreTile tile =
      chooseTensorCoreTile(mm.m, mm.n, mm.batches, target.multiprocessors);
  if (succeeded(buildPipelinedTensorCoreMatmul(op, tile, target)))
    return success();
  // One stage of A's and B's tiles, padded, within --gpu-shared-limit: a
  // smaller tile where the chosen one's does not fit, none where no tile's
  // does (a limit below them had been passed over, silently).
  Type element = cast<MemRefType>(op.getDpsInputs()[0].getType()).getElementType();
  auto stagedBytes = [&](const TensorCoreTile &t) {
    return (t.blockM * (kBlockK + kPadA) + kBlockK * (t.blockN + kPadB)) *
           static_cast<int64_t>(element.getIntOrFloatBitWidth() / 8);
  };
  for (const TensorCoreTile &smaller : kCandidates)
    if (smaller.blockM * smaller.blockN <= tile.blockM * tile.blockN &&
        stagedBytes(smaller) <= target.sharedPerBlock) {
      buildStagedTensorCoreMatmul(op, smaller);
      return success();
    }
  return failure();
}

//===----------------------------------------------------------------------===//
// TensorCoreKernel
//===----------------------------------------------------------------------===//

Value loom::IndexMath::cst(OpBuilder &b, int64_t v) const {
  return constantIndex(b, loc, v);
}
Value loom::IndexMath::add(OpBuilder &b, Value x, Value y) const {
  return arith::AddIOp::create(b, loc, x, y);
}
Value loom::IndexMath::addc(OpBuilder &b, Value x, int64_t y) const {
  return y ? add(b, x, cst(b, y)) : x;
}
Value loom::IndexMath::mulc(OpBuilder &b, Value x, int64_t y) const {
  return arith::MulIOp::create(b, loc, x, cst(b, y));
}
Value loom::IndexMath::divc(OpBuilder &b, Value x, int64_t y) const {
  return arith::DivUIOp::create(b, loc, x, cst(b, y));
}
Value loom::IndexMath::remc(OpBuilder &b, Value x, int64_t y) const {
  return arith::RemUIOp::create(b, loc, x, cst(b, y));
}
Value loom::IndexMath::xorv(OpBuilder &b, Value x, Value y) const {
  return arith::XOrIOp::create(b, loc, x, y);
}
Value loom::IndexMath::below(OpBuilder &b, Value x, int64_t bound) const {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, cst(b, bound));
}
Value loom::IndexMath::both(OpBuilder &b, Value x, Value y) const {
  return arith::AndIOp::create(b, loc, x, y);
}

Value loom::swizzleChunk(OpBuilder &b, const IndexMath &im, Value row, Value chunk,
                         int64_t chunksPerRow) {
  // The XOR key must stay below the largest power of two (up to 8) that
  // divides chunksPerRow, so that a chunk never leaves its row: 12 chunks
  // (96 features) take keys of 0-3, not 0-7, which would move chunks 8-11
  // to 12-15.
  Value key;
  if (chunksPerRow % 8 == 0)
    key = im.remc(b, row, 8);
  else if (chunksPerRow % 4 == 0)
    key = im.remc(b, im.divc(b, row, 2), 4);
  else if (chunksPerRow % 2 == 0)
    key = im.remc(b, im.divc(b, row, 4), 2);
  else
    return chunk;
  return im.xorv(b, chunk, key);
}

void loom::loadAhead(
    OpBuilder &b, const IndexMath &im, Value kTile, int64_t stages,
    int64_t kTiles,
    function_ref<void(OpBuilder &, Value stage, Value tile)> load) {
  Value next = im.addc(b, kTile, stages - 1);
  Value more = arith::CmpIOp::create(b, im.loc, arith::CmpIPredicate::ult,
                                     next, im.cst(b, kTiles));
  scf::IfOp::create(b, im.loc, more, [&](OpBuilder &then, Location loc) {
    load(then, im.remc(then, next, stages), next);
    scf::YieldOp::create(then, loc);
  });
}

loom::TensorCoreKernel::TensorCoreKernel(linalg::GenericOp op, TensorCoreTile tile,
                                         TypeRange workgroup,
                                         int64_t dynamicSharedBytes,
                                         int64_t producerThreads,
                                         int64_t persistentBlocks,
                                         int64_t clusterBlocks)
    : op(op), fusion(findTensorCoreFusion(op)), mm(op), tile(tile), loc(op.getLoc()), im{op.getLoc()},
      element(cast<MemRefType>(mm.a.getType()).getElementType()),
      k(op.getContext()), warpM(tile.blockM / tile.warpsM),
      warpN(tile.blockN / tile.warpsN), threads(32 * tile.warpsM * tile.warpsN),
      tilesM(warpM / 16), tilesN(warpN / 8) {
  OpBuilder b(op);
  // The launch stands for every op it absorbed (the kernel report counts
  // the work of each op whose location a launch carries).
  SmallVector<Location> absorbed{loc};
  if (fusion.fill)
    absorbed.push_back(fusion.fill.getLoc());
  if (fusion.epilogue)
    absorbed.push_back(fusion.epilogue.getLoc());
  int64_t gridX = persistentBlocks ? persistentBlocks
                                   : llvm::divideCeil(mm.n, tile.blockN);
  int64_t gridY = persistentBlocks ? 1 : llvm::divideCeil(mm.m, tile.blockM);
  int64_t gridZ = persistentBlocks ? 1 : mm.batches;
  launch = gpu::LaunchOp::create(
      b, absorbed.size() > 1 ? FusedLoc::get(op.getContext(), absorbed) : loc,
      im.cst(b, gridX), im.cst(b, gridY), im.cst(b, gridZ),
      im.cst(b, threads + producerThreads), im.cst(b, 1), im.cst(b, 1),
      dynamicSharedBytes ? arith::ConstantIntOp::create(b, loc, dynamicSharedBytes, 32)
                         : Value(),
      Type(), ValueRange(), workgroup, TypeRange(),
      clusterBlocks ? im.cst(b, clusterBlocks) : Value(),
      clusterBlocks ? im.cst(b, 1) : Value(), clusterBlocks ? im.cst(b, 1) : Value());
  // MLIR 22's gpu.launch builder leaves out the 6 region arguments of a
  // cluster launch (its cluster ids and sizes, after the 12 of blocks and
  // threads), which the parser and the accessors expect.
  if (clusterBlocks)
    for (int i = 0; i < 6; ++i)
      launch.getBody().front().insertArgument(
          gpu::LaunchOp::kNumConfigRegionAttributes + i, b.getIndexType(), loc);
  k.setInsertionPointToStart(&launch.getBody().front());
  shared.assign(launch.getWorkgroupAttributions().begin(),
                launch.getWorkgroupAttributions().end());
  tid = launch.getThreadIds().x;
  warp = im.divc(k, tid, 32);
  lane = im.remc(k, tid, 32);
  g = im.divc(k, lane, 4);
  t = im.remc(k, lane, 4);
  warpRow = im.mulc(k, im.divc(k, warp, tile.warpsN), warpM);
  warpCol = im.mulc(k, im.remc(k, warp, tile.warpsN), warpN);
  if (!persistentBlocks) {
    row0 = im.mulc(k, launch.getBlockIds().y, tile.blockM);
    col0 = im.mulc(k, launch.getBlockIds().x, tile.blockN);
    mm.setBatchFromBlock(k, loc, launch.getBlockIds().z);
  }
  if (dynamicSharedBytes)
    dynamicShared = gpu::DynamicSharedMemoryOp::create(
        k, loc,
        MemRefType::get({ShapedType::kDynamic}, k.getI8Type(),
                        MemRefLayoutAttrInterface(),
                        gpu::AddressSpaceAttr::get(
                            op.getContext(), gpu::AddressSpace::Workgroup)));
}

void loom::TensorCoreKernel::placeTile(OpBuilder &b, Value index) {
  int64_t alongN = llvm::divideCeil(mm.n, tile.blockN),
          alongM = llvm::divideCeil(mm.m, tile.blockM);
  int64_t groupRows = std::min(kGroupRows, alongM), groupTiles = groupRows * alongN;
  Value inBatch = im.remc(b, index, alongM * alongN);
  Value firstRow = im.mulc(b, im.divc(b, inBatch, groupTiles), groupRows);
  // The last group may have fewer rows.
  Value rows = arith::MinSIOp::create(b, loc, im.cst(b, groupRows),
                                      arith::SubIOp::create(b, loc, im.cst(b, alongM), firstRow));
  Value inGroup = im.remc(b, inBatch, groupTiles);
  row0 = im.mulc(b, im.add(b, firstRow, arith::RemSIOp::create(b, loc, inGroup, rows)),
                 tile.blockM);
  col0 = im.mulc(b, arith::DivSIOp::create(b, loc, inGroup, rows), tile.blockN);
  mm.setBatchFromBlock(b, loc, im.divc(b, index, alongM * alongN));
}

// Where accumulator e (0..3) of tile (mi, ni) of this thread lives: rows g
// and g + 8, columns 2t and 2t + 1 of the 16 x 8 tile.
static std::pair<Value, Value> accumulatorAt(loom::TensorCoreKernel &kernel,
                                             int64_t mi, int64_t ni, int64_t e) {
  const loom::IndexMath &im = kernel.im;
  OpBuilder &k = kernel.k;
  Value r = im.addc(k, im.add(k, kernel.row0, im.add(k, kernel.warpRow, kernel.g)),
                    mi * 16 + (e >= 2 ? 8 : 0));
  Value c = im.addc(
      k, im.add(k, kernel.col0, im.add(k, kernel.warpCol, im.mulc(k, kernel.t, 2))),
      ni * 8 + (e & 1));
  return {r, c};
}

SmallVector<Value> loom::TensorCoreKernel::loadAccumulators() {
  Type f32 = k.getF32Type();
  Value zero = im.cst(k, 0);
  if (fusion.fillValue) {
    Value init = arith::ConstantOp::create(k, loc, fusion.fillValue);
    return SmallVector<Value>(tilesM * tilesN * 4, init);
  }
  SmallVector<Value> inits;
  for (int64_t mi = 0; mi < tilesM; ++mi)
    for (int64_t ni = 0; ni < tilesN; ++ni)
      for (int64_t e = 0; e < 4; ++e) {
        auto [row, column] = accumulatorAt(*this, mi, ni, e);
        Value r = row, col = column;
        Value inside = im.both(k, im.below(k, r, mm.m), im.below(k, col, mm.n));
        inits.push_back(
            scf::IfOp::create(
                k, loc, inside,
                [&](OpBuilder &then, Location l) {
                  Value v = memref::LoadOp::create(
                      then, l, mm.c, mm.indices(then, l, 2, r, col, zero));
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
  return inits;
}

Value loom::packPair(OpBuilder &b, Location loc, Type element, Value lo,
                     Value hi) {
  Type i16 = b.getI16Type(), i32 = b.getI32Type();
  auto bits = [&](Value v) -> Value {
    return arith::ExtUIOp::create(b, loc, i32,
                                  arith::BitcastOp::create(b, loc, i16, v));
  };
  Value high = arith::ShLIOp::create(
      b, loc, bits(hi), arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(16)));
  Value packed = arith::OrIOp::create(b, loc, bits(lo), high);
  if (element.isBF16())
    return packed;
  return LLVM::BitcastOp::create(b, loc, VectorType::get({2}, element), packed);
}

Value loom::pairAsRegister(OpBuilder &b, Location loc, Type element, Value pair) {
  // nvvm.mma.sync takes bf16 pairs as i32 and f16 pairs as vector<2xf16>.
  if (element.isBF16())
    return LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair);
  return pair;
}

SmallVector<Value, 4> loom::mmaSync(OpBuilder &builder, Location loc,
                                    Type element, ValueRange a, ValueRange b,
                                    ValueRange c) {
  Type f32 = builder.getF32Type();
  auto structType =
      LLVM::LLVMStructType::getLiteral(builder.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes ptxType = element.isBF16()  ? NVVM::MMATypes::bf16
                           : element.isF16() ? NVVM::MMATypes::f16
                                             : NVVM::MMATypes::tf32;
  // tf32 multiplies 8 of K at a time, the 16-bit types 16.
  std::array<int64_t, 3> shape{16, 8, element.isF32() ? 8 : 16};
  auto mma = NVVM::MmaOp::create(
      builder, loc, structType, a, b, c, shape, std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
  SmallVector<Value, 4> sums;
  for (int64_t e = 0; e < 4; ++e)
    sums.push_back(LLVM::ExtractValueOp::create(builder, loc, mma, e));
  return sums;
}

Value loom::TensorCoreKernel::pack(OpBuilder &b, Value lo, Value hi) {
  return packPair(b, loc, element, lo, hi);
}

Value loom::TensorCoreKernel::asRegister(OpBuilder &b, Value pair) {
  return pairAsRegister(b, loc, element, pair);
}

void loom::TensorCoreKernel::multiply(OpBuilder &b,
                                      ArrayRef<SmallVector<Value, 4>> aFrags,
                                      ArrayRef<SmallVector<Value, 4>> bFrags,
                                      MutableArrayRef<Value> accs) {
  for (int64_t mi = 0; mi < tilesM; ++mi)
    for (int64_t ni = 0; ni < tilesN; ++ni) {
      int64_t base = (mi * tilesN + ni) * 4;
      SmallVector<Value, 4> sums =
          mmaSync(b, loc, element, aFrags[mi], bFrags[ni],
                  ArrayRef<Value>(accs).slice(base, 4));
      llvm::copy(sums, accs.begin() + base);
    }
}

void loom::TensorCoreKernel::writeBack(ValueRange accs) {
  Value zero = im.cst(k, 0);
  // What the kernel writes: C, or the epilogue's outputs. Accumulators 0, 1
  // (and 2, 3) of a tile are columns 2t and 2t + 1 of one row: with N even
  // and every output holding such pairs side by side, one store of two.
  unsigned nDim = mm.batch + 1;
  SmallVector<std::pair<Value, AffineMap>> outputs;
  if (fusion.epilogue) {
    // The epilogue's loops are C's dims: n is the dim C's map puts it in.
    unsigned cDimOfN = *mm.maps[2].getResultPosition(k.getAffineDimExpr(nDim));
    for (OpOperand &init : fusion.epilogue.getDpsInitsMutable())
      outputs.push_back({init.get(), fusion.epilogue.getMatchingIndexingMap(&init)});
    nDim = cDimOfN;
  } else {
    outputs.push_back({mm.c, mm.maps[2]});
  }
  // (Sub-byte elements, i1, are stored one by one: a pair has no byte
  // alignment.)
  bool pairs = mm.n % 2 == 0 && llvm::all_of(outputs, [&](auto &output) {
    return cast<MemRefType>(output.first.getType()).getElementTypeBitWidth() >= 8 &&
           holdsPairsAlongLastDim(output.first, output.second, nDim);
  });
  // The values of C's elements at `at` and `atNext` holding `acc` and
  // `accNext`, as one pair per output.
  auto pairResults = [&](OpBuilder &b, Location l, ValueRange at,
                         ValueRange atNext, Value acc, Value accNext) {
    if (fusion.epilogue)
      return evaluateEpiloguePair(b, l, fusion.epilogue, mm.c, at, atNext,
                                  acc, accNext);
    return SmallVector<Value>{vector::FromElementsOp::create(
        b, l, VectorType::get({2}, acc.getType()), ValueRange{acc, accNext})};
  };
  auto outputIndices = [&](OpBuilder &b, Location l, unsigned i, ValueRange at) {
    if (!fusion.epilogue)
      return SmallVector<Value>(at);
    return epilogueIndices(b, l, fusion.epilogue,
                           fusion.epilogue.getDpsInitsMutable()[i], at);
  };
  // Accumulators e and e + 1 (e even) are columns col and col + 1 of one
  // row, col even: they are evaluated as a pair (the second at column
  // N - 1 when col + 1 = N, so that the epilogue reads nothing outside its
  // inputs), and a 16-bit pair is rounded by one instruction. Rounding an
  // accumulator alone (cvt.rn.bf16.f32) in the block that waits for the
  // wgmmas makes ptxas serialize them (C7514): an odd N (GPT-2's 50257
  // logits), or an epilogue that rounds the product before a bias.
  bool oddN = mm.n % 2 != 0;
  for (int64_t mi = 0; mi < tilesM; ++mi)
    for (int64_t ni = 0; ni < tilesN; ++ni)
      for (int64_t e = 0; e < 4; e += 2) {
        auto [row, column] = accumulatorAt(*this, mi, ni, e);
        Value r = row, col = column;
        Value inside = im.both(k, im.below(k, r, mm.m), im.below(k, col, mm.n));
        Value v = accs[(mi * tilesN + ni) * 4 + e];
        Value vNext = accs[(mi * tilesN + ni) * 4 + e + 1];
        scf::IfOp::create(k, loc, inside, [&](OpBuilder &then, Location tl) {
          SmallVector<Value> at = mm.indices(then, tl, 2, r, col, zero);
          Value colNext = im.addc(then, col, 1);
          Value colRead = oddN ? arith::MinUIOp::create(then, tl, colNext,
                                                        im.cst(then, mm.n - 1))
                               : colNext;
          SmallVector<Value> atNext = mm.indices(then, tl, 2, r, colNext, zero);
          SmallVector<Value> results = pairResults(
              then, tl, at,
              oddN ? mm.indices(then, tl, 2, r, colRead, zero) : atNext, v,
              vNext);
          for (auto [output, result] : llvm::enumerate(results)) {
            unsigned i = output;
            Value pair = result;
            Type element = cast<VectorType>(pair.getType()).getElementType();
            if (pairs) {
              // N is even, so col + 1 < N too, and the pair is aligned to
              // its size (holdsPairsAlongLastDim); said so, it is one 4- or
              // 8-byte store rather than two.
              unsigned bytes = 2 * element.getIntOrFloatBitWidth() / 8;
              vector::StoreOp::create(then, tl, pair, outputs[i].first,
                                      outputIndices(then, tl, i, at),
                                      /*nontemporal=*/false, llvm::Align(bytes));
              continue;
            }
            // LLVM scalarizes a pair whose halves are stored apart.
            if (element.getIntOrFloatBitWidth() == 16)
              pair = keepPairPacked(then, tl, pair);
            auto storeHalf = [&](OpBuilder &sb, Location sl, int64_t half,
                                 ArrayRef<Value> where) {
              Value value = vector::ExtractOp::create(sb, sl, pair, half);
              memref::StoreOp::create(sb, sl, value, outputs[i].first,
                                      outputIndices(sb, sl, i, where));
            };
            storeHalf(then, tl, 0, at);
            if (!oddN) {
              storeHalf(then, tl, 1, atNext);
              continue;
            }
            scf::IfOp::create(then, tl, im.below(then, colNext, mm.n),
                              [&](OpBuilder &last, Location ll) {
                                storeHalf(last, ll, 1, atNext);
                                scf::YieldOp::create(last, ll);
                              });
          }
          scf::YieldOp::create(then, tl);
        });
      }
}

void loom::TensorCoreKernel::close() {
  gpu::TerminatorOp::create(k, loc);
  op.erase();
  if (fusion.fill)
    fusion.fill.erase();
  if (fusion.epilogue)
    fusion.epilogue.erase();
  loom::sinkViewsIntoLaunch(launch);
}
