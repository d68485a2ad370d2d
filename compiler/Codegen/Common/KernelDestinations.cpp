//===- KernelDestinations.cpp - Kernel results into destination args ------===//

#include "Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMKERNELDESTINATIONS
#include "Codegen/Common/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// `value` copied elementwise into a new tensor: a linalg.generic, which
/// the CPU and GPU stages lower as any other (no canonicalization runs
/// between this pass and bufferization to fold the identity away).
static Value copyOf(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  Value empty = tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(type.getRank()));
  SmallVector<utils::IteratorType> parallel(type.getRank(), utils::IteratorType::parallel);
  return linalg::GenericOp::create(b, loc, type, value, empty, maps, parallel,
                                   [](OpBuilder &nb, Location l, ValueRange args) {
                                     linalg::YieldOp::create(nb, l, args[0]);
                                   })
      .getResult(0);
}

namespace {
struct LoomKernelDestinations
    : public loom::impl::LoomKernelDestinationsBase<LoomKernelDestinations> {
  void runOnOperation() override {
    llvm::SmallPtrSet<Operation *, 16> kernels;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !func->hasAttr(loom::attr::kKernel))
        continue;
      kernels.insert(func);
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      OpBuilder b(ret);
      // A result loom-in-place-updates put over an argument is written
      // there (its destination argument stays, unused, for the plan's
      // step, which passes the same bytes for both).
      SmallVector<std::optional<unsigned>> over(func.getNumResults());
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (auto arg = func.getResultAttrOfType<IntegerAttr>(i, loom::attr::kInPlace)) {
          over[i] = arg.getInt();
          func.removeResultAttr(i, b.getStringAttr(loom::attr::kInPlace));
        }
      // A value returned twice (two outputs of one value) is written in
      // place once; its other destinations get a copy, made before any
      // destination is written (the analysis would see the copy read a
      // value after its buffer's write).
      llvm::SmallPtrSet<Value, 8> returned;
      for (OpOperand &operand : ret->getOpOperands())
        if (isa<RankedTensorType>(operand.get().getType()) &&
            !returned.insert(operand.get()).second)
          operand.set(copyOf(b, ret.getLoc(), operand.get()));
      for (OpOperand &operand : ret->getOpOperands()) {
        auto type = dyn_cast<RankedTensorType>(operand.get().getType());
        if (!type)
          continue;
        Value dest = func.getBody().front().addArgument(type, ret.getLoc());
        if (std::optional<unsigned> arg = over[operand.getOperandNumber()])
          dest = func.getArgument(*arg);
        operand.set(bufferization::MaterializeInDestinationOp::create(
            b, ret.getLoc(), type, operand.get(), dest)
                        .getResult());
      }
      func.setFunctionType(FunctionType::get(
          func.getContext(), func.getBody().front().getArgumentTypes(),
          func.getResultTypes()));
    }
    // The plan calls the kernels (with its buffers as destinations); a
    // call left in the module (hand-written IR) passes new empty tensors,
    // so that it still matches its kernel's signature.
    getOperation().walk([&](func::CallOp call) {
      Operation *callee = SymbolTable::lookupNearestSymbolFrom(call, call.getCalleeAttr());
      if (!kernels.contains(callee))
        return;
      OpBuilder b(call);
      SmallVector<Value> operands(call.getOperands());
      for (Type type : call.getResultTypes()) {
        auto tensor = dyn_cast<RankedTensorType>(type);
        if (!tensor)
          continue;
        if (!tensor.hasStaticShape()) {
          call.emitError("a call of kernel @")
              << call.getCallee() << " with a result of dynamic shape " << type
              << " has no destination to pass";
          return signalPassFailure();
        }
        operands.push_back(tensor::EmptyOp::create(b, call.getLoc(), tensor.getShape(),
                                                   tensor.getElementType()));
      }
      call->setOperands(operands);
    });
  }
};
} // namespace
