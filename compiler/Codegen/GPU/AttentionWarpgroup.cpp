//===- AttentionWarpgroup.cpp - The attention forward on wgmma (sm_90a) ---===//
//
// The forward of a kernel marked `loom.gpu_attention`, for sm_90a, in the
// manner of FlashAttention-3: a block of three warpgroups per 128 query
// rows of one batch entry. The producer warpgroup (its registers given up
// by setmaxnreg) has one thread copy the block's queries into shared
// memory once and the key blocks' K and V into a ring of stages, all by
// the TMA unit in the 128-byte swizzle wgmma's descriptors read: a stage's
// `full` mbarrier counts its bytes, its `empty` one the two consumer
// warpgroups' releases, which the producer waits for before refilling it.
// Each consumer warpgroup takes 64 of the rows, per key block of 128 (or
// 64):
//
//   S = Q K^T    wgmma m64nBk16, both operands in shared memory, K-major
//                (K's rows are S's columns, as a @ transpose(b));
//   the scores, the online softmax and P exactly as the mma.sync kernel's
//                (Warp::softmaxBlock): wgmma's m64nN accumulators are, warp
//                by warp, the m16n8 tiles that code walks;
//   O += P V     wgmma m64nDk16 with A in registers: the accumulators of S
//                tiles 2j and 2j + 1, rounded, are the A fragment of k step
//                j (the same identity as mma.sync's); V N-major from its
//                stage (as the matmul's N-contiguous B);
//
// then releases the stage. At the end O / l is stored, rounded. The
// consumers never wait for each other, so one's softmax overlaps the
// other's products. Fragments and accumulators pass through empty inline
// asm around the fences and waits (pinRegisters), so LLVM keeps their
// writes before a fence and their reads after a wait.
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
/// Query rows of a block (two consumer warpgroups of 64 each), its
/// consumers' threads, and the producer warpgroup's.
constexpr int64_t kBlockRows = 2 * kWarpgroupRows;
constexpr int64_t kWarpgroupThreads = 128, kConsumerThreads = 256, kProducerThreads = 128;
/// Registers a producer thread keeps and a consumer gets (setmaxnreg):
/// ptxas gives a block of three warpgroups 168 a thread, which spilled the
/// consumers (S and O are 128 f32 at heads of 128); 128 x 40 + 256 x 232
/// fit an SM's 64 Ki, as the persistent matmul and FlashAttention-3 split
/// them.
constexpr int64_t kProducerRegisters = 40, kConsumerRegisters = 232;
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

/// The launch being built, its shared memory and barriers, and the
/// producer's copies (issued by one thread, unpredicated).
struct ForwardKernel {
  const AttentionSpec &spec;
  const ForwardLayout &layout;
  Location loc;
  IndexMath im;
  Value queryMap, keyMap, valueMap;
  SmallVector<Value> batchIndices;
  /// The dynamic shared memory, its address and the aligned base's offset.
  Value dynamicShared, address, base;
  /// The stages' (and the queries') `full` barriers and the stages'
  /// `empty` ones.
  Value full, empty;

  Value stageOffset(OpBuilder &b, Value stage) const {
    return im.add(b, im.addc(b, base, layout.queryBytes), im.mulc(b, stage, layout.stageBytes()));
  }
  /// The TMA copy of `map`'s box at (row, column) of the batch entry into
  /// the shared bytes at `offset`, counted by barrier `barrier` of
  /// `barriers`.
  void copy(OpBuilder &b, Value map, Value operand, int64_t rows, Value offset, Value row,
            int64_t column, Value barriers, Value barrier) const {
    SmallVector<Value> coordinates(batchIndices);
    coordinates.append({row, im.cst(b, column)});
    std::reverse(coordinates.begin(), coordinates.end());
    Value view = memref::ViewOp::create(b, loc, boxType(operand, rows), dynamicShared, offset,
                                        ValueRange{});
    nvgpu::TmaAsyncLoadOp::create(b, loc, view, barriers, map, coordinates, barrier, Value(),
                                  Value());
  }
  /// Key block `block`'s K and V into `stage`.
  void loadBlock(OpBuilder &b, Value stage, Value block) const {
    nvgpu::MBarrierArriveExpectTxOp::create(b, loc, full, im.cst(b, layout.stageBytes()), stage,
                                            Value());
    Value offset = stageOffset(b, stage);
    Value first = im.mulc(b, block, layout.keyBlock);
    for (int64_t f = 0; f < spec.features / kRowElements; ++f)
      copy(b, keyMap, spec.key, layout.keyBlock,
           im.addc(b, offset, f * layout.keyBlock * kRowBytes), first, f * kRowElements, full,
           stage);
    int64_t boxes = spec.valueFeatures / kRowElements;
    for (int64_t rows = 0; rows < layout.keyBlock / kRowElements; ++rows)
      for (int64_t f = 0; f < boxes; ++f)
        copy(b, valueMap, spec.value, kRowElements,
             im.addc(b, offset, layout.keyBytes + (rows * boxes + f) * kBoxBytes),
             im.addc(b, first, rows * kRowElements), f * kRowElements, full, stage);
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
      b, loc, im.cst(b, spec.batch), im.cst(b, rowBlocks), im.cst(b, 1),
      im.cst(b, kConsumerThreads + kProducerThreads), im.cst(b, 1), im.cst(b, 1),
      arith::ConstantIntOp::create(b, loc, layout.bytes(), 32), Type(), ValueRange(),
      TypeRange());
  OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  // Causal blocks last first: they read the most keys.
  Value rowBlock = launch.getBlockIds().y;
  if (spec.causal)
    rowBlock = arith::SubIOp::create(k, loc, im.cst(k, rowBlocks - 1), rowBlock);
  Value queryBase = im.mulc(k, rowBlock, kBlockRows);

  ForwardKernel kernel{spec, layout, loc, im, queryMap, keyMap, valueMap, {}, {}, {}, {}, {}, {}};
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
  // `full`: stage s's copies landed (barrier `stages`: the queries'), one
  // arrival (the producer's expect-tx) and the bytes; `empty`: both
  // consumer warpgroups are done reading stage s, one arrival each.
  int64_t stages = layout.stages;
  auto group = [&](int64_t count) {
    return nvgpu::MBarrierCreateOp::create(
        k, loc,
        nvgpu::MBarrierGroupType::get(
            context, gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup), count));
  };
  kernel.full = group(stages + 1);
  kernel.empty = group(stages);
  Value first = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::eq, tid, im.cst(k, 0));
  for (int64_t s = 0; s <= stages; ++s)
    nvgpu::MBarrierInitOp::create(k, loc, kernel.full, im.cst(k, 1), im.cst(k, s), first);
  for (int64_t s = 0; s < stages; ++s)
    nvgpu::MBarrierInitOp::create(k, loc, kernel.empty,
                                  im.cst(k, kConsumerThreads / kWarpgroupThreads), im.cst(k, s),
                                  first);
  NVVM::FenceMbarrierInitOp::create(k, loc);
  gpu::BarrierOp::create(k, loc);

  // Keys through the diagonal of the block's last row (causal), in blocks.
  Value warp = im.divc(k, tid, 32), lane = im.remc(k, tid, 32);
  Value g = im.divc(k, lane, 4), t = im.remc(k, lane, 4);
  Warp w{k, loc, im, spec, kernel.batchIndices, launch.getBlockIds().x,
         g, t, im.mulc(k, t, 2), im.add(k, queryBase, im.mulc(k, warp, kRowsPerWarp)),
         tid, lane, {}};
  Value blocks = im.divc(k, w.keyEndAfter(queryBase, kBlockRows, layout.keyBlock),
                         layout.keyBlock);
  Value queryBarrier = im.cst(k, stages);

  auto roles = scf::IfOp::create(
      k, loc, arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ult, tid, im.cst(k, kConsumerThreads)),
      /*withElseRegion=*/true);
  // One if/else, a warpgroup's role per branch (ptxas applies setmaxnreg
  // only so). The producer warpgroup: its first thread copies the queries, then each key
  // block into its stage once both warpgroups released the stage's
  // previous block (the wait on the phase before a stage's first fill
  // passes at once). The copies are unpredicated: inside the branch on the
  // thread, LLVM would fold a predicate to a constant, which inline PTX
  // cannot take.
  {
    OpBuilder p = roles.getElseBodyBuilder();
    NVVM::SetMaxRegisterOp::create(p, loc, kProducerRegisters,
                                   NVVM::SetMaxRegisterAction::decrease);
    Value issuer =
        arith::CmpIOp::create(p, loc, arith::CmpIPredicate::eq, tid, im.cst(p, kConsumerThreads));
    auto only = scf::IfOp::create(p, loc, issuer, /*withElseRegion=*/false);
    OpBuilder o = only.getThenBodyBuilder();
    nvgpu::MBarrierArriveExpectTxOp::create(o, loc, kernel.full, im.cst(o, layout.queryBytes),
                                            queryBarrier, Value());
    for (int64_t f = 0; f < spec.features / kRowElements; ++f)
      kernel.copy(o, queryMap, spec.query, kBlockRows,
                  im.addc(o, kernel.base, f * kBlockRows * kRowBytes), queryBase,
                  f * kRowElements, kernel.full, queryBarrier);
    auto loads = scf::ForOp::create(o, loc, im.cst(o, 0), blocks, im.cst(o, 1));
    OpBuilder l = OpBuilder::atBlockBegin(loads.getBody());
    Value block = loads.getInductionVar();
    Value stage = im.remc(l, block, stages);
    Value released = arith::XOrIOp::create(l, loc, phaseParity(l, im, im.divc(l, block, stages)),
                                           arith::ConstantIntOp::create(l, loc, 1, 1));
    nvgpu::MBarrierTryWaitParityOp::create(l, loc, kernel.empty, released, im.cst(l, 10000000),
                                           stage);
    kernel.loadBlock(l, stage, block);
  }

  // The consumers: two warpgroups of 64 query rows each.
  OpBuilder c = roles.getThenBodyBuilder();
  NVVM::SetMaxRegisterOp::create(c, loc, kConsumerRegisters, NVVM::SetMaxRegisterAction::increase);
  Value warpgroup = im.divc(c, warp, 4);
  nvgpu::MBarrierTryWaitParityOp::create(c, loc, kernel.full, phaseParity(c, im, im.cst(c, 0)),
                                         im.cst(c, 10000000), queryBarrier);
  // The warpgroup's 64 query rows, K-major A: a descriptor per 64
  // features, stepping 32 bytes along the swizzled rows per k16.
  SmallVector<Value> queryDescriptors;
  for (int64_t f = 0; f < spec.features / kRowElements; ++f)
    queryDescriptors.push_back(matrixDescriptor(
        c, loc,
        im.add(c, kernel.address,
               im.add(c, im.addc(c, kernel.base, f * kBlockRows * kRowBytes),
                      im.mulc(c, warpgroup, kWarpgroupRows * kRowBytes))),
        16, kAtomBytes));
  Value signals = arith::CmpIOp::create(c, loc, arith::CmpIPredicate::eq,
                                        im.remc(c, tid, kWarpgroupThreads), im.cst(c, 0));
  auto types = NVVM::WGMMATypesAttr::get(
      context, spec.element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16);
  auto scoreType = LLVM::LLVMStructType::getLiteral(
      context, SmallVector<Type>(layout.keyBlock / 2, c.getF32Type()));

  Warp cw{c, loc, im, spec, w.batchIndices, w.batch, w.g, w.t, w.t2, w.rowBase, tid, lane, {}};
  int64_t outputValues = spec.valueFeatures / 2;
  SmallVector<Value> init(outputValues, cw.f32Constant(0.0));
  init.append({cw.minusInf(), cw.minusInf(), cw.f32Constant(0.0), cw.f32Constant(0.0)});
  auto loop = scf::ForOp::create(c, loc, im.cst(c, 0), blocks, im.cst(c, 1), init);
  {
    OpBuilder l = OpBuilder::atBlockBegin(loop.getBody());
    Warp lw{l, loc, im, spec, w.batchIndices, w.batch, w.g, w.t, w.t2, w.rowBase,
            tid, lane, {}};
    Value block = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    Value stage = im.remc(l, block, stages);
    nvgpu::MBarrierTryWaitParityOp::create(l, loc, kernel.full,
                                           phaseParity(l, im, im.divc(l, block, stages)),
                                           im.cst(l, 10000000), stage);
    Value stageAddress = im.add(l, kernel.address, kernel.stageOffset(l, stage));
    // S = Q K^T, the first product not accumulating (scale-d 0).
    Value scores = LLVM::PoisonOp::create(l, loc, scoreType);
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
            NVVM::WGMMAScaleOutAttr::get(context, f == 0 && kk == 0 ? NVVM::WGMMAScaleOut::zero
                                                                    : NVVM::WGMMAScaleOut::one),
            NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one),
            NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one),
            NVVM::MMALayoutAttr::get(context, NVVM::MMALayout::row),
            NVVM::MMALayoutAttr::get(context, NVVM::MMALayout::col),
            NVVM::MMAIntOverflowAttr());
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(l, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 0);

    SmallVector<Tile> s = tilesOf(pinRegisters(l, loc, unpackStruct(l, loc, scores)));
    SmallVector<Tile> output = tilesOf(carried.take_front(outputValues));
    Value maxima[2] = {carried[outputValues], carried[outputValues + 1]};
    Value sums[2] = {carried[outputValues + 2], carried[outputValues + 3]};
    lw.softmaxBlock(im.mulc(l, block, layout.keyBlock), s, output, maxima, sums);

    // O += P V: per 16 keys, P's A fragment from two score tiles and V's
    // 16 rows (N-major: 16 rows of 128 bytes a step in its 64-key group,
    // 64-feature boxes kBoxBytes apart). P's fragments and the rescaled O
    // are written before the fence.
    SmallVector<Value> fragments;
    for (int64_t j = 0; j < layout.keyBlock / kInstructionK; ++j)
      for (Value reg : lw.aFragment(s[2 * j], s[2 * j + 1]))
        fragments.push_back(registerWord(l, loc, reg));
    SmallVector<Value> operands = flat(output);
    llvm::append_range(operands, fragments);
    operands = pinRegisters(l, loc, operands);
    Value values = packStruct(l, loc, ArrayRef<Value>(operands).take_front(outputValues));
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
      values = warpgroupMmaRegisterA(
          l, loc, spec.element, values,
          ArrayRef<Value>(operands).slice(outputValues + 4 * j, 4), descriptor,
          spec.valueFeatures, /*nMajorB=*/true);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(l, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 0);
    SmallVector<Value> yielded = pinRegisters(l, loc, unpackStruct(l, loc, values));

    // This warpgroup is done with the stage: release it to the producer.
    scf::IfOp::create(l, loc, signals, [&](OpBuilder &then, Location) {
      nvgpu::MBarrierArriveOp::create(then, loc,
                                      nvgpu::MBarrierTokenType::get(then.getContext()),
                                      kernel.empty, stage);
      scf::YieldOp::create(then, loc);
    });
    yielded.append({maxima[0], maxima[1], sums[0], sums[1]});
    scf::YieldOp::create(l, loc, yielded);
  }
  ValueRange results = loop.getResults();
  Value sums[2] = {cw.quadSum(results[outputValues + 2]), cw.quadSum(results[outputValues + 3])};
  cw.storeRows(spec.outputs[0], tilesOf(results.take_front(outputValues)),
               [&](Value x, int64_t half) { return cw.div(x, sums[half]); });
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
