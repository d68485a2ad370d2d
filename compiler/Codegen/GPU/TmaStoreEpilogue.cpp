//===- TmaStoreEpilogue.cpp - wgmma tiles written back by TMA stores ------===//

#include "Codegen/GPU/TmaStoreEpilogue.h"
#include "Codegen/GPU/WarpgroupMatmul.h"
#include "Codegen/GPU/WarpgroupMma.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The 16-byte chunks (8 16-bit elements, one m16n8 tile's row) of a box
/// row, and the boxes' width in elements.
constexpr int64_t kChunksPerRow = kRowBytes / 16;
} // namespace

Value TmaStoreEpilogue::destinationOf(linalg::GenericOp op) {
  // C's map plain loop dims, the batch dims first and then m and n: a box
  // of rows of m and columns of n is a tile of its last two dims at the
  // block's batch indices.
  GpuMatmul mm(op);
  if (wgmma::indexedDims(mm, 2) != std::make_pair(mm.batch, mm.batch + 1))
    return {};
  TensorCoreFusion fusion = findTensorCoreFusion(op);
  Value destination = mm.c;
  if (linalg::GenericOp epilogue = fusion.epilogue) {
    if (epilogue.getNumDpsInits() != 1)
      return {};
    OpOperand &init = epilogue.getDpsInitsMutable()[0];
    if (!epilogue.getMatchingIndexingMap(&init).isIdentity())
      return {};
    // A box's elements past the result's edges are computed too (the
    // tensor map drops them): reading a bias there would read past it.
    Block &body = epilogue.getRegion().front();
    bool readsOthers =
        llvm::any_of(epilogue->getOpOperands(), [&](OpOperand &o) {
          return o.get() != mm.c &&
                 !body.getArgument(o.getOperandNumber()).use_empty();
        });
    if (readsOthers && (mm.m % 128 || mm.n % 256))
      return {};
    destination = init.get();
  }
  Type element = cast<MemRefType>(destination.getType()).getElementType();
  if (!isa<BFloat16Type, Float16Type>(element) ||
      !isTensorMapReadable(destination))
    return {};
  return destination;
}

TmaStoreEpilogue::TmaStoreEpilogue(TensorCoreKernel &kernel, Value result)
    : kernel(kernel), result(result) {
  OpBuilder host(kernel.launch);
  map = createTensorMap(host, kernel.loc, result, kWarpgroupRows);
}

Value TmaStoreEpilogue::issuer(OpBuilder &b) const {
  const IndexMath &im = kernel.im;
  return arith::CmpIOp::create(b, kernel.loc, arith::CmpIPredicate::eq,
                               im.remc(b, kernel.tid, kWarpgroupThreads),
                               im.cst(b, 0));
}

void TmaStoreEpilogue::syncWarpgroup(OpBuilder &b, Value warpgroup) const {
  namedBarrierOfWarpgroup(b, kernel.loc, warpgroup, "bar.sync", 1, 2,
                          kWarpgroupThreads);
}

void TmaStoreEpilogue::store(
    OpBuilder &b, ValueRange accs,
    function_ref<Value(OpBuilder &, Value warpgroup, int64_t box)> bufferAt,
    bool reuse, Value rowBlock) {
  const IndexMath &im = kernel.im;
  const GpuMatmul &mm = kernel.mm;
  Location loc = kernel.loc;
  linalg::GenericOp epilogue = kernel.fusion.epilogue;
  auto type = cast<MemRefType>(result.getType());
  Type element = type.getElementType();
  MemRefType box = boxType(result, kWarpgroupRows);
  Value zero = im.cst(b, 0);
  Value warpgroup = im.divc(b, kernel.warp, 4);
  // The accumulators' first row in the output, and the thread's rows in its
  // boxes: warp w of the warpgroup holds rows 16w + g and 16w + g + 8.
  Value firstRow =
      im.add(b, kernel.row0,
             im.mulc(b, rowBlock ? rowBlock : warpgroup, kWarpgroupRows));
  Value rowInBox =
      im.add(b, im.mulc(b, im.remc(b, kernel.warp, 4), 16), kernel.g);
  // The result's values at C's elements (row, column) and (row, column + 1)
  // holding `acc` and `accNext`, as a pair (evaluateEpiloguePair: rounded
  // by one instruction).
  auto pairAt = [&](OpBuilder &b, Value row, Value column, Value acc,
                    Value accNext) -> Value {
    Value pair;
    if (epilogue) {
      pair = evaluateEpiloguePair(
          b, loc, epilogue, mm.c, mm.indices(b, loc, 2, row, column, zero),
          mm.indices(b, loc, 2, row, im.addc(b, column, 1), zero), acc,
          accNext)[0];
    } else {
      pair = vector::FromElementsOp::create(
          b, loc, VectorType::get({2}, acc.getType()), ValueRange{acc, accNext});
    }
    auto pairType = VectorType::get({2}, element);
    if (pair.getType() != pairType)
      pair = arith::TruncFOp::create(b, loc, pairType, pair);
    return pair;
  };
  int64_t boxes = kernel.tilesN * 8 / kRowElements;
  for (int64_t j = 0; j < boxes; ++j) {
    if (reuse) {
      // The store two boxes back read this buffer: at most the last one
      // may still be reading its own.
      scf::IfOp::create(b, loc, issuer(b), [&](OpBuilder &then, Location) {
        NVVM::CpAsyncBulkWaitGroupOp::create(then, loc, 1, then.getUnitAttr());
        scf::YieldOp::create(then, loc);
      });
      syncWarpgroup(b, warpgroup);
    }
    Value view =
        memref::ViewOp::create(b, loc, box, kernel.dynamicShared,
                               bufferAt(b, warpgroup, j), ValueRange{});
    Value column0 = im.addc(b, kernel.col0, j * kRowElements);
    // Tile ni of the box is the rows' 16-byte chunk ni, which the 128-byte
    // swizzle moves to chunk ni ^ (row % 8); row % 8 is g for both rows.
    for (int64_t ni = 0; ni < kChunksPerRow; ++ni) {
      Value chunk = im.xorv(b, im.cst(b, ni), kernel.g);
      Value columnInBox =
          im.add(b, im.mulc(b, chunk, 8), im.mulc(b, kernel.t, 2));
      Value column =
          im.add(b, column0, im.addc(b, im.mulc(b, kernel.t, 2), ni * 8));
      for (int64_t e = 0; e < 4; e += 2) {
        int64_t first = ((j * kChunksPerRow + ni) * 4) + e;
        Value row = im.addc(b, im.add(b, firstRow, rowInBox), e ? 8 : 0);
        Value pair = pairAt(b, row, column, accs[first], accs[first + 1]);
        SmallVector<Value> at(box.getRank() - 2, zero);
        at.append({im.addc(b, rowInBox, e ? 8 : 0), columnInBox});
        vector::StoreOp::create(b, loc, pair, view, at, /*nontemporal=*/false,
                                llvm::Align(4));
      }
    }
    // The threads' writes, then the TMA unit's read (another proxy), in
    // that order: every writer fences, then the issuer stores.
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
    syncWarpgroup(b, warpgroup);
    scf::IfOp::create(b, loc, issuer(b), [&](OpBuilder &then, Location) {
      SmallVector<Value> coordinates =
          mm.indices(then, loc, 2, firstRow, column0, zero);
      std::reverse(coordinates.begin(), coordinates.end());
      nvgpu::TmaAsyncStoreOp::create(then, loc, view, map, coordinates,
                                     Value());
      NVVM::CpAsyncBulkCommitGroupOp::create(then, loc);
      scf::YieldOp::create(then, loc);
    });
  }
}

void TmaStoreEpilogue::drain(OpBuilder &b) {
  scf::IfOp::create(
      b, kernel.loc, issuer(b), [&](OpBuilder &then, Location loc) {
        NVVM::CpAsyncBulkWaitGroupOp::create(then, loc, 0, UnitAttr());
        scf::YieldOp::create(then, loc);
      });
}
