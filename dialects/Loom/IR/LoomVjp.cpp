//===- LoomVjp.cpp - VJPs of elementwise and data-movement ops ------------===//
//
// Each rule receives the gradient of its result(s) and builds those of its
// operands (see LoomVjpInterface.td). Broadcast operands get their gradient
// summed back to their own shape (vjp::reduceTo).
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/LoomOps.h"
#include "Loom/IR/VjpBuilders.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::vjp;

//===----------------------------------------------------------------------===//
// Elementwise arithmetic
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  operandGrads.assign({reduceTo(b, loc, grads[0], typeOf(getLhs())),
                       reduceTo(b, loc, grads[0], typeOf(getRhs()))});
  return success();
}

LogicalResult SubOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value negated = NegOp::create(b, loc, grads[0]);
  operandGrads.assign({reduceTo(b, loc, grads[0], typeOf(getLhs())),
                       reduceTo(b, loc, negated, typeOf(getRhs()))});
  return success();
}

LogicalResult MulOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value g = toF32(b, loc, grads[0]);
  Value lhs = MulOp::create(b, loc, g, toF32(b, loc, getRhs()));
  Value rhs = MulOp::create(b, loc, g, toF32(b, loc, getLhs()));
  operandGrads.assign({reduceTo(b, loc, lhs, typeOf(getLhs())),
                       reduceTo(b, loc, rhs, typeOf(getRhs()))});
  return success();
}

LogicalResult DivOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  // d(a/b) = da / b - (a/b) db / b.
  Location loc = getLoc();
  Value g = toF32(b, loc, grads[0]);
  Value rhs = toF32(b, loc, getRhs());
  Value lhsGrad = DivOp::create(b, loc, g, rhs);
  Value rhsGrad = NegOp::create(
      b, loc, MulOp::create(b, loc, lhsGrad, toF32(b, loc, getResult())));
  operandGrads.assign({reduceTo(b, loc, lhsGrad, typeOf(getLhs())),
                       reduceTo(b, loc, rhsGrad, typeOf(getRhs()))});
  return success();
}

/// maximum and minimum: the gradient goes to the operand the result took,
/// shared evenly where the two are equal (PyTorch's maximum and minimum
/// give each half). Each operand's share is its equality mask over the sum
/// of both masks, in f32.
static LogicalResult selectionVjp(Operation *op, OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  Location loc = op->getLoc();
  Value result = op->getResult(0);
  RankedTensorType type = typeOf(result);
  auto took = [&](Value operand) -> Value {
    // loom.max_mask wants the compared value at the result's rank: the
    // operand broadcast to the result (a reshape of a number to [1, 1]
    // had become a constant global in each GPU kernel reading it, one
    // symbol defined twice).
    return MaxMaskOp::create(b, loc, type.clone(b.getF32Type()), result,
                             broadcastTo(b, loc, operand, type.getShape()));
  };
  Value lhs = took(op->getOperand(0)), rhs = took(op->getOperand(1));
  Value share = DivOp::create(b, loc, toF32(b, loc, grads[0]), AddOp::create(b, loc, lhs, rhs));
  operandGrads.assign(
      {reduceTo(b, loc, MulOp::create(b, loc, lhs, share), typeOf(op->getOperand(0))),
       reduceTo(b, loc, MulOp::create(b, loc, rhs, share), typeOf(op->getOperand(1)))});
  return success();
}

LogicalResult MaximumOp::buildVjp(OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return selectionVjp(*this, b, grads, operandGrads);
}

LogicalResult MinimumOp::buildVjp(OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return selectionVjp(*this, b, grads, operandGrads);
}

LogicalResult NegOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({NegOp::create(b, getLoc(), grads[0]).getResult()});
  return success();
}

//===----------------------------------------------------------------------===//
// Activations and math functions
//===----------------------------------------------------------------------===//

/// dy * f'(x) through loom.activation_grad (the derivative needs x).
static LogicalResult activationVjp(Operation *op, StringRef activation,
                                   OpBuilder &b, ValueRange grads,
                                   SmallVectorImpl<Value> &operandGrads) {
  Value grad = ActivationGradOp::create(b, op->getLoc(), grads[0].getType(),
                                        activation, op->getOperand(0), grads[0]);
  operandGrads.assign({grad});
  return success();
}

LogicalResult GeluOp::buildVjp(OpBuilder &b, ValueRange grads,
                               SmallVectorImpl<Value> &operandGrads) {
  return activationVjp(*this, "gelu", b, grads, operandGrads);
}

LogicalResult ReluOp::buildVjp(OpBuilder &b, ValueRange grads,
                               SmallVectorImpl<Value> &operandGrads) {
  return activationVjp(*this, "relu", b, grads, operandGrads);
}

LogicalResult SiluOp::buildVjp(OpBuilder &b, ValueRange grads,
                               SmallVectorImpl<Value> &operandGrads) {
  return activationVjp(*this, "silu", b, grads, operandGrads);
}

LogicalResult AbsOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  return activationVjp(*this, "abs", b, grads, operandGrads);
}

/// dy * f'(x) of a unary op, f'(x) written from `at` (its result or its
/// operand) in f32, the gradient in the operand's type. From the result
/// where f' is simplest so (exp, tanh, sqrt); from the operand where the
/// result would lose something (sin, cos: sqrt(1 - y^2) loses the sign).
template <typename Derivative>
static LogicalResult chainRule(Operation *op, Value at, OpBuilder &b, ValueRange grads,
                               SmallVectorImpl<Value> &operandGrads,
                               Derivative derivative) {
  Location loc = op->getLoc();
  Value x = toF32(b, loc, at);
  Value grad = MulOp::create(b, loc, toF32(b, loc, grads[0]), derivative(x));
  operandGrads.assign(
      {castTo(b, loc, grad, typeOf(op->getOperand(0)).getElementType())});
  return success();
}

LogicalResult ExpOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  return chainRule(*this, getResult(), b, grads, operandGrads, [](Value y) { return y; });
}

LogicalResult LogOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  // d log(x) = dx / x, from the operand (exp(-y) would round twice).
  Location loc = getLoc();
  Value grad = DivOp::create(b, loc, toF32(b, loc, grads[0]), toF32(b, loc, getInput()));
  operandGrads.assign({castTo(b, loc, grad, typeOf(getInput()).getElementType())});
  return success();
}

LogicalResult TanhOp::buildVjp(OpBuilder &b, ValueRange grads,
                               SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  return chainRule(*this, getResult(), b, grads, operandGrads, [&](Value y) -> Value {
    return SubOp::create(b, loc, scalar(b, loc, 1.0), MulOp::create(b, loc, y, y));
  });
}

LogicalResult SqrtOp::buildVjp(OpBuilder &b, ValueRange grads,
                               SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  return chainRule(*this, getResult(), b, grads, operandGrads, [&](Value y) -> Value {
    return DivOp::create(b, loc, scalar(b, loc, 0.5), y);
  });
}

LogicalResult SigmoidOp::buildVjp(OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // sigmoid' = y (1 - y), from the result as tanh's.
  Location loc = getLoc();
  return chainRule(*this, getResult(), b, grads, operandGrads, [&](Value y) -> Value {
    return MulOp::create(b, loc, y, SubOp::create(b, loc, scalar(b, loc, 1.0), y));
  });
}

LogicalResult SinOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  return chainRule(*this, getInput(), b, grads, operandGrads,
                   [&](Value x) -> Value { return CosOp::create(b, loc, x); });
}

LogicalResult CosOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  return chainRule(*this, getInput(), b, grads, operandGrads, [&](Value x) -> Value {
    return NegOp::create(b, loc, SinOp::create(b, loc, x));
  });
}

LogicalResult ErfOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  // erf' = 2 / sqrt(pi) exp(-x^2).
  Location loc = getLoc();
  return chainRule(*this, getInput(), b, grads, operandGrads, [&](Value x) -> Value {
    Value gauss = ExpOp::create(b, loc, NegOp::create(b, loc, MulOp::create(b, loc, x, x)));
    return MulOp::create(b, loc, scalar(b, loc, 1.1283791670955126), gauss);
  });
}

LogicalResult DropoutOp::buildVjp(OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // dy through the same mask: the same positions, stream and (once the
  // step adds them to every dropout) keys.
  Location loc = getLoc();
  Value dy = grads[0];
  Value dx = DropoutOp::create(b, loc, dy.getType(), dy, getPositions(), getKeys(),
                               getProbabilityAttr(), getStreamAttr());
  operandGrads.assign({castTo(b, loc, dx, typeOf(getInput()).getElementType())});
  operandGrads.append(getNumOperands() - 1, Value());
  return success();
}

LogicalResult CastOp::buildVjp(OpBuilder &b, ValueRange grads,
                               SmallVectorImpl<Value> &operandGrads) {
  Type element = typeOf(getInput()).getElementType();
  if (!isa<FloatType>(element)) {
    operandGrads.assign({Value()});
    return success();
  }
  operandGrads.assign({castTo(b, getLoc(), grads[0], element)});
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult CausalMaskOp::buildVjp(OpBuilder &b, ValueRange grads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({CausalMaskGradOp::create(b, getLoc(), grads[0]).getResult()});
  return success();
}

LogicalResult EmbeddingOp::buildVjp(OpBuilder &b, ValueRange grads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value table = EmbeddingGradOp::create(b, getLoc(), typeOf(getTable()),
                                        getIds(), grads[0]);
  operandGrads.assign({table, Value()});
  return success();
}

LogicalResult TransposeOp::buildVjp(OpBuilder &b, ValueRange grads,
                                    SmallVectorImpl<Value> &operandGrads) {
  ArrayRef<int64_t> permutation = getPermutation();
  // The gradient of a matrix a matmul read transposed (a tied embedding's
  // `h @ transpose(wte)`) arrives as `p @ q` ([D, V]): it is made as
  // `q^T @ p^T` instead ([V, D]), whose operands' transposes fold into the
  // matmul's reads, rather than transposed by a copy (29 ms of a 252 ms
  // step for a 50257-word vocabulary). The first product, unused, is left
  // to CSE (the differentiator still holds it).
  auto product = grads[0].getDefiningOp<MatmulOp>();
  // (Only a swap: the identity [0, 1] had had its gradient transposed.)
  if (product && product->use_empty() && permutation == ArrayRef<int64_t>{1, 0} &&
      typeOf(product.getLhs()).getRank() == 2 && typeOf(product.getRhs()).getRank() == 2) {
    // p is the matmul VJP's own a^T: loom-outline-kernels reads its
    // transpose back as a itself (foldOperandTransposes).
    Location loc = getLoc();
    Value swapped = MatmulOp::create(b, loc, swapLastTwo(b, loc, product.getRhs()),
                                     swapLastTwo(b, loc, product.getLhs()),
                                     product.getAccumulateAttr(), product.getMultiplyAttr());
    operandGrads.assign({swapped});
    return success();
  }
  SmallVector<int64_t> inverse(permutation.size());
  for (auto [d, from] : llvm::enumerate(permutation))
    inverse[from] = d;
  operandGrads.assign(
      {TransposeOp::create(b, getLoc(), grads[0], inverse).getResult()});
  return success();
}

LogicalResult BroadcastOp::buildVjp(OpBuilder &b, ValueRange grads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // Summed over what the broadcast repeated.
  operandGrads.assign({reduceTo(b, getLoc(), grads[0], typeOf(getInput()))});
  return success();
}

LogicalResult ReshapeOp::buildVjp(OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({reshapeTo(b, getLoc(), grads[0], typeOf(getInput()).getShape())});
  return success();
}

LogicalResult SplitOp::buildVjp(OpBuilder &b, ValueRange grads,
                                SmallVectorImpl<Value> &operandGrads) {
  // Pieces the loss does not read contribute zeros.
  SmallVector<Value> pieces;
  for (auto [grad, result] : llvm::zip(grads, getResults()))
    pieces.push_back(grad ? grad : zeros(b, getLoc(), typeOf(result)));
  operandGrads.assign(
      {ConcatOp::create(b, getLoc(), pieces, getAxis()).getResult()});
  return success();
}

LogicalResult ConcatOp::buildVjp(OpBuilder &b, ValueRange grads,
                                 SmallVectorImpl<Value> &operandGrads) {
  SmallVector<Type> types(getInputs().getTypes());
  auto split = SplitOp::create(b, getLoc(), types, grads[0], getAxis());
  operandGrads.assign(split.getResults().begin(), split.getResults().end());
  return success();
}
