//===- TensorCoreWarpgroup.cpp - wgmma matmuls fed by TMA (sm_90a) --------===//
//
// The Hopper kernel, for sm_90a with `warpgroup-mma`: a block of two
// warpgroups (256 threads) computes a 128 x N output tile (N = 256 for
// large matmuls, else 128; choosePipeline), each warpgroup 64 rows of it
// with `wgmma.mma_async.m64nNk16` (f32 accumulators, N / 2 per thread),
// reading both operands straight from shared memory. The TMA unit fills
// that memory: one thread issues `cp.async.bulk.tensor` copies
// (`nvgpu.tma.async.load`) of A's 128 x 64 tile and B's N x 64 one into
// `stages` buffers, each buffer's completion counted by an mbarrier in
// bytes (`nvgpu.mbarrier.arrive.expect_tx`), and every thread waits on the
// barrier's phase parity before multiplying that stage. The copies land in
// the 128-byte swizzle both the TMA unit and wgmma's shared-memory
// descriptors know, so neither padding nor ldmatrix is needed.
//
// Operands: indexed by plain loop dims (batch dims first, up to 5 in all),
// A with K contiguous ([M][K], one 128 x 64 box) or M contiguous ([K][M],
// the backward's x^T: two boxes of 64 x 64, multiplied M-major, wgmma's
// transposed A); B with N contiguous ([K][N], read as N / 64 boxes of
// 64 x 64 and multiplied N-major, wgmma's transposed B) or K contiguous
// ([N][K], one N x 64 box, K-major like A); rows and offset 16-byte
// aligned (what a tensor map requires). A box is one tile of the last two
// dims at the block's batch indices. The tensor maps are made on the host
// (`nvgpu.tma.create.descriptor`; the plan's `tmap:` launch argument, which
// the runtime encodes with cuTensorMapEncodeTiled) and cover the whole
// operand, so the TMA unit zero-fills the tiles past its edges and any M,
// N and K work. Accumulators leave through the same epilogue as the
// mma.sync kernels (TensorCoreKernel::finish): a warp's m64nN fragment has
// the m16n8 accumulator layout, N / 8 tiles along N.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/TensorCoreKernel.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr int64_t kBlockM = 128, kBlockK = 64;
/// 16-bit elements in one 128-byte swizzled shared row (and one TMA box
/// row): the K step, and the width of one box of an N-contiguous B.
constexpr int64_t kRowElements = 64;
constexpr int64_t kRowBytes = 128;
/// The 128-byte swizzle repeats every 8 rows; TMA and the wgmma descriptors
/// agree on it only from a base aligned to that many bytes.
constexpr int64_t kAtomBytes = 8 * kRowBytes;
/// Rows one warpgroup's wgmma covers, and the K of one instruction.
constexpr int64_t kWarpgroupRows = 64, kInstructionK = 16;
constexpr int64_t kMaxStages = 4;
/// A's 128 x 64 tile, first in each stage.
constexpr int64_t kTileBytes = kBlockM * kBlockK * 2;

/// A block tile: 128 x blockN outputs (wgmma m64n<blockN>k16 per
/// warpgroup, blockN / 2 accumulators a thread), and the blocks an SM
/// should hold: two of 128 x 128 (64 accumulators a thread) keep the tensor
/// cores busy while one waits on its barriers; one of 128 x 256 (128
/// accumulators, the registers of one block) reads each operand element
/// from global memory a third less often.
struct WarpgroupTile {
  int64_t blockN, blocksPerSM;
  int64_t stageBytes() const { return (kBlockM + blockN) * kBlockK * 2; }
};
constexpr WarpgroupTile kTiles[] = {{256, 1}, {128, 2}};

/// The shape of a Hopper pipeline: its tile, stages and dynamic shared
/// memory (the stages plus the slack to align them to kAtomBytes).
struct WarpgroupPipeline {
  WarpgroupTile tile;
  int64_t stages, bytes;
};

/// The documented heuristic (docs/pipeline.md): the largest tile that
/// still gives every SM a block and wastes at most a quarter of its outputs
/// on padding (as chooseTensorCoreTile), else 128 x 128; then as many
/// stages as the shared memory of its blocks per SM allows (the spec
/// table's per-SM bytes, less the driver's per-block reservation), within
/// the per-block limit, at least 2 and at most kMaxStages.
std::optional<WarpgroupPipeline> choosePipeline(int64_t m, int64_t n,
                                                int64_t batches,
                                                const TensorCoreTarget &target) {
  for (const WarpgroupTile &tile : kTiles) {
    bool last = &tile == &kTiles[std::size(kTiles) - 1];
    if (!last && !tileFillsWave(m, n, batches, kBlockM, tile.blockN,
                                target.multiprocessors))
      continue;
    int64_t budget = target.sharedBudget(tile.blocksPerSM) - kAtomBytes;
    int64_t stages = std::min(kMaxStages, budget / tile.stageBytes());
    if (stages >= 2)
      return WarpgroupPipeline{tile, stages,
                               stages * tile.stageBytes() + kAtomBytes};
  }
  return std::nullopt;
}

/// The layout of an operand the TMA unit can read: at most 5 dims, static
/// shape, strides and offset, unit innermost stride, and the other strides
/// and the offset multiples of 16 bytes.
bool isTensorMapReadable(Value operand) {
  auto type = cast<MemRefType>(operand.getType());
  return type.getRank() >= 2 && type.getRank() <= 5 && type.hasStaticShape() &&
         type.getElementTypeBitWidth() == 16 && isAlignedRun(operand, 8);
}

/// The (outer, inner) loop dims of operand `which` when its indices are
/// plain loop dims, batch dims first: a tensor map's box can then follow
/// the operand's last two dims, and its coordinates are the operand's
/// indices.
std::optional<std::pair<unsigned, unsigned>> indexedDims(const GpuMatmul &mm,
                                                         unsigned which) {
  AffineMap map = mm.maps[which];
  unsigned rank = map.getNumResults();
  if (rank < 2)
    return std::nullopt;
  SmallVector<unsigned> dims;
  for (AffineExpr result : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(result);
    if (!dim)
      return std::nullopt;
    dims.push_back(dim.getPosition());
  }
  for (unsigned i = 0; i + 2 < rank; ++i)
    if (dims[i] >= mm.batch)
      return std::nullopt;
  return std::make_pair(dims[rank - 2], dims[rank - 1]);
}

/// The shared-memory tile one box of `operand` fills: `rows` x
/// kRowElements, with unit dims before them for the operand's batch dims.
MemRefType boxType(Value operand, int64_t rows) {
  auto type = cast<MemRefType>(operand.getType());
  SmallVector<int64_t> shape(type.getRank() - 2, 1);
  shape.append({rows, kRowElements});
  return MemRefType::get(shape, type.getElementType(),
                         MemRefLayoutAttrInterface(),
                         gpu::AddressSpaceAttr::get(type.getContext(),
                                                    gpu::AddressSpace::Workgroup));
}

/// A host-side tensor map of `operand` whose box is boxType's, 128-byte
/// swizzled, zero-filled past the edges.
Value createTensorMap(OpBuilder &b, Location loc, Value operand, int64_t rows) {
  auto type = cast<MemRefType>(operand.getType());
  MemRefType box = boxType(operand, rows);
  auto mapType = nvgpu::TensorMapDescriptorType::get(
      b.getContext(), box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  Value unranked = memref::CastOp::create(
      b, loc, UnrankedMemRefType::get(type.getElementType(), Attribute()),
      operand);
  IndexMath im{loc};
  SmallVector<Value> extents;
  for (int64_t extent : box.getShape())
    extents.push_back(im.cst(b, extent));
  return nvgpu::TmaCreateDescriptorOp::create(b, loc, mapType, unranked,
                                              extents);
}

/// A wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor
/// Format"): the start address, the leading and stride byte offsets (each
/// >> 4, 14 bits), and the 128-byte swizzle mode in bits 62-63.
Value matrixDescriptor(OpBuilder &b, Location loc, Value address,
                       int64_t leadingBytes, int64_t strideBytes) {
  Type i64 = b.getI64Type();
  auto constant = [&](uint64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  Value start = arith::AndIOp::create(
      b, loc,
      arith::ShRUIOp::create(
          b, loc, arith::IndexCastUIOp::create(b, loc, i64, address),
          constant(4)),
      constant(0x3fff));
  uint64_t fields = ((uint64_t(leadingBytes) >> 4) << 16) |
                    ((uint64_t(strideBytes) >> 4) << 32) | (uint64_t(1) << 62);
  return arith::OrIOp::create(b, loc, start, constant(fields));
}
} // namespace

LogicalResult
loom::buildWarpgroupTensorCoreMatmul(linalg::GenericOp op,
                                     const TensorCoreTarget &target) {
  GpuMatmul probe(op);
  if (!isTensorMapReadable(probe.a) || !isTensorMapReadable(probe.b))
    return failure();
  // The loop dims after the batch dims are m, n, k.
  unsigned mDim = probe.batch, nDim = mDim + 1, kDim = mDim + 2;
  auto aDims = indexedDims(probe, 0), bDims = indexedDims(probe, 1);
  if (!aDims || !bDims)
    return failure();
  bool aMContiguous = *aDims == std::make_pair(kDim, mDim);
  if (!aMContiguous && *aDims != std::make_pair(mDim, kDim))
    return failure();
  bool bNContiguous = *bDims == std::make_pair(kDim, nDim);
  if (!bNContiguous && *bDims != std::make_pair(nDim, kDim))
    return failure();
  std::optional<WarpgroupPipeline> pipeline =
      choosePipeline(probe.m, probe.n, probe.batches, target);
  if (!pipeline)
    return failure();
  const int64_t stages = pipeline->stages, blockN = pipeline->tile.blockN,
                stageBytes = pipeline->tile.stageBytes();

  TensorCoreTile tile{kBlockM, blockN, /*warpsM=*/8, /*warpsN=*/1};
  TensorCoreKernel kernel(op, tile, TypeRange(), pipeline->bytes);
  // The tensor maps, made on the host just before the launch (after the
  // kernel has found the fill it absorbs, which must be just before `op`).
  OpBuilder host(kernel.launch);
  Location loc = op.getLoc();
  Value aMap = createTensorMap(host, loc, probe.a,
                               aMContiguous ? kBlockK : kBlockM);
  Value bMap = createTensorMap(host, loc, probe.b,
                               bNContiguous ? kBlockK : blockN);
  const IndexMath &im = kernel.im;
  OpBuilder &k = kernel.k;
  const GpuMatmul &mm = kernel.mm;
  Type element = kernel.element;
  auto workgroup = gpu::AddressSpaceAttr::get(op.getContext(),
                                              gpu::AddressSpace::Workgroup);

  // The stages start at the first kAtomBytes boundary of the dynamic
  // shared memory (static shared memory, the barriers, may come before it).
  Value all = kernel.dynamicShared;
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(k, loc, all);
  Value base = im.remc(
      k,
      arith::SubIOp::create(k, loc, im.cst(k, kAtomBytes),
                            im.remc(k, address, kAtomBytes)),
      kAtomBytes);
  // Stage s: A's tile (one 128 x 64 box, or two boxes of 64 x 64), then
  // B's (one blockN x 64 box, or blockN / 64 boxes of 64 x 64). A box of an
  // M- or N-contiguous operand is kBlockK rows of K.
  auto stageOffset = [&](OpBuilder &b, Value stage) {
    return im.add(b, base, im.mulc(b, stage, stageBytes));
  };
  auto view = [&](OpBuilder &b, Value offset, Value operand,
                  int64_t rows) -> Value {
    return memref::ViewOp::create(b, loc, boxType(operand, rows), all, offset,
                                  ValueRange{});
  };
  // A box's coordinates are the operand's indices at its first element,
  // innermost first.
  auto coordinates = [&](OpBuilder &b, unsigned which, Value m, Value n,
                         Value kk) {
    SmallVector<Value> indices = mm.indices(b, loc, which, m, n, kk);
    std::reverse(indices.begin(), indices.end());
    return indices;
  };

  auto barrierType = nvgpu::MBarrierGroupType::get(op.getContext(), workgroup,
                                                   stages);
  Value barriers = nvgpu::MBarrierCreateOp::create(k, loc, barrierType);
  Value leader = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::eq,
                                       kernel.tid, im.cst(k, 0));
  for (int64_t s = 0; s < stages; ++s)
    nvgpu::MBarrierInitOp::create(k, loc, barriers, im.cst(k, 1),
                                  im.cst(k, s), leader);
  // The initialized barriers are visible to the TMA unit's completions
  // (CUTLASS's fence_barrier_init), then to every thread.
  NVVM::FenceMbarrierInitOp::create(k, loc);
  gpu::BarrierOp::create(k, loc);

  int64_t kTiles = (mm.k + kBlockK - 1) / kBlockK;
  // The leader loads K-tile `kTile` into stage `stage`: the barrier expects
  // the stage's bytes (the TMA unit counts a box's zero-filled part too),
  // and each copy completes its share. Coordinates are innermost first.
  auto load = [&](OpBuilder &b, Value stage, Value kTile) {
    Value offset = stageOffset(b, stage);
    Value k0 = im.mulc(b, kTile, kBlockK), zero = im.cst(b, 0);
    nvgpu::MBarrierArriveExpectTxOp::create(b, loc, barriers,
                                            im.cst(b, stageBytes), stage,
                                            leader);
    // Operand `which` (0: A, 1: B), `extent` rows of M or N at `at`: one
    // extent x 64 box when K is contiguous, else extent / 64 boxes of
    // kBlockK x 64, kBlockK x kRowBytes bytes apart.
    auto loadOperand = [&](Value at, unsigned which, bool kContiguous,
                           int64_t extent) {
      Value operand = which == 0 ? mm.a : mm.b, map = which == 0 ? aMap : bMap;
      int64_t boxes = kContiguous ? 1 : extent / kRowElements;
      for (int64_t box = 0; box < boxes; ++box) {
        Value first = im.addc(b, which == 0 ? kernel.row0 : kernel.col0,
                              box * kRowElements);
        nvgpu::TmaAsyncLoadOp::create(
            b, loc,
            view(b, im.addc(b, at, box * kBlockK * kRowBytes), operand,
                 kContiguous ? extent : kBlockK),
            barriers, map,
            which == 0 ? coordinates(b, 0, first, zero, k0)
                       : coordinates(b, 1, zero, first, k0),
            stage, Value(), leader);
      }
    };
    loadOperand(offset, 0, !aMContiguous, kBlockM);
    loadOperand(im.addc(b, offset, kTileBytes), 1, !bNContiguous, blockN);
  };

  for (int64_t s = 0; s < std::min(stages - 1, kTiles); ++s)
    load(k, im.cst(k, s), im.cst(k, s));

  // The accumulators as wgmma's operand: one struct of blockN / 2 f32 a
  // thread, in the order of the m16n8 tiles along N (TensorCoreKernel's).
  Type f32 = k.getF32Type();
  const int64_t count = kernel.tilesM * kernel.tilesN * 4;
  auto accType = LLVM::LLVMStructType::getLiteral(
      op.getContext(), SmallVector<Type>(count, f32));
  Value acc = LLVM::PoisonOp::create(k, loc, accType);
  for (auto [i, v] : llvm::enumerate(kernel.loadAccumulators()))
    acc = LLVM::InsertValueOp::create(k, loc, acc, v, int64_t(i));

  auto loop = scf::ForOp::create(k, loc, im.cst(k, 0), im.cst(k, kTiles),
                                 im.cst(k, 1), ValueRange{acc});
  OpBuilder l = OpBuilder::atBlockBegin(loop.getBody());
  Value kTile = loop.getInductionVar();
  Value stage = im.remc(l, kTile, stages);
  // Use u of a stage (u = kTile / stages) completes the barrier's phase u.
  Value parity = arith::TruncIOp::create(
      l, loc, l.getI1Type(),
      arith::IndexCastUIOp::create(l, loc, l.getI64Type(),
                                   im.divc(l, kTile, stages)));
  nvgpu::MBarrierTryWaitParityOp::create(l, loc, barriers, parity,
                                         im.cst(l, 10000000), stage);

  // This warpgroup's rows of A (64 rows of a K-major A, or the one box of
  // 64 columns of an M-major one: kWarpgroupRows x kRowBytes bytes in
  // either), and B: K-major descriptors step 32 bytes along a swizzled row
  // per instruction; M- and N-major ones step 16 rows, their 64-column
  // boxes kBlockK rows apart (the leading byte offset).
  Value warpgroup = im.divc(l, kernel.warp, 4);
  Value stageAddress = im.add(l, address, stageOffset(l, stage));
  Value aAddress = im.add(l, stageAddress,
                          im.mulc(l, warpgroup, kWarpgroupRows * kRowBytes));
  Value bAddress = im.addc(l, stageAddress, kTileBytes);
  Value aDescriptor = matrixDescriptor(
      l, loc, aAddress, aMContiguous ? kBlockK * kRowBytes : 16, kAtomBytes);
  Value bDescriptor = matrixDescriptor(
      l, loc, bAddress, bNContiguous ? kBlockK * kRowBytes : 16, kAtomBytes);
  auto step = [&](Value descriptor, int64_t bytes) -> Value {
    if (!bytes)
      return descriptor;
    return arith::AddIOp::create(
        l, loc, descriptor,
        arith::ConstantOp::create(l, loc, l.getI64IntegerAttr(bytes >> 4)));
  };
  auto types = [&]() {
    return NVVM::WGMMATypesAttr::get(op.getContext(),
                                     element.isBF16() ? NVVM::WGMMATypes::bf16
                                                      : NVVM::WGMMATypes::f16);
  };
  NVVM::WgmmaFenceAlignedOp::create(l, loc);
  Value accs = loop.getRegionIterArgs()[0];
  for (int64_t kk = 0; kk < kBlockK / kInstructionK; ++kk) {
    auto stepBytes = [&](bool kMajor) {
      return kMajor ? kk * 32 : kk * kInstructionK * kRowBytes;
    };
    accs = NVVM::WgmmaMmaAsyncOp::create(
        l, loc, accType, accs, step(aDescriptor, stepBytes(!aMContiguous)),
        step(bDescriptor, stepBytes(!bNContiguous)),
        NVVM::MMAShapeAttr::get(op.getContext(), kWarpgroupRows, blockN,
                                kInstructionK),
        types(), types(),
        NVVM::WGMMATypesAttr::get(op.getContext(), NVVM::WGMMATypes::f32),
        NVVM::WGMMAScaleOutAttr::get(op.getContext(), NVVM::WGMMAScaleOut::one),
        NVVM::WGMMAScaleInAttr::get(op.getContext(), NVVM::WGMMAScaleIn::one),
        NVVM::WGMMAScaleInAttr::get(op.getContext(), NVVM::WGMMAScaleIn::one),
        // wgmma's "row" A is K-major, "col" M-major (transposed); its
        // "row" B is N-major (transposed), "col" K-major.
        NVVM::MMALayoutAttr::get(op.getContext(), aMContiguous
                                                      ? NVVM::MMALayout::col
                                                      : NVVM::MMALayout::row),
        NVVM::MMALayoutAttr::get(op.getContext(), bNContiguous
                                                      ? NVVM::MMALayout::row
                                                      : NVVM::MMALayout::col),
        NVVM::MMAIntOverflowAttr());
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(l, loc);
  // At most this step's group in flight: the previous step's reads of its
  // stage are done in this warpgroup, and after the barrier in both, so
  // the leader may refill that stage.
  NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 1);
  gpu::BarrierOp::create(l, loc);
  loadAhead(l, im, kTile, stages, kTiles, load);
  scf::YieldOp::create(l, loc, accs);

  NVVM::WgmmaWaitGroupSyncOp::create(k, loc, 0);
  SmallVector<Value> results;
  for (int64_t i = 0; i < count; ++i)
    results.push_back(
        LLVM::ExtractValueOp::create(k, loc, loop.getResult(0), i));
  kernel.finish(results);
  return success();
}
