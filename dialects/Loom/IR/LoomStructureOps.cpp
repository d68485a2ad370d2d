//===- LoomStructureOps.cpp - Verifiers of stage, moe and train ops -------===//

#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

/// Checks that the body's yield produces exactly `expected`.
static LogicalResult verifyYield(Operation *op, Region &body,
                                 TypeRange expected) {
  auto yield = body.front().mightHaveTerminator()
                   ? dyn_cast<YieldOp>(body.front().getTerminator())
                   : YieldOp();
  if (!yield)
    return op->emitOpError("body must end with loom.yield");
  if (yield.getValues().getTypes() != expected)
    return op->emitOpError("body yields ")
           << yield.getValues().getTypes() << " but the op produces "
           << expected;
  return success();
}

LogicalResult StageOp::verify() {
  if ((int64_t)getStage() < 0)
    return emitOpError("stage number must be non-negative, got ")
           << (int64_t)getStage();
  if (getBody().front().getNumArguments() != 0)
    return emitOpError("body takes no arguments");
  return verifyYield(*this, getBody(), getResultTypes());
}

int64_t MoeOp::computeCapacity(int64_t tokens, int64_t experts, int64_t topK,
                               double capacityFactor) {
  double perExpert = double(topK) * double(tokens) * capacityFactor / experts;
  return std::max<int64_t>(1, (int64_t)std::ceil(perExpert));
}

LogicalResult MoeOp::verify() {
  int64_t experts = getExperts(), topK = getTopK(), capacity = getCapacity();
  if (experts < 1)
    return emitOpError("needs at least one expert, got ") << experts;
  if (topK < 1 || topK > experts)
    return emitOpError("top_k must be in [1, ") << experts << "], got " << topK;
  if (!(getCapacityFactor().convertToDouble() > 0))
    return emitOpError("capacity_factor must be positive");
  if (getAxis().empty())
    return emitOpError("needs the expert mesh axis");

  RankedTensorType input = getInput().getType();
  if (input.getRank() < 1)
    return emitOpError("input must have a feature dimension");
  int64_t model = input.getShape().back();
  if (model < 1)
    return emitOpError("input features must be non-empty");
  if (getRouter().getType().getShape() != ArrayRef<int64_t>{model, experts})
    return emitOpError("router must have shape [")
           << model << ", " << experts << "], got "
           << formatShape(getRouter().getType().getShape());
  int64_t tokens = input.getNumElements() / model;
  if (capacity != computeCapacity(tokens, experts, topK,
                                       getCapacityFactor().convertToDouble()))
    return emitOpError("capacity ") << capacity
                                    << " does not follow from the routing "
                                       "parameters";

  // The body sees one expert: a token tile and its slice of each param.
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 + getExpertParams().size())
    return emitOpError("body must take the token tile and one argument per "
                       "expert parameter");
  auto tile = dyn_cast<RankedTensorType>(body.getArgument(0).getType());
  if (!tile || tile.getShape() != ArrayRef<int64_t>{capacity, model} ||
      tile.getElementType() != input.getElementType())
    return emitOpError("token tile must be ")
           << input.clone({capacity, model});
  if (!getRouter().getType().getElementType().isF32())
    return emitOpError("router must be f32");
  for (auto [param, arg] :
       llvm::zip(getExpertParams(), body.getArguments().drop_front())) {
    auto paramType = cast<RankedTensorType>(param.getType());
    if (paramType.getRank() < 1 || paramType.getShape().front() != experts ||
        arg.getType() != paramType.clone(paramType.getShape().drop_front()))
      return emitOpError("expert parameter ")
             << paramType << " must be [experts, ...] with the body taking "
             << "one expert's slice";
  }
  auto yield = body.mightHaveTerminator()
                   ? dyn_cast<YieldOp>(body.getTerminator())
                   : YieldOp();
  if (!yield || yield.getValues().size() != 1)
    return emitOpError("body must yield one token tile");
  auto out = dyn_cast<RankedTensorType>(yield.getValues()[0].getType());
  if (!out || out.getRank() != 2 || out.getShape()[0] != capacity)
    return emitOpError("body must yield a [capacity, features] tile");
  SmallVector<int64_t> resultShape(input.getShape().drop_back());
  resultShape.push_back(out.getShape()[1]);
  if (getType() != RankedTensorType::get(resultShape, out.getElementType()))
    return emitOpError("result must be ")
           << RankedTensorType::get(resultShape, out.getElementType());
  return success();
}

ArrayRef<StringRef> TrainOp::hyperparametersOf(StringRef optimizer) {
  static const StringRef sgd[] = {"lr", "momentum", "weight_decay"};
  static const StringRef adam[] = {"lr", "beta1", "beta2", "eps",
                                   "weight_decay"};
  if (optimizer == "sgd")
    return sgd;
  if (optimizer == "adam" || optimizer == "adamw")
    return adam;
  return {};
}

double TrainOp::defaultLearningRate(StringRef optimizer) {
  return optimizer == "sgd" ? 1e-2 : 1e-3;
}

llvm::SetVector<Value> mlir::loom::valuesRead(Operation *op) {
  llvm::SetVector<Value> read(op->operand_begin(), op->operand_end());
  getUsedValuesDefinedAbove(op->getRegions(), read);
  return read;
}

bool mlir::loom::isPlanStepOp(Operation *op) {
  return isa<shard::ShardDialect>(op->getDialect()) || isa<AccumulateOp>(op);
}

bool mlir::loom::joinsGradientBucket(Operation *op) {
  auto sum = dyn_cast<shard::AllReduceOp>(op);
  auto previous = dyn_cast_or_null<shard::AllReduceOp>(op->getPrevNode());
  if (!sum || !previous)
    return false;
  Attribute bucket = sum->getAttr(attr::kGradientBucket);
  auto sameAttr = [&](StringRef name) {
    return sum->getAttr(name) == previous->getAttr(name);
  };
  return bucket && bucket == previous->getAttr(attr::kGradientBucket) &&
         sum.getGridAttr() == previous.getGridAttr() &&
         sum.getGridAxesAttr() == previous.getGridAxesAttr() &&
         sum.getReductionAttr() == previous.getReductionAttr() &&
         getElementTypeOrSelf(sum.getType()) ==
             getElementTypeOrSelf(previous.getType()) &&
         sameAttr(attr::kPhase) && sameAttr(attr::kStage) &&
         sameAttr(attr::kStages);
}

LogicalResult AccumulateOp::verify() {
  if (static_cast<int64_t>(getMicrobatches()) < 2)
    return emitOpError("accumulates over at least 2 microbatches, not ")
           << static_cast<int64_t>(getMicrobatches());
  return success();
}

LogicalResult TrainOp::verify() {
  ArrayRef<StringRef> known = hyperparametersOf(getOptimizer());
  if (known.empty())
    return emitOpError("unknown optimizer '")
           << getOptimizer() << "' (expected sgd, adam or adamw)";
  for (NamedAttribute hyper : getHyperparameters()) {
    if (!llvm::is_contained(known, hyper.getName().getValue()))
      return emitOpError("optimizer '") << getOptimizer()
                                        << "' has no hyperparameter '"
                                        << hyper.getName().getValue() << "'";
    if (!isa<FloatAttr>(hyper.getValue()))
      return emitOpError("hyperparameter '")
             << hyper.getName().getValue() << "' must be a number";
  }
  if ((int64_t)getMicrobatches() < 1)
    return emitOpError("needs at least one microbatch");
  if ((int64_t)getSteps() < 1)
    return emitOpError("needs at least one step");
  if (!llvm::is_contained({"gpipe", "1f1b", "interleaved", "zero_bubble"},
                          getSchedule()))
    return emitOpError("unknown pipeline schedule '") << getSchedule() << "'";
  StringRef scaling = getLossScale();
  if (!llvm::is_contained({"none", "static", "dynamic"}, scaling))
    return emitOpError("unknown loss scaling '") << scaling << "'";
  if (scaling == "static" && !getInitialScale())
    return emitOpError("static loss scaling needs an initial_scale");
  if (scaling == "none" && getInitialScale())
    return emitOpError("initial_scale goes with static or dynamic loss scaling, only");
  StringRef schedule = getLrSchedule().value_or("constant");
  if (!llvm::is_contained({"constant", "warmup_cosine", "warmup_linear"}, schedule))
    return emitOpError("unknown learning-rate schedule '")
           << schedule << "' (expected constant, warmup_cosine or warmup_linear)";
  if (schedule == "constant" && (getWarmup() || getMinLr()))
    return emitOpError("warmup and min_lr go with the warmup_cosine and warmup_linear "
                       "schedules, only");
  auto number = [](FloatAttr attr) { return attr.getValueAsDouble(); };
  if (getWarmupAttr() && !(number(getWarmupAttr()) >= 0 &&
                           number(getWarmupAttr()) == std::floor(number(getWarmupAttr()))))
    return emitOpError("warmup must be a whole number of steps");
  if (getMinLrAttr() && !(number(getMinLrAttr()) >= 0))
    return emitOpError("min_lr must be non-negative");
  if (getClipGradNormAttr() && !(number(getClipGradNormAttr()) > 0))
    return emitOpError("clip_grad_norm must be positive");
  if (getZeroAttr() && getZeroAttr().getInt() != 1)
    return emitOpError("zero ") << getZeroAttr().getInt()
                                << " is not built (expected zero 1)";
  return success();
}

LogicalResult TrainOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto model =
      symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, getModelAttr());
  if (!model)
    return emitOpError("refers to an unknown model ") << getModelAttr();
  for (unsigned i = 0, e = model.getNumResults(); i < e; ++i)
    if (model.getResultAttr(i, attr::kLoss))
      return success();
  return emitOpError("model ") << getModelAttr() << " has no loom.loss result";
}
