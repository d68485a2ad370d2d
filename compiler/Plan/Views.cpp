//===- Views.cpp - Model calls that only reshape: plan views -------------===//

#include "Plan/PlanBuilder.h"

#include "Loom/IR/LoomDialect.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

/// Whether `kernel`'s body is views of its one argument and nothing else:
/// loom.reshape before lowering, tensor.collapse_shape and expand_shape
/// after.
static bool onlyReshapes(func::FuncOp kernel) {
  if (kernel.isExternal() || kernel.getNumArguments() != 1)
    return false;
  Block &body = kernel.getBody().front();
  Value view = body.getArgument(0);
  for (Operation &op : body.without_terminator()) {
    if (!isa<mlir::loom::ReshapeOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op) ||
        op.getOperand(0) != view)
      return false;
    view = op.getResult(0);
  }
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  return ret && ret.getNumOperands() == 1 && ret.getOperand(0) == view &&
         view != body.getArgument(0);
}

bool (::loom::isViewStep)(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  if (!call || call.getNumOperands() != 1 || call.getNumResults() != 1)
    return false;
  auto model = call->getParentOfType<func::FuncOp>();
  if (!model || model->hasAttr(mlir::loom::attr::kStagesCount))
    return false;
  Value argument = call.getOperand(0);
  auto isReturned = [](Value value) {
    return llvm::any_of(value.getUsers(),
                        [](Operation *user) { return isa<func::ReturnOp>(user); });
  };
  if (!isa_and_nonnull<func::CallOp>(argument.getDefiningOp()) || isReturned(argument) ||
      isReturned(call.getResult(0)))
    return false;
  auto kernel = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  return kernel && onlyReshapes(kernel);
}
