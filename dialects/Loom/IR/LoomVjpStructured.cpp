//===- LoomVjpStructured.cpp - VJPs of matmuls, norms, reductions, losses -===//
//
// Normalizations and softmax compute their gradients in f32 from f32
// copies of their operands, as their forward statistics are; matmul
// gradients are matmuls with the forward's accumulation type.
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/LoomOps.h"
#include "Loom/IR/VjpBuilders.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::vjp;

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildVjp(OpBuilder &b, ValueRange grads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // y = a @ b: da = dy @ b^T, db = a^T @ dy, each in the operands' type
  // (the forward's rounding point) and summed over broadcast batch dims.
  Location loc = getLoc();
  RankedTensorType lhsType = typeOf(getLhs()), rhsType = typeOf(getRhs());
  Value g = castTo(b, loc, grads[0], lhsType.getElementType());
  auto matmul = [&](Value x, Value y) -> Value {
    return MatmulOp::create(b, loc, x, y, getAccumulateAttr(), getMultiplyAttr());
  };
  Value lhsGrad = reduceTo(b, loc, matmul(g, swapLastTwo(b, loc, getRhs())), lhsType);
  Value rhsGrad;
  if (rhsType.getRank() == 2) {
    // One B for every batch: flatten the batches into the rows.
    int64_t k = lhsType.getShape().back(), n = rhsType.getShape().back();
    int64_t rows = lhsType.getNumElements() / k;
    Value a = reshapeTo(b, loc, getLhs(), {rows, k});
    Value dy = reshapeTo(b, loc, g, {rows, n});
    rhsGrad = matmul(swapLastTwo(b, loc, a), dy);
  } else {
    // Batched B: a broadcast to dy's batches, then summed back.
    SmallVector<int64_t> shape(typeOf(g).getShape());
    shape.back() = lhsType.getShape().back();
    Value a = broadcastTo(b, loc, getLhs(), shape);
    rhsGrad = reduceTo(b, loc, matmul(swapLastTwo(b, loc, a), g), rhsType);
  }
  operandGrads.assign({lhsGrad, rhsGrad});
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax and normalizations
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildVjp(OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // dx = y * (dy - sum(dy * y)) along the axis.
  Location loc = getLoc();
  Value y = toF32(b, loc, getResult()), g = toF32(b, loc, grads[0]);
  Value dot = SumOp::create(b, loc, MulOp::create(b, loc, g, y), getAxis(),
                            /*keepdim=*/true);
  Value grad = MulOp::create(b, loc, y, SubOp::create(b, loc, g, dot));
  operandGrads.assign({castTo(b, loc, grad, typeOf(getInput()).getElementType())});
  return success();
}

LogicalResult AttentionOp::buildVjp(OpBuilder &b, ValueRange grads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // One op that recomputes the scores (as the CPU forward does, in blocks):
  // the forward keeps no [queries, keys] tensor for the backward, only its
  // result, which the output projection's gradient keeps anyway.
  Location loc = getLoc();
  if (!getLse())
    return emitOpError("needs its lse result to be differentiated (loom-autodiff asks for it)");
  Value g = castTo(b, loc, grads[0], typeOf(getQuery()).getElementType());
  auto grad = AttentionGradOp::create(
      b, loc, TypeRange{typeOf(getQuery()), typeOf(getKey()), typeOf(getValue())},
      getQuery(), getKey(), getValue(), getResult(), getLse(), g, getScale(), getCausalAttr(),
      getAccumulateAttr());
  operandGrads.assign(grad->result_begin(), grad->result_end());
  if (getScale())
    operandGrads.push_back(Value());
  return success();
}

/// The gradients of a (layer or RMS) norm's input, scale and bias: one
/// loom.norm_grad, its f32 parameter gradients cast to the params' types.
/// The result's gradient goes in as it is (an f32 one is not rounded to a
/// 16-bit input's type first: the statistics are f32 either way).
static void normVjp(OpBuilder &b, Location loc, Value input, Value scale,
                    Value bias, double epsilon, bool centered, Value grad,
                    SmallVectorImpl<Value> &operandGrads) {
  RankedTensorType type = typeOf(input);
  auto feature = RankedTensorType::get({type.getShape().back()}, b.getF32Type());
  auto norm = NormGradOp::create(b, loc, TypeRange{type, feature, feature}, input, grad, scale,
                                 b.getF64FloatAttr(epsilon), centered ? b.getUnitAttr() : nullptr);
  // Under master weights a 16-bit scale or bias is the cast of its f32
  // master, whose VJP passes an f32 gradient on as it is: so it stays f32,
  // as torch's autocast keeps a norm's (it had been rounded to 16 bits and
  // widened back, 2^-9 off).
  auto paramGrad = [&](Value param, Value grad) -> Value {
    auto cast = param.getDefiningOp<CastOp>();
    if (cast && typeOf(cast.getInput()).getElementType().isF32())
      return grad;
    return castTo(b, loc, grad, typeOf(param).getElementType());
  };
  operandGrads.push_back(norm.getInputGrad());
  if (scale)
    operandGrads.push_back(paramGrad(scale, norm.getScaleGrad()));
  if (bias)
    operandGrads.push_back(paramGrad(bias, norm.getBiasGrad()));
}

LogicalResult LayerNormOp::buildVjp(OpBuilder &b, ValueRange grads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.clear();
  normVjp(b, getLoc(), getInput(), getScale(), getBias(),
          getEpsilon().convertToDouble(), /*centered=*/true, grads[0],
          operandGrads);
  return success();
}

LogicalResult RmsNormOp::buildVjp(OpBuilder &b, ValueRange grads,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads.clear();
  normVjp(b, getLoc(), getInput(), getScale(), Value(),
          getEpsilon().convertToDouble(), /*centered=*/false, grads[0],
          operandGrads);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The gradient of a reduction of `input` along `axis`: `grad` with the
/// axis restored (size 1), times `factor`, broadcast to the input.
static Value spreadBack(OpBuilder &b, Location loc, Value input, int64_t axis,
                        Value grad, double factor) {
  RankedTensorType type = typeOf(input);
  int64_t rank = type.getRank();
  axis = axis < 0 ? axis + rank : axis;
  SmallVector<int64_t> kept(type.getShape());
  kept[axis] = 1;
  Value g = reshapeTo(b, loc, toF32(b, loc, grad), kept);
  if (factor != 1.0)
    g = MulOp::create(b, loc, g, scalar(b, loc, factor));
  return castTo(b, loc, broadcastTo(b, loc, g, type.getShape()),
                type.getElementType());
}

LogicalResult SumOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(
      {spreadBack(b, getLoc(), getInput(), getAxis(), grads[0], 1.0)});
  return success();
}

LogicalResult MeanOp::buildVjp(OpBuilder &b, ValueRange grads,
                               SmallVectorImpl<Value> &operandGrads) {
  RankedTensorType type = typeOf(getInput());
  int64_t axis = getAxis();
  int64_t size = type.getDimSize(axis < 0 ? axis + type.getRank() : axis);
  operandGrads.assign(
      {spreadBack(b, getLoc(), getInput(), axis, grads[0], 1.0 / size)});
  return success();
}

LogicalResult MaxOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  // The gradient goes to the maxima, shared evenly among ties.
  Location loc = getLoc();
  RankedTensorType type = typeOf(getInput());
  int64_t rank = type.getRank(), axis = getAxis();
  axis = axis < 0 ? axis + rank : axis;
  SmallVector<int64_t> kept(type.getShape());
  kept[axis] = 1;
  Value max = reshapeTo(b, loc, getResult(), kept);
  Value mask = MaxMaskOp::create(b, loc, type.clone(b.getF32Type()), getInput(), max);
  Value ties = SumOp::create(b, loc, mask, axis, /*keepdim=*/true);
  Value share = DivOp::create(b, loc, reshapeTo(b, loc, toF32(b, loc, grads[0]), kept), ties);
  operandGrads.assign(
      {castTo(b, loc, MulOp::create(b, loc, mask, share), type.getElementType())});
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::buildVjp(OpBuilder &b, ValueRange grads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Value logits = CrossEntropyGradOp::create(b, getLoc(), typeOf(getLogits()),
                                            getLogits(), getLabels(), grads[0]);
  operandGrads.assign({logits, Value()});
  return success();
}

LogicalResult MseOp::buildVjp(OpBuilder &b, ValueRange grads,
                              SmallVectorImpl<Value> &operandGrads) {
  // loss = mean((p - t)^2): dp = 2 (p - t) dloss / N, dt = -dp.
  Location loc = getLoc();
  RankedTensorType type = typeOf(getPrediction());
  Value diff = SubOp::create(b, loc, toF32(b, loc, getPrediction()),
                             toF32(b, loc, getTarget()));
  Value factor = MulOp::create(b, loc, grads[0],
                               scalar(b, loc, 2.0 / type.getNumElements()));
  Value grad = MulOp::create(b, loc, diff, factor);
  operandGrads.assign(
      {castTo(b, loc, grad, type.getElementType()),
       castTo(b, loc, NegOp::create(b, loc, grad),
              typeOf(getTarget()).getElementType())});
  return success();
}
