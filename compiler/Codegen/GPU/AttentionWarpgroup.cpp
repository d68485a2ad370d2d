//===- AttentionWarpgroup.cpp - The attention forward on wgmma (sm_90a) ---===//
//
// The forward of a kernel marked `loom.gpu_attention`, for sm_90a, in the
// manner of FlashAttention-3 without its producer warpgroup: a block of two
// warpgroups (256 threads) per 128 query rows of one batch entry, each
// warpgroup 64 rows. The TMA unit copies the block's queries into shared
// memory once and the key blocks' K and V into a ring of stages (thread 0
// issues every copy; an mbarrier per stage counts its bytes), all in the
// 128-byte swizzle wgmma's descriptors read. Per key block of 128 (or 64):
//
//   S = Q K^T    wgmma m64nBk16, both operands in shared memory, K-major
//                (K's rows are S's columns, as a @ transpose(b));
//   the scores, the online softmax and P exactly as the mma.sync kernel's
//                (Warp::softmaxBlock): wgmma's m64nN accumulators are, warp
//                by warp, the m16n8 tiles that code walks;
//   O += P V     wgmma m64nDk16 with A in registers: the accumulators of S
//                tiles 2j and 2j + 1, rounded, are the A fragment of k step
//                j (the same identity as mma.sync's); V N-major from its
//                stage (as the matmul's N-contiguous B).
//
// then every thread has finished reading the stage (wait_group 0, a block
// barrier) and thread 0 refills it with the block `stages` ahead. At the end
// O / l is stored, rounded. Each warpgroup runs its own chain; the two meet
// only at the stage barrier, so one's softmax overlaps the other's wgmmas.
//
// Shapes: bf16 or f16, heads of 64 or 128 (Q and V's features), queries a
// multiple of 128, keys of 64, operands a tensor map can read (at most 3
// batch dims); the others keep AttentionKernel.cpp's mma.sync forward.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/AttentionWarp.h"
#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/Passes.h"
#include "Codegen/GPU/WarpgroupMma.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::attention;

namespace {
/// Query rows of a block (two warpgroups of 64), and its threads.
constexpr int64_t kBlockRows = 2 * kWarpgroupRows, kThreads = 256;
constexpr int64_t kMaxStages = 4;
/// One 64 x 64 box of 16-bit elements.
constexpr int64_t kBoxBytes = kRowElements * kRowBytes;

/// Where the launch's dynamic shared memory puts things, from its first
/// kAtomBytes boundary: the queries (features / 64 boxes of 128 rows),
/// then `stages` stages of a key block's K (features / 64 boxes of
/// keyBlock rows) and V (keyBlock / 64 row groups of valueFeatures / 64
/// boxes of 64 x 64, the matmul's N-contiguous B layout per 64 keys).
struct ForwardLayout {
  int64_t keyBlock, stages;
  int64_t queryBytes, keyBytes, valueBytes;
  int64_t stageBytes() const { return keyBytes + valueBytes; }
  int64_t bytes() const { return kAtomBytes + queryBytes + stages * stageBytes(); }
};

std::optional<ForwardLayout> chooseLayout(const AttentionSpec &spec, int64_t sharedPerBlock) {
  if (spec.backward() || !(spec.element.isBF16() || spec.element.isF16()))
    return std::nullopt;
  auto head = [](int64_t features) { return features == 64 || features == 128; };
  if (!head(spec.features) || !head(spec.valueFeatures) || spec.queries % kBlockRows)
    return std::nullopt;
  for (Value operand : {spec.query, spec.key, spec.value})
    if (!isTensorMapReadable(operand))
      return std::nullopt;
  ForwardLayout layout;
  layout.keyBlock = spec.keys % 128 == 0 ? 128 : spec.keys % 64 == 0 ? 64 : 0;
  if (!layout.keyBlock)
    return std::nullopt;
  int64_t bytes = spec.element.getIntOrFloatBitWidth() / 8;
  layout.queryBytes = kBlockRows * spec.features * bytes;
  layout.keyBytes = layout.keyBlock * spec.features * bytes;
  layout.valueBytes = layout.keyBlock * spec.valueFeatures * bytes;
  layout.stages = std::min(kMaxStages, (sharedPerBlock - kAtomBytes - layout.queryBytes) /
                                           layout.stageBytes());
  if (layout.stages < 2)
    return std::nullopt;
  return layout;
}

/// The launch being built, its shared memory and barriers.
struct ForwardKernel {
  const AttentionSpec &spec;
  const ForwardLayout &layout;
  Location loc;
  IndexMath im;
  Value queryMap, keyMap, valueMap;
  OpBuilder &k;
  SmallVector<Value> batchIndices;
  /// The dynamic shared memory, its address and the aligned base's offset.
  Value dynamicShared, address, base;
  /// Barriers 0 .. stages - 1 count the stages' copies, barrier `stages`
  /// the queries'; thread 0 (`leader`) issues every copy.
  Value barriers, leader;

  Value stageOffset(OpBuilder &b, Value stage) const {
    return im.add(b, im.addc(b, base, layout.queryBytes), im.mulc(b, stage, layout.stageBytes()));
  }
  /// The TMA copy of `map`'s box at (row, column) of the batch entry into
  /// the shared bytes at `offset`, counted by barrier `barrier`.
  void copy(OpBuilder &b, Value map, Value operand, int64_t rows, Value offset, Value row,
            int64_t column, Value barrier) const {
    SmallVector<Value> coordinates(batchIndices);
    coordinates.append({row, im.cst(b, column)});
    std::reverse(coordinates.begin(), coordinates.end());
    Value view = memref::ViewOp::create(b, loc, boxType(operand, rows), dynamicShared, offset,
                                        ValueRange{});
    nvgpu::TmaAsyncLoadOp::create(b, loc, view, barriers, map, coordinates, barrier, Value(),
                                  leader);
  }
  /// Key block `block`'s K and V into `stage`.
  void loadBlock(OpBuilder &b, Value stage, Value block) const {
    nvgpu::MBarrierArriveExpectTxOp::create(b, loc, barriers, im.cst(b, layout.stageBytes()),
                                            stage, leader);
    Value offset = stageOffset(b, stage);
    Value first = im.mulc(b, block, layout.keyBlock);
    for (int64_t f = 0; f < spec.features / kRowElements; ++f)
      copy(b, keyMap, spec.key, layout.keyBlock,
           im.addc(b, offset, f * layout.keyBlock * kRowBytes), first, f * kRowElements, stage);
    int64_t boxes = spec.valueFeatures / kRowElements;
    for (int64_t rows = 0; rows < layout.keyBlock / kRowElements; ++rows)
      for (int64_t f = 0; f < boxes; ++f)
        copy(b, valueMap, spec.value, kRowElements,
             im.addc(b, offset, layout.keyBytes + (rows * boxes + f) * kBoxBytes),
             im.addc(b, first, rows * kRowElements), f * kRowElements, stage);
  }
};

/// The struct of `values` (wgmma's accumulators).
Value packStruct(OpBuilder &b, Location loc, ArrayRef<Value> values) {
  auto type = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(values.size(), b.getF32Type()));
  Value packed = LLVM::PoisonOp::create(b, loc, type);
  for (auto [i, v] : llvm::enumerate(values))
    packed = LLVM::InsertValueOp::create(b, loc, packed, v, int64_t(i));
  return packed;
}
SmallVector<Value> unpackStruct(OpBuilder &b, Location loc, Value packed) {
  SmallVector<Value> values;
  auto type = cast<LLVM::LLVMStructType>(packed.getType());
  for (int64_t i = 0, e = type.getBody().size(); i < e; ++i)
    values.push_back(LLVM::ExtractValueOp::create(b, loc, packed, i));
  return values;
}

void buildForward(OpBuilder &b, Location loc, const AttentionSpec &spec,
                  const ForwardLayout &layout) {
  IndexMath im{loc};
  MLIRContext *context = b.getContext();
  // The tensor maps, made on the host before the launch: boxes of 128
  // query rows, of a key block's rows, and of 64 value rows.
  Value queryMap = createTensorMap(b, loc, spec.query, kBlockRows);
  Value keyMap = createTensorMap(b, loc, spec.key, layout.keyBlock);
  Value valueMap = createTensorMap(b, loc, spec.value, kRowElements);
  int64_t rowBlocks = spec.queries / kBlockRows;
  auto launch = gpu::LaunchOp::create(
      b, loc, im.cst(b, spec.batch), im.cst(b, rowBlocks), im.cst(b, 1), im.cst(b, kThreads),
      im.cst(b, 1), im.cst(b, 1), arith::ConstantIntOp::create(b, loc, layout.bytes(), 32),
      Type(), ValueRange(), TypeRange());
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value warp = im.divc(k, tid, 32), lane = im.remc(k, tid, 32);
  Value warpgroup = im.divc(k, warp, 4);
  // Causal blocks last first: they read the most keys.
  Value rowBlock = launch.getBlockIds().y;
  if (spec.causal)
    rowBlock = arith::SubIOp::create(k, loc, im.cst(k, rowBlocks - 1), rowBlock);
  Value queryBase = im.mulc(k, rowBlock, kBlockRows);

  ForwardKernel kernel{spec, layout, loc, im, queryMap, keyMap, valueMap, k, {}, {}, {}, {}, {},
                       {}};
  ArrayRef<int64_t> shape = cast<MemRefType>(spec.query.getType()).getShape();
  Value rest = launch.getBlockIds().x;
  for (int64_t size : llvm::reverse(shape.drop_back(2))) {
    kernel.batchIndices.insert(kernel.batchIndices.begin(), im.remc(k, rest, size));
    rest = im.divc(k, rest, size);
  }
  kernel.dynamicShared = gpu::DynamicSharedMemoryOp::create(
      k, loc,
      MemRefType::get({ShapedType::kDynamic}, k.getI8Type(), MemRefLayoutAttrInterface(),
                      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup)));
  kernel.address = memref::ExtractAlignedPointerAsIndexOp::create(k, loc, kernel.dynamicShared);
  kernel.base = im.remc(k,
                        arith::SubIOp::create(k, loc, im.cst(k, kAtomBytes),
                                              im.remc(k, kernel.address, kAtomBytes)),
                        kAtomBytes);
  int64_t stages = layout.stages;
  kernel.barriers = nvgpu::MBarrierCreateOp::create(
      k, loc,
      nvgpu::MBarrierGroupType::get(
          context, gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup),
          stages + 1));
  kernel.leader = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::eq, tid, im.cst(k, 0));
  for (int64_t s = 0; s <= stages; ++s)
    nvgpu::MBarrierInitOp::create(k, loc, kernel.barriers, im.cst(k, 1), im.cst(k, s),
                                  kernel.leader);
  NVVM::FenceMbarrierInitOp::create(k, loc);
  gpu::BarrierOp::create(k, loc);

  Value g = im.divc(k, lane, 4), t = im.remc(k, lane, 4);
  Warp w{k, loc, im, spec, kernel.batchIndices, launch.getBlockIds().x,
         g, t, im.mulc(k, t, 2), im.add(k, queryBase, im.mulc(k, warp, kRowsPerWarp)),
         tid, lane, {}};
  // Keys through the diagonal of the block's last row (causal), in blocks.
  Value blocks = im.divc(k, w.keyEndAfter(queryBase, kBlockRows, layout.keyBlock),
                         layout.keyBlock);

  // The queries, then the first stages' key blocks.
  Value queryBarrier = im.cst(k, stages);
  nvgpu::MBarrierArriveExpectTxOp::create(k, loc, kernel.barriers,
                                          im.cst(k, layout.queryBytes), queryBarrier,
                                          kernel.leader);
  for (int64_t f = 0; f < spec.features / kRowElements; ++f)
    kernel.copy(k, queryMap, spec.query, kBlockRows,
                im.addc(k, kernel.base, f * kBlockRows * kRowBytes), queryBase,
                f * kRowElements, queryBarrier);
  // (Branches test the block count only: inside a branch on the leader,
  // LLVM would fold the copies' predicate to a constant, which inline PTX
  // cannot take.)
  for (int64_t s = 0; s < stages; ++s) {
    Value stage = im.cst(k, s);
    scf::IfOp::create(k, loc, arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ult, stage, blocks),
                      [&](OpBuilder &then, Location) {
                        kernel.loadBlock(then, stage, stage);
                        scf::YieldOp::create(then, loc);
                      });
  }
  nvgpu::MBarrierTryWaitParityOp::create(k, loc, kernel.barriers,
                                         phaseParity(k, im, im.cst(k, 0)),
                                         im.cst(k, 10000000), queryBarrier);

  // The warpgroup's 64 query rows, K-major A: a descriptor per 64
  // features, stepping 32 bytes along the swizzled rows per k16.
  SmallVector<Value> queryDescriptors;
  for (int64_t f = 0; f < spec.features / kRowElements; ++f)
    queryDescriptors.push_back(matrixDescriptor(
        k, loc,
        im.add(k, kernel.address,
               im.add(k, im.addc(k, kernel.base, f * kBlockRows * kRowBytes),
                      im.mulc(k, warpgroup, kWarpgroupRows * kRowBytes))),
        16, kAtomBytes));
  auto types = NVVM::WGMMATypesAttr::get(
      context, spec.element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16);
  auto scoreType = LLVM::LLVMStructType::getLiteral(
      context, SmallVector<Type>(layout.keyBlock / 2, k.getF32Type()));

  int64_t outputValues = spec.valueFeatures / 2;
  SmallVector<Value> init(outputValues, w.f32Constant(0.0));
  init.append({w.minusInf(), w.minusInf(), w.f32Constant(0.0), w.f32Constant(0.0)});
  auto loop = scf::ForOp::create(k, loc, im.cst(k, 0), blocks, im.cst(k, 1), init);
  {
    OpBuilder l = OpBuilder::atBlockBegin(loop.getBody());
    Warp lw{l, loc, im, spec, w.batchIndices, w.batch, w.g, w.t, w.t2, w.rowBase,
            tid, lane, {}};
    Value block = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    Value stage = im.remc(l, block, stages);
    nvgpu::MBarrierTryWaitParityOp::create(l, loc, kernel.barriers,
                                           phaseParity(l, im, im.divc(l, block, stages)),
                                           im.cst(l, 10000000), stage);
    Value stageAddress = im.add(l, kernel.address, kernel.stageOffset(l, stage));
    // S = Q K^T.
    Value scores = packStruct(l, loc, SmallVector<Value>(layout.keyBlock / 2,
                                                         lw.f32Constant(0.0)));
    NVVM::WgmmaFenceAlignedOp::create(l, loc);
    for (int64_t f = 0; f < spec.features / kRowElements; ++f) {
      Value keyDescriptor = matrixDescriptor(
          l, loc, im.addc(l, stageAddress, f * layout.keyBlock * kRowBytes), 16, kAtomBytes);
      for (int64_t kk = 0; kk < kRowElements / kInstructionK; ++kk)
        scores = NVVM::WgmmaMmaAsyncOp::create(
            l, loc, scoreType, scores,
            advanceDescriptor(l, loc, queryDescriptors[f], kk * 32),
            advanceDescriptor(l, loc, keyDescriptor, kk * 32),
            NVVM::MMAShapeAttr::get(context, kWarpgroupRows, layout.keyBlock, kInstructionK),
            types, types, NVVM::WGMMATypesAttr::get(context, NVVM::WGMMATypes::f32),
            NVVM::WGMMAScaleOutAttr::get(context, NVVM::WGMMAScaleOut::one),
            NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one),
            NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one),
            NVVM::MMALayoutAttr::get(context, NVVM::MMALayout::row),
            NVVM::MMALayoutAttr::get(context, NVVM::MMALayout::col),
            NVVM::MMAIntOverflowAttr());
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(l, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 0);

    SmallVector<Tile> s = tilesOf(unpackStruct(l, loc, scores));
    SmallVector<Tile> output = tilesOf(carried.take_front(outputValues));
    Value maxima[2] = {carried[outputValues], carried[outputValues + 1]};
    Value sums[2] = {carried[outputValues + 2], carried[outputValues + 3]};
    lw.softmaxBlock(im.mulc(l, block, layout.keyBlock), s, output, maxima, sums);

    // O += P V: per 16 keys, P's A fragment from two score tiles and V's
    // 16 rows (N-major: 16 rows of 128 bytes a step in its 64-key group,
    // 64-feature boxes kBoxBytes apart).
    Value values = packStruct(l, loc, flat(output));
    Value valueAddress = im.addc(l, stageAddress, layout.keyBytes);
    NVVM::WgmmaFenceAlignedOp::create(l, loc);
    for (int64_t j = 0; j < layout.keyBlock / kInstructionK; ++j) {
      int64_t group = j / (kRowElements / kInstructionK), step = j % (kRowElements / kInstructionK);
      Value descriptor = matrixDescriptor(
          l, loc,
          im.addc(l, valueAddress,
                  group * (spec.valueFeatures / kRowElements) * kBoxBytes +
                      step * kInstructionK * kRowBytes),
          kBoxBytes, kAtomBytes);
      values = warpgroupMmaRegisterA(l, loc, spec.element, values,
                                     lw.aFragment(s[2 * j], s[2 * j + 1]), descriptor,
                                     spec.valueFeatures, /*nMajorB=*/true);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(l, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 0);

    // Every thread is done with the stage: refill it.
    gpu::BarrierOp::create(l, loc);
    Value next = im.addc(l, block, stages);
    scf::IfOp::create(
        l, loc, arith::CmpIOp::create(l, loc, arith::CmpIPredicate::ult, next, blocks),
        [&](OpBuilder &then, Location) {
          kernel.loadBlock(then, stage, next);
          scf::YieldOp::create(then, loc);
        });
    SmallVector<Value> yielded = unpackStruct(l, loc, values);
    yielded.append({maxima[0], maxima[1], sums[0], sums[1]});
    scf::YieldOp::create(l, loc, yielded);
  }
  ValueRange results = loop.getResults();
  Value sums[2] = {w.quadSum(results[outputValues + 2]), w.quadSum(results[outputValues + 3])};
  w.storeRows(spec.outputs[0], tilesOf(results.take_front(outputValues)),
              [&](Value x, int64_t half) { return w.div(x, sums[half]); });
  gpu::TerminatorOp::create(k, loc);
  sinkViewsIntoLaunch(launch);
}
} // namespace

bool loom::attention::buildWarpgroupAttention(OpBuilder &b, Location loc,
                                              const AttentionSpec &spec,
                                              int64_t sharedPerBlock) {
  std::optional<ForwardLayout> layout = chooseLayout(spec, sharedPerBlock);
  if (!layout)
    return false;
  buildForward(b, loc, spec, *layout);
  return true;
}
