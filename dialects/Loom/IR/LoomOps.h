//===- LoomOps.h - Operations of the loom dialect -------------------------===//

#ifndef LOOM_IR_LOOMOPS_H
#define LOOM_IR_LOOMOPS_H

#include "Loom/IR/LoomDialect.h"
#include "Loom/IR/TypeRules.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "Loom/IR/LoomOps.h.inc"

namespace mlir::loom {
/// Ops that compute each element from the same (broadcast) element of their
/// operands: they follow their operands' layout when partitioned, and run
/// as the epilogue of the kernel producing an operand.
inline bool isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, NegOp, GeluOp, ReluOp, SiluOp, ExpOp,
             TanhOp, SqrtOp, CastOp>(op);
}
} // namespace mlir::loom

#endif // LOOM_IR_LOOMOPS_H
