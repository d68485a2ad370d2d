//===- TileMatmulsForGpu.cpp - Shared-memory tiled SIMT matmul kernels ----===//

#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/GpuMatmul.h"
#include "Codegen/Common/MatmulLike.h"
#include "Codegen/GPU/Passes.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMTILEMATMULSFORGPU
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomTileMatmulsForGpu
    : public loom::impl::LoomTileMatmulsForGpuBase<LoomTileMatmulsForGpu> {
  using Base::Base;
  void runOnOperation() override {
    // The options come from loom-opt's command line too: a tile of 0 had
    // divided by zero, a negative one printed memref<-1x-1xf32>.
    auto refuse = [&](StringRef option, int64_t value, StringRef expected) {
      getOperation().emitError() << "loom-tile-matmuls-for-gpu: " << option << "=" << value
                                 << " (expected " << expected << ")";
      signalPassFailure();
    };
    if (tile < 1 || tile > 32)
      return refuse("tile", tile, "1 to 32: a block runs tile x tile threads, at most 1024");
    if (multiprocessors < 1)
      return refuse("multiprocessors", multiprocessors, "at least 1");
    if (sharedPerBlock < 1)
      return refuse("shared-per-block", sharedPerBlock, "a positive number of bytes");
    if (sharedPerSM < sharedPerBlock)
      return refuse("shared-per-sm", sharedPerSM, "at least shared-per-block");
    if (reservedSharedPerBlock < 0)
      return refuse("reserved-shared-per-block", reservedSharedPerBlock, "0 or more bytes");
    // Its kernels take buffers; on tensor IR it had silently done nothing.
    if (failed(loom::requireBufferized(getOperation(), "loom-tile-matmuls-for-gpu")))
      return signalPassFailure();
    SmallVector<linalg::GenericOp> matmuls;
    getOperation().walk([&](linalg::GenericOp op) {
      if (loom::isMatmulLike(op))
        matmuls.push_back(op);
    });
    loom::TensorCoreTarget target;
    target.multiprocessors = multiprocessors;
    target.sharedPerBlock = sharedPerBlock;
    target.sharedPerSM = sharedPerSM;
    target.reservedSharedPerBlock = reservedSharedPerBlock;
    target.warpgroupMma = warpgroupMma;
    target.persistentWarpgroupMma =
        warpgroupMma && (persistentWarpgroupMma || pingpongWarpgroupMma);
    target.pingpongWarpgroupMma = warpgroupMma && pingpongWarpgroupMma;
    target.tmaStoreEpilogue = warpgroupMma && tmaStoreEpilogue;
    // Clusters pair the tiles of the cooperative persistent kernel only.
    target.tmaMulticast = target.persistentWarpgroupMma &&
                          !target.pingpongWarpgroupMma && tmaMulticast;
    for (linalg::GenericOp op : matmuls) {
      if (tensorCores && loom::isTensorCoreMatmul(op) &&
          succeeded(loom::buildTensorCoreMatmul(op, target)))
        continue;
      // The CUDA-core kernel's two tile x tile tiles must fit too.
      loom::GpuMatmul mm(op);
      auto bytesOf = [](Value v) {
        return cast<MemRefType>(v.getType()).getElementType().getIntOrFloatBitWidth() / 8;
      };
      int64_t bytes = tile * tile * (bytesOf(mm.a) + bytesOf(mm.b));
      int64_t limit = sharedPerBlock;
      if (bytes > limit) {
        op.emitError() << "the smallest matmul kernel needs " << bytes
                       << " bytes of shared memory per block, over the limit of " << limit
                       << " (shared-per-block; loomc's --gpu-shared-limit)";
        return signalPassFailure();
      }
      rewrite(op);
    }
  }
  void rewrite(linalg::GenericOp op);
};
} // namespace

void LoomTileMatmulsForGpu::rewrite(linalg::GenericOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  loom::GpuMatmul mm(op);
  int64_t M = mm.m, N = mm.n, K = mm.k;
  Value a = mm.a, bMat = mm.b, c = mm.c;
  auto elementOf = [](Value v) { return cast<MemRefType>(v.getType()).getElementType(); };

  auto cst = [&](OpBuilder &builder, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(builder, loc, v);
  };
  auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(),
                                              gpu::AddressSpace::Workgroup);
  auto tileType = [&](Type element) {
    return MemRefType::get({tile, tile}, element, MemRefLayoutAttrInterface(),
                           workgroup);
  };
  auto launch = gpu::LaunchOp::create(
      b, loc, cst(b, (N + tile - 1) / tile), cst(b, (M + tile - 1) / tile),
      cst(b, mm.batches), cst(b, tile), cst(b, tile), cst(b, 1), Value(), Type(),
      ValueRange(), TypeRange{tileType(elementOf(a)), tileType(elementOf(bMat))});
  Value aTile = launch.getWorkgroupAttributions()[0];
  Value bTile = launch.getWorkgroupAttributions()[1];

  OpBuilder k(launch.getBody());
  k.setInsertionPointToStart(&launch.getBody().front());
  Value tx = launch.getThreadIds().x, ty = launch.getThreadIds().y;
  Value row = arith::AddIOp::create(
      k, loc, arith::MulIOp::create(k, loc, launch.getBlockIds().y, cst(k, tile)), ty);
  Value col = arith::AddIOp::create(
      k, loc, arith::MulIOp::create(k, loc, launch.getBlockIds().x, cst(k, tile)), tx);
  mm.setBatchFromBlock(k, loc, launch.getBlockIds().z);
  auto inBounds = [&](OpBuilder &builder, Value v, int64_t bound) {
    return arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ult, v,
                                 cst(builder, bound));
  };
  Value rowOk = inBounds(k, row, M), colOk = inBounds(k, col, N);
  Value inside = arith::AndIOp::create(k, loc, rowOk, colOk);
  Value zero = cst(k, 0);

  // The accumulator starts from C (the generic's init), in a register.
  Type accType = elementOf(c);
  Value init = scf::IfOp::create(
                   k, loc, inside,
                   [&](OpBuilder &t, Location l) {
                     Value v = memref::LoadOp::create(
                         t, l, c, mm.indices(t, l, 2, row, col, zero));
                     scf::YieldOp::create(t, l, v);
                   },
                   [&](OpBuilder &e, Location l) {
                     scf::YieldOp::create(
                         e, l, ValueRange{arith::ConstantOp::create(
                                   e, l, e.getZeroAttr(accType))});
                   })
                   .getResult(0);

  auto kLoop = scf::ForOp::create(k, loc, zero, cst(k, K), cst(k, tile),
                                  ValueRange{init});
  {
    OpBuilder l = OpBuilder::atBlockBegin(kLoop.getBody());
    Value k0 = kLoop.getInductionVar();
    Value acc = kLoop.getRegionIterArgs()[0];
    // Stage A[row, k0 + tx] and B[k0 + ty, col]; out-of-range threads skip.
    Value aK = arith::AddIOp::create(l, loc, k0, tx);
    Value bK = arith::AddIOp::create(l, loc, k0, ty);
    Value aOk = arith::AndIOp::create(l, loc, rowOk, inBounds(l, aK, K));
    scf::IfOp::create(l, loc, aOk, [&](OpBuilder &t, Location tl) {
      Value v = memref::LoadOp::create(t, tl, a, mm.indices(t, tl, 0, row, zero, aK));
      memref::StoreOp::create(t, tl, v, aTile, ValueRange{ty, tx});
      scf::YieldOp::create(t, tl);
    });
    Value bOk = arith::AndIOp::create(l, loc, colOk, inBounds(l, bK, K));
    scf::IfOp::create(l, loc, bOk, [&](OpBuilder &t, Location tl) {
      Value v = memref::LoadOp::create(t, tl, bMat, mm.indices(t, tl, 1, zero, col, bK));
      memref::StoreOp::create(t, tl, v, bTile, ValueRange{ty, tx});
      scf::YieldOp::create(t, tl);
    });
    gpu::BarrierOp::create(l, loc);
    // acc = body(As[ty][kk], Bs[kk][tx], acc) for the k0 + kk < K.
    Value steps = arith::MinSIOp::create(
        l, loc, cst(l, tile), arith::SubIOp::create(l, loc, cst(l, K), k0));
    auto inner = scf::ForOp::create(l, loc, zero, steps, cst(l, 1), ValueRange{acc});
    {
      OpBuilder ib = OpBuilder::atBlockBegin(inner.getBody());
      Value kk = inner.getInductionVar();
      Value av = memref::LoadOp::create(ib, loc, aTile, ValueRange{ty, kk});
      Value bv = memref::LoadOp::create(ib, loc, bTile, ValueRange{kk, tx});
      IRMapping mapping;
      Block &body = op.getRegion().front();
      mapping.map(body.getArgument(0), av);
      mapping.map(body.getArgument(1), bv);
      mapping.map(body.getArgument(2), inner.getRegionIterArgs()[0]);
      for (Operation &bodyOp : body.without_terminator())
        ib.clone(bodyOp, mapping);
      Value next = mapping.lookup(body.getTerminator()->getOperand(0));
      scf::YieldOp::create(ib, loc, next);
    }
    // Everyone is done with the tiles before they are overwritten.
    gpu::BarrierOp::create(l, loc);
    scf::YieldOp::create(l, loc, inner.getResults());
  }
  scf::IfOp::create(k, loc, inside, [&](OpBuilder &t, Location l) {
    memref::StoreOp::create(t, l, kLoop.getResult(0), c,
                            mm.indices(t, l, 2, row, col, zero));
    scf::YieldOp::create(t, l);
  });
  gpu::TerminatorOp::create(k, loc);
  op.erase();
  loom::sinkViewsIntoLaunch(launch);
}
