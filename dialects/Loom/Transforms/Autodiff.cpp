//===- Autodiff.cpp - Reverse-mode gradients of a trained model's loss ----===//
//
// Differentiates the global program (before partitioning, so that the
// gradient collectives come from the same sharding rules as the forward's):
// each op's VJP comes from its VjpOpInterface, and values used several
// times sum their gradients. Only values that depend on a param are
// differentiated.
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/VjpBuilders.h"
#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMAUTODIFF
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

static bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// Recomputation (`recompute block(h)`, loomc --recompute=layers): the
/// values of a marked layer instance that only the backward reads are
/// computed again, by copies of their forward ops placed before the first
/// backward op that reads any of them, so that the forward's stay live
/// only while the forward uses them. The instance's outputs (what a
/// forward op outside it reads) and what it reads from outside are kept.
/// The copies are the same ops on the same values: the same numbers.
/// A gradient matmul rounded to 16 bits and widened again right after (a
/// master weight's gradient: the matmul's VJP, then its f32 cast's) is a
/// matmul into f32, its accumulation type, instead. That is Megatron's
/// fp32 weight-gradient accumulation; and the partitioner keeps f32 partial
/// sums, so a data-parallel gradient is summed once after the
/// microbatches, not once per microbatch.
static void widenGradientMatmuls(Block &body,
                                 const llvm::SmallPtrSetImpl<Operation *> &forward) {
  for (Operation &op : llvm::make_early_inc_range(body)) {
    auto cast = dyn_cast<CastOp>(op);
    if (!cast || forward.contains(cast))
      continue;
    auto matmul = cast.getInput().getDefiningOp<MatmulOp>();
    if (!matmul || forward.contains(matmul) || !matmul->hasOneUse())
      continue;
    auto wide = cast.getType();
    Type narrow = matmul.getType().getElementType();
    if (wide.getElementType() != matmul.getAccumulate() ||
        narrow.getIntOrFloatBitWidth() >= 32)
      continue;
    OpBuilder b(matmul);
    auto widened = MatmulOp::create(b, matmul.getLoc(), wide, matmul.getLhs(),
                                    matmul.getRhs(), matmul.getAccumulateAttr(),
                                    matmul.getMultiplyAttr());
    widened->setDiscardableAttrs(matmul->getDiscardableAttrDictionary());
    cast.getResult().replaceAllUsesWith(widened.getResult());
    cast.erase();
    matmul.erase();
  }
}

static void recomputeLayers(Block &body,
                            const llvm::SmallPtrSetImpl<Operation *> &forward) {
  llvm::MapVector<StringAttr, SmallVector<Operation *>> instances;
  for (Operation &op : body)
    if (forward.contains(&op))
      if (auto name = op.getAttrOfType<StringAttr>(attr::kRecompute))
        instances[name].push_back(&op);
  for (auto &[name, ops] : instances) {
    llvm::SmallPtrSet<Operation *, 32> members(ops.begin(), ops.end());
    auto isKept = [&](Value value) {
      return llvm::any_of(value.getUsers(), [&](Operation *user) {
        return forward.contains(user) && !members.contains(user);
      });
    };
    // Parameters' annotations are not copied: the partitioner lays out an
    // argument at its one annotation.
    auto copies = [&](Operation *op) {
      if (!op || !members.contains(op) || isa<shard::ShardingOp>(op))
        return false;
      if (auto annotation = dyn_cast<shard::ShardOp>(op))
        if (isa<BlockArgument>(annotation.getSrc()))
          return false;
      return llvm::none_of(op->getResults(), isKept);
    };
    SmallVector<OpOperand *> uses;
    llvm::SmallPtrSet<Operation *, 32> needed;
    SmallVector<Operation *> work;
    for (Operation *op : ops) {
      if (!copies(op))
        continue;
      for (Value result : op->getResults())
        for (OpOperand &use : result.getUses())
          if (!forward.contains(use.getOwner())) {
            uses.push_back(&use);
            if (needed.insert(op).second)
              work.push_back(op);
          }
    }
    if (uses.empty())
      continue;
    while (!work.empty())
      for (Value operand : work.pop_back_val()->getOperands())
        if (Operation *def = operand.getDefiningOp(); copies(def))
          if (needed.insert(def).second)
            work.push_back(def);
    Operation *first = uses.front()->getOwner();
    for (OpOperand *use : uses)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    OpBuilder b(first);
    IRMapping copied;
    for (Operation *op : ops)
      if (needed.contains(op)) {
        Operation *copy = b.clone(*op, copied);
        copy->removeAttr(attr::kRecompute);
        copy->setAttr(attr::kRecomputed, name);
      }
    for (OpOperand *use : uses)
      use->set(copied.lookup(use->get()));
  }
}

/// Each attention the backward differentiates gives its rows' log-sum-exp
/// too (loom.attention's `lse`), for loom.attention_grad: with it the
/// backward forms each block's scores once, where finding the rows'
/// statistics again took a pass over the keys of its own (a fifth of the
/// backward's products). The op is rebuilt with the second result before
/// any rule runs, so that no gradient refers to the one it replaces.
static void keepAttentionLse(Block &body, llvm::DenseSet<Value> &active) {
  for (auto attention : llvm::make_early_inc_range(body.getOps<AttentionOp>())) {
    if (attention.getLse() || !active.contains(attention.getResult()))
      continue;
    OpBuilder b(attention);
    auto query = attention.getQuery().getType();
    auto lse = RankedTensorType::get(query.getShape().drop_back(), b.getF32Type());
    auto kept = AttentionOp::create(b, attention.getLoc(), attention.getResult().getType(), lse,
                                    attention.getQuery(), attention.getKey(),
                                    attention.getValue(), attention.getScale(),
                                    attention.getCausalAttr(), attention.getAccumulateAttr());
    kept->setDiscardableAttrs(attention->getDiscardableAttrDictionary());
    attention.getResult().replaceAllUsesWith(kept.getResult());
    active.erase(attention.getResult());
    active.insert(kept.getResult());
    attention.erase();
  }
}

namespace {
/// The backward pass of one model function.
class Differentiator {
public:
  /// `seed` is the gradient of the loss: 1, or the loss scale.
  Differentiator(func::FuncOp model, Value seed) : model(model), seed(seed) {}
  LogicalResult run();

private:
  void accumulate(OpBuilder &b, Value value, Value grad);
  LogicalResult differentiate(OpBuilder &b, Operation *op);

  func::FuncOp model;
  Value seed;
  llvm::DenseSet<Value> active;
  DenseMap<Value, Value> grads;
};
} // namespace

void Differentiator::accumulate(OpBuilder &b, Value value, Value grad) {
  auto [it, inserted] = grads.try_emplace(value, grad);
  if (!inserted)
    it->second = AddOp::create(b, grad.getLoc(), it->second, grad);
}

LogicalResult Differentiator::differentiate(OpBuilder &b, Operation *op) {
  SmallVector<Value> resultGrads;
  bool any = false;
  for (Value result : op->getResults()) {
    resultGrads.push_back(grads.lookup(result));
    any |= static_cast<bool>(resultGrads.back());
  }
  if (!any)
    return success();
  // A sharding annotation is the identity.
  if (auto annotation = dyn_cast<shard::ShardOp>(op)) {
    accumulate(b, annotation.getSrc(), resultGrads.front());
    return success();
  }
  auto rule = dyn_cast<VjpOpInterface>(op);
  if (!rule)
    return emitError(op->getLoc(), "'")
           << op->getName() << "' has no gradient (no VJP rule)";
  SmallVector<Value> operandGrads;
  if (failed(rule.buildVjp(b, resultGrads, operandGrads)))
    return failure();
  for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
    if (grad && active.contains(operand))
      accumulate(b, operand, grad);
  return success();
}

LogicalResult Differentiator::run() {
  Block &body = model.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  std::optional<unsigned> lossIndex;
  for (unsigned i = 0, e = model.getNumResults(); i < e; ++i)
    if (model.getResultAttr(i, attr::kLoss))
      lossIndex = i;
  if (!lossIndex)
    return emitError(model.getLoc(), "a trained model needs a loss result");
  for (Operation &op : body)
    if (op.getNumRegions())
      return emitError(op.getLoc(), "'")
             << op.getName() << "' must be inlined before loom-autodiff";

  // Forward activity: the float params and everything computed from them.
  SmallVector<BlockArgument> params;
  for (BlockArgument arg : body.getArguments())
    if (model.getArgAttr(arg.getArgNumber(), attr::kParam) &&
        isFloatTensor(arg)) {
      params.push_back(arg);
      active.insert(arg);
    }
  for (Operation &op : body)
    if (llvm::any_of(op.getOperands(), [&](Value v) { return active.contains(v); }))
      for (Value result : op.getResults())
        if (isFloatTensor(result))
          active.insert(result);
  keepAttentionLse(body, active);

  // Backward, in reverse program order, built before the return.
  OpBuilder b(ret);
  Value loss = ret.getOperand(*lossIndex);
  grads[loss] = seed ? seed : vjp::scalar(b, loss.getLoc(), 1.0);
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  // In a pipelined model, what a rule builds is the backward of its op's
  // stage (loom-place-stages reads the marks).
  bool pipelined = model->hasAttr(attr::kPipelineAxis);
  for (Operation *op : llvm::reverse(forward)) {
    Operation *before = ret->getPrevNode();
    if (failed(differentiate(b, op)))
      return failure();
    if (!pipelined)
      continue;
    Attribute stage = op->getAttr(attr::kStage);
    for (Operation *built = before ? before->getNextNode() : &body.front();
         built != ret.getOperation(); built = built->getNextNode()) {
      built->setAttr(attr::kBackward, b.getUnitAttr());
      if (stage)
        built->setAttr(attr::kStage, stage);
    }
  }
  llvm::SmallPtrSet<Operation *, 32> forwardOps(forward.begin(), forward.end());
  recomputeLayers(body, forwardOps);

  // Every param's gradient becomes a result, "grad.<param>", after the
  // model's own results; a param the loss does not read gets zeros.
  SmallVector<Value> results(ret.getOperands());
  for (BlockArgument param : params) {
    Value grad = grads.lookup(param);
    results.push_back(grad ? grad : vjp::zeros(b, param.getLoc(), vjp::typeOf(param)));
  }
  SmallVector<DictionaryAttr> resultAttrs;
  model.getAllResultAttrs(resultAttrs);
  Builder attrs(model.getContext());
  for (BlockArgument param : params) {
    auto name = model.getArgAttrOfType<StringAttr>(param.getArgNumber(), attr::kParam);
    resultAttrs.push_back(attrs.getDictionaryAttr(attrs.getNamedAttr(
        attr::kOutput, attrs.getStringAttr("grad." + name.str()))));
  }
  ret->setOperands(results);
  model.setFunctionType(FunctionType::get(
      model.getContext(), body.getArgumentTypes(), ValueRange(results).getTypes()));
  model.setAllResultAttrs(resultAttrs);
  // The rules build some values they then do not need (the gradients of
  // operands that do not depend on a param).
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  // Last: the gradients map no longer holds the values this replaces.
  widenGradientMatmuls(body, forwardOps);
  return success();
}

/// A new rank-0 f32 input `opt.loss_scale` of `model`, which the runtime
/// fills with the step's loss scale.
static Value addLossScaleInput(func::FuncOp model) {
  Block &body = model.getBody().front();
  unsigned index = body.getNumArguments();
  Builder b(model.getContext());
  (void)model.insertArgument(
      index, RankedTensorType::get({}, b.getF32Type()),
      b.getDictionaryAttr(b.getNamedAttr(attr::kInput,
                                         b.getStringAttr("opt.loss_scale"))),
      model.getLoc());
  return body.getArgument(index);
}

namespace {
struct LoomAutodiff : public loom::impl::LoomAutodiffBase<LoomAutodiff> {
  using LoomAutodiffBase::LoomAutodiffBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<TrainOp> trains(module.getOps<TrainOp>());
    if (trains.empty()) {
      // Said at the model, which has a location in the script.
      Location loc = module.getLoc();
      StringRef name = "the script";
      for (auto func : module.getOps<func::FuncOp>())
        if (func.isPublic()) {
          loc = func.getLoc();
          name = func.getSymName();
          break;
        }
      emitError(loc, "gradients need a train section, and model '")
          << name << "' has none (its loss is what is differentiated)";
      return signalPassFailure();
    }
    for (TrainOp train : trains) {
      auto model = module.lookupSymbol<func::FuncOp>(train.getModelAttr());
      if (!model)
        return signalPassFailure();
      Value seed;
      if (scaleLoss && train.getLossScale() != "none")
        seed = addLossScaleInput(model);
      if (failed(Differentiator(model, seed).run()))
        return signalPassFailure();
    }
  }
};
} // namespace
