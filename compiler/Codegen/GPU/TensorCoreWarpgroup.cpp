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
// the m16n8 accumulator layout, N / 8 tiles along N; or, with `tma-store`,
// through shared memory by TMA stores (TmaStoreEpilogue.h). The persistent
// kernels that share these pieces (WarpgroupMatmul.h) are in
// TensorCorePersistent.cpp; this file also picks between them.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/TensorCoreKernel.h"
#include "Codegen/GPU/TmaStoreEpilogue.h"
#include "Codegen/GPU/WarpgroupMatmul.h"
#include "Codegen/GPU/WarpgroupMma.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::wgmma;

namespace {
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

/// The layout of `op`'s operands when both Hopper kernels can read them,
/// with `pipeline` chosen for it.
std::optional<WarpgroupLayout>
readLayout(linalg::GenericOp op,
           function_ref<std::optional<WarpgroupPipeline>(const GpuMatmul &)>
               pipeline) {
  GpuMatmul probe(op);
  if (!isTensorMapReadable(probe.a) || !isTensorMapReadable(probe.b))
    return std::nullopt;
  // The loop dims after the batch dims are m, n, k.
  unsigned mDim = probe.batch, nDim = mDim + 1, kDim = mDim + 2;
  auto aDims = indexedDims(probe, 0), bDims = indexedDims(probe, 1);
  if (!aDims || !bDims)
    return std::nullopt;
  bool aMContiguous = *aDims == std::make_pair(kDim, mDim);
  if (!aMContiguous && *aDims != std::make_pair(mDim, kDim))
    return std::nullopt;
  bool bNContiguous = *bDims == std::make_pair(kDim, nDim);
  if (!bNContiguous && *bDims != std::make_pair(nDim, kDim))
    return std::nullopt;
  std::optional<WarpgroupPipeline> chosen = pipeline(probe);
  if (!chosen)
    return std::nullopt;
  return WarpgroupLayout{aMContiguous, bNContiguous, *chosen};
}

/// One block per output tile: both warpgroups wait for a stage, multiply
/// it, and thread 0 refills the stage the previous step read. With a
/// `tmaStore` destination the tile leaves through the stages' memory, free
/// once both warpgroups' last wgmmas are done, by TMA stores.
void buildTiledKernel(linalg::GenericOp op, const WarpgroupLayout &layout,
                      Value tmaStore) {
  const WarpgroupPipeline &pipeline = layout.pipeline;
  TensorCoreKernel kernel(op, {kBlockM, pipeline.tile.blockN, 8, 1},
                          TypeRange(), pipeline.bytes);
  WarpgroupMatmul w(kernel, layout);
  const IndexMath &im = kernel.im;
  OpBuilder &k = kernel.k;
  Location loc = op.getLoc();
  const int64_t stages = w.stages, kTiles = w.kTiles;

  StageBarriers made = createStageBarriers(kernel, stages, {1});
  Value barriers = made.groups[0], leader = made.leader;
  auto load = [&](OpBuilder &b, Value stage, Value kTile) {
    w.load(b, barriers, stage, kTile, leader);
  };
  for (int64_t s = 0; s < std::min(stages - 1, kTiles); ++s)
    load(k, im.cst(k, s), im.cst(k, s));

  Value acc = w.initialAccumulators();
  auto loop = scf::ForOp::create(k, loc, im.cst(k, 0), im.cst(k, kTiles),
                                 im.cst(k, 1), ValueRange{acc});
  OpBuilder l = OpBuilder::atBlockBegin(loop.getBody());
  Value kTile = loop.getInductionVar();
  Value stage = im.remc(l, kTile, stages);
  nvgpu::MBarrierTryWaitParityOp::create(
      l, loc, barriers, phaseParity(l, im, im.divc(l, kTile, stages)),
      im.cst(l, 10000000), stage);
  Value accs = w.multiply(l, stage, loop.getRegionIterArgs()[0]);
  // At most this step's group in flight: the previous step's reads of its
  // stage are done in this warpgroup, and after the barrier in both, so
  // the leader may refill that stage.
  NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 1);
  gpu::BarrierOp::create(l, loc);
  loadAhead(l, im, kTile, stages, kTiles, load);
  scf::YieldOp::create(l, loc, accs);

  NVVM::WgmmaWaitGroupSyncOp::create(k, loc, 0);
  if (!tmaStore) {
    kernel.finish(w.unpack(k, loop.getResult(0)));
    return;
  }
  TmaStoreEpilogue epilogue(kernel, tmaStore);
  // The other warpgroup may still read the stages its last wgmmas name.
  gpu::BarrierOp::create(k, loc);
  int64_t boxes = w.blockN / kRowElements;
  epilogue.store(
      k, w.unpack(k, loop.getResult(0)),
      [&](OpBuilder &b, Value warpgroup, int64_t box) {
        return im.add(b, w.base,
                      im.mulc(b, im.addc(b, im.mulc(b, warpgroup, boxes), box),
                              kStoreBoxBytes));
      },
      /*reuse=*/false);
  epilogue.drain(k);
  kernel.close();
}
} // namespace

std::optional<std::pair<unsigned, unsigned>>
wgmma::indexedDims(const GpuMatmul &mm, unsigned which) {
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

WarpgroupMatmul::WarpgroupMatmul(TensorCoreKernel &kernel,
                                 const WarpgroupLayout &layout, bool multicastB)
    : kernel(kernel), aMContiguous(layout.aMContiguous),
      bNContiguous(layout.bNContiguous), multicastB(multicastB),
      stages(layout.pipeline.stages),
      blockN(layout.pipeline.tile.blockN),
      stageBytes(layout.pipeline.tile.stageBytes()),
      kTiles(llvm::divideCeil(kernel.mm.k, kBlockK)) {
  // The tensor maps, made on the host just before the launch (after the
  // kernel has found the fill it absorbs, which must be just before `op`).
  OpBuilder host(kernel.launch);
  Location loc = kernel.loc;
  aMap = createTensorMap(host, loc, kernel.mm.a,
                         aMContiguous ? kBlockK : kBlockM);
  // A K-contiguous B multicast in halves: boxes of half the tile's rows.
  bMap = createTensorMap(host, loc, kernel.mm.b,
                         bNContiguous ? kBlockK : blockN / (multicastB ? 2 : 1));
  // The stages start at the first kAtomBytes boundary of the dynamic
  // shared memory (static shared memory, the barriers, may come before it).
  const IndexMath &im = kernel.im;
  OpBuilder &k = kernel.k;
  address = memref::ExtractAlignedPointerAsIndexOp::create(
      k, loc, kernel.dynamicShared);
  base = im.remc(k,
                 arith::SubIOp::create(k, loc, im.cst(k, kAtomBytes),
                                       im.remc(k, address, kAtomBytes)),
                 kAtomBytes);
  if (multicastB)
    rank = im.remc(k, kernel.launch.getBlockIds().x, 2);
  accType = LLVM::LLVMStructType::getLiteral(
      k.getContext(),
      SmallVector<Type>(kernel.tilesM * kernel.tilesN * 4, k.getF32Type()));
}

void WarpgroupMatmul::load(OpBuilder &b, Value barriers, Value stage,
                           Value kTile, Value predicate) const {
  const IndexMath &im = kernel.im;
  Location loc = kernel.loc;
  const GpuMatmul &mm = kernel.mm;
  // Stage s: A's tile (one 128 x 64 box, or two boxes of 64 x 64), then
  // B's (one blockN x 64 box, or blockN / 64 boxes of 64 x 64). A box of an
  // M- or N-contiguous operand is kBlockK rows of K.
  Value offset = stageOffset(b, stage);
  Value k0 = im.mulc(b, kTile, kBlockK), zero = im.cst(b, 0);
  // The barrier expects the stage's bytes (the TMA unit counts a box's
  // zero-filled part too), and each copy completes its share.
  nvgpu::MBarrierArriveExpectTxOp::create(b, loc, barriers,
                                          im.cst(b, stageBytes), stage,
                                          predicate);
  // Operand `which` (0: A, 1: B), `extent` rows of M or N at `at`: one
  // extent x 64 box when K is contiguous, else extent / 64 boxes of
  // kBlockK x 64, kBlockK x kRowBytes bytes apart. A box's coordinates are
  // the operand's indices at its first element, innermost first.
  auto loadOperand = [&](Value at, unsigned which, bool kContiguous,
                         int64_t extent) {
    Value operand = which == 0 ? mm.a : mm.b, map = which == 0 ? aMap : bMap;
    int64_t boxes = kContiguous ? 1 : extent / kRowElements;
    for (int64_t box = 0; box < boxes; ++box) {
      Value first = im.addc(b, which == 0 ? kernel.row0 : kernel.col0,
                            box * kRowElements);
      SmallVector<Value> coordinates =
          which == 0 ? mm.indices(b, loc, 0, first, zero, k0)
                     : mm.indices(b, loc, 1, zero, first, k0);
      std::reverse(coordinates.begin(), coordinates.end());
      Value view = memref::ViewOp::create(
          b, loc, boxType(operand, kContiguous ? extent : kBlockK),
          kernel.dynamicShared, im.addc(b, at, box * kBlockK * kRowBytes),
          ValueRange{});
      nvgpu::TmaAsyncLoadOp::create(b, loc, view, barriers, map, coordinates,
                                    stage, Value(), predicate);
    }
  };
  loadOperand(offset, 0, !aMContiguous, kBlockM);
  if (!multicastB) {
    loadOperand(im.addc(b, offset, kTileBytes), 1, !bNContiguous, blockN);
    return;
  }
  // B's tile in pieces (its 64 x 64 boxes when N-contiguous, two halves of
  // blockN / 2 rows when K-contiguous), this block's half of them copied
  // into the same offset of both blocks of the cluster, each piece
  // completing bytes on both blocks' `barriers[stage]`: each block's
  // barrier, expecting the whole stage, sees its A and both halves of B.
  bool kContiguous = !bNContiguous;
  int64_t pieces = kContiguous ? 2 : blockN / kRowElements;
  int64_t pieceRows = kContiguous ? blockN / 2 : kBlockK;
  int64_t pieceColumns = kContiguous ? blockN / 2 : kRowElements;
  Value both = arith::ConstantOp::create(b, loc, b.getI16IntegerAttr(0b11));
  for (int64_t i = 0; i < pieces / 2; ++i) {
    Value piece = im.addc(b, im.mulc(b, rank, pieces / 2), i);
    SmallVector<Value> coordinates = mm.indices(
        b, loc, 1, zero, im.add(b, kernel.col0, im.mulc(b, piece, pieceColumns)),
        k0);
    std::reverse(coordinates.begin(), coordinates.end());
    Value view = memref::ViewOp::create(
        b, loc, boxType(mm.b, pieceRows), kernel.dynamicShared,
        im.add(b, im.addc(b, offset, kTileBytes),
               im.mulc(b, piece, pieceRows * kRowBytes)),
        ValueRange{});
    nvgpu::TmaAsyncLoadOp::create(b, loc, view, barriers, bMap, coordinates,
                                  stage, both, predicate);
  }
}

Value WarpgroupMatmul::multiply(OpBuilder &b, Value stage, Value accs) const {
  return multiply(b, stage, accs, kernel.im.divc(b, kernel.warp, 4))[0];
}

SmallVector<Value> WarpgroupMatmul::multiply(OpBuilder &b, Value stage,
                                             ValueRange accs,
                                             ValueRange rowBlocks) const {
  const IndexMath &im = kernel.im;
  Location loc = kernel.loc;
  MLIRContext *context = b.getContext();
  // A row block's rows of A (64 rows of a K-major A, or the one box of 64
  // columns of an M-major one: kWarpgroupRows x kRowBytes bytes in
  // either), and B: K-major descriptors step 32 bytes along a swizzled row
  // per instruction; M- and N-major ones step 16 rows, their 64-column
  // boxes kBlockK rows apart (the leading byte offset).
  Value stageAddress = im.add(b, address, stageOffset(b, stage));
  SmallVector<Value> aDescriptors;
  for (Value rowBlock : rowBlocks)
    aDescriptors.push_back(matrixDescriptor(
        b, loc,
        im.add(b, stageAddress, im.mulc(b, rowBlock, kWarpgroupRows * kRowBytes)),
        aMContiguous ? kBlockK * kRowBytes : 16, kAtomBytes));
  Value bAddress = im.addc(b, stageAddress, kTileBytes);
  Value bDescriptor = matrixDescriptor(
      b, loc, bAddress, bNContiguous ? kBlockK * kRowBytes : 16, kAtomBytes);
  auto step = [&](Value descriptor, int64_t bytes) {
    return advanceDescriptor(b, loc, descriptor, bytes);
  };
  auto types = [&]() {
    return NVVM::WGMMATypesAttr::get(context, kernel.element.isBF16()
                                                  ? NVVM::WGMMATypes::bf16
                                                  : NVVM::WGMMATypes::f16);
  };
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  SmallVector<Value> results(accs);
  for (int64_t kk = 0; kk < kBlockK / kInstructionK; ++kk) {
    auto stepBytes = [&](bool kMajor) {
      return kMajor ? kk * 32 : kk * kInstructionK * kRowBytes;
    };
    for (auto [acc, aDescriptor] : llvm::zip(results, aDescriptors)) {
      acc = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, accType, acc, step(aDescriptor, stepBytes(!aMContiguous)),
        step(bDescriptor, stepBytes(!bNContiguous)),
        NVVM::MMAShapeAttr::get(context, kWarpgroupRows, blockN,
                                kInstructionK),
        types(), types(),
        NVVM::WGMMATypesAttr::get(context, NVVM::WGMMATypes::f32),
        NVVM::WGMMAScaleOutAttr::get(context, NVVM::WGMMAScaleOut::one),
        NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one),
        NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one),
        // wgmma's "row" A is K-major, "col" M-major (transposed); its
        // "row" B is N-major (transposed), "col" K-major.
        NVVM::MMALayoutAttr::get(context, aMContiguous ? NVVM::MMALayout::col
                                                       : NVVM::MMALayout::row),
        NVVM::MMALayoutAttr::get(context, bNContiguous ? NVVM::MMALayout::row
                                                       : NVVM::MMALayout::col),
        NVVM::MMAIntOverflowAttr());
    }
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return results;
}

Value WarpgroupMatmul::initialAccumulators() const {
  Value acc = LLVM::PoisonOp::create(kernel.k, kernel.loc, accType);
  for (auto [i, v] : llvm::enumerate(kernel.loadAccumulators()))
    acc = LLVM::InsertValueOp::create(kernel.k, kernel.loc, acc, v, int64_t(i));
  return acc;
}

SmallVector<Value> WarpgroupMatmul::unpack(OpBuilder &b, Value accs) const {
  SmallVector<Value> values;
  for (int64_t i = 0, e = accType.getBody().size(); i < e; ++i)
    values.push_back(LLVM::ExtractValueOp::create(b, kernel.loc, accs, i));
  return values;
}

StageBarriers wgmma::createStageBarriers(TensorCoreKernel &kernel, int64_t stages,
                                  ArrayRef<int64_t> arrivals,
                                         bool cluster) {
  OpBuilder &k = kernel.k;
  const IndexMath &im = kernel.im;
  auto type = nvgpu::MBarrierGroupType::get(
      k.getContext(),
      gpu::AddressSpaceAttr::get(k.getContext(), gpu::AddressSpace::Workgroup),
      stages);
  StageBarriers made;
  for (int64_t count : arrivals) {
    Value barriers = nvgpu::MBarrierCreateOp::create(k, kernel.loc, type);
    if (!made.leader)
      made.leader = arith::CmpIOp::create(k, kernel.loc, arith::CmpIPredicate::eq,
                                          kernel.tid, im.cst(k, 0));
    for (int64_t s = 0; s < stages; ++s)
      nvgpu::MBarrierInitOp::create(k, kernel.loc, barriers, im.cst(k, count),
                                    im.cst(k, s), made.leader);
    made.groups.push_back(barriers);
  }
  NVVM::FenceMbarrierInitOp::create(k, kernel.loc);
  if (cluster) {
    NVVM::ClusterArriveOp::create(k, kernel.loc, k.getUnitAttr());
    NVVM::ClusterWaitOp::create(k, kernel.loc, k.getUnitAttr());
  } else {
    gpu::BarrierOp::create(k, kernel.loc);
  }
  return made;
}

void wgmma::arriveInBothBlocks(OpBuilder &b, Location loc, Value barriers,
                               Value index) {
  Value address = nvgpu::MBarrierGetOp::create(b, loc, b.getI32Type(),
                                               barriers, index);
  std::string ptx = "{\n.reg .b32 remote;\n";
  for (int rank = 0; rank < 2; ++rank)
    ptx += "mapa.shared::cluster.u32 remote, $0, " + std::to_string(rank) +
           ";\nmbarrier.arrive.release.cluster.shared::cluster.b64 _, "
           "[remote];\n";
  ptx += "}\n";
  inlinePtx(b, loc, TypeRange(), address, ptx, "r,~{memory}");
}

LogicalResult
loom::buildWarpgroupTensorCoreMatmul(linalg::GenericOp op,
                                     const TensorCoreTarget &target) {
  Value tmaStore =
      target.tmaStoreEpilogue ? TmaStoreEpilogue::destinationOf(op) : Value();
  if (target.persistentWarpgroupMma) {
    // Two boxes a consumer warpgroup.
    int64_t epilogueBytes = tmaStore ? 4 * kStoreBoxBytes : 0;
    // Ping-pong where every block has two 128 x 128 tiles, one for each
    // consumer warpgroup: with fewer, one warpgroup would sit idle, and the
    // cooperative kernel splits each tile between both.
    GpuMatmul shape(op);
    int64_t smallTiles = llvm::divideCeil(shape.m, kBlockM) *
                         llvm::divideCeil(shape.n, kTiles[1].blockN) *
                         shape.batches;
    bool pingpong = target.pingpongWarpgroupMma &&
                    smallTiles >= 2 * target.multiprocessors;
    std::optional<WarpgroupLayout> layout =
        readLayout(op, [&](const GpuMatmul &mm) {
          return choosePersistentPipeline(mm, target, epilogueBytes, pingpong);
        });
    if (!layout)
      return failure();
    buildPersistentKernel(op, *layout, target.multiprocessors, tmaStore,
                          target.tmaMulticast && sharesTilesOfB(shape),
                          pingpong);
    return success();
  }
  std::optional<WarpgroupLayout> layout =
      readLayout(op, [&](const GpuMatmul &mm) {
        return choosePipeline(mm.m, mm.n, mm.batches, target);
      });
  if (!layout)
    return failure();
  // The tile's boxes take the stages' memory: 2 x 128 x blockN bytes, within
  // the 2 or more stages of (128 + blockN) x 128.
  buildTiledKernel(op, *layout, tmaStore);
  return success();
}
