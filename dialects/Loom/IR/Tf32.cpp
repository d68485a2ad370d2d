//===- Tf32.cpp - Rounding f32 to tf32, one definition for CPU and GPU -----===//

#include "Loom/IR/Tf32.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace {
constexpr int32_t kHalfUlp = 0x1000;          // bit 12: half of bit 13
constexpr int32_t kKeep = int32_t(0xffffe000); // sign, exponent, 10 bits
constexpr int32_t kExponent = 0x7f800000;      // all ones: inf or NaN

bool isConstant(Value value, int32_t expected) {
  APInt bits;
  return matchPattern(value, m_ConstantInt(&bits)) &&
         bits.getBitWidth() == 32 && int32_t(bits.getZExtValue()) == expected;
}
} // namespace

Value loom::roundToTf32(OpBuilder &b, Location loc, Value x) {
  Type i32 = b.getI32Type();
  auto constant = [&](int32_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  Value rounded = arith::AndIOp::create(
      b, loc, arith::AddIOp::create(b, loc, bits, constant(kHalfUlp)),
      constant(kKeep));
  Value finite = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ne,
      arith::AndIOp::create(b, loc, bits, constant(kExponent)),
      constant(kExponent));
  return arith::BitcastOp::create(
      b, loc, x.getType(),
      arith::SelectOp::create(b, loc, finite, rounded, bits));
}

Value loom::matchRoundToTf32(Value value) {
  auto out = value.getDefiningOp<arith::BitcastOp>();
  auto select = out ? out.getIn().getDefiningOp<arith::SelectOp>() : nullptr;
  if (!select)
    return nullptr;
  auto in = select.getFalseValue().getDefiningOp<arith::BitcastOp>();
  auto rounded = select.getTrueValue().getDefiningOp<arith::AndIOp>();
  auto finite = select.getCondition().getDefiningOp<arith::CmpIOp>();
  if (!in || !rounded || !finite ||
      finite.getPredicate() != arith::CmpIPredicate::ne ||
      !isConstant(rounded.getRhs(), kKeep) ||
      !isConstant(finite.getRhs(), kExponent))
    return nullptr;
  auto plus = rounded.getLhs().getDefiningOp<arith::AddIOp>();
  auto exponent = finite.getLhs().getDefiningOp<arith::AndIOp>();
  Value bits = in.getResult();
  if (!plus || !exponent || plus.getLhs() != bits ||
      !isConstant(plus.getRhs(), kHalfUlp) || exponent.getLhs() != bits ||
      !isConstant(exponent.getRhs(), kExponent))
    return nullptr;
  return in.getIn();
}
