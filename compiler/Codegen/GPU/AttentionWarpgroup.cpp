//===- AttentionWarpgroup.cpp - Attention on wgmma (sm_90a) ---------------===//
//
// The launches of a kernel marked `loom.gpu_attention`, for sm_90a, in the
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
// then releases the stage. Each step issues the next block's Q K^T before
// its own softmax, so the tensor cores work through it (FlashAttention-3's
// overlap within a warpgroup), and waits once for both groups. At the end
// O / l is stored, rounded (and, where the op has that result, each row's
// log-sum-exp). The consumers never wait for each other, so one's softmax
// also overlaps the other's products. The backward's two launches
// (AttentionKernel.cpp's: the query side's one pass for dq, with the
// forward's log-sum-exp and rowsum(dO * O); the key side's dk and dv)
// share the skeleton (WarpgroupLaunch) and overlap their products with
// their math too, staggered where registers are short: a step's dp runs
// while p is formed from the scores the last step issued. Fragments and
// accumulators pass through empty inline asm around the fences and waits
// (pinRegisters), so LLVM keeps their writes before a fence and their
// reads after a wait.
//
// Shapes: bf16 or f16, heads of 64 or 128 (Q and V's features), operands a
// tensor map can read (at most 3 batch dims); the forward and the
// backward's query side need queries in blocks of 128 and keys of 64, its
// key side keys of 128 and queries of 32 or 64 (and, causal, every key block a
// query at or after its first key). A launch whose shapes do not fit
// keeps AttentionKernel.cpp's mma.sync launch.
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
/// Rows of a block (two consumer warpgroups of 64 each), its consumers'
/// threads, and the producer warpgroup's.
constexpr int64_t kBlockRows = 2 * kWarpgroupRows;
constexpr int64_t kConsumerThreads = 256, kProducerThreads = 128;
/// Registers a producer thread keeps and a consumer gets (setmaxnreg):
/// ptxas gives a block of three warpgroups 168 a thread, which spilled the
/// consumers (S and O are 128 f32 at heads of 128); 128 x 40 + 256 x 232
/// fit an SM's 64 Ki, as the persistent matmul and FlashAttention-3 split
/// them.
constexpr int64_t kProducerRegisters = 40, kConsumerRegisters = 232;
constexpr int64_t kMaxStages = 4;
/// The key side's blocks of queries (its first products' N): 64 at heads
/// of 64, where dk's and dv's accumulators leave the registers for them
/// (m64n64: a product's operands read from shared memory a third less per
/// FLOP than m64n32's); 32 at heads of 128 (blocks of 64 spilled 160-424
/// bytes there).
int64_t keySideQueryBlock(const AttentionSpec &spec) {
  return spec.features + spec.valueFeatures <= 128 && spec.queries % 64 == 0 ? 64 : 32;
}

/// An operand the TMA unit copies into shared memory, `rows` rows of
/// `width` features at a time (64 or 128): per `boxRows` rows, width / 64
/// boxes of boxRows x 64, 128-byte swizzled, `offset` bytes into the
/// launch's resident part or into each stage. Read K-major (its rows are a
/// product's M or N: needs boxRows == rows) through kMajor, N-major (its
/// rows are a product's K) through nMajor.
struct Tiles {
  Tiles(Value buffer, int64_t width, int64_t rows, int64_t boxRows)
      : buffer(buffer), width(width), rows(rows), boxRows(boxRows) {}
  Value buffer;
  int64_t width, rows, boxRows;
  int64_t offset = 0;
  /// The host's tensor map (WarpgroupLaunch::create).
  Value map;

  int64_t bytes() const { return rows * width * 2; }
  /// K-major: features f * 64 on, from row `row` (a multiple of 8) of the
  /// copy at `at` (an address); +32 bytes a k16 step.
  Value kMajor(OpBuilder &b, const IndexMath &im, Value at, int64_t f, Value row) const {
    assert(boxRows == rows && "K-major reads need the rows in one box");
    return matrixDescriptor(b, im.loc,
                            im.add(b, im.addc(b, at, offset + f * boxRows * kRowBytes),
                                   im.mulc(b, row, kRowBytes)),
                            16, kAtomBytes);
  }
  /// N-major: rows 16 j .. 16 j + 15 (k step j) by all the features, the
  /// 64-feature boxes boxRows x 128 bytes apart.
  Value nMajor(OpBuilder &b, const IndexMath &im, Value at, int64_t j) const {
    int64_t first = j * kInstructionK;
    int64_t group = first / boxRows, step = first % boxRows;
    return matrixDescriptor(
        b, im.loc,
        im.addc(b, at,
                offset + group * (width / kRowElements) * boxRows * kRowBytes + step * kRowBytes),
        boxRows * kRowBytes, kAtomBytes);
  }
};

/// Whether `spec`'s operands allow the wgmma kernels: 16-bit, heads of 64
/// or 128, a tensor map can read every operand.
bool warpgroupOperands(const AttentionSpec &spec) {
  auto head = [](int64_t features) { return features == 64 || features == 128; };
  if (!(spec.element.isBF16() || spec.element.isF16()) || !head(spec.features) ||
      !head(spec.valueFeatures))
    return false;
  SmallVector<Value> operands{spec.query, spec.key, spec.value};
  if (spec.backward())
    operands.push_back(spec.resultGrad);
  return llvm::all_of(operands, isTensorMapReadable);
}

/// The struct of `values` (wgmma's accumulators), and back.
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

/// The wgmma operand types of `spec`'s element type.
NVVM::WGMMATypesAttr wgmmaTypes(const AttentionSpec &spec) {
  return NVVM::WGMMATypesAttr::get(spec.element.getContext(), spec.element.isBF16()
                                                                  ? NVVM::WGMMATypes::bf16
                                                                  : NVVM::WGMMATypes::f16);
}

/// The wgmma products of a consumer warpgroup, on `b`: a group starts
/// with a fence, is committed, and is waited for (`wait`, or `settle` for
/// every committed group), its results pinned after the wait.
struct Products {
  OpBuilder &b;
  Location loc;
  NVVM::WGMMATypesAttr types;

  /// `accs` (N / 2 f32 a thread; null: zeros) + A B over `steps` k16
  /// steps, both operands from shared memory K-major (descriptors per
  /// step: `a(step)`, `b(step)`).
  Value shared(Value accs, int64_t n, int64_t steps, function_ref<Value(int64_t)> a,
               function_ref<Value(int64_t)> bOperand) const {
    MLIRContext *context = b.getContext();
    auto type = LLVM::LLVMStructType::getLiteral(context,
                                                 SmallVector<Type>(n / 2, b.getF32Type()));
    bool zero = !accs;
    if (zero)
      accs = LLVM::PoisonOp::create(b, loc, type);
    for (int64_t step = 0; step < steps; ++step)
      accs = NVVM::WgmmaMmaAsyncOp::create(
          b, loc, type, accs, a(step), bOperand(step),
          NVVM::MMAShapeAttr::get(context, kWarpgroupRows, n, kInstructionK), types, types,
          NVVM::WGMMATypesAttr::get(context, NVVM::WGMMATypes::f32),
          NVVM::WGMMAScaleOutAttr::get(context, zero && step == 0 ? NVVM::WGMMAScaleOut::zero
                                                                  : NVVM::WGMMAScaleOut::one),
          NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one),
          NVVM::WGMMAScaleInAttr::get(context, NVVM::WGMMAScaleIn::one),
          NVVM::MMALayoutAttr::get(context, NVVM::MMALayout::row),
          NVVM::MMALayoutAttr::get(context, NVVM::MMALayout::col), NVVM::MMAIntOverflowAttr());
    return accs;
  }
  /// `rows`' rows from `row` (its copy at `rowsAt`) times `columns`' rows
  /// (at `columnsAt`) transposed: both K-major over `rows.width` features,
  /// 16 a step; N is columns.rows.
  Value rowsTimesRows(const IndexMath &im, const Tiles &rows, Value rowsAt, Value row,
                      const Tiles &columns, Value columnsAt) const {
    return shared(
        Value(), columns.rows, rows.width / kInstructionK,
        [&](int64_t step) {
          return advanceDescriptor(b, loc, rows.kMajor(b, im, rowsAt, step / 4, row),
                                   step % 4 * 32);
        },
        [&](int64_t step) {
          return advanceDescriptor(b, loc, columns.kMajor(b, im, columnsAt, step / 4, im.cst(b, 0)),
                                   step % 4 * 32);
        });
  }
  /// `accs` + A B with A's fragments in registers (4 a k16 step, pinned),
  /// B N-major (descriptor per step: `bOperand(step)`).
  Value registers(Value accs, int64_t n, ArrayRef<Value> fragments,
                  function_ref<Value(int64_t)> bOperand, Type element) const {
    for (size_t step = 0; step < fragments.size() / 4; ++step)
      accs = warpgroupMmaRegisterA(b, loc, element, accs, fragments.slice(4 * step, 4),
                                   bOperand(step), n, /*nMajorB=*/true);
    return accs;
  }
  void fence() const { NVVM::WgmmaFenceAlignedOp::create(b, loc); }
  void commit() const { NVVM::WgmmaGroupSyncAlignedOp::create(b, loc); }
  /// Waits for every committed group; `accs`' values, pinned.
  SmallVector<SmallVector<Value>> settle(ArrayRef<Value> accs) const {
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    SmallVector<Value> all;
    SmallVector<size_t> sizes;
    for (Value acc : accs) {
      SmallVector<Value> values = unpackStruct(b, loc, acc);
      sizes.push_back(values.size());
      llvm::append_range(all, values);
    }
    all = pinRegisters(b, loc, all);
    SmallVector<SmallVector<Value>> results;
    size_t at = 0;
    for (size_t size : sizes) {
      results.push_back(SmallVector<Value>(ArrayRef<Value>(all).slice(at, size)));
      at += size;
    }
    return results;
  }
};

/// A launch of blocks of three warpgroups over 128 rows (queries, or keys
/// in the backward's key side) of each batch entry: the producer copies
/// `resident` once and `streamed` block by block into a ring of stages;
/// the consumers, 64 rows each, take the blocks as they land (`full`
/// barriers) and release them (`empty`).
struct WarpgroupLaunch {
  WarpgroupLaunch(const AttentionSpec &spec, Location loc, int64_t rowCount, bool lastFirst,
                  SmallVector<Tiles> resident, SmallVector<Tiles> streamed)
      : spec(spec), loc(loc), im{loc}, rowCount(rowCount), lastFirst(lastFirst),
        resident(std::move(resident)), streamed(std::move(streamed)) {}
  const AttentionSpec &spec;
  Location loc;
  IndexMath im;
  int64_t rowCount;
  bool lastFirst;
  SmallVector<Tiles> resident, streamed;
  int64_t stages = 0, residentBytes = 0, stageBytes = 0;

  gpu::LaunchOp launch;
  Value tid, lane, warp, blockRow;
  SmallVector<Value> batchIndices;
  Value dynamicShared, address, base;
  /// `full`: stages 0 .. stages - 1, then the resident copies' barrier.
  Value full, empty;
  scf::IfOp roles;

  /// Lays the operands out (offsets, stages within `sharedPerBlock`);
  /// false if not even two stages fit.
  bool plan(int64_t sharedPerBlock) {
    for (Tiles &tiles : resident) {
      tiles.offset = residentBytes;
      residentBytes += tiles.bytes();
    }
    for (Tiles &tiles : streamed) {
      tiles.offset = stageBytes;
      stageBytes += tiles.bytes();
    }
    stages = std::min(kMaxStages, (sharedPerBlock - kAtomBytes - residentBytes) / stageBytes);
    return stages >= 2;
  }
  int64_t bytes() const { return kAtomBytes + residentBytes + stages * stageBytes; }
  Value stageAddress(OpBuilder &b, Value stage) const {
    return im.add(b, im.add(b, address, im.addc(b, base, residentBytes)),
                  im.mulc(b, stage, stageBytes));
  }
  Value residentAddress(OpBuilder &b) const { return im.add(b, address, base); }

  /// The tensor maps (at `b`, on the host), the launch, its barriers, and
  /// the if/else of the consumers and the producer (ptxas applies
  /// setmaxnreg only so).
  void create(OpBuilder &b) {
    for (Tiles &tiles : llvm::concat<Tiles>(resident, streamed))
      tiles.map = createTensorMap(b, loc, tiles.buffer, tiles.boxRows);
    int64_t blocks = rowCount / kBlockRows;
    launch = gpu::LaunchOp::create(
        b, loc, im.cst(b, spec.batch), im.cst(b, blocks), im.cst(b, 1),
        im.cst(b, kConsumerThreads + kProducerThreads), im.cst(b, 1), im.cst(b, 1),
        arith::ConstantIntOp::create(b, loc, bytes(), 32), Type(), ValueRange(), TypeRange());
    OpBuilder k = OpBuilder::atBlockBegin(&launch.getBody().front());
    MLIRContext *context = b.getContext();
    tid = launch.getThreadIds().x;
    warp = im.divc(k, tid, 32);
    lane = im.remc(k, tid, 32);
    // Causal query blocks last first: they read the most keys.
    Value block = launch.getBlockIds().y;
    if (lastFirst)
      block = arith::SubIOp::create(k, loc, im.cst(k, blocks - 1), block);
    blockRow = im.mulc(k, block, kBlockRows);
    ArrayRef<int64_t> shape = cast<MemRefType>(spec.query.getType()).getShape();
    Value rest = launch.getBlockIds().x;
    for (int64_t size : llvm::reverse(shape.drop_back(2))) {
      batchIndices.insert(batchIndices.begin(), im.remc(k, rest, size));
      rest = im.divc(k, rest, size);
    }
    dynamicShared = gpu::DynamicSharedMemoryOp::create(
        k, loc,
        MemRefType::get({ShapedType::kDynamic}, k.getI8Type(), MemRefLayoutAttrInterface(),
                        gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup)));
    address = memref::ExtractAlignedPointerAsIndexOp::create(k, loc, dynamicShared);
    base = im.remc(k,
                   arith::SubIOp::create(k, loc, im.cst(k, kAtomBytes),
                                         im.remc(k, address, kAtomBytes)),
                   kAtomBytes);
    auto group = [&](int64_t count) {
      return nvgpu::MBarrierCreateOp::create(
          k, loc,
          nvgpu::MBarrierGroupType::get(
              context, gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup),
              count));
    };
    full = group(stages + 1);
    empty = group(stages);
    Value first = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::eq, tid, im.cst(k, 0));
    for (int64_t s = 0; s <= stages; ++s)
      nvgpu::MBarrierInitOp::create(k, loc, full, im.cst(k, 1), im.cst(k, s), first);
    for (int64_t s = 0; s < stages; ++s)
      nvgpu::MBarrierInitOp::create(k, loc, empty,
                                    im.cst(k, kConsumerThreads / kWarpgroupThreads),
                                    im.cst(k, s), first);
    NVVM::FenceMbarrierInitOp::create(k, loc);
    gpu::BarrierOp::create(k, loc);
    roles = scf::IfOp::create(
        k, loc,
        arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ult, tid,
                              im.cst(k, kConsumerThreads)),
        /*withElseRegion=*/true);
    gpu::TerminatorOp::create(k, loc);
  }

  /// A consumer warp's view (rows from the block's, 16 a warp).
  Warp warpAt(OpBuilder &b) {
    Value g = im.divc(b, lane, 4), t = im.remc(b, lane, 4);
    return Warp{b, loc, im, spec, batchIndices, launch.getBlockIds().x, g, t,
                im.mulc(b, t, 2), im.add(b, blockRow, im.mulc(b, warp, kRowsPerWarp)),
                tid, lane, {}};
  }

  /// The producer: one thread copies the resident operands (rows from the
  /// block's), then streamed blocks `first` .. `end` - 1 (rows from block x
  /// streamed rows), each into its stage once both consumers released the
  /// stage's previous block (the wait on the phase before a stage's first
  /// fill passes at once). The copies are unpredicated: inside the branch
  /// on the thread, LLVM would fold a predicate to a constant, which inline
  /// PTX cannot take.
  void produce(function_ref<std::pair<Value, Value>(OpBuilder &)> range) {
    OpBuilder p = roles.getElseBodyBuilder();
    NVVM::SetMaxRegisterOp::create(p, loc, kProducerRegisters,
                                   NVVM::SetMaxRegisterAction::decrease);
    Value issuer = arith::CmpIOp::create(p, loc, arith::CmpIPredicate::eq, tid,
                                         im.cst(p, kConsumerThreads));
    auto only = scf::IfOp::create(p, loc, issuer, /*withElseRegion=*/false);
    OpBuilder o = only.getThenBodyBuilder();
    Value residentBarrier = im.cst(o, stages);
    nvgpu::MBarrierArriveExpectTxOp::create(o, loc, full, im.cst(o, residentBytes),
                                            residentBarrier, Value());
    for (const Tiles &tiles : resident)
      copy(o, tiles, im.addc(o, base, tiles.offset), blockRow, residentBarrier);
    auto [first, end] = range(o);
    int64_t bytes = 0;
    for (const Tiles &tiles : streamed)
      bytes += tiles.bytes();
    auto loads = scf::ForOp::create(o, loc, first, end, im.cst(o, 1));
    OpBuilder l = OpBuilder::atBlockBegin(loads.getBody());
    Value use = arith::SubIOp::create(l, loc, loads.getInductionVar(), first);
    Value stage = im.remc(l, use, stages);
    Value released = arith::XOrIOp::create(l, loc, phaseParity(l, im, im.divc(l, use, stages)),
                                           arith::ConstantIntOp::create(l, loc, 1, 1));
    nvgpu::MBarrierTryWaitParityOp::create(l, loc, empty, released, im.cst(l, 10000000), stage);
    nvgpu::MBarrierArriveExpectTxOp::create(l, loc, full, im.cst(l, bytes), stage, Value());
    Value offset = im.add(l, im.addc(l, base, residentBytes), im.mulc(l, stage, stageBytes));
    for (const Tiles &tiles : streamed)
      copy(l, tiles, im.addc(l, offset, tiles.offset),
           im.mulc(l, loads.getInductionVar(), tiles.rows), stage);
  }

  /// The consumers' builder, registers raised, once the resident copies
  /// landed.
  OpBuilder consumers() {
    OpBuilder c = roles.getThenBodyBuilder();
    NVVM::SetMaxRegisterOp::create(c, loc, kConsumerRegisters,
                                   NVVM::SetMaxRegisterAction::increase);
    nvgpu::MBarrierTryWaitParityOp::create(c, loc, full, phaseParity(c, im, im.cst(c, 0)),
                                           im.cst(c, 10000000), im.cst(c, stages));
    return c;
  }
  /// Waits for fill `use` of the streamed blocks; its stage's address.
  Value waitFor(OpBuilder &b, Value use) const {
    Value stage = im.remc(b, use, stages);
    nvgpu::MBarrierTryWaitParityOp::create(b, loc, full,
                                           phaseParity(b, im, im.divc(b, use, stages)),
                                           im.cst(b, 10000000), stage);
    return stageAddress(b, stage);
  }
  /// A consumers' loop over streamed blocks `first` .. `end` - 1 carrying
  /// `init`; `body` gets the block, its stage's address and the carried
  /// values and multiplies; then the warpgroup releases the stage. Returns
  /// the loop.
  scf::ForOp consume(
      OpBuilder &c, Value first, Value end, ValueRange init,
      function_ref<SmallVector<Value>(OpBuilder &, Value block, Value at, ValueRange carried)>
          body) {
    Value signals = arith::CmpIOp::create(c, loc, arith::CmpIPredicate::eq,
                                          im.remc(c, tid, kWarpgroupThreads), im.cst(c, 0));
    auto loop = scf::ForOp::create(c, loc, first, end, im.cst(c, 1), init);
    OpBuilder l = OpBuilder::atBlockBegin(loop.getBody());
    Value use = arith::SubIOp::create(l, loc, loop.getInductionVar(), first);
    Value stage = im.remc(l, use, stages);
    SmallVector<Value> yielded =
        body(l, loop.getInductionVar(), waitFor(l, use), loop.getRegionIterArgs());
    // This warpgroup is done with the stage: release it to the producer.
    scf::IfOp::create(l, loc, signals, [&](OpBuilder &then, Location) {
      nvgpu::MBarrierArriveOp::create(then, loc,
                                      nvgpu::MBarrierTokenType::get(then.getContext()), empty,
                                      stage);
      scf::YieldOp::create(then, loc);
    });
    scf::YieldOp::create(l, loc, yielded);
    return loop;
  }
  /// This warpgroup's first row in the block (0 or 64).
  Value warpgroupRow(OpBuilder &b) const {
    return im.mulc(b, im.divc(b, warp, 4), kWarpgroupRows);
  }
  /// The backward's two products of the streamed block at `at`, issued
  /// and committed as one wgmma group, not waited for: each resident
  /// operand's rows (this warpgroup's, from `row`) times the matching
  /// streamed one's rows transposed, both K-major: the scores and dp (the
  /// key side's transposed ones), as accumulator structs.
  SmallVector<Value> issueScoresAndGrads(OpBuilder &l, Value row, Value at) const {
    return issue(l, row, at, {kScores, kGrads});
  }
  /// Products `which` of those (kScores, kGrads) issued and committed as
  /// one group: their accumulator structs.
  SmallVector<Value> issue(OpBuilder &l, Value row, Value at, ArrayRef<int64_t> which) const {
    Products products{l, loc, wgmmaTypes(spec)};
    Value base = residentAddress(l);
    products.fence();
    SmallVector<Value> accs;
    for (int64_t operand : which)
      accs.push_back(products.rowsTimesRows(im, resident[operand], base, row, streamed[operand], at));
    products.commit();
    return accs;
  }
  /// The resident and streamed operands whose product is the scores, and
  /// those whose product is dp (dO V^T; the key side's transposed ones).
  static constexpr int64_t kScores = 0, kGrads = 1;

private:
  /// `tiles`' rows from `row` of the batch entry into the shared bytes at
  /// `offset` (from the aligned base), counted by barrier `barrier` of
  /// `full`.
  void copy(OpBuilder &b, const Tiles &tiles, Value offset, Value row, Value barrier) const {
    for (int64_t group = 0; group < tiles.rows / tiles.boxRows; ++group)
      for (int64_t f = 0; f < tiles.width / kRowElements; ++f) {
        SmallVector<Value> coordinates(batchIndices);
        coordinates.append({im.addc(b, row, group * tiles.boxRows), im.cst(b, f * kRowElements)});
        std::reverse(coordinates.begin(), coordinates.end());
        Value at = im.addc(
            b, offset, (group * (tiles.width / kRowElements) + f) * tiles.boxRows * kRowBytes);
        Value view = memref::ViewOp::create(b, loc, boxType(tiles.buffer, tiles.boxRows),
                                            dynamicShared, at, ValueRange{});
        nvgpu::TmaAsyncLoadOp::create(b, loc, view, full, tiles.map, coordinates, barrier,
                                      Value(), Value());
      }
  }
};

/// The forward: 128 queries a block against key blocks of 128 (or 64):
/// Q resident, K and V streamed.
bool buildForward(OpBuilder &b, Location loc, const AttentionSpec &spec,
                  int64_t sharedPerBlock) {
  int64_t keyBlock = spec.keys % 128 == 0 ? 128 : spec.keys % 64 == 0 ? 64 : 0;
  // (At least one key block: the first block's scores come before the loop.)
  if (spec.backward() || !warpgroupOperands(spec) || spec.queries % kBlockRows || !keyBlock ||
      spec.keys == 0)
    return false;
  WarpgroupLaunch launch(spec, loc, spec.queries, spec.causal,
                         {Tiles(spec.query, spec.features, kBlockRows, kBlockRows)},
                         {Tiles(spec.key, spec.features, keyBlock, keyBlock),
                          Tiles(spec.value, spec.valueFeatures, keyBlock, kRowElements)});
  if (!launch.plan(sharedPerBlock))
    return false;
  launch.create(b);
  const IndexMath &im = launch.im;
  const Tiles &queries = launch.resident[0], &keys = launch.streamed[0],
              &values = launch.streamed[1];
  // Keys through the diagonal of the block's last row (causal), in blocks.
  auto range = [&](OpBuilder &o) {
    Warp w = launch.warpAt(o);
    return std::make_pair(im.cst(o, 0),
                          im.divc(o, w.keyEndAfter(launch.blockRow, kBlockRows, keyBlock),
                                  keyBlock));
  };
  launch.produce(range);

  OpBuilder c = launch.consumers();
  Warp cw = launch.warpAt(c);
  Value warpgroupRow = launch.warpgroupRow(c);
  // S = Q K^T of the key block in the stage at `at`, both K-major (16
  // features a step), committed.
  auto scoresAt = [&](OpBuilder &l, Value at) {
    Products products{l, loc, wgmmaTypes(spec)};
    Value resident = launch.residentAddress(l);
    products.fence();
    Value scores = products.rowsTimesRows(im, queries, resident, warpgroupRow, keys, at);
    products.commit();
    return scores;
  };
  int64_t outputValues = spec.valueFeatures / 2, scoreValues = keyBlock / 2;
  Value first, end;
  std::tie(first, end) = range(c);
  // The first block's scores before the loop: each step then issues the
  // next block's Q K^T before its own softmax, so that the tensor cores
  // work through it (FlashAttention-3's overlap within a warpgroup); the
  // last step recomputes its own block's instead (its stage still held)
  // rather than branch around wgmma.
  Products prologue{c, loc, wgmmaTypes(spec)};
  SmallVector<Value> init(outputValues, cw.f32Constant(0.0));
  init.append({cw.minusInf(), cw.minusInf(), cw.f32Constant(0.0), cw.f32Constant(0.0)});
  llvm::append_range(init, prologue.settle({scoresAt(c, launch.waitFor(c, im.cst(c, 0)))})[0]);
  auto loop = launch.consume(
      c, first, end, init,
      [&](OpBuilder &l, Value block, Value at, ValueRange carried) -> SmallVector<Value> {
        Warp lw = cw.at(l);
        Products products{l, loc, wgmmaTypes(spec)};
        Value last = arith::SubIOp::create(l, loc, end, im.cst(l, 1));
        Value next = arith::MinUIOp::create(l, loc, im.addc(l, block, 1), last);
        Value nextScores = scoresAt(l, launch.waitFor(l, arith::SubIOp::create(l, loc, next, first)));
        SmallVector<Tile> s = tilesOf(carried.take_back(scoreValues));
        SmallVector<Tile> output = tilesOf(carried.take_front(outputValues));
        Value maxima[2] = {carried[outputValues], carried[outputValues + 1]};
        Value sums[2] = {carried[outputValues + 2], carried[outputValues + 3]};
        lw.softmaxBlock(im.mulc(l, block, keyBlock), s, output, maxima, sums);
        // O += P V: P's fragments (two score tiles a k16 step) and the
        // rescaled O written before the fence.
        SmallVector<Value> operands = flat(output);
        for (int64_t j = 0; j < keyBlock / kInstructionK; ++j)
          for (Value reg : lw.aFragment(s[2 * j], s[2 * j + 1]))
            operands.push_back(registerWord(l, loc, reg));
        operands = pinRegisters(l, loc, operands);
        products.fence();
        Value o = products.registers(
            packStruct(l, loc, ArrayRef<Value>(operands).take_front(outputValues)),
            spec.valueFeatures, ArrayRef<Value>(operands).drop_front(outputValues),
            [&](int64_t step) { return values.nMajor(l, im, at, step); }, spec.element);
        products.commit();
        SmallVector<SmallVector<Value>> done = products.settle({o, nextScores});
        SmallVector<Value> yielded = done[0];
        yielded.append({maxima[0], maxima[1], sums[0], sums[1]});
        llvm::append_range(yielded, done[1]);
        return yielded;
      });
  ValueRange results = loop.getResults();
  Value sums[2] = {cw.quadSum(results[outputValues + 2]), cw.quadSum(results[outputValues + 3])};
  cw.storeRows(spec.outputs[0], tilesOf(results.take_front(outputValues)),
               [&](Value x, int64_t half) { return cw.div(x, sums[half]); });
  cw.storeLse({results[outputValues], results[outputValues + 1]}, sums);
  sinkViewsIntoLaunch(launch.launch);
  return true;
}

/// The backward's key side: 128 keys a block (K and V resident) against
/// blocks of 32 or 64 queries (Q and dO streamed) from the block's diagonal
/// (causal): the transposed scores and dp (`K Q^T`, `V dO^T`), p and ds
/// from the lse and dots the query side stored, `dv += p^T dO` and `dk += ds^T Q`
/// (Q and dO read N-major, the same stage the first products read K-major),
/// each rounded once at the end.
bool buildKeyGrad(OpBuilder &b, Location loc, const AttentionSpec &spec,
                  int64_t sharedPerBlock) {
  // (At least one query block for every key block: the first block's
  // scores come before the loop. A causal block of keys whose first key
  // lies past the last query has none.)
  int64_t queryBlock = keySideQueryBlock(spec);
  if (!spec.backward() || !warpgroupOperands(spec) || spec.keys % kBlockRows ||
      spec.queries % queryBlock || spec.queries == 0 ||
      (spec.causal && spec.keys >= spec.queries + kBlockRows))
    return false;
  WarpgroupLaunch launch(spec, loc, spec.keys, /*lastFirst=*/false,
                         {Tiles(spec.key, spec.features, kBlockRows, kBlockRows),
                          Tiles(spec.value, spec.valueFeatures, kBlockRows, kBlockRows)},
                         {Tiles(spec.query, spec.features, queryBlock, queryBlock),
                          Tiles(spec.resultGrad, spec.valueFeatures, queryBlock, queryBlock)});
  if (!launch.plan(sharedPerBlock))
    return false;
  launch.create(b);
  const IndexMath &im = launch.im;
  const Tiles &queries = launch.streamed[0], &grads = launch.streamed[1];
  // Causal: from the query block holding the block's first key on.
  auto range = [&](OpBuilder &o) {
    Value first = spec.causal ? im.divc(o, launch.blockRow, queryBlock) : im.cst(o, 0);
    return std::make_pair(first, im.cst(o, spec.queries / queryBlock));
  };
  launch.produce(range);

  OpBuilder c = launch.consumers();
  Warp cw = launch.warpAt(c);
  Value warpgroupRow = launch.warpgroupRow(c);
  int64_t keyValues = spec.features / 2, valueValues = spec.valueFeatures / 2;
  int64_t blockValues = queryBlock / 2, tiles = queryBlock / 8, statValues = 4 * tiles;
  Value first, end;
  std::tie(first, end) = range(c);
  // Staggered as the query side at heads of 128: the first block's scores
  // and statistics (lse and dots) before the loop; each step issues its
  // own dp, forms p while dp's product runs, then ds, dk and dv and the
  // next block's scores (the last step its own again: its stage is still
  // held), loads the next block's statistics, and waits for the products:
  // the loads' latency (from L2) passes under the wait, not before p. (The
  // next block's dp in flight as well, as the forward overlaps, would add
  // a block's f32 to dk's and dv's: 16 to 128 at heads of 128.)
  SmallVector<Value> init(keyValues + valueValues, cw.f32Constant(0.0));
  for (const SmallVector<Value> &scores :
       Products{c, loc, wgmmaTypes(spec)}.settle(launch.issue(
           c, warpgroupRow, launch.waitFor(c, im.cst(c, 0)), {WarpgroupLaunch::kScores})))
    llvm::append_range(init, scores);
  llvm::append_range(init, cw.loadKeyBlockStats(im.mulc(c, first, queryBlock), tiles));
  auto loop = launch.consume(
      c, first, end, init,
      [&](OpBuilder &l, Value block, Value at, ValueRange carried) -> SmallVector<Value> {
        Warp lw = cw.at(l);
        Products products{l, loc, wgmmaTypes(spec)};
        Value q0 = im.mulc(l, block, queryBlock);
        SmallVector<Value> stats(carried.take_back(statValues));
        // Rows are keys, columns queries: V dO^T issued, then p from the
        // scores K Q^T the last step formed.
        Value dp = launch.issue(l, warpgroupRow, at, {WarpgroupLaunch::kGrads})[0];
        SmallVector<Tile> p = tilesOf(carried.slice(keyValues + valueValues, blockValues));
        // (A tile's stats: its columns' lse, lse, dot, dot.)
        lw.blockProbabilities(q0, p, /*rowsAreKeys=*/true,
                              [&](size_t n, int64_t e) { return stats[4 * n + e % 2]; });
        SmallVector<Tile> ds = tilesOf(products.settle({dp})[0]);
        lw.blockScoreGrads(q0, p, ds, /*rowsAreKeys=*/true,
                           [&](size_t n, int64_t e) { return stats[4 * n + 2 + e % 2]; });
        // dk += ds^T Q, dv += p^T dO: fragments and accumulators written
        // before the fence.
        SmallVector<Value> operands(carried.take_front(keyValues + valueValues));
        for (ArrayRef<Tile> tiles : {ArrayRef<Tile>(ds), ArrayRef<Tile>(p)})
          for (size_t j = 0; j < tiles.size() / 2; ++j)
            for (Value reg : lw.aFragment(tiles[2 * j], tiles[2 * j + 1]))
              operands.push_back(registerWord(l, loc, reg));
        operands = pinRegisters(l, loc, operands);
        ArrayRef<Value> all(operands);
        int64_t fragments = queryBlock / kInstructionK * 4;
        products.fence();
        Value dk = products.registers(
            packStruct(l, loc, all.take_front(keyValues)), spec.features,
            all.slice(keyValues + valueValues, fragments),
            [&](int64_t step) { return queries.nMajor(l, im, at, step); }, spec.element);
        Value dv = products.registers(
            packStruct(l, loc, all.slice(keyValues, valueValues)), spec.valueFeatures,
            all.take_back(fragments),
            [&](int64_t step) { return grads.nMajor(l, im, at, step); }, spec.element);
        products.commit();
        Value last = arith::SubIOp::create(l, loc, end, im.cst(l, 1));
        Value next = arith::MinUIOp::create(l, loc, im.addc(l, block, 1), last);
        Value scores = launch.issue(l, warpgroupRow,
                                    launch.waitFor(l, arith::SubIOp::create(l, loc, next, first)),
                                    {WarpgroupLaunch::kScores})[0];
        SmallVector<Value> nextStats = lw.loadKeyBlockStats(im.mulc(l, next, queryBlock), tiles);
        SmallVector<Value> yielded;
        for (const SmallVector<Value> &settled : products.settle({dk, dv, scores}))
          llvm::append_range(yielded, settled);
        llvm::append_range(yielded, nextStats);
        return yielded;
      });
  ValueRange results = loop.getResults();
  auto same = [](Value x, int64_t) { return x; };
  cw.storeRows(spec.outputs[1], tilesOf(results.take_front(keyValues)), same);
  cw.storeRows(spec.outputs[2], tilesOf(results.slice(keyValues, valueValues)), same);
  sinkViewsIntoLaunch(launch.launch);
  return true;
}
/// The backward's query side: 128 queries a block (Q and dO resident)
/// against blocks of 64 keys (K and V streamed, one sweep), the mma.sync
/// query side's pass: p = exp(s - lse) from the forward's log-sum-exp,
/// then ds and dq += ds K (ds in registers, K read N-major from the stage
/// the scores read K-major), with dot = rowsum(dO * O) taken first; lse
/// and the dots go to the flat statistics buffer for the key side.
bool buildQueryGrad(OpBuilder &b, Location loc, const AttentionSpec &spec,
                    int64_t sharedPerBlock) {
  constexpr int64_t keyBlock = 64;
  // (At least one key block: the first block's products come before the
  // loop.)
  if (!spec.backward() || !warpgroupOperands(spec) || spec.queries % kBlockRows ||
      spec.keys % keyBlock || spec.keys == 0)
    return false;
  WarpgroupLaunch launch(spec, loc, spec.queries, spec.causal,
                         {Tiles(spec.query, spec.features, kBlockRows, kBlockRows),
                          Tiles(spec.resultGrad, spec.valueFeatures, kBlockRows, kBlockRows)},
                         {Tiles(spec.key, spec.features, keyBlock, keyBlock),
                          Tiles(spec.value, spec.valueFeatures, keyBlock, keyBlock)});
  if (!launch.plan(sharedPerBlock))
    return false;
  launch.create(b);
  const IndexMath &im = launch.im;
  const Tiles &keys = launch.streamed[0];
  // Keys through the diagonal of the block's last row (causal), in blocks.
  auto range = [&](OpBuilder &o) {
    Warp w = launch.warpAt(o);
    return std::make_pair(im.cst(o, 0),
                          im.divc(o, w.keyEndAfter(launch.blockRow, kBlockRows, keyBlock),
                                  keyBlock));
  };
  launch.produce(range);

  OpBuilder c = launch.consumers();
  Warp cw = launch.warpAt(c);
  Value warpgroupRow = launch.warpgroupRow(c);
  Value first, end;
  std::tie(first, end) = range(c);
  // The softmax gradient's row sums, from the result (no pass over keys),
  // and the rows' log-sum-exp.
  std::array<Value, 2> dot = cw.rowDots(spec.resultGrad, spec.output, spec.valueFeatures);
  std::array<Value, 2> lse = cw.loadRowsLse();
  int64_t gradValues = spec.features / 2, blockValues = keyBlock / 2;
  // p = exp(s - lse) of a block's scores, in place.
  auto probabilities = [&](OpBuilder &l, Value block, MutableArrayRef<Tile> p) {
    cw.at(l).blockProbabilities(im.mulc(l, block, keyBlock), p, /*rowsAreKeys=*/false,
                                [&](size_t, int64_t e) { return lse[e / 2]; });
  };
  // ds from a block's p and dp, then dq += ds K issued and committed (K
  // read N-major from the stage at `at`): dq's accumulator struct.
  auto issueGrads = [&](OpBuilder &l, Value block, Value at, ArrayRef<Tile> p,
                        SmallVector<Tile> ds, ValueRange dq) {
    Warp lw = cw.at(l);
    lw.blockScoreGrads(im.mulc(l, block, keyBlock), p, ds, /*rowsAreKeys=*/false,
                       [&](size_t, int64_t e) { return dot[e / 2]; });
    SmallVector<Value> operands(dq);
    for (size_t j = 0; j < ds.size() / 2; ++j)
      for (Value reg : lw.aFragment(ds[2 * j], ds[2 * j + 1]))
        operands.push_back(registerWord(l, loc, reg));
    operands = pinRegisters(l, loc, operands);
    ArrayRef<Value> all(operands);
    Products group{l, loc, wgmmaTypes(spec)};
    group.fence();
    Value sum = group.registers(
        packStruct(l, loc, all.take_front(gradValues)), spec.features, all.drop_front(gradValues),
        [&](int64_t step) { return keys.nMajor(l, im, at, step); }, spec.element);
    group.commit();
    return sum;
  };
  auto flatSettled = [&](OpBuilder &l, ArrayRef<Value> accs) {
    SmallVector<Value> values;
    for (const SmallVector<Value> &settled : Products{l, loc, wgmmaTypes(spec)}.settle(accs))
      llvm::append_range(values, settled);
    return values;
  };
  // The tensor cores work through a block's products while the warpgroup
  // does its softmax math (FlashAttention-3's overlap within a warpgroup),
  // as far as the registers allow:
  // - at heads of 64, as the forward: the first block's scores and dp
  //   before the loop, then each step issues the next block's before its
  //   own p, ds and dq, and waits once for all;
  // - at heads of 128 the next block's dp as well (64 f32 on top of dq's
  //   64, this block's 64 and the fragments) spilled in some shapes
  //   (ptxas 13.0: 24-72 bytes a step without the causal mask), so the
  //   steps are staggered: each issues its own dp, forms p from the scores
  //   the last step issued while dp's product runs, then ds, dq and the
  //   next block's scores, and waits for both (at most 32 f32 of
  //   products in flight beside dq's).
  // Either way the last step forms its own block's products again (its
  // stage still held) rather than branch around wgmma, and `first` is 0:
  // every block of queries has a key block.
  bool overlap = spec.features + spec.valueFeatures <= 128;
  SmallVector<Value> init(gradValues, cw.f32Constant(0.0));
  Value firstAt = launch.waitFor(c, im.cst(c, 0));
  if (overlap)
    llvm::append_range(init, flatSettled(c, launch.issueScoresAndGrads(c, warpgroupRow, firstAt)));
  else
    llvm::append_range(
        init, flatSettled(c, launch.issue(c, warpgroupRow, firstAt, {WarpgroupLaunch::kScores})));
  auto backward = launch.consume(
      c, first, end, init,
      [&](OpBuilder &l, Value block, Value at, ValueRange carried) -> SmallVector<Value> {
        ValueRange dq = carried.take_front(gradValues);
        Value last = arith::SubIOp::create(l, loc, end, im.cst(l, 1));
        Value next = arith::MinUIOp::create(l, loc, im.addc(l, block, 1), last);
        auto nextAt = [&] { return launch.waitFor(l, arith::SubIOp::create(l, loc, next, first)); };
        // This block's scores (and, overlapped, dp = dO V^T) in f32,
        // formed last step.
        SmallVector<Tile> p = tilesOf(carried.slice(gradValues, blockValues));
        if (!overlap) {
          Value grads = launch.issue(l, warpgroupRow, at, {WarpgroupLaunch::kGrads})[0];
          probabilities(l, block, p);
          SmallVector<Tile> ds = tilesOf(flatSettled(l, {grads}));
          Value sum = issueGrads(l, block, at, p, ds, dq);
          Value scores = launch.issue(l, warpgroupRow, nextAt(), {WarpgroupLaunch::kScores})[0];
          return flatSettled(l, {sum, scores});
        }
        SmallVector<Value> nextProducts = launch.issueScoresAndGrads(l, warpgroupRow, nextAt());
        probabilities(l, block, p);
        Value sum = issueGrads(l, block, at, p, tilesOf(carried.take_back(blockValues)), dq);
        return flatSettled(l, {sum, nextProducts[0], nextProducts[1]});
      });
  auto dq = backward.getResults().take_front(gradValues);
  cw.storeRows(spec.outputs[0], tilesOf(dq), [](Value x, int64_t) { return x; });
  cw.storeStatistics(lse, dot);
  sinkViewsIntoLaunch(launch.launch);
  return true;
}
} // namespace

bool loom::attention::buildWarpgroupAttention(OpBuilder &b, Location loc,
                                              const AttentionSpec &spec,
                                              int64_t sharedPerBlock) {
  return buildForward(b, loc, spec, sharedPerBlock);
}

bool loom::attention::buildWarpgroupKeyGrad(OpBuilder &b, Location loc,
                                            const AttentionSpec &spec,
                                            int64_t sharedPerBlock) {
  return buildKeyGrad(b, loc, spec, sharedPerBlock);
}

bool loom::attention::buildWarpgroupQueryGrad(OpBuilder &b, Location loc,
                                              const AttentionSpec &spec,
                                              int64_t sharedPerBlock) {
  return buildQueryGrad(b, loc, spec, sharedPerBlock);
}
