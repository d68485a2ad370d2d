//===- MasterWeights.cpp - f32 masters of a trained model's 16-bit params -===//
//
// Mixed-precision training keeps the weights the optimizer updates in f32
// (small updates would vanish in a 16-bit weight) and computes with their
// 16-bit copies. Making the param itself f32 and casting where the forward
// reads it gives both at once: autodiff differentiates through the cast
// (the gradient comes back in f32), the optimizer step sees an f32 param,
// and the cast re-rounds the compute copy from the master at every step.
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/VjpBuilders.h"
#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMMASTERWEIGHTS
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

/// Makes `param` an f32 master: its type (and its sharding annotation's)
/// becomes f32, and every other reader gets the cast to its old type.
static void makeMaster(BlockArgument param) {
  auto type = vjp::typeOf(param);
  auto master = type.clone(Float32Type::get(param.getContext()));
  param.setType(master);
  // The annotation, if any, is the value the forward reads: it moves to f32
  // with its param, and the cast goes after it.
  Value read = param;
  for (Operation *user : param.getUsers())
    if (auto annotation = dyn_cast<shard::ShardOp>(user)) {
      annotation.getResult().setType(master);
      read = annotation.getResult();
      break;
    }
  OpBuilder b(param.getContext());
  if (auto result = dyn_cast<OpResult>(read))
    b.setInsertionPointAfter(result.getOwner());
  else
    b.setInsertionPointToStart(param.getOwner());
  Value cast = CastOp::create(b, param.getLoc(), type, read);
  read.replaceAllUsesExcept(cast, cast.getDefiningOp());
}

namespace {
struct LoomMasterWeights
    : public loom::impl::LoomMasterWeightsBase<LoomMasterWeights> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (TrainOp train : module.getOps<TrainOp>()) {
      auto model = module.lookupSymbol<func::FuncOp>(train.getModelAttr());
      if (!model)
        continue;
      Block &body = model.getBody().front();
      for (BlockArgument arg : body.getArguments()) {
        auto type = dyn_cast<RankedTensorType>(arg.getType());
        if (!model.getArgAttr(arg.getArgNumber(), attr::kParam) || !type ||
            !(type.getElementType().isBF16() || type.getElementType().isF16()))
          continue;
        makeMaster(arg);
      }
      model.setFunctionType(FunctionType::get(model.getContext(),
                                              body.getArgumentTypes(),
                                              model.getResultTypes()));
    }
  }
};
} // namespace
