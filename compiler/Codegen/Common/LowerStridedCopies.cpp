//===- LowerStridedCopies.cpp - memref.copy of views as loops -------------===//

#include "Codegen/Common/Passes.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMLOWERSTRIDEDCOPIES
#include "Codegen/Common/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

LogicalResult mlir::loom::lowerCopyToLoop(memref::CopyOp copy) {
  auto type = cast<MemRefType>(copy.getTarget().getType());
  if (!type.hasStaticShape() ||
      !cast<MemRefType>(copy.getSource().getType()).hasStaticShape())
    return copy.emitError("copies of dynamically shaped buffers are not supported");
  OpBuilder b(copy);
  Location loc = copy.getLoc();
  if (type.getRank() == 0) {
    Value v = memref::LoadOp::create(b, loc, copy.getSource());
    memref::StoreOp::create(b, loc, v, copy.getTarget());
    copy.erase();
    return success();
  }
  SmallVector<Value> lower, upper, steps;
  for (int64_t size : type.getShape()) {
    lower.push_back(arith::ConstantIndexOp::create(b, loc, 0));
    upper.push_back(arith::ConstantIndexOp::create(b, loc, size));
    steps.push_back(arith::ConstantIndexOp::create(b, loc, 1));
  }
  scf::ParallelOp::create(b, loc, lower, upper, steps,
                          [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
                            Value v = memref::LoadOp::create(nb, nloc, copy.getSource(), ivs);
                            memref::StoreOp::create(nb, nloc, v, copy.getTarget(), ivs);
                          });
  copy.erase();
  return success();
}

namespace {
struct LoomLowerStridedCopies
    : public loom::impl::LoomLowerStridedCopiesBase<LoomLowerStridedCopies> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) {
      auto source = cast<MemRefType>(copy.getSource().getType());
      auto target = cast<MemRefType>(copy.getTarget().getType());
      if (source.hasStaticShape() && target.hasStaticShape() &&
          (!source.getLayout().isIdentity() || !target.getLayout().isIdentity()))
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies)
      (void)loom::lowerCopyToLoop(copy); // shapes checked above
  }
};
} // namespace
