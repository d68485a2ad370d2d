//===- GpuMatmul.cpp - A matmul-like op as the GPU matmul builders see it -===//

#include "Codegen/GPU/GpuMatmul.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::loom;

GpuMatmul::GpuMatmul(linalg::GenericOp op)
    : bounds(op.getStaticLoopRanges()), batch(bounds.size() - 3),
      m(bounds[batch]), n(bounds[batch + 1]), k(bounds[batch + 2]), batches(1),
      a(op.getDpsInputs()[0]), b(op.getDpsInputs()[1]),
      c(op.getDpsInits()[0]), maps(op.getIndexingMapsArray()) {
  for (unsigned d = 0; d < batch; ++d)
    batches *= bounds[d];
}

void GpuMatmul::setBatchFromBlock(OpBuilder &builder, Location loc,
                                  Value blockZ) {
  batchIndex.assign(batch, Value());
  Value z = blockZ;
  for (int d = batch - 1; d >= 0; --d) {
    Value size = arith::ConstantIndexOp::create(builder, loc, bounds[d]);
    batchIndex[d] = arith::RemUIOp::create(builder, loc, z, size);
    z = arith::DivUIOp::create(builder, loc, z, size);
  }
}

SmallVector<Value> GpuMatmul::indices(OpBuilder &builder, Location loc,
                                      unsigned which, Value mIndex,
                                      Value nIndex, Value kIndex) const {
  SmallVector<Value> loops(batchIndex);
  loops.append({mIndex, nIndex, kIndex});
  return *affine::expandAffineMap(builder, loc, maps[which], loops);
}
