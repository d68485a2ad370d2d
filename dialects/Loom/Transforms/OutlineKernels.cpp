//===- OutlineKernels.cpp - Group model ops into kernel functions ---------===//

#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMOUTLINEKERNELS
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

/// Ops without operands that are cheaper to recompute than to load, into
/// every kernel that reads them. One a plan step reads (the class ids a
/// vocab-parallel cross-entropy slices) is a kernel of its own.
static bool isRematerialized(Operation *op) {
  return isa<ConstantOp, ArangeOp>(op) &&
         llvm::none_of(op->getUsers(), [](Operation *user) {
           return isPlanStepOp(user) || isa<func::ReturnOp>(user);
         });
}

namespace {
/// Consecutive ops (in program order) that become one kernel.
struct KernelGroup {
  SmallVector<Operation *> ops;
  llvm::SmallPtrSet<Operation *, 8> members;
  void add(Operation *op) {
    ops.push_back(op);
    members.insert(op);
  }
};

/// The matmul that `op` is a folded operand transpose of
/// (foldOperandTransposes), or null.
static MatmulOp foldedInto(Operation *op) {
  auto transpose = dyn_cast<TransposeOp>(op);
  if (!transpose || !swapsLastTwoDims(transpose.getPermutation()) ||
      !transpose->hasOneUse())
    return nullptr;
  return dyn_cast<MatmulOp>(*transpose->user_begin());
}

/// The update bucket `op` belongs to (loom-optimizer-step), or null.
static IntegerAttr updateBucketOf(Operation *op) {
  return op->getAttrOfType<IntegerAttr>(attr::kUpdateBucket);
}

/// Whether `op` joins `group`, the folded operand transposes of one matmul
/// so far: `op` is that matmul or its other operand's transpose.
static bool joinsFoldedTransposes(Operation *op, const KernelGroup &group) {
  MatmulOp matmul = foldedInto(group.ops.front());
  if (!matmul || llvm::any_of(group.ops, [&](Operation *member) {
        return foldedInto(member) != matmul;
      }))
    return false;
  return op == matmul.getOperation() || foldedInto(op) == matmul;
}

struct LoomOutlineKernels
    : public loom::impl::LoomOutlineKernelsBase<LoomOutlineKernels> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> models;
    for (auto func : module.getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal())
        models.push_back(func);
    for (func::FuncOp model : models)
      if (failed(outline(model)))
        return signalPassFailure();
  }

  /// The model's return slots of each value it returns, found once: a
  /// search of the return per kernel made a deep model's outlining
  /// quadratic (0.74 s of a 48-layer GPT's 0.89 s stage).
  using ReturnSlots = llvm::DenseMap<Value, SmallVector<unsigned, 1>>;

  LogicalResult outline(func::FuncOp model);
  /// isRematerialized, judged once per op: a constant every layer reads
  /// had its users walked for each operand of each kernel (quadratic: a
  /// 4000-line script's outlining 2.7 s).
  bool rematerialized(Operation *op) {
    if (!isa<ConstantOp, ArangeOp>(op))
      return false;
    auto [at, fresh] = rematerializedOps.try_emplace(op, false);
    if (fresh)
      at->second = isRematerialized(op);
    return at->second;
  }
  llvm::DenseMap<Operation *, bool> rematerializedOps;
  /// The module's symbols before a model's kernels join them.
  llvm::StringSet<> symbolsBefore;
  func::FuncOp buildKernel(func::FuncOp model, KernelGroup &group,
                           unsigned index, const ReturnSlots &returnSlots,
                           SmallVectorImpl<Value> &inputs,
                           SmallVectorImpl<Value> &outputs);
};
} // namespace

/// Where loom-place-stages put an op of a pipelined program (its stage,
/// phase and update stages); null elsewhere. A kernel holds ops of one
/// place only, and takes it.
static SmallVector<NamedAttribute> placeOf(Operation *op) {
  SmallVector<NamedAttribute> place;
  auto model = op->getParentOfType<func::FuncOp>();
  if (!model || !model->hasAttr(attr::kStagesCount))
    return place; // stage marks elsewhere are only where the ops came from
  for (StringRef name : {attr::kStage, attr::kPhase, attr::kStages})
    if (Attribute value = op->getAttr(name))
      place.push_back(NamedAttribute(StringAttr::get(op->getContext(), name), value));
  return place;
}

/// With microbatches, the plan's steps up to its last accumulate run once
/// per microbatch and the rest once per step. The microbatch's program is
/// what the accumulates read, directly or not; everything else (the
/// update, and what it computes from the params alone) moves after the
/// accumulates, in order. What an op reads never moves behind it.
static void sinkPastAccumulates(func::FuncOp model) {
  Block &body = model.getBody().front();
  SmallVector<Operation *> accumulates;
  for (Operation &op : body.without_terminator())
    if (isa<AccumulateOp>(op))
      accumulates.push_back(&op);
  if (accumulates.empty())
    return;
  llvm::SmallPtrSet<Operation *, 32> perMicrobatch;
  SmallVector<Operation *> work(accumulates.begin(), accumulates.end());
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (perMicrobatch.insert(def).second)
          work.push_back(def);
  }
  SmallVector<Operation *> after;
  for (Operation &op : body.without_terminator())
    if (!perMicrobatch.contains(&op) && !isa<AccumulateOp>(op) &&
        !isRematerialized(&op))
      after.push_back(&op);
  // What the microbatches compute from the params alone and the rest reads
  // too (a param's all-slice that CSE made one for the forward and the
  // update: seed 240175) is computed again after the accumulates, for those
  // readers: past the last accumulate only the accumulates' results carry
  // values. Anything else read there stays an error of the plan's.
  // (Memoized: the values a chain shares are judged once.)
  llvm::DenseMap<Value, bool> paramsOnly;
  auto fromParams = [&](auto &self, Value value) -> bool {
    if (auto known = paramsOnly.find(value); known != paramsOnly.end())
      return known->second;
    bool result;
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      result = static_cast<bool>(model.getArgAttr(arg.getArgNumber(), attr::kParam));
    } else {
      Operation *def = value.getDefiningOp();
      result = def->getNumRegions() == 0 && !isa<AccumulateOp>(def) &&
               llvm::all_of(def->getOperands(), [&](Value v) { return self(self, v); });
    }
    return paramsOnly[value] = result;
  };
  IRMapping again;
  SmallVector<Operation *> sequence;
  auto recompute = [&](auto &self, Operation *user, Value value) -> void {
    Operation *def = value.getDefiningOp();
    if (!def || !perMicrobatch.contains(def) || again.contains(value) ||
        !fromParams(fromParams, value))
      return;
    for (Value operand : def->getOperands())
      self(self, user, operand);
    OpBuilder b(body.getTerminator());
    Operation *copy = b.clone(*def, again);
    for (StringRef name : {attr::kStage, attr::kPhase, attr::kStages})
      copy->removeAttr(name);
    // Apart from the original for CSE, which runs again on the model.
    copy->setAttr(attr::kAfterAccumulates, b.getUnitAttr());
    for (NamedAttribute place : placeOf(user))
      copy->setAttr(place.getName(), place.getValue());
    sequence.push_back(copy);
  };
  for (Operation *op : after) {
    for (Value operand : op->getOperands())
      recompute(recompute, op, operand);
    for (OpOperand &operand : op->getOpOperands())
      if (Value copy = again.lookupOrNull(operand.get()))
        operand.set(copy);
    sequence.push_back(op);
  }
  for (Operation *op : llvm::concat<Operation *>(accumulates, sequence))
    op->moveBefore(body.getTerminator());
}

/// A pipelined program's update runs after the microbatches: its ops move
/// after the others, in order (nothing of the microbatches reads them).
static void sinkUpdate(func::FuncOp model) {
  Block &body = model.getBody().front();
  SmallVector<Operation *> update;
  for (Operation &op : body.without_terminator())
    if (auto phase = op.getAttrOfType<StringAttr>(attr::kPhase);
        phase && phase.getValue() == "update")
      update.push_back(&op);
  for (Operation *op : update)
    op->moveBefore(body.getTerminator());
}

/// A transpose of the last two dims that matmuls alone read, each as an
/// operand (A or B) and each where the transpose runs: convert-loom-to-linalg
/// folds such a transpose into the matmul's indexing map, so the matmul
/// reads it in place (`x^T @ dy`, `q @ transpose(k)`) and it need never be
/// materialized.
static TransposeOp foldableTranspose(Value operand) {
  auto transpose = operand.getDefiningOp<TransposeOp>();
  if (!transpose || !swapsLastTwoDims(transpose.getPermutation()))
    return nullptr;
  for (Operation *user : transpose->getUsers())
    if (!isa<MatmulOp>(user) || placeOf(user) != placeOf(transpose))
      return nullptr;
  return transpose;
}

/// Whether `op` is a sum or mean of what `group` computes elementwise (or
/// reduces already): the gradient norm's squares of a gradient, then their
/// sum. It joins the group, where linalg's fusion squares inside the sum:
/// as a kernel of its own, it read the squares that its producer's kernel
/// had written, a second full-size tensor per gradient.
static bool reducesLatestKernel(Operation *op, const KernelGroup &group) {
  if (!isa<SumOp, MeanOp>(op))
    return false;
  Operation *def = op->getOperand(0).getDefiningOp();
  return def && group.members.contains(def) &&
         (isElementwise(def) || isa<SumOp, MeanOp>(def));
}

/// Gives every matmul operand that is a foldable transpose a copy of its
/// own, just before the matmul, so that the matmul's kernel holds it
/// (joinsFoldedTransposes); the original goes. An operand that transposes
/// a transpose back (the backward's `(w^T)^T`) reads the value itself.
/// Between them: `ln(h) @ transpose(wte)` has the cast of ln(h) to bf16.
static void foldOperandTransposes(func::FuncOp model) {
  SmallVector<MatmulOp> matmuls;
  model.walk([&](MatmulOp matmul) { matmuls.push_back(matmul); });
  // Judged once per transpose until its readers change: a transpose every
  // layer's matmul reads (a shared weight's) had its readers walked for
  // each of them (quadratic: 4000 matmuls of one w, 1.3 s). A reader that
  // goes or comes (an erased op's operands, a rewired operand's new value)
  // has it judged again.
  llvm::DenseMap<Operation *, TransposeOp> judged;
  auto readersChange = [&](Value value) {
    if (Operation *def = value.getDefiningOp())
      judged.erase(def);
  };
  auto foldable = [&](Value operand) {
    Operation *def = operand.getDefiningOp();
    if (!def)
      return TransposeOp();
    auto [at, fresh] = judged.try_emplace(def, nullptr);
    if (fresh)
      at->second = foldableTranspose(operand);
    return at->second;
  };
  auto eraseIfUnused = [&](Operation *op) {
    if (op && op->use_empty()) {
      judged.erase(op);
      for (Value operand : op->getOperands())
        readersChange(operand);
      op->erase();
    }
  };
  // Double transposes first, so that the transposes they read may then
  // have matmuls alone as readers.
  for (MatmulOp matmul : matmuls)
    for (OpOperand &operand : matmul->getOpOperands()) {
      TransposeOp outer = foldable(operand.get());
      auto inner = outer ? outer.getInput().getDefiningOp<TransposeOp>() : nullptr;
      if (!inner || !swapsLastTwoDims(inner.getPermutation()) ||
          placeOf(inner) != placeOf(outer))
        continue;
      operand.set(inner.getInput());
      readersChange(inner.getInput());
      eraseIfUnused(outer);
      eraseIfUnused(inner);
    }
  for (MatmulOp matmul : matmuls)
    for (OpOperand &operand : matmul->getOpOperands()) {
      TransposeOp transpose = foldable(operand.get());
      if (!transpose)
        continue;
      if (transpose->hasOneUse()) {
        transpose->moveBefore(matmul);
        continue;
      }
      OpBuilder builder(matmul);
      operand.set(builder.clone(*transpose)->getResult(0));
      readersChange(transpose.getInput());
      eraseIfUnused(transpose);
    }
}

/// The model's return slots that repeat a value no kernel computes (a
/// collective's or an accumulate's result: say the gradient two params
/// share, after its data-parallel sum) read a copy, `x * 1` (exact), a
/// kernel of its own placed as the value is: each plan output is a buffer
/// of its own. A kernel's result returned twice its kernel writes twice
/// (buildKernel); an input or param returned is the plan builder's error.
static void copyRepeatedStepResults(func::FuncOp model) {
  Operation *ret = model.getBody().front().getTerminator();
  llvm::SmallPtrSet<Value, 8> returned;
  for (OpOperand &slot : ret->getOpOperands()) {
    Value value = slot.get();
    auto type = dyn_cast<RankedTensorType>(value.getType());
    Operation *def = value.getDefiningOp();
    if (returned.insert(value).second || !def || !isPlanStepOp(def) || !type ||
        !isa<FloatType>(type.getElementType()))
      continue;
    // Right after the value (and the rest of its gradient bucket): at the
    // end of the program it would follow the update's steps, a backward
    // step after them in a pipelined plan (seed 132073: "a weight step
    // after an update step").
    Operation *after = def;
    while (after->getNextNode() && joinsGradientBucket(after->getNextNode()))
      after = after->getNextNode();
    OpBuilder b(def->getContext());
    b.setInsertionPointAfter(after);
    Value one = ConstantOp::create(b, value.getLoc(),
                                   RankedTensorType::get({}, type.getElementType()),
                                   b.getF64FloatAttr(1.0));
    auto copy = MulOp::create(b, value.getLoc(), value, one);
    // In a pipelined model it runs where the value is made.
    for (NamedAttribute place : placeOf(def))
      copy->setAttr(place.getName(), place.getValue());
    slot.set(copy);
  }
}

LogicalResult LoomOutlineKernels::outline(func::FuncOp model) {
  rematerializedOps.clear();
  symbolsBefore.clear();
  if (auto module = model->getParentOfType<ModuleOp>())
    for (Operation &op : *module.getBody())
      if (auto name = op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        symbolsBefore.insert(name.getValue());
  sinkPastAccumulates(model);
  sinkUpdate(model);
  copyRepeatedStepResults(model);
  foldOperandTransposes(model);
  // Groups are contiguous: an op joins only the latest group, so a
  // kernel's call can take the place of its ops.
  SmallVector<KernelGroup> groups;
  bool afterCollective = false;
  for (Operation &op : model.getBody().front().without_terminator()) {
    if (rematerialized(&op))
      continue;
    // Collectives and accumulates stay in the model as plan steps of their
    // own; the next op starts a new kernel, which may read their result.
    if (isPlanStepOp(&op)) {
      afterCollective = true;
      continue;
    }
    if (isa<MoeOp, StageOp>(op))
      return emitError(op.getLoc(), "'")
             << op.getName() << "' must be "
             << (isa<MoeOp>(op) ? "expanded (loom-expand-moe)" : "inlined (loom-inline-stages)")
             << " before kernels are outlined";
    // An attention is a kernel of its own, which the GPU stages replace
    // whole (loom-build-gpu-attention).
    bool joins = !groups.empty() && !afterCollective &&
                 !isa<AttentionOp, AttentionGradOp>(groups.back().ops.front()) &&
                 placeOf(&op) == placeOf(groups.back().ops.front()) &&
                 ((isElementwise(&op) &&
                   llvm::any_of(op.getOperands(), [&](Value v) {
                     return groups.back().members.contains(v.getDefiningOp());
                   })) ||
                  joinsFoldedTransposes(&op, groups.back()) ||
                  reducesLatestKernel(&op, groups.back()) ||
                  // A bucket's whole optimizer update is one kernel: its
                  // params' chains are independent elementwise loops.
                  (updateBucketOf(&op) &&
                   updateBucketOf(&op) == updateBucketOf(groups.back().ops.front())));
    if (!joins)
      groups.emplace_back();
    afterCollective = false;
    groups.back().add(&op);
  }

  // Keyed by the values the groups compute, which stay until their own
  // group is replaced; a group's call takes the slots of its outputs.
  Operation *ret = model.getBody().front().getTerminator();
  ReturnSlots returnSlots;
  for (OpOperand &slot : ret->getOpOperands())
    returnSlots[slot.get()].push_back(slot.getOperandNumber());
  OpBuilder builder(model.getContext());
  for (auto [index, group] : llvm::enumerate(groups)) {
    SmallVector<Value> inputs, outputs;
    func::FuncOp kernel =
        buildKernel(model, group, index, returnSlots, inputs, outputs);
    builder.setInsertionPoint(group.ops.front());
    auto call = func::CallOp::create(builder, group.ops.front()->getLoc(),
                                     kernel, inputs);
    for (NamedAttribute place : placeOf(group.ops.front()))
      call->setAttr(place.getName(), place.getValue());
    // A repeated output's later results go to its later return slots.
    llvm::SmallDenseMap<Value, unsigned> written;
    for (auto [output, result] : llvm::zip(outputs, call.getResults())) {
      if (unsigned n = written[output]++)
        ret->setOperand(returnSlots.lookup(output)[n], result);
      else
        output.replaceAllUsesWith(result);
    }
    for (Operation *op : llvm::reverse(group.ops))
      op->erase();
  }
  // Constants and aranges now live inside the kernels that use them.
  for (Operation &op :
       llvm::make_early_inc_range(model.getBody().front().without_terminator()))
    if (rematerialized(&op) && op.use_empty())
      op.erase();
  return success();
}

func::FuncOp LoomOutlineKernels::buildKernel(func::FuncOp model,
                                             KernelGroup &group, unsigned index,
                                             const ReturnSlots &returnSlots,
                                             SmallVectorImpl<Value> &inputs,
                                             SmallVectorImpl<Value> &outputs) {
  // Inputs: values from outside the group (rematerialized ops excepted).
  // Outputs: results some op outside the group (or the return) still reads.
  // What a member's regions capture (a hand-written loop's) is read as its
  // operands are: it had stayed a use of the model's values in the kernel.
  for (Operation *op : group.ops) {
    for (Value operand : valuesRead(op)) {
      Operation *def = operand.getDefiningOp();
      if ((def && (group.members.contains(def) || rematerialized(def))) ||
          llvm::is_contained(inputs, operand))
        continue;
      inputs.push_back(operand);
    }
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !group.members.contains(user);
          }))
        outputs.push_back(result);
  }
  // An output the model returns more than once (two script outputs CSE'd
  // into one value, a gradient shared by two params) is written once per
  // return slot: each plan output is a buffer of its own.
  for (Value output : llvm::to_vector(outputs))
    for (size_t extra = returnSlots.lookup(output).size(); extra > 1; --extra)
      outputs.push_back(output);

  OpBuilder builder(model);
  std::string name = (model.getSymName() + "_k" + Twine(index)).str();
  // A symbol of that name already there (hand-written IR) gets a suffix
  // (it had been redefined, and the module failed to verify).
  for (unsigned suffix = 1; symbolsBefore.contains(name); ++suffix)
    name = (model.getSymName() + "_k" + Twine(index) + "_" + Twine(suffix)).str();
  auto kernel = func::FuncOp::create(
      builder, group.ops.front()->getLoc(), name,
      builder.getFunctionType(ValueRange(inputs).getTypes(),
                              ValueRange(outputs).getTypes()));
  kernel.setPrivate();
  kernel->setAttr(attr::kKernel, builder.getUnitAttr());
  if (updateBucketOf(group.ops.front()))
    kernel->setAttr(attr::kUpdateKernel, builder.getUnitAttr());
  Block *body = kernel.addEntryBlock();
  builder.setInsertionPointToStart(body);
  IRMapping mapping;
  for (auto [input, arg] : llvm::zip(inputs, body->getArguments()))
    mapping.map(input, arg);
  // Where a step runs is the call's (placeOf), not its ops': a kernel's
  // body carries no place, so that the instances of a layer on different
  // stages stay structurally equal (loom-dedup-kernels). Nor the names of
  // what it belongs to, which the passes before outlining used up: the
  // param whose gradient a matmul is (one per layer instance: a deep
  // model's weight gradients were a kernel each) and the layer instance
  // recomputed (explain asks only whether an op is recomputed).
  auto cloneUnplaced = [&](Operation &op) {
    Operation *copy = builder.clone(op, mapping);
    for (StringRef name : {attr::kStage, attr::kPhase, attr::kStages,
                           attr::kBackward, attr::kUpdateBucket,
                           attr::kGradientOf, attr::kRecompute, attr::kAfterAccumulates})
      copy->removeAttr(name);
    if (copy->hasAttr(attr::kRecomputed))
      copy->setAttr(attr::kRecomputed, builder.getStringAttr(""));
  };
  for (Operation *op : group.ops) {
    for (Value operand : valuesRead(op))
      if (Operation *def = operand.getDefiningOp();
          def && rematerialized(def) && !mapping.contains(operand))
        cloneUnplaced(*def);
    cloneUnplaced(*op);
  }
  SmallVector<Value> results;
  for (Value output : outputs)
    results.push_back(mapping.lookup(output));
  func::ReturnOp::create(builder, model.getLoc(), results);
  return kernel;
}
