//===- TensorCorePersistent.cpp - Persistent warp-specialized wgmma -------===//
//
// The persistent sm_90a matmul kernels (--gpu-mma=wgmma-persistent and
// wgmma-pingpong): a block per SM loops over output tiles; its third
// warpgroup, the producer, copies operands by TMA into a ring of stages
// counted by mbarriers, and the first two, the consumers, multiply with
// wgmma and write back, either cooperatively (both on each 128 x 256 or
// 128 x 128 tile, optionally in clusters of two blocks sharing B by TMA
// multicast) or by turns (ping-pong: each on its own 128 x 128 tile, one's
// write-back under the other's wgmmas). WarpgroupMatmul.h has what they
// share with the one-block-a-tile kernel.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/TensorCoreKernel.h"
#include "Codegen/GPU/TmaStoreEpilogue.h"
#include "Codegen/GPU/WarpgroupMatmul.h"
#include "Codegen/GPU/WarpgroupMma.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::wgmma;

namespace {
/// Registers a thread of the producer warpgroup keeps (it only computes
/// TMA coordinates), and a consumer gets (a 128 x 256 tile's 128
/// accumulators, the epilogue's addresses): 128 x 40 + 256 x 232 fit an
/// SM's 64 Ki registers, as CUTLASS's warp-specialized kernels split them.
constexpr int64_t kProducerRegisters = 40, kConsumerRegisters = 232;
constexpr int64_t kConsumerThreads = 256, kProducerThreads = 128;
} // namespace

void wgmma::buildPersistentKernel(linalg::GenericOp op,
                                  const WarpgroupLayout &layout,
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
  auto kLoop =
      [&](OpBuilder &b, Value use, ValueRange extra,
          function_ref<SmallVector<Value>(OpBuilder &, Value kTile, Value stage,
                                          Value use, ValueRange extra)>
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

  Value consumer =
      arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ult, kernel.tid,
                            im.cst(k, kConsumerThreads));
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
    Value issuer =
        arith::CmpIOp::create(p, loc, arith::CmpIPredicate::eq, kernel.tid,
                              im.cst(p, kConsumerThreads));
    auto only = scf::IfOp::create(p, loc, issuer, /*withElseRegion=*/false);
    OpBuilder o = only.getThenBodyBuilder();
    // The block's tiles in order, carrying the fill count.
    auto tilesLoop = scf::ForOp::create(o, loc, firstTile, im.cst(o, tiles),
                                        im.cst(o, blocks), ValueRange{zero});
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

  // The consumers: per tile, the accumulators from the fill (or C), the K
  // loop, and the write-back while the producer loads ahead (and, in
  // ping-pong, while the other warpgroup multiplies).
  {
    OpBuilder c = roles.getThenBodyBuilder();
    NVVM::SetMaxRegisterOp::create(c, loc, kConsumerRegisters,
                                   NVVM::SetMaxRegisterAction::increase);
    Value warpgroup = im.divc(c, kernel.warp, 4);
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
    // The 64-row blocks of the tile a warpgroup computes: its own, or in
    // ping-pong both. TensorCoreKernel's write-back and accumulator loads
    // place a thread's rows by warpRow, which for block h is that of warp
    // 4h + (warp % 4): set so for ping-pong's blocks.
    SmallVector<Value> rowBlocks =
        pingpong ? SmallVector<Value>{im.cst(c, 0), im.cst(c, 1)}
                 : SmallVector<Value>{warpgroup};
    Value rowInBlock = im.mulc(c, im.remc(c, kernel.warp, 4), 16);
    Value defaultWarpRow = kernel.warpRow;
    auto forBlock = [&](int64_t h, function_ref<void()> body) {
      if (pingpong)
        kernel.warpRow =
            im.add(k, rowInBlock, im.mulc(k, rowBlocks[h], kWarpgroupRows));
      body();
      kernel.warpRow = defaultWarpRow;
    };
    // The block's tiles: all of them, or in ping-pong the warpgroup's turns
    // j = warpgroup, warpgroup + 2, ... (tile blockIdx.x + j * blocks, fills
    // j * kTiles on), skipping the other's fills from one to the next.
    int64_t turns = pingpong ? 2 : 1;
    Value start = pingpong ? im.add(c, firstTile, im.mulc(c, warpgroup, blocks))
                           : firstTile;
    Value firstUse = pingpong ? im.mulc(c, warpgroup, kTiles) : zero;
    auto tilesLoop =
        scf::ForOp::create(c, loc, start, im.cst(c, tiles),
                           im.cst(c, turns * blocks), ValueRange{firstUse});
    k.setInsertionPointToStart(tilesLoop.getBody());
    Value tileIndex = tilesLoop.getInductionVar();
    kernel.placeTile(k, tileIndex);
    SmallVector<Value> initial;
    for (int64_t h = 0, e = rowBlocks.size(); h < e; ++h)
      forBlock(h, [&] {
        if (!pingpong)
          return initial.push_back(w.initialAccumulators());
        // Pinned: left alone, LLVM materialized the second block's zeros
        // between the first K step's wgmmas, and ptxas then injected
        // warpgroup.arrive (C7519).
        SmallVector<Value> pinned =
            pinRegisters(k, loc, w.unpack(k, w.initialAccumulators()));
        Value acc = LLVM::PoisonOp::create(k, loc, w.accType);
        for (auto [i, v] : llvm::enumerate(pinned))
          acc = LLVM::InsertValueOp::create(k, loc, acc, v, int64_t(i));
        initial.push_back(acc);
      });
    // Ping-pong: the tensor cores are this warpgroup's once the other's last
    // wgmmas on the block's previous tile are issued (no wait before the
    // block's first tile); the accumulators are set up before, off the turn.
    if (pingpong) {
      Value notFirst = arith::CmpIOp::create(k, loc, arith::CmpIPredicate::ne,
                                             tileIndex, firstTile);
      scf::IfOp::create(k, loc, notFirst, [&](OpBuilder &then, Location) {
        namedBarrierOfWarpgroup(then, loc, warpgroup, "bar.sync", 3, 4,
                                kConsumerThreads);
        scf::YieldOp::create(then, loc);
      });
    }
    scf::ForOp multiplies = kLoop(
        k, tilesLoop.getRegionIterArgs()[0], initial,
        [&](OpBuilder &l, Value kTile, Value stage, Value use,
            ValueRange accs) {
          nvgpu::MBarrierTryWaitParityOp::create(
              l, loc, full, phaseParity(l, im, im.divc(l, use, stages)),
              im.cst(l, 10000000), stage);
          SmallVector<Value> next = w.multiply(l, stage, accs, rowBlocks);
          // The previous K tile's wgmmas are done: its stage is free.
          NVVM::WgmmaWaitGroupSyncOp::create(l, loc, 1);
          Value notFirst = arith::CmpIOp::create(
              l, loc, arith::CmpIPredicate::ne, kTile, im.cst(l, 0));
          scf::IfOp::create(l, loc, notFirst, [&](OpBuilder &then, Location) {
            release(then,
                    im.remc(then, im.addc(then, use, stages - 1), stages));
            scf::YieldOp::create(then, loc);
          });
          return next;
        });
    // Ping-pong: the other warpgroup's turn once this one's last wgmmas are
    // issued (as CUTLASS hands it over, before the tail wait: the tensor
    // cores run them in order, and the accumulators are each warpgroup's
    // own), if the block has a next tile (the other's).
    if (pingpong) {
      Value more = im.below(k, im.addc(k, tileIndex, blocks), tiles);
      scf::IfOp::create(k, loc, more, [&](OpBuilder &then, Location) {
        namedBarrierOfWarpgroup(then, loc, warpgroup, "bar.arrive", 4, 3,
                                kConsumerThreads);
        scf::YieldOp::create(then, loc);
      });
    }
    NVVM::WgmmaWaitGroupSyncOp::create(k, loc, 0);
    Value used = multiplies.getResult(0);
    release(k, im.remc(k, im.addc(k, used, stages - 1), stages));
    for (int64_t h = 0, e = rowBlocks.size(); h < e; ++h)
      forBlock(h, [&] {
        SmallVector<Value> accs = w.unpack(k, multiplies.getResult(1 + h));
        if (!epilogue)
          return kernel.writeBack(accs);
        epilogue->store(
            k, accs,
            [&](OpBuilder &b, Value warpgroup, int64_t box) {
              return im.add(
                  b, w.base,
                  im.addc(b, im.mulc(b, warpgroup, 2 * kStoreBoxBytes),
                          stages * w.stageBytes + box % 2 * kStoreBoxBytes));
            },
            /*reuse=*/true, pingpong ? rowBlocks[h] : Value());
      });
    scf::YieldOp::create(k, loc, pingpong ? im.addc(k, used, kTiles) : used);
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

bool wgmma::sharesTilesOfB(const GpuMatmul &mm) {
  return llvm::divideCeil(mm.m, kBlockM) % 2 == 0;
}

std::optional<WarpgroupPipeline>
wgmma::choosePersistentPipeline(const GpuMatmul &mm,
                                const TensorCoreTarget &target,
                                int64_t epilogueBytes, bool pingpong) {
  WarpgroupTile tile =
      !pingpong && tileFillsWave(mm.m, mm.n, mm.batches, kBlockM,
                                 kTiles[0].blockN, target.multiprocessors)
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
