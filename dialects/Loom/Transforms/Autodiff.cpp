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
#include "Loom/Transforms/DeadOps.h"
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
/// `narrow`, a 16-bit value of the backward, computed in f32 instead: the
/// ops that make it (when nothing else reads them) are rebuilt on f32
/// operands, down to where they are linear no more. A gradient matmul
/// then accumulates into f32 (its accumulation type): Megatron's fp32
/// weight-gradient accumulation. The sum of a tied param's gradient parts,
/// their transposes, an embedding's scatter-add and a broadcast's sum over
/// the batch round no more either. Besides rounding once instead of at
/// every op, this keeps the partitioner's partial sums f32 all the way to
/// the accumulate, so a data-parallel gradient is summed over the ranks
/// once after the microbatches, not once per microbatch (a 16-bit sum
/// would round each rank's part first, so it needs its operands whole).
static Value widen(OpBuilder &b, Value narrow, FloatType wide,
                   const llvm::SmallPtrSetImpl<Operation *> &forward) {
  auto type = cast<RankedTensorType>(narrow.getType());
  auto element = dyn_cast<FloatType>(type.getElementType());
  if (!element || element.getWidth() >= wide.getWidth())
    return narrow;
  RankedTensorType wideType = type.clone(wide);
  Operation *def = narrow.getDefiningOp();
  auto rebuilt = [&](Operation *op) {
    op->setDiscardableAttrs(def->getDiscardableAttrDictionary());
    return op->getResult(0);
  };
  if (def && !forward.contains(def) && narrow.hasOneUse()) {
    OpBuilder::InsertionGuard guard(b);
    // The widened op goes where `def` was: an operand widened exactly
    // leaves the builder after that operand's def (`v + v`: the add had
    // gone between the two casts of v, before the second).
    auto wider = [&](Value operand) {
      b.setInsertionPoint(def);
      Value widened = widen(b, operand, wide, forward);
      b.setInsertionPoint(def);
      return widened;
    };
    if (auto matmul = dyn_cast<MatmulOp>(def); matmul &&
        matmul.getAccumulate() == wide) {
      b.setInsertionPoint(def);
      return rebuilt(MatmulOp::create(b, def->getLoc(), wideType,
                                      matmul.getLhs(), matmul.getRhs(),
                                      matmul.getAccumulateAttr(),
                                      matmul.getMultiplyAttr()));
    }
    if (auto add = dyn_cast<AddOp>(def)) {
      Value lhs = wider(add.getLhs()), rhs = wider(add.getRhs());
      return rebuilt(AddOp::create(b, def->getLoc(), lhs, rhs));
    }
    if (auto transpose = dyn_cast<TransposeOp>(def)) {
      Value input = wider(transpose.getInput());
      return rebuilt(TransposeOp::create(b, def->getLoc(), input,
                                         transpose.getPermutation()));
    }
    if (auto reshape = dyn_cast<ReshapeOp>(def)) {
      Value input = wider(reshape.getInput());
      return rebuilt(ReshapeOp::create(b, def->getLoc(), wideType, input));
    }
    if (auto sum = dyn_cast<SumOp>(def)) {
      Value input = wider(sum.getInput());
      return rebuilt(SumOp::create(b, def->getLoc(), input, sum.getAxis(),
                                   sum.getKeepdim()));
    }
    if (auto scatter = dyn_cast<EmbeddingGradOp>(def)) {
      // It adds in f32 whatever it reads. A broadcast's sum over the batch
      // (a position embedding's rows) is summed into f32 too, so that it
      // stays a partial sum over a split batch; row gradients stay 16-bit
      // (an f32 copy would be an activation's size).
      Value grad = scatter.getGrad();
      if (grad.hasOneUse() && grad.getDefiningOp<SumOp>())
        grad = wider(grad);
      b.setInsertionPoint(def);
      return rebuilt(EmbeddingGradOp::create(b, def->getLoc(), wideType,
                                             scatter.getIds(), grad));
    }
  }
  // Exact: every 16-bit value is an f32 one.
  if (def)
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(narrow).getOwner());
  auto widened = CastOp::create(b, narrow.getLoc(), wideType, narrow);
  if (def)
    widened->setDiscardableAttrs(def->getDiscardableAttrDictionary());
  return widened.getResult();
}

/// Every backward cast of a 16-bit value to f32 (a master weight's
/// gradient: the VJP of its forward cast) computes that value in f32.
static void widenGradients(Block &body,
                           const llvm::SmallPtrSetImpl<Operation *> &forward) {
  SmallVector<CastOp> casts;
  for (auto widening : body.getOps<CastOp>()) {
    auto from = dyn_cast<FloatType>(widening.getInput().getType().getElementType());
    auto to = dyn_cast<FloatType>(widening.getType().getElementType());
    Operation *def = widening.getInput().getDefiningOp();
    // A cast that would only be rebuilt as itself stays.
    if (!forward.contains(widening) && from && to && to.isF32() &&
        from.getWidth() < 32 && def && widening.getInput().hasOneUse() &&
        isa<MatmulOp, AddOp, TransposeOp, ReshapeOp, SumOp, EmbeddingGradOp>(def))
      casts.push_back(widening);
  }
  OpBuilder b(body.getParentOp()->getContext());
  for (CastOp widening : casts) {
    b.setInsertionPoint(widening);
    Value wide = widen(b, widening.getInput(),
                       cast<FloatType>(widening.getType().getElementType()), forward);
    widening.getResult().replaceAllUsesWith(wide);
    widening.erase();
  }
  eraseDeadOps(body);
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
/// `attention` rebuilt with an lse result of type `lse`, or none; its
/// result's uses and its attributes go to the new op.
static AttentionOp rebuildAttention(AttentionOp attention, Type lse) {
  OpBuilder b(attention);
  auto rebuilt = AttentionOp::create(b, attention.getLoc(), attention.getResult().getType(), lse,
                                     attention.getQuery(), attention.getKey(),
                                     attention.getValue(), attention.getScale(),
                                     attention.getCausalAttr(), attention.getAccumulateAttr());
  rebuilt->setDiscardableAttrs(attention->getDiscardableAttrDictionary());
  attention.getResult().replaceAllUsesWith(rebuilt.getResult());
  attention.erase();
  return rebuilt;
}

static void keepAttentionLse(Block &body, llvm::DenseSet<Value> &active) {
  for (auto attention : llvm::make_early_inc_range(body.getOps<AttentionOp>())) {
    if (attention.getLse() || !active.contains(attention.getResult()))
      continue;
    auto query = attention.getQuery().getType();
    active.erase(attention.getResult());
    AttentionOp kept = rebuildAttention(
        attention, RankedTensorType::get(query.getShape().drop_back(),
                                         Float32Type::get(query.getContext())));
    active.insert(kept.getResult());
  }
}

/// An attention whose `lse` nothing reads gives none: the forward's of a
/// recomputed layer, whose backward reads its recomputed copy's. (A GPU
/// build lowers an attention with an unread lse as no attention kernel:
/// `gpu.launch_func` failed to legalize.)
static void dropUnreadAttentionLse(Block &body) {
  for (auto attention : llvm::make_early_inc_range(body.getOps<AttentionOp>())) {
    if (attention.getLse() && attention.getLse().use_empty())
      rebuildAttention(attention, Type());
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
  // (zip: a rule may give fewer gradients than its op has operands.)
  for (auto [i, pair] : llvm::enumerate(llvm::zip(op->getOperands(), operandGrads))) {
    auto [operand, grad] = pair;
    if (!grad || !active.contains(operand))
      continue;
    // A rule's gradient has its operand's shape (an identity transpose's
    // had been transposed: a [3, 2] param got a [2, 3] gradient).
    auto want = dyn_cast<RankedTensorType>(operand.getType());
    auto got = dyn_cast<RankedTensorType>(grad.getType());
    if (want && got && want.getShape() != got.getShape())
      return emitError(op->getLoc(), "internal error: the gradient rule of '")
             << op->getName() << "' gave operand " << i << " (" << want
             << ") a gradient of type " << got;
    accumulate(b, operand, grad);
  }
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
  dropUnreadAttentionLse(body);

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
  eraseDeadOps(body);
  // Last: the gradients map no longer holds the values this replaces.
  widenGradients(body, forwardOps);
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
      // Said at the model, which has a location in the script (a kernel
      // of later IR is not one).
      for (auto func : module.getOps<func::FuncOp>())
        if (func.isPublic() && !func->hasAttr(attr::kKernel) &&
            !func->hasAttr(attr::kPartitionOf)) {
          emitError(func.getLoc(), "gradients need a train section, and model '")
              << func.getSymName() << "' has none (its loss is what is differentiated)";
          return signalPassFailure();
        }
      emitError(module.getLoc(), "gradients need a train section and its model, and this "
                                 "module has neither (loom-autodiff runs on loom IR, before "
                                 "partitioning and kernels)");
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
