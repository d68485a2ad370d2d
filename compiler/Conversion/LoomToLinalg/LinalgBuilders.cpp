//===- LinalgBuilders.cpp - Building blocks of the loom-to-linalg lowering ===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

/// A float to a signed integer as NumPy's astype and torch's .to do it,
/// toward zero, but defined everywhere (arith.fptosi is poison outside the
/// integer's range; x86 gave INT_MIN for 1e10): values beyond the range
/// saturate to its ends, NaN gives 0 (LLVM's fptosi.sat).
static Value saturatingFloatToInt(OpBuilder &b, Location loc, Value value,
                                  IntegerType type) {
  value = widen(b, loc, value);
  auto floatType = cast<FloatType>(value.getType());
  unsigned bits = type.getWidth();
  APInt max = APInt::getSignedMaxValue(bits), min = APInt::getSignedMinValue(bits);
  // 2^(bits-1) and -2^(bits-1) are exact in f32 and f64.
  auto bound = [&](double v) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, v));
  };
  Value upper = bound(std::ldexp(1.0, bits - 1)), lower = bound(-std::ldexp(1.0, bits - 1));
  Value truncated = arith::FPToSIOp::create(b, loc, type, value);
  auto constant = [&](const APInt &v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, v));
  };
  Value tooBig = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, value, upper);
  Value tooSmall = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, value, lower);
  Value isNan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, value, value);
  Value result = arith::SelectOp::create(b, loc, tooBig, constant(max), truncated);
  result = arith::SelectOp::create(b, loc, tooSmall, constant(min), result);
  return arith::SelectOp::create(b, loc, isNan, constant(APInt(bits, 0)), result);
}

Value mlir::loom::convertScalar(OpBuilder &b, Location loc, Value value,
                                Type type) {
  Type from = value.getType();
  if (from == type)
    return value;
  bool fromFloat = isa<FloatType>(from), toFloat = isa<FloatType>(type);
  if (fromFloat && toFloat) {
    if (from.getIntOrFloatBitWidth() < type.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, loc, type, value);
    // Between the two 16-bit formats, go through f32 (exact) first.
    if (from.getIntOrFloatBitWidth() == type.getIntOrFloatBitWidth())
      value = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
    return arith::TruncFOp::create(b, loc, type, value);
  }
  if (!fromFloat && toFloat)
    return arith::SIToFPOp::create(b, loc, type, value);
  if (fromFloat && !toFloat)
    return saturatingFloatToInt(b, loc, value, cast<IntegerType>(type));
  if (from.getIntOrFloatBitWidth() < type.getIntOrFloatBitWidth())
    return arith::ExtSIOp::create(b, loc, type, value);
  return arith::TruncIOp::create(b, loc, type, value);
}

Value mlir::loom::widen(OpBuilder &b, Location loc, Value value) {
  Type type = value.getType();
  if (isa<FloatType>(type) && type.getIntOrFloatBitWidth() < 32)
    return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  return value;
}

Value mlir::loom::clampedIndex(OpBuilder &b, Location loc, Value id,
                               int64_t size) {
  Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), id);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value last = arith::ConstantIndexOp::create(b, loc, size - 1);
  return arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, index, zero),
                                last);
}

Value mlir::loom::tableRow(OpBuilder &b, Location loc, Value id, int64_t size,
                           Value rows, std::optional<uint64_t> vocab) {
  if (!rows)
    return clampedIndex(b, loc, id, size);
  Value global = clampedIndex(b, loc, id, static_cast<int64_t>(*vocab));
  Value first = tensor::ExtractOp::create(
      b, loc, rows, ValueRange{arith::ConstantIndexOp::create(b, loc, 0)});
  Value offset = arith::IndexCastOp::create(b, loc, b.getIndexType(), first);
  return arith::SubIOp::create(b, loc, global, offset);
}

Value mlir::loom::f32Constant(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

AffineMap mlir::loom::broadcastMap(ArrayRef<int64_t> shape,
                                   ArrayRef<int64_t> result,
                                   MLIRContext *context) {
  SmallVector<AffineExpr> exprs;
  size_t offset = result.size() - shape.size();
  for (auto [i, size] : llvm::enumerate(shape)) {
    // A dimension of size 1 against a larger one is read at index 0.
    if (size == 1 && result[offset + i] != 1)
      exprs.push_back(getAffineConstantExpr(0, context));
    else
      exprs.push_back(getAffineDimExpr(offset + i, context));
  }
  return AffineMap::get(result.size(), 0, exprs, context);
}

AffineMap mlir::loom::dropDimMap(int64_t rank, int64_t axis,
                                 MLIRContext *context) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      exprs.push_back(getAffineDimExpr(d, context));
  return AffineMap::get(rank, 0, exprs, context);
}

Value mlir::loom::buildElementwise(OpBuilder &b, Location loc,
                                   RankedTensorType resultType,
                                   ValueRange inputs,
                                   ArrayRef<AffineMap> inputMaps,
                                   ScalarBody body) {
  MLIRContext *context = b.getContext();
  int64_t rank = resultType.getRank();
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, context));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  Value init = tensor::EmptyOp::create(b, loc, resultType.getShape(),
                                       resultType.getElementType());
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, inputs, init, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> wide;
        for (Value arg : args.drop_back())
          wide.push_back(widen(nb, nloc, arg));
        Value result = body(nb, nloc, wide);
        linalg::YieldOp::create(
            nb, nloc,
            convertScalar(nb, nloc, result, resultType.getElementType()));
      });
  return generic.getResult(0);
}

Value mlir::loom::buildBroadcastElementwise(OpBuilder &b, Location loc,
                                            RankedTensorType resultType,
                                            ValueRange inputs,
                                            ScalarBody body) {
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(broadcastMap(cast<RankedTensorType>(input.getType()).getShape(),
                                resultType.getShape(), b.getContext()));
  return buildElementwise(b, loc, resultType, inputs, maps, body);
}

Value mlir::loom::buildConverted(OpBuilder &b, Location loc,
                                 RankedTensorType resultType, Value value) {
  return buildBroadcastElementwise(
      b, loc, resultType, {value},
      [](OpBuilder &, Location, ValueRange in) { return in[0]; });
}

Value mlir::loom::multiplyAccumulate(OpBuilder &b, Location loc, Value acc,
                                     Value a, Value c) {
  Type type = acc.getType();
  // f32 sums fuse (vfmadd, fma.rn.f32). 16-bit ones round the product and
  // the sum each: with `contract`, LLVM fused them where the CPU has
  // avx512fp16 (or in f32 for bf16), so the result depended on --cpu.
  auto contract = type.isF32() ? arith::FastMathFlags::contract
                               : arith::FastMathFlags::none;
  Value product = arith::MulFOp::create(b, loc, convertScalar(b, loc, a, type),
                                        convertScalar(b, loc, c, type), contract);
  return arith::AddFOp::create(b, loc, acc, product, contract);
}

Value mlir::loom::filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                               TypedAttr value) {
  return filledTensor(b, loc,
                      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType()),
                      value);
}

Value mlir::loom::filledTensor(OpBuilder &b, Location loc, Value tensor, TypedAttr value) {
  Value init = arith::ConstantOp::create(b, loc, value);
  return linalg::FillOp::create(b, loc, ValueRange{init}, ValueRange{tensor}).getResult(0);
}

/// An f32 tensor of `shape` filled with `value`.
static Value filledF32(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                       double value) {
  return filledTensor(b, loc, RankedTensorType::get(shape, b.getF32Type()),
                      b.getF32FloatAttr(value));
}

Value mlir::loom::buildReduction(
    OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
    ArrayRef<bool> reducedLoops, ValueRange inputs,
    ArrayRef<AffineMap> inputMaps, double init,
    function_ref<Value(OpBuilder &, Location, Value, ValueRange)> combine) {
  MLIRContext *context = b.getContext();
  int64_t rank = shape.size();
  SmallVector<int64_t> kept;
  SmallVector<AffineExpr> keptExprs;
  SmallVector<utils::IteratorType> iterators;
  for (int64_t d = 0; d < rank; ++d) {
    iterators.push_back(reducedLoops[d] ? utils::IteratorType::reduction
                                        : utils::IteratorType::parallel);
    if (!reducedLoops[d]) {
      kept.push_back(shape[d]);
      keptExprs.push_back(getAffineDimExpr(d, context));
    }
  }
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(AffineMap::get(rank, 0, keptExprs, context));
  Value acc = filledF32(b, loc, kept, init);
  auto generic = linalg::GenericOp::create(
      b, loc, acc.getType(), inputs, acc, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> wide;
        for (Value arg : args.drop_back())
          wide.push_back(widen(nb, nloc, arg));
        linalg::YieldOp::create(nb, nloc,
                                combine(nb, nloc, args.back(), wide));
      });
  return generic.getResult(0);
}

Value mlir::loom::buildAxisReduction(
    OpBuilder &b, Location loc, ArrayRef<int64_t> shape, int64_t axis,
    ValueRange inputs, ArrayRef<AffineMap> inputMaps, double init,
    function_ref<Value(OpBuilder &, Location, Value, ValueRange)> combine) {
  SmallVector<bool> reduced(shape.size(), false);
  reduced[axis] = true;
  return buildReduction(b, loc, shape, reduced, inputs, inputMaps, init, combine);
}

Value mlir::loom::buildTotalSum(
    OpBuilder &b, Location loc, ArrayRef<int64_t> shape, ValueRange inputs,
    ArrayRef<AffineMap> inputMaps,
    function_ref<Value(OpBuilder &, Location, ValueRange)> value) {
  SmallVector<bool> reduced(shape.size(), true);
  return buildReduction(
      b, loc, shape, reduced, inputs, inputMaps, 0.0,
      [&](OpBuilder &nb, Location l, Value acc, ValueRange in) -> Value {
        return arith::AddFOp::create(nb, l, acc, value(nb, l, in));
      });
}
