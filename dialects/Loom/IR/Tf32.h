//===- Tf32.h - Rounding f32 to tf32, one definition for CPU and GPU -------===//
//
// Under `precision tf32` a matmul of f32 operands rounds each operand to
// tf32 (8 exponent bits, 10 mantissa bits) before multiplying, to nearest
// with ties away from zero (PTX `cvt.rna.tf32.f32`), and accumulates the
// exact products in f32. The CPU kernels and the GPU tensor-core kernels
// build the rounding with the same arith ops, so that both devices multiply
// the same values.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IR_TF32_H
#define LOOM_IR_TF32_H

#include "mlir/IR/Builders.h"

namespace mlir::loom {

/// `x` (f32) rounded to tf32, as an f32 whose low 13 mantissa bits are 0:
/// its bits plus half a tf32 ulp (0x1000), masked; infinities and NaNs are
/// kept (adding to a NaN's or infinity's bits could change them). A finite
/// value above tf32's largest rounds to infinity, as cvt.rna does.
Value roundToTf32(OpBuilder &b, Location loc, Value x);

/// The value roundToTf32 rounded, if `value` is its result; else null.
Value matchRoundToTf32(Value value);

} // namespace mlir::loom

#endif // LOOM_IR_TF32_H
