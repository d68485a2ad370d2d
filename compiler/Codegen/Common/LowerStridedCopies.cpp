//===- LowerStridedCopies.cpp - memref.copy of views as loops -------------===//

#include "Codegen/Common/Passes.h"

#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"

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

/// Whether the upstream lowering copies `type` with one memcpy: a view
/// that is one dense run (a concat's slot, a split's piece of a 1-D
/// bucket). A loop per such piece would cost LLVM's back end seconds in a
/// gradient bucket of a deep model (hundreds of pieces).
static bool contiguous(MemRefType type) {
  return type.getRank() > 0 && type.getNumElements() > 0 &&
         memref::isStaticShapeAndContiguousRowMajor(type);
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
          (!source.getLayout().isIdentity() || !target.getLayout().isIdentity()) &&
          !(contiguous(source) && contiguous(target)))
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies)
      (void)loom::lowerCopyToLoop(copy); // shapes checked above
  }
};
} // namespace
