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
#include "Codegen/GPU/TmaStoreEpilogue.h"
#include "Codegen/GPU/WarpgroupMma.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr int64_t kBlockM = 128, kBlockK = 64;
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

/// An operand layout both Hopper kernels can read, and its pipeline.
struct WarpgroupLayout {
  bool aMContiguous, bNContiguous;
  WarpgroupPipeline pipeline;
};

/// What both Hopper kernels share once the launch exists: the tensor maps
/// (made on the host just before the launch), the stages in dynamic shared
/// memory, the TMA loads of one K tile into a stage, and the wgmmas that
/// multiply one stage into the accumulators.
struct WarpgroupMatmul {
  /// With `multicastB`, the kernel runs in clusters of two blocks whose
  /// tiles share B's columns: each block copies half of B's tile into both
  /// blocks' stage by TMA multicast (load).
  WarpgroupMatmul(TensorCoreKernel &kernel, const WarpgroupLayout &layout,
                  bool multicastB = false);

  TensorCoreKernel &kernel;
  bool aMContiguous, bNContiguous, multicastB;
  int64_t stages, blockN, stageBytes, kTiles;
  Value aMap, bMap;
  /// The dynamic shared memory's address, and where the stages start in it.
  Value address, base;
  /// With multicastB: the block's rank in its cluster (0 or 1).
  Value rank;
  /// The accumulators as wgmma's operand: one struct of blockN / 2 f32 a
  /// thread, in the order of the m16n8 tiles along N (TensorCoreKernel's).
  LLVM::LLVMStructType accType;

  Value stageOffset(OpBuilder &b, Value stage) const {
    return kernel.im.add(b, base, kernel.im.mulc(b, stage, stageBytes));
  }
  /// Issues the TMA copies of K tile `kTile` of the current output tile
  /// (kernel.row0, col0 and batch) into `stage`, counted by
  /// `barriers[stage]`, under `predicate` (null: unconditionally).
  void load(OpBuilder &b, Value barriers, Value stage, Value kTile,
            Value predicate) const;
  /// fence, the wgmmas of the K tile in `stage` on `accs`, commit; the
  /// new accumulators (in flight until a wait_group). The warpgroup's own
  /// 64 rows of the tile.
  Value multiply(OpBuilder &b, Value stage, Value accs) const;
  /// The same for the 64-row blocks `rowBlocks` of the tile, one
  /// accumulator struct each (a ping-pong warpgroup computes all of them).
  SmallVector<Value> multiply(OpBuilder &b, Value stage, ValueRange accs,
                              ValueRange rowBlocks) const;
  /// The accumulators loadAccumulators gives, as one struct (at kernel.k).
  Value initialAccumulators() const;
  /// The struct's values, for TensorCoreKernel's write-back.
  SmallVector<Value> unpack(OpBuilder &b, Value accs) const;
};

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

/// A kernel's stage barriers: groups of one barrier per stage, and thread
/// 0's predicate (`leader`), which initialized them.
struct StageBarriers {
  Value leader;
  SmallVector<Value> groups;
};

/// One group per entry of `arrivals` (each of its barriers expecting that
/// many arrivals), initialized by thread 0 and then made visible to the
/// TMA unit's completions (CUTLASS's fence_barrier_init) and to every
/// thread; with `cluster`, to every thread of the cluster, whose other
/// block multicasts into this one's stages and arrives on its barriers.
StageBarriers createStageBarriers(TensorCoreKernel &kernel, int64_t stages,
                                  ArrayRef<int64_t> arrivals,
                                  bool cluster = false) {
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

/// One arrival on barrier `index` of `barriers` in each block of a cluster
/// of two (this one's included): `mapa` gives the other block's copy of
/// the barrier's shared address, and `mbarrier.arrive` on a
/// `shared::cluster` address reaches it (release at cluster scope, so this
/// block's reads of the stage are done before the other block's producer
/// may refill it). MLIR 22's nvgpu.mbarrier.arrive knows only the block's
/// own barriers, so this is inline PTX, as CUTLASS's ClusterBarrier::arrive.
void arriveInBothBlocks(OpBuilder &b, Location loc, Value barriers,
                        Value index) {
  Value address = nvgpu::MBarrierGetOp::create(b, loc, b.getI32Type(),
                                               barriers, index);
  std::string ptx = "{\n.reg .b32 remote;\n";
  for (int rank = 0; rank < 2; ++rank)
    ptx += "mapa.shared::cluster.u32 remote, $0, " + std::to_string(rank) +
           ";\nmbarrier.arrive.release.cluster.shared::cluster.b64 _, "
           "[remote];\n";
  ptx += "}\n";
  LLVM::InlineAsmOp::create(
      b, loc, TypeRange(), ValueRange{address}, ptx, "r,~{memory}",
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      ArrayAttr());
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

/// Registers a thread of the producer warpgroup keeps (it only computes
/// TMA coordinates), and a consumer gets (a 128 x 256 tile's 128
/// accumulators, the epilogue's addresses): 128 x 40 + 256 x 232 fit an
/// SM's 64 Ki registers, as CUTLASS's warp-specialized kernels split them.
constexpr int64_t kProducerRegisters = 40, kConsumerRegisters = 232;
constexpr int64_t kConsumerThreads = 256, kProducerThreads = 128;
constexpr int64_t kWarpgroupThreads = 128;

/// A persistent warp-specialized kernel: `blocks` blocks, each taking
/// output tiles blockIdx.x, blockIdx.x + blocks, ...; warpgroup 2 loads,
/// warpgroups 0 and 1 multiply. Stage s has two barriers: `full` (its
/// copies landed: the producer's expect-tx and the TMA bytes) and `empty`
/// (both consumer warpgroups are done reading it). Both sides count fills
/// across tiles (`use`), so the producer runs up to `stages` K tiles ahead
/// of the consumers, into the next output tile while they write this one.
///
/// With a `tmaStore` destination, each consumer warpgroup writes its tiles
/// back by TMA stores through two boxes of its own after the stages,
/// alternating (TmaStoreEpilogue), and the next tile's K loop starts as
/// soon as the last box is handed to the TMA unit.
///
/// With `multicast` (sharesTilesOfB), blocks 2c and 2c + 1 form a cluster
/// whose tiles (m, n) and (m + 1, n) share B's columns at every K tile:
/// each producer copies its A and half of B, multicast into both blocks'
/// stage, so B crosses L2 once for two tiles. A stage is then refilled by
/// either block's producer, so its `empty` barrier counts the consumer
/// warpgroups of both blocks (4), each releasing a stage in both; the
/// cluster meets once its barriers are initialized and again before any
/// block exits (the other may still arrive on its barriers).
///
/// With `pingpong` (CUTLASS's ping-pong), the two consumer warpgroups take
/// the block's tiles by turns, each a whole 128 x 128 tile (two m64n128
/// accumulator structs, 64 f32 each), and take turns at the tensor cores
/// too: a warpgroup's K loop waits for the other's to end (named barriers
/// 3 and 4, one a warpgroup's turn), so one's write-back runs under the
/// other's wgmmas. Each fill is then read by one warpgroup: `empty` counts
/// one arrival.
void buildPersistentKernel(linalg::GenericOp op, const WarpgroupLayout &layout,
                           int64_t multiprocessors, Value tmaStore,
                           bool multicast, bool pingpong) {
  const WarpgroupPipeline &pipeline = layout.pipeline;
  TensorCoreTile tile{kBlockM, pipeline.tile.blockN, 8, 1};
  GpuMatmul probe(op);
  int64_t tiles = llvm::divideCeil(probe.m, kBlockM) *
                  llvm::divideCeil(probe.n, tile.blockN) * probe.batches;
  int64_t blocks = std::min(tiles, multiprocessors);
  // Whole clusters: every block of one takes as many tiles as its partner.
  // (Tiles pair up, so there are at least 2 even on a 1-SM target.)
  if (multicast)
    blocks = std::max<int64_t>(2, blocks - blocks % 2);
  TensorCoreKernel kernel(op, tile, TypeRange(), pipeline.bytes,
                          kProducerThreads, blocks, multicast ? 2 : 0);
  WarpgroupMatmul w(kernel, layout, multicast);
  std::optional<TmaStoreEpilogue> epilogue;
  if (tmaStore)
    epilogue.emplace(kernel, tmaStore);
  const IndexMath &im = kernel.im;
  OpBuilder &k = kernel.k;
  Location loc = op.getLoc();
  const int64_t stages = w.stages, kTiles = w.kTiles;

  // `full` counts the producer's one arrival; a stage is released into
  // `empty` once per consumer warpgroup, by its first thread, as CUTLASS's
  // PipelineTmaAsync does: a warpgroup's wgmmas are complete for all its
  // threads once wait_group returns in one of them.
  int64_t releases = pingpong ? 1 : kConsumerThreads / kWarpgroupThreads;
  StageBarriers made = createStageBarriers(
      kernel, stages, {1, releases * (multicast ? 2 : 1)}, multicast);
  Value full = made.groups[0], empty = made.groups[1];

  Value firstTile = kernel.launch.getBlockIds().x;
  Value zero = im.cst(k, 0);
  // The (K tile, fill count) loop of one output tile on either side.
  auto kLoop = [&](OpBuilder &b, Value use, ValueRange extra,
                   function_ref<SmallVector<Value>(OpBuilder &, Value kTile,
                                                   Value stage, Value use,
                                                   ValueRange extra)>
                       body) {
    SmallVector<Value> inits{use};
    llvm::append_range(inits, extra);
    auto loop = scf::ForOp::create(b, loc, im.cst(b, 0), im.cst(b, kTiles),
                                   im.cst(b, 1), inits);
    OpBuilder l = OpBuilder::atBlockBegin(loop.getBody());
    Value current = loop.getRegionIterArgs()[0];
    SmallVector<Value> yielded{im.addc(l, current, 1)};
    llvm::append_range(yielded,
                       body(l, loop.getInductionVar(),
                            im.remc(l, current, stages), current,
                            loop.getRegionIterArgs().drop_front()));
    scf::YieldOp::create(l, loc, yielded);
    return loop;
  };
  // The loop over this block's output tiles, carrying the fill count.
  auto tileLoop = [&](OpBuilder &b) {
    return scf::ForOp::create(b, loc, firstTile, im.cst(b, tiles),
                              im.cst(b, blocks), ValueRange{zero});
  };

  Value consumer = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ult,
                                         kernel.tid, im.cst(k, kConsumerThreads));
  // One if/else, a warpgroup's role per branch: ptxas applies setmaxnreg
  // only so.
  auto roles = scf::IfOp::create(k, loc, consumer, /*withElseRegion=*/true);

  // The producer: one thread issues every copy; a stage is refilled once
  // the consumers released its previous fill (the wait on the phase before
  // the first passes at once).
  {
    OpBuilder p = roles.getElseBodyBuilder();
    NVVM::SetMaxRegisterOp::create(p, loc, kProducerRegisters,
                                   NVVM::SetMaxRegisterAction::decrease);
    Value issuer = arith::CmpIOp::create(p, loc, arith::CmpIPredicate::eq,
                                         kernel.tid,
                                         im.cst(p, kConsumerThreads));
    auto only = scf::IfOp::create(p, loc, issuer, /*withElseRegion=*/false);
    OpBuilder o = only.getThenBodyBuilder();
    scf::ForOp tilesLoop = tileLoop(o);
    OpBuilder t = OpBuilder::atBlockBegin(tilesLoop.getBody());
    kernel.placeTile(t, tilesLoop.getInductionVar());
    scf::ForOp loads = kLoop(
        t, tilesLoop.getRegionIterArgs()[0], ValueRange(),
        [&](OpBuilder &l, Value kTile, Value stage, Value use, ValueRange) {
          Value released = arith::XOrIOp::create(
              l, loc, phaseParity(l, im, im.divc(l, use, stages)),
              arith::ConstantIntOp::create(l, loc, 1, 1));
          nvgpu::MBarrierTryWaitParityOp::create(l, loc, empty, released,
                                                 im.cst(l, 10000000), stage);
          w.load(l, full, stage, kTile, Value());
          return SmallVector<Value>();
        });
    scf::YieldOp::create(t, loc, loads.getResult(0));
  }

  // Ping-pong consumers.
  if (pingpong) {
    OpBuilder c = roles.getThenBodyBuilder();
    NVVM::SetMaxRegisterOp::create(c, loc, kConsumerRegisters,
                                   NVVM::SetMaxRegisterAction::increase);
    Value warpgroup = im.divc(c, kernel.warp, 4);
    Value signals = arith::CmpIOp::create(
        c, loc, arith::CmpIPredicate::eq,
        im.remc(c, kernel.tid, kWarpgroupThreads), im.cst(c, 0));
    auto release = [&](OpBuilder &b, Value stage) {
      scf::IfOp::create(b, loc, signals, [&](OpBuilder &then, Location) {
        nvgpu::MBarrierArriveOp::create(
            then, loc, nvgpu::MBarrierTokenType::get(then.getContext()), empty,
            stage);
        scf::YieldOp::create(then, loc);
      });
    };
    // The tile's two 64-row blocks; TensorCoreKernel's write-back and
    // accumulator loads place a thread's rows by warpRow, which for block h
    // is that of warp 4h + (warp % 4).
    Value rowInBlock = im.mulc(c, im.remc(c, kernel.warp, 4), 16);
    Value defaultWarpRow = kernel.warpRow;
    auto forBlock = [&](int64_t h, function_ref<void()> body) {
      kernel.warpRow = im.addc(k, rowInBlock, h * kWarpgroupRows);
      body();
      kernel.warpRow = defaultWarpRow;
    };
    // The block's tiles j = warpgroup, warpgroup + 2, ...: tile index
    // blockIdx.x + j * blocks, fills j * kTiles on.
    auto tilesLoop = scf::ForOp::create(
        c, loc, im.add(c, firstTile, im.mulc(c, warpgroup, blocks)),
        im.cst(c, tiles), im.cst(c, 2 * blocks), ValueRange());
    k.setInsertionPointToStart(tilesLoop.getBody());
    Value tileIndex = tilesLoop.getInductionVar();
    kernel.placeTile(k, tileIndex);
    Value firstUse = im.mulc(
        k, im.divc(k, arith::SubIOp::create(k, loc, tileIndex, firstTile), blocks),
        kTiles);
    // Both blocks' initial accumulators pass through pinRegisters: left
    // alone, LLVM materialized the second block's zeros between the first
    // K step's wgmmas, and ptxas then injected warpgroup.arrive (C7519).
    SmallVector<Value> initial;
    for (int64_t h = 0; h < 2; ++h)
      forBlock(h, [&] {
        SmallVector<Value> pinned =
            pinRegisters(k, loc, w.unpack(k, w.initialAccumulators()));
        Value acc = LLVM::PoisonOp::create(k, loc, w.accType);
        for (auto [i, v] : llvm::enumerate(pinned))
          acc = LLVM::InsertValueOp::create(k, loc, acc, v, int64_t(i));
        initial.push_back(acc);
      });
    // The tensor cores are this warpgroup's once the other's last wgmmas on
    // the block's previous tile are issued (no wait before the block's first
    // tile); the accumulators are set up before, off the turn.
    Value notFirst = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ne,
                                           tileIndex, firstTile);
    scf::IfOp::create(k, loc, notFirst, [&](OpBuilder &then, Location) {
      namedBarrierOfWarpgroup(then, loc, warpgroup, "bar.sync", 3, 4,
                              kConsumerThreads);
      scf::YieldOp::create(then, loc);
    });
    SmallVector<Value> rowBlocks{im.cst(k, 0), im.cst(k, 1)};
    scf::ForOp multiplies = kLoop(
        k, firstUse, initial,
        [&](OpBuilder &l, Value kTile, Value stage, Value use,
            ValueRange accs) {
          nvgpu::MBarrierTryWaitParityOp::create(
              l, loc, full, phaseParity(l, im, im.divc(l, use, stages)),
              im.cst(l, 10000000), stage);
          SmallVector<Value> next = w.multiply(l, stage, accs, rowBlocks);
          NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 1);
          Value notFirstK = arith::CmpIOp::create(
              l, loc, arith::CmpIPredicate::ne, kTile, im.cst(l, 0));
          scf::IfOp::create(l, loc, notFirstK, [&](OpBuilder &then, Location) {
            release(then, im.remc(then, im.addc(then, use, stages - 1), stages));
            scf::YieldOp::create(then, loc);
          });
          return next;
        });
    // The other warpgroup's turn once this one's last wgmmas are issued (as
    // CUTLASS hands it over, before the tail wait: the tensor cores run
    // them in order, and the accumulators are each warpgroup's own), if the
    // block has a next tile (the other's).
    Value more = im.below(k, im.addc(k, tileIndex, blocks), tiles);
    scf::IfOp::create(k, loc, more, [&](OpBuilder &then, Location) {
      namedBarrierOfWarpgroup(then, loc, warpgroup, "bar.arrive", 4, 3,
                              kConsumerThreads);
      scf::YieldOp::create(then, loc);
    });
    NVVM::WgmmaWaitGroupSyncOp::create(k, loc, 0);
    release(k, im.remc(k, im.addc(k, multiplies.getResult(0), stages - 1), stages));
    for (int64_t h = 0; h < 2; ++h)
      forBlock(h, [&] {
        SmallVector<Value> accs = w.unpack(k, multiplies.getResult(1 + h));
        if (epilogue)
          epilogue->store(
              k, accs,
              [&](OpBuilder &b, Value warpgroup, int64_t box) {
                return im.add(b, w.base,
                              im.addc(b, im.mulc(b, warpgroup, 2 * kStoreBoxBytes),
                                      stages * w.stageBytes +
                                          box % 2 * kStoreBoxBytes));
              },
              /*reuse=*/true, rowBlocks[h]);
        else
          kernel.writeBack(accs);
      });
    // (The loop carries nothing: its body ends in the builder's own yield.)
    if (epilogue) {
      k.setInsertionPointAfter(tilesLoop);
      epilogue->drain(k);
    }
  }

  // The consumers: per tile, the accumulators from the fill (or C), the K
  // loop, and the write-back while the producer loads ahead.
  if (!pingpong) {
    OpBuilder c = roles.getThenBodyBuilder();
    NVVM::SetMaxRegisterOp::create(c, loc, kConsumerRegisters,
                                   NVVM::SetMaxRegisterAction::increase);
    Value signals = arith::CmpIOp::create(
        c, loc, arith::CmpIPredicate::eq,
        im.remc(c, kernel.tid, kWarpgroupThreads), im.cst(c, 0));
    auto release = [&](OpBuilder &b, Value stage) {
      scf::IfOp::create(b, loc, signals, [&](OpBuilder &then, Location) {
        if (multicast)
          arriveInBothBlocks(then, loc, empty, stage);
        else
          nvgpu::MBarrierArriveOp::create(
              then, loc, nvgpu::MBarrierTokenType::get(then.getContext()),
              empty, stage);
        scf::YieldOp::create(then, loc);
      });
    };
    scf::ForOp tilesLoop = tileLoop(c);
    k.setInsertionPointToStart(tilesLoop.getBody());
    kernel.placeTile(k, tilesLoop.getInductionVar());
    Value acc = w.initialAccumulators();
    scf::ForOp multiplies = kLoop(
        k, tilesLoop.getRegionIterArgs()[0], ValueRange{acc},
        [&](OpBuilder &l, Value kTile, Value stage, Value use,
            ValueRange accs) {
          nvgpu::MBarrierTryWaitParityOp::create(
              l, loc, full, phaseParity(l, im, im.divc(l, use, stages)),
              im.cst(l, 10000000), stage);
          Value next = w.multiply(l, stage, accs[0]);
          // The previous K tile's wgmmas are done: its stage is free.
          NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 1);
          Value notFirst = arith::CmpIOp::create(
              l, loc, arith::CmpIPredicate::ne, kTile, im.cst(l, 0));
          scf::IfOp::create(l, loc, notFirst, [&](OpBuilder &then, Location) {
            release(then, im.remc(then, im.addc(then, use, stages - 1), stages));
            scf::YieldOp::create(then, loc);
          });
          return SmallVector<Value>{next};
        });
    NVVM::WgmmaWaitGroupSyncOp::create(k, loc, 0);
    Value used = multiplies.getResult(0);
    release(k, im.remc(k, im.addc(k, used, stages - 1), stages));
    SmallVector<Value> accs = w.unpack(k, multiplies.getResult(1));
    if (epilogue)
      epilogue->store(
          k, accs,
          [&](OpBuilder &b, Value warpgroup, int64_t box) {
            return im.add(b, w.base,
                          im.addc(b, im.mulc(b, warpgroup, 2 * kStoreBoxBytes),
                                  stages * w.stageBytes +
                                      box % 2 * kStoreBoxBytes));
          },
          /*reuse=*/true);
    else
      kernel.writeBack(accs);
    scf::YieldOp::create(k, loc, used);
    if (epilogue) {
      k.setInsertionPointAfter(tilesLoop);
      epilogue->drain(k);
    }
  }
  k.setInsertionPointAfter(roles);
  if (multicast) {
    NVVM::ClusterArriveOp::create(k, loc, UnitAttr());
    NVVM::ClusterWaitOp::create(k, loc, UnitAttr());
  }
  kernel.close();
}

/// Whether the persistent kernel's blocks 2c and 2c + 1 always take tiles
/// (m, n) and (m + 1, n) of one batch entry: consecutive tile indices are
/// m-adjacent within a group of tile rows (placeTile), so every group must
/// have an even number of rows, which an even number of tile rows gives.
bool sharesTilesOfB(const GpuMatmul &mm) {
  return llvm::divideCeil(mm.m, kBlockM) % 2 == 0;
}

/// The persistent kernel's tile and stages: one block per SM, so the
/// stages take the SM's shared memory: 128 x 256 tiles where they give
/// every SM a tile with little padding (choosePipeline's rule), else
/// 128 x 128 (always with `pingpong`, a warpgroup's tile); as many stages
/// as fit beside `epilogueBytes`, at most kMaxStages + 2.
std::optional<WarpgroupPipeline>
choosePersistentPipeline(const GpuMatmul &mm, const TensorCoreTarget &target,
                         int64_t epilogueBytes, bool pingpong) {
  WarpgroupTile tile = !pingpong && tileFillsWave(mm.m, mm.n, mm.batches, kBlockM,
                                                  kTiles[0].blockN,
                                                  target.multiprocessors)
                           ? kTiles[0]
                           : kTiles[1];
  int64_t budget = target.sharedBudget(1) - kAtomBytes - epilogueBytes;
  int64_t stages = std::min(kMaxStages + 2, budget / tile.stageBytes());
  if (stages < 2)
    return std::nullopt;
  return WarpgroupPipeline{WarpgroupTile{tile.blockN, 1}, stages,
                           stages * tile.stageBytes() + kAtomBytes +
                               epilogueBytes};
}
} // namespace

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
    bool pingpong = target.pingpongWarpgroupMma &&
                    llvm::divideCeil(shape.m, kBlockM) *
                            llvm::divideCeil(shape.n, kTiles[1].blockN) *
                            shape.batches >=
                        2 * target.multiprocessors;
    std::optional<WarpgroupLayout> layout =
        readLayout(op, [&](const GpuMatmul &mm) {
          return choosePersistentPipeline(mm, target, epilogueBytes, pingpong);
        });
    if (!layout)
      return failure();
    GpuMatmul probe(op);
    buildPersistentKernel(op, *layout, target.multiprocessors, tmaStore,
                          target.tmaMulticast && sharesTilesOfB(probe),
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
