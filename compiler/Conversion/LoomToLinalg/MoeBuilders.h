//===- MoeBuilders.h - Scalar and generic builders of the MoE lowerings -*- C++ -*-===//
//
// Shared by MoeToLinalg.cpp (routing, gathers, gates) and
// MoeExchangeToLinalg.cpp (the expert-parallel counts and maps).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_LOOMTOLINALG_MOEBUILDERS_H
#define LOOM_CONVERSION_LOOMTOLINALG_MOEBUILDERS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::loom::moe {

/// Small builders for the scalar bodies.
struct Scalars {
  OpBuilder &b;
  Location loc;

  Value index(int64_t dim) { return linalg::IndexOp::create(b, loc, dim); }
  Value i32(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value asI32(Value index) {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value extract(Value tensor, ValueRange indices) {
    return tensor::ExtractOp::create(b, loc, tensor, indices);
  }
  Value constIndex(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
};

inline RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

inline AffineMap mapOf(MLIRContext *context, int64_t loops, ArrayRef<int64_t> dims) {
  SmallVector<AffineExpr> exprs;
  for (int64_t d : dims)
    exprs.push_back(getAffineDimExpr(d, context));
  return AffineMap::get(loops, 0, exprs, context);
}

/// A generic with `loops` loops, the first `parallel` of them parallel.
inline Value generic(OpBuilder &b, Location loc, RankedTensorType type, ValueRange inputs,
              Value init, ArrayRef<AffineMap> maps, int64_t loops, int64_t parallel,
              function_ref<void(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<utils::IteratorType> iterators(loops, utils::IteratorType::reduction);
  std::fill_n(iterators.begin(), parallel, utils::IteratorType::parallel);
  return linalg::GenericOp::create(b, loc, type, inputs, ValueRange{init}, maps,
                                   iterators, body)
      .getResult(0);
}

/// The inverse of `slot` [N, K] (values below sourceType's elements, or
/// -1 for none): source[s] is the element n * K + k of slot holding s, or
/// -1. One pass over the slots (an scf.for over n, linear in N), as no two
/// elements hold one slot.
inline Value invertSlots(OpBuilder &b, Location loc, Value slot,
                         RankedTensorType sourceType, Value noneFilled) {
  int64_t rows = typeOf(slot).getDimSize(0), width = typeOf(slot).getDimSize(1);
  int64_t sources = sourceType.getNumElements();
  Scalars outer{b, loc};
  auto loop = scf::ForOp::create(
      b, loc, outer.constIndex(0), outer.constIndex(rows), outer.constIndex(1),
      ValueRange{noneFilled}, [&](OpBuilder &b, Location l, Value n, ValueRange state) {
        Scalars s{b, l};
        Value source = state[0];
        for (int64_t k = 0; k < width; ++k) {
          Value held = s.extract(slot, {n, s.constIndex(k)});
          // A slot outside source writes nothing: source[0] is read back
          // and written unchanged, with no branch.
          Value writes = arith::AndIOp::create(
              b, l, s.cmp(arith::CmpIPredicate::sge, held, s.i32(0)),
              s.cmp(arith::CmpIPredicate::slt, held, s.i32(sources)));
          Value target = arith::IndexCastOp::create(b, l, b.getIndexType(),
                                                    s.select(writes, held, s.i32(0)));
          Value id = arith::AddIOp::create(
              b, l, arith::MulIOp::create(b, l, s.asI32(n), s.i32(width)), s.i32(k));
          source = tensor::InsertOp::create(
              b, l, s.select(writes, id, s.extract(source, {target})), source, target);
        }
        scf::YieldOp::create(b, l, ValueRange{source});
      });
  return loop.getResult(0);
}

} // namespace mlir::loom::moe

#endif // LOOM_CONVERSION_LOOMTOLINALG_MOEBUILDERS_H
