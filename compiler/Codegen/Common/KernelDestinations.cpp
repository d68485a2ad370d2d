//===- KernelDestinations.cpp - Kernel results into destination args ------===//

#include "Codegen/Common/Passes.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMKERNELDESTINATIONS
#include "Codegen/Common/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomKernelDestinations
    : public loom::impl::LoomKernelDestinationsBase<LoomKernelDestinations> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !func->hasAttr(loom::attr::kKernel))
        continue;
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        auto type = dyn_cast<RankedTensorType>(operand.get().getType());
        if (!type)
          continue;
        Value dest = func.getBody().front().addArgument(type, ret.getLoc());
        operand.set(bufferization::MaterializeInDestinationOp::create(
            b, ret.getLoc(), type, operand.get(), dest)
                        .getResult());
      }
      func.setFunctionType(FunctionType::get(
          func.getContext(), func.getBody().front().getArgumentTypes(),
          func.getResultTypes()));
    }
  }
};
} // namespace
