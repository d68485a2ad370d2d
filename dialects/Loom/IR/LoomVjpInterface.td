//===- LoomVjpInterface.td - Reverse-mode rules of loom ops --------------===//

#ifndef LOOM_VJP_INTERFACE_TD
#define LOOM_VJP_INTERFACE_TD

include "mlir/IR/OpBase.td"

def Loom_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::mlir::loom";
  let description = [{
    An op's vector-Jacobian product, declared beside the op the way JAX
    primitives carry their transpose rules: given the gradient of the loss
    with respect to each result, the op builds (as loom ops, at the
    builder's insertion point) the gradient with respect to each operand.
    `loom-autodiff` walks a model backwards calling this rule and sums the
    gradients of values used more than once.

    A gradient has its value's type (shape and element type). A result
    whose gradient is unknown (unused) gets a null value, and the rule puts
    a null value for operands that have no gradient (integer ids, labels).
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the gradients of the operands from `resultGrads` (one per
        result, null where the loss does not depend on that result) into
        `operandGrads` (one per operand, null where none is defined).
      }],
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // LOOM_VJP_INTERFACE_TD
