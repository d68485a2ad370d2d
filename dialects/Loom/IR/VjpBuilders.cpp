//===- VjpBuilders.cpp - Pieces the VJP rules of loom ops share -----------===//

#include "Loom/IR/VjpBuilders.h"

#include "Loom/IR/LoomOps.h"

using namespace mlir;
using namespace mlir::loom;

Value vjp::scalar(OpBuilder &b, Location loc, double value) {
  return ConstantOp::create(b, loc, RankedTensorType::get({}, b.getF32Type()),
                            b.getF64FloatAttr(value));
}

Value vjp::castTo(OpBuilder &b, Location loc, Value value, Type element) {
  RankedTensorType type = typeOf(value);
  if (type.getElementType() == element)
    return value;
  return CastOp::create(b, loc, type.clone(element), value);
}

Value vjp::reduceTo(OpBuilder &b, Location loc, Value grad,
                    RankedTensorType target) {
  // Leading dims broadcasting added, collapsed into one and summed at
  // once (a bias's gradient over [B, T, N] is one sum over B x T rows, not
  // a [T, N] partial sum written and read again), then dims of size 1 it
  // repeated.
  int64_t added = typeOf(grad).getRank() - target.getRank();
  if (added > 0) {
    ArrayRef<int64_t> shape = typeOf(grad).getShape();
    SmallVector<int64_t> rows{ShapedType::getNumElements(shape.take_front(added))};
    llvm::append_range(rows, shape.drop_front(added));
    grad = SumOp::create(b, loc, reshapeTo(b, loc, grad, rows), /*axis=*/0,
                         /*keepdim=*/false);
  }
  for (int64_t d = 0; d < target.getRank(); ++d)
    if (target.getDimSize(d) == 1 && typeOf(grad).getDimSize(d) != 1)
      grad = SumOp::create(b, loc, grad, d, /*keepdim=*/true);
  return castTo(b, loc, grad, target.getElementType());
}

Value vjp::broadcastTo(OpBuilder &b, Location loc, Value value,
                       ArrayRef<int64_t> shape) {
  RankedTensorType type = typeOf(value);
  if (type.getShape() == shape)
    return value;
  return BroadcastOp::create(b, loc, RankedTensorType::get(shape, type.getElementType()),
                             value);
}

Value vjp::zeros(OpBuilder &b, Location loc, RankedTensorType type) {
  Value zero = ConstantOp::create(
      b, loc, RankedTensorType::get({}, type.getElementType()),
      b.getF64FloatAttr(0.0));
  return broadcastTo(b, loc, zero, type.getShape());
}

Value vjp::swapLastTwo(OpBuilder &b, Location loc, Value value) {
  int64_t rank = typeOf(value).getRank();
  SmallVector<int64_t> permutation;
  for (int64_t d = 0; d < rank; ++d)
    permutation.push_back(d);
  std::swap(permutation[rank - 2], permutation[rank - 1]);
  return TransposeOp::create(b, loc, value, permutation);
}

Value vjp::reshapeTo(OpBuilder &b, Location loc, Value value,
                     ArrayRef<int64_t> shape) {
  RankedTensorType type = typeOf(value);
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, type.getElementType()),
                           value);
}

Value vjp::rowSum(OpBuilder &b, Location loc, Value value) {
  return SumOp::create(b, loc, value, typeOf(value).getRank() - 1,
                       /*keepdim=*/true);
}
