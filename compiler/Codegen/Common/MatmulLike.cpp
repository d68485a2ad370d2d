//===- MatmulLike.cpp - The contractions the tilers recognize -------------===//

#include "Codegen/Common/MatmulLike.h"

#include "Loom/IR/Tf32.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

bool loom::isTensorCoreMatmul(linalg::GenericOp op) {
  if (!isMatmulLike(op) || op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return false;
  auto element = [](Value v) {
    return cast<ShapedType>(v.getType()).getElementType();
  };
  Type a = element(op.getDpsInputs()[0]), b = element(op.getDpsInputs()[1]);
  if (a != b || !(a.isBF16() || a.isF16() || a.isF32()) ||
      !element(op.getDpsInits()[0]).isF32())
    return false;
  // The body must be exactly acc + extf(a) * extf(b), or for f32 operands
  // acc + tf32(a) * tf32(b) (`multiply tf32`, Loom/IR/Tf32.h).
  Block &body = op.getRegion().front();
  if (!a.isF32() && body.getOperations().size() != 5)
    return false;
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value acc = body.getArgument(2);
  Value product = add.getLhs() == acc   ? add.getRhs()
                  : add.getRhs() == acc ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  auto extOf = [&](Value v, unsigned arg) {
    if (a.isF32())
      return matchRoundToTf32(v) == body.getArgument(arg);
    auto ext = v.getDefiningOp<arith::ExtFOp>();
    return ext && ext.getIn() == body.getArgument(arg);
  };
  return (extOf(mul.getLhs(), 0) && extOf(mul.getRhs(), 1)) ||
         (extOf(mul.getLhs(), 1) && extOf(mul.getRhs(), 0));
}

/// The buffer `value` views, or `value` itself.
static Value underlyingBuffer(Value value) {
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>())
    value = view.getViewSource();
  return value;
}

bool mlir::loom::writesMatmulOperand(linalg::GenericOp matmul, Value output) {
  Value buffer = underlyingBuffer(output);
  return llvm::any_of(matmul->getOperands(), [&](Value operand) {
    return underlyingBuffer(operand) == buffer;
  });
}
