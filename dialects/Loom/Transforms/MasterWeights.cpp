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

/// A lookup of `value` as its table (no vocab-parallel rows yet) reads the
/// f32 master and casts the rows it gathers: a cast of the whole table had
/// run every step for the rows looked up (a [32000, 256] table, 1.85 ms of
/// a bf16 step). The same values: a cast commutes with a gather; the
/// gradient comes back through the rows' cast.
static bool castsRows(OpOperand &use) {
  auto lookup = dyn_cast<EmbeddingOp>(use.getOwner());
  return lookup && use.get() == lookup.getTable() && !lookup.getRows();
}
static void castRowsOf(EmbeddingOp lookup) {
  RankedTensorType rows = lookup.getType();
  lookup.getResult().setType(rows.clone(Float32Type::get(lookup.getContext())));
  OpBuilder b(lookup->getContext());
  b.setInsertionPointAfter(lookup);
  Value cast = CastOp::create(b, lookup.getLoc(), rows, lookup.getResult());
  lookup.getResult().replaceAllUsesExcept(cast, cast.getDefiningOp());
}

/// The readers of `value` (but those `keeps` names) read `value` cast to
/// `type` instead, placed right after it.
static void readCast(Value value, RankedTensorType type,
                     llvm::function_ref<bool(Operation *)> keeps = nullptr) {
  for (OpOperand &use : llvm::make_early_inc_range(value.getUses()))
    if (castsRows(use) && (!keeps || !keeps(use.getOwner())))
      castRowsOf(cast<EmbeddingOp>(use.getOwner()));
  auto reads = [&](OpOperand &use) {
    return (!keeps || !keeps(use.getOwner())) && !castsRows(use);
  };
  if (llvm::none_of(value.getUses(), reads))
    return;
  OpBuilder b(value.getContext());
  if (auto result = dyn_cast<OpResult>(value))
    b.setInsertionPointAfter(result.getOwner());
  else
    b.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
  Value copy = CastOp::create(b, value.getLoc(), type, value);
  value.replaceUsesWithIf(copy, [&](OpOperand &use) {
    return use.getOwner() != copy.getDefiningOp() && reads(use);
  });
}

/// Makes `param` an f32 master: its type (and its sharding annotations')
/// becomes f32, and every reader gets the cast to its old type.
static void makeMaster(BlockArgument param) {
  auto type = vjp::typeOf(param);
  auto master = type.clone(Float32Type::get(param.getContext()));
  param.setType(master);
  // An annotation (`let w = p shard [...]`) is a value the forward reads:
  // it moves to f32 with its param, and its cast goes after it. A param
  // also read directly casts for those readers too (they read the f32
  // master: an internal verifier error).
  auto isAnnotation = [](Operation *op) { return isa<shard::ShardOp>(op); };
  for (Operation *user : llvm::make_early_inc_range(param.getUsers()))
    if (auto annotation = dyn_cast<shard::ShardOp>(user)) {
      annotation.getResult().setType(master);
      readCast(annotation.getResult(), type);
    }
  readCast(param, type, isAnnotation);
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
