//===- VjpBuilders.h - Pieces the VJP rules of loom ops share ---*- C++ -*-===//
//
// Gradients are built as loom ops. The rules compute in f32 where a value
// is 16-bit and round once at the end (castTo), so a gradient has its
// value's type but no intermediate 16-bit rounding.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IR_VJPBUILDERS_H
#define LOOM_IR_VJPBUILDERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::loom::vjp {

inline RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// A rank-0 f32 constant.
Value scalar(OpBuilder &b, Location loc, double value);

/// `value` with element type `element` (a loom.cast when it differs).
Value castTo(OpBuilder &b, Location loc, Value value, Type element);

/// `value` in f32.
inline Value toF32(OpBuilder &b, Location loc, Value value) {
  return castTo(b, loc, value, b.getF32Type());
}

/// The gradient of a broadcast operand: `grad` (of the broadcast shape)
/// summed over the dims broadcasting added or repeated, so that it has
/// `target`'s shape, then rounded to `target`'s element type.
Value reduceTo(OpBuilder &b, Location loc, Value grad, RankedTensorType target);

/// `value` broadcast to `target`'s shape (a loom.broadcast when it differs).
Value broadcastTo(OpBuilder &b, Location loc, Value value,
                  ArrayRef<int64_t> shape);

/// Zeros of `type`.
Value zeros(OpBuilder &b, Location loc, RankedTensorType type);

/// The matrix transpose of each batch of `value` (its last two dims).
Value swapLastTwo(OpBuilder &b, Location loc, Value value);

/// `value` reshaped to `shape` (a loom.reshape when it differs).
Value reshapeTo(OpBuilder &b, Location loc, Value value, ArrayRef<int64_t> shape);

/// The sum of `value` over its last axis, keeping the axis.
Value rowSum(OpBuilder &b, Location loc, Value value);

} // namespace mlir::loom::vjp

#endif // LOOM_IR_VJPBUILDERS_H
