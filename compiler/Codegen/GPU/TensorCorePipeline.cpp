//===- TensorCorePipeline.cpp - mma.sync matmuls fed by cp.async stages ---===//
//
// The fast tensor-core kernel, for operands whose rows are 16-byte aligned
// (the innermost memref dim is K or M for A and K or N for B, with unit stride,
// and every other stride, the offset and that dim's extent are multiples of
// 8 elements). A and B tiles of K-step 32 or 64 travel from global to
// shared memory as 16-byte `cp.async` copies (`nvgpu.device_async_copy`, L1
// bypassed, zero-filled past the operands' edges), `stages` tiles in
// flight: while the warps multiply tile i, tiles i+1 .. i+stages-1 are
// loading. Fragments come out of shared memory with `ldmatrix.x4`,
// transposed for an operand stored with K as its rows (an M-contiguous A,
// the backward's x^T, or an N-contiguous B). Shared rows are XOR-swizzled by
// 16-byte chunk rather than padded, so that the 8 row addresses of one
// ldmatrix and the copies of one warp hit 8 different bank groups.
// choosePipeline sizes the stages from the spec table's shared memory:
// beyond the 48 KiB of static shared memory a block may have, the stages
// live in dynamic shared memory (the plan's `shared:` launch token).
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/TensorCoreKernel.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// 16-bit elements per 16-byte copy and per ldmatrix row.
constexpr int64_t kChunk = 8;
/// Static shared memory a block may use; more is dynamic, opted into at
/// launch.
constexpr int64_t kStaticSharedLimit = 48 * 1024;
/// More stages than this hide no more latency at these tile sizes.
constexpr int64_t kMaxStages = 4;
/// Warps an SM should hold for the pipeline to hide latency: 2 blocks of 8
/// warps or 4 of 4 (about what 128 registers a thread allow).
constexpr int64_t kWarpsPerSM = 16;

/// The loop dim whose elements are contiguous in operand `which` (0: A,
/// 1: B) if its rows are 16-byte aligned, as the file header defines.
std::optional<unsigned> alignedContiguousDim(const GpuMatmul &mm,
                                             unsigned which) {
  Value operand = which == 0 ? mm.a : mm.b;
  if (cast<MemRefType>(operand.getType()).getElementTypeBitWidth() != 16 ||
      !isAlignedRun(operand, kChunk))
    return std::nullopt;
  auto dim = dyn_cast<AffineDimExpr>(mm.maps[which].getResults().back());
  if (!dim || mm.bounds[dim.getPosition()] % kChunk)
    return std::nullopt;
  return dim.getPosition();
}

/// One operand's stages in shared memory: [stages][rows][cols], rows along
/// M or N (K-contiguous operands) or along K (A stored M-contiguous, B
/// N-contiguous).
struct StagedOperand {
  unsigned which;
  bool kMajor; // rows are K
  int64_t rows, cols;
  int64_t chunksPerRow() const { return cols / kChunk; }
};

} // namespace

namespace {
/// The K step and stage count of a pipeline, and its shared memory.
struct PipelineShape {
  int64_t blockK, stages, bytes;
};

/// The documented heuristic (docs/pipeline.md, "K step and stages"): the
/// shared memory a block may take is what the SM has over the blocks it
/// should hold (kWarpsPerSM), within the block limit of the spec table. A K step of 64 when at least 3
/// such stages fit and K has 4 steps to pipeline (half the barriers and
/// waits per FLOP of 32), else 32 with at least 2; as many stages as fit,
/// at most kMaxStages.
std::optional<PipelineShape> choosePipeline(TensorCoreTile tile, int64_t k,
                                            const TensorCoreTarget &target) {
  int64_t warps = tile.warpsM * tile.warpsN;
  int64_t blocks = std::max<int64_t>(1, kWarpsPerSM / warps);
  int64_t budget = target.sharedBudget(blocks);
  for (int64_t blockK : {64, 32}) {
    int64_t stageBytes = (tile.blockM + tile.blockN) * blockK * 2;
    int64_t stages = std::min(kMaxStages, budget / stageBytes);
    if (blockK == 64 && (stages < 3 || k < 4 * blockK))
      continue;
    if (stages >= 2)
      return PipelineShape{blockK, stages, stages * stageBytes};
  }
  return std::nullopt;
}
} // namespace

LogicalResult loom::buildPipelinedTensorCoreMatmul(linalg::GenericOp op,
                                                   TensorCoreTile tile,
                                                   const TensorCoreTarget &target) {
  // The op's shapes and layouts, looked at before any kernel is built.
  GpuMatmul probe(op);
  unsigned mDim = probe.batch, nDim = mDim + 1, kDim = mDim + 2;
  std::optional<unsigned> aDim = alignedContiguousDim(probe, 0);
  std::optional<unsigned> bDim = alignedContiguousDim(probe, 1);
  if (!aDim || (*aDim != kDim && *aDim != mDim) || !bDim ||
      (*bDim != kDim && *bDim != nDim))
    return failure();
  int64_t threads = 32 * tile.warpsM * tile.warpsN;
  std::optional<PipelineShape> shape = choosePipeline(tile, probe.k, target);
  if (!shape)
    return failure();
  const int64_t blockK = shape->blockK, stages = shape->stages;
  StagedOperand aStage = *aDim == mDim
                             ? StagedOperand{0, true, blockK, tile.blockM}
                             : StagedOperand{0, false, tile.blockM, blockK};
  StagedOperand bStage = *bDim == nDim
                             ? StagedOperand{1, true, blockK, tile.blockN}
                             : StagedOperand{1, false, tile.blockN, blockK};
  for (const StagedOperand &s : {aStage, bStage})
    if ((s.rows * s.chunksPerRow()) % threads)
      return failure();

  Type element = cast<MemRefType>(probe.a.getType()).getElementType();
  auto workgroup = gpu::AddressSpaceAttr::get(op.getContext(),
                                              gpu::AddressSpace::Workgroup);
  auto bufferType = [&](const StagedOperand &s) {
    return MemRefType::get({stages, s.rows, s.cols}, element,
                           MemRefLayoutAttrInterface(), workgroup);
  };
  // Up to 48 KiB as two workgroup buffers; beyond, as views of the launch's
  // dynamic shared memory (A's stages, then B's).
  bool dynamic = shape->bytes > kStaticSharedLimit;
  SmallVector<Type> buffers;
  if (!dynamic)
    buffers = {bufferType(aStage), bufferType(bStage)};
  TensorCoreKernel kernel(op, tile, buffers, dynamic ? shape->bytes : 0);
  // The kernel's own view of the operands knows the block's batch indices.
  const GpuMatmul &mm = kernel.mm;
  const IndexMath &im = kernel.im;
  Location loc = kernel.loc;
  OpBuilder &k = kernel.k;
  if (dynamic) {
    int64_t offset = 0;
    for (const StagedOperand &s : {aStage, bStage}) {
      kernel.shared.push_back(memref::ViewOp::create(
          k, loc, bufferType(s), kernel.dynamicShared, im.cst(k, offset),
          ValueRange{}));
      offset += stages * s.rows * s.cols * 2;
    }
  }
  int64_t M = mm.m, N = mm.n, K = mm.k;
  int64_t kTiles = (K + blockK - 1) / blockK;

  // Issues the copies of K-tile `kTile` into stage `stage`: each thread
  // copies (rows x chunks) / threads chunks, consecutive threads reading
  // consecutive chunks of a row. A chunk past an operand's edge reads
  // nothing (source size 0) from a clamped, valid address and is zero-filled.
  auto issue = [&](OpBuilder &b, const StagedOperand &s, Value stage, Value kTile) {
    Value buffer = kernel.workgroupBuffer(s.which);
    Value source = s.which == 0 ? mm.a : mm.b;
    Value k0 = im.mulc(b, kTile, blockK), zero = im.cst(b, 0);
    int64_t perThread = s.rows * s.chunksPerRow() / threads;
    for (int64_t i = 0; i < perThread; ++i) {
      Value index = im.addc(b, kernel.tid, i * threads);
      Value row = im.divc(b, index, s.chunksPerRow());
      Value chunk = im.remc(b, index, s.chunksPerRow());
      Value along = im.mulc(b, chunk, kChunk);
      Value m = zero, n = zero, kk;
      Value inside;
      if (s.which == 0 && s.kMajor) {
        kk = im.add(b, k0, row);
        m = im.add(b, kernel.row0, along);
        inside = im.both(b, im.below(b, kk, K), im.below(b, m, M));
      } else if (s.which == 0) {
        m = im.add(b, kernel.row0, row);
        kk = im.add(b, k0, along);
        inside = im.both(b, im.below(b, m, M), im.below(b, kk, K));
      } else if (s.kMajor) {
        kk = im.add(b, k0, row);
        n = im.add(b, kernel.col0, along);
        inside = im.both(b, im.below(b, kk, K), im.below(b, n, N));
      } else {
        n = im.add(b, kernel.col0, row);
        kk = im.add(b, k0, along);
        inside = im.both(b, im.below(b, n, N), im.below(b, kk, K));
      }
      auto clamp = [&](Value v) -> Value {
        return arith::SelectOp::create(b, loc, inside, v, zero);
      };
      Value size = arith::SelectOp::create(b, loc, inside, im.cst(b, kChunk), zero);
      Value column = im.mulc(b, swizzleChunk(b, im, row, chunk, s.chunksPerRow()), kChunk);
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, buffer, ValueRange{stage, row, column}, source,
          mm.indices(b, loc, s.which, clamp(m), clamp(n), clamp(kk)),
          b.getIndexAttr(kChunk), size, b.getUnitAttr());
    }
  };
  auto issueBoth = [&](OpBuilder &b, Value stage, Value kTile) {
    issue(b, aStage, stage, kTile);
    issue(b, bStage, stage, kTile);
  };

  // Prologue: tiles 0 .. stages-2 in flight, one commit group each (empty
  // groups past the last tile keep the count that the waits rely on).
  for (int64_t s = 0; s < stages - 1; ++s) {
    if (s < kTiles)
      issueBoth(k, im.cst(k, s), im.cst(k, s));
    NVVM::CpAsyncCommitGroupOp::create(k, loc);
  }

  auto loop = scf::ForOp::create(k, loc, im.cst(k, 0), im.cst(k, kTiles),
                                 im.cst(k, 1), kernel.loadAccumulators());
  OpBuilder l = OpBuilder::atBlockBegin(loop.getBody());
  Value kTile = loop.getInductionVar();
  // Groups committed so far: stages - 1 + kTile. At most stages - 2
  // pending means tile kTile's own copies are done; the barrier makes every
  // thread's copies visible and ends every warp's reads of the stage that
  // the next copies overwrite (the one multiplied in the previous step).
  NVVM::CpAsyncWaitGroupOp::create(l, loc, stages - 2);
  gpu::BarrierOp::create(l, loc);
  loadAhead(l, im, kTile, stages, kTiles, issueBoth);
  NVVM::CpAsyncCommitGroupOp::create(l, loc);

  Value stage = im.remc(l, kTile, stages);
  auto fragmentsType = VectorType::get({4, 2}, element);
  auto ldmatrix = [&](const StagedOperand &s, Value row, Value chunk,
                      bool transpose) {
    Value column = im.mulc(l, swizzleChunk(l, im, row, chunk, s.chunksPerRow()), kChunk);
    Value tiles = nvgpu::LdMatrixOp::create(
        l, loc, fragmentsType, kernel.workgroupBuffer(s.which),
        ValueRange{stage, row, column}, l.getBoolAttr(transpose),
        l.getI32IntegerAttr(4));
    SmallVector<Value, 4> regs;
    for (int64_t i = 0; i < 4; ++i)
      regs.push_back(kernel.asRegister(
          l, vector::ExtractOp::create(l, loc, tiles, ArrayRef<int64_t>{i})));
    return regs;
  };
  // Lane l addresses row l % 8 of 8 x 8 matrix l / 8 of an ldmatrix.x4.
  Value laneRow16 = im.remc(l, kernel.lane, 16), laneHalf = im.divc(l, kernel.lane, 16);
  Value laneRow8 = im.remc(l, kernel.lane, 8), laneMatrix = im.divc(l, kernel.lane, 8);
  SmallVector<Value> accs(loop.getRegionIterArgs());
  for (int64_t kk = 0; kk < blockK; kk += 16) {
    SmallVector<SmallVector<Value, 4>> aFrags, bFrags;
    // A (16 x 16 per mma row): matrices (rows 0-7, k 0-7), (rows 8-15,
    // k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15): registers a0..a3.
    for (int64_t mi = 0; mi < kernel.tilesM; ++mi) {
      Value mBase = im.addc(l, kernel.warpRow, mi * 16);
      if (aStage.kMajor) // rows k: matrix i holds k + 8 * (i / 2), m + 8 * (i % 2)
        aFrags.push_back(ldmatrix(
            aStage,
            im.add(l, im.addc(l, laneRow8, kk),
                   im.mulc(l, im.divc(l, laneMatrix, 2), 8)),
            im.add(l, im.divc(l, mBase, kChunk), im.remc(l, laneMatrix, 2)),
            /*transpose=*/true));
      else
        aFrags.push_back(ldmatrix(aStage, im.add(l, mBase, laneRow16),
                                  im.addc(l, laneHalf, kk / kChunk),
                                  /*transpose=*/false));
    }
    // B, two 8-column mma tiles per ldmatrix.x4: matrices (k 0-7, n 0-7),
    // (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15), i.e. b0 and b1 of
    // the first tile, then of the second.
    for (int64_t ni = 0; ni < kernel.tilesN; ni += 2) {
      Value nBase = im.addc(l, kernel.warpCol, ni * 8);
      SmallVector<Value, 4> regs;
      if (bStage.kMajor) // rows k: transpose each 8 x 8 matrix
        regs = ldmatrix(bStage, im.addc(l, laneRow16, kk),
                        im.add(l, im.divc(l, nBase, kChunk), laneHalf),
                        /*transpose=*/true);
      else // rows n: matrix i holds n + 8 * (i / 2), k + 8 * (i % 2)
        regs = ldmatrix(
            bStage,
            im.add(l, im.add(l, nBase, laneRow8),
                   im.mulc(l, im.divc(l, laneMatrix, 2), 8)),
            im.addc(l, im.remc(l, laneMatrix, 2), kk / kChunk),
            /*transpose=*/false);
      bFrags.push_back({regs[0], regs[1]});
      bFrags.push_back({regs[2], regs[3]});
    }
    kernel.multiply(l, aFrags, bFrags, accs);
  }
  scf::YieldOp::create(l, loc, accs);
  kernel.finish(loop.getResults());
  return success();
}
