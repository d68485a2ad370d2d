//===- OutlineKernels.cpp - Group model ops into kernel functions ---------===//

#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

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

/// The transpose of the last two dims that only `matmul` reads, as its B:
/// convert-loom-to-linalg folds it into the matmul's indexing map, so it
/// belongs in the matmul's kernel and is never materialized.
static TransposeOp foldableTranspose(MatmulOp matmul) {
  auto transpose = matmul.getRhs().getDefiningOp<TransposeOp>();
  if (transpose && swapsLastTwoDims(transpose.getPermutation()) &&
      transpose->hasOneUse())
    return transpose;
  return nullptr;
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

/// Whether `op` is a matmul whose foldable B transpose is the whole of
/// `group`: the matmul then joins that group.
static bool readsTransposedOperand(Operation *op, const KernelGroup &group) {
  auto matmul = dyn_cast<MatmulOp>(op);
  return matmul && group.ops.size() == 1 &&
         foldableTranspose(matmul) == group.ops.front();
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

  LogicalResult outline(func::FuncOp model);
  func::FuncOp buildKernel(func::FuncOp model, KernelGroup &group,
                           unsigned index, SmallVectorImpl<Value> &inputs,
                           SmallVectorImpl<Value> &outputs);
};
} // namespace

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
  for (Operation *op : llvm::concat<Operation *>(accumulates, after))
    op->moveBefore(body.getTerminator());
}

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

LogicalResult LoomOutlineKernels::outline(func::FuncOp model) {
  sinkPastAccumulates(model);
  sinkUpdate(model);
  // A foldable B transpose moves next to its matmul (it is pure, and its
  // operand is defined earlier still), so that the matmul can join its
  // group (readsTransposedOperand): in `ln(h) @ transpose(wte)` the cast
  // of ln(h) to bf16 comes between them.
  model.walk([](MatmulOp matmul) {
    if (TransposeOp transpose = foldableTranspose(matmul))
      transpose->moveBefore(matmul);
  });
  // Groups are contiguous: an op joins only the latest group, so a
  // kernel's call can take the place of its ops.
  SmallVector<KernelGroup> groups;
  bool afterCollective = false;
  for (Operation &op : model.getBody().front().without_terminator()) {
    if (isRematerialized(&op))
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
    bool joins = !groups.empty() && !afterCollective &&
                 placeOf(&op) == placeOf(groups.back().ops.front()) &&
                 ((isElementwise(&op) &&
                   llvm::any_of(op.getOperands(), [&](Value v) {
                     return groups.back().members.contains(v.getDefiningOp());
                   })) ||
                  readsTransposedOperand(&op, groups.back()));
    if (!joins)
      groups.emplace_back();
    afterCollective = false;
    groups.back().add(&op);
  }

  OpBuilder builder(model.getContext());
  for (auto [index, group] : llvm::enumerate(groups)) {
    SmallVector<Value> inputs, outputs;
    func::FuncOp kernel = buildKernel(model, group, index, inputs, outputs);
    builder.setInsertionPoint(group.ops.front());
    auto call = func::CallOp::create(builder, group.ops.front()->getLoc(),
                                     kernel, inputs);
    for (NamedAttribute place : placeOf(group.ops.front()))
      call->setAttr(place.getName(), place.getValue());
    for (auto [output, result] : llvm::zip(outputs, call.getResults()))
      output.replaceAllUsesWith(result);
    for (Operation *op : llvm::reverse(group.ops))
      op->erase();
  }
  // Constants and aranges now live inside the kernels that use them.
  for (Operation &op :
       llvm::make_early_inc_range(model.getBody().front().without_terminator()))
    if (isRematerialized(&op) && op.use_empty())
      op.erase();
  return success();
}

func::FuncOp LoomOutlineKernels::buildKernel(func::FuncOp model,
                                             KernelGroup &group, unsigned index,
                                             SmallVectorImpl<Value> &inputs,
                                             SmallVectorImpl<Value> &outputs) {
  // Inputs: values from outside the group (rematerialized ops excepted).
  // Outputs: results some op outside the group (or the return) still reads.
  for (Operation *op : group.ops) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if ((def && (group.members.contains(def) || isRematerialized(def))) ||
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

  OpBuilder builder(model);
  std::string name = (model.getSymName() + "_k" + Twine(index)).str();
  auto kernel = func::FuncOp::create(
      builder, group.ops.front()->getLoc(), name,
      builder.getFunctionType(ValueRange(inputs).getTypes(),
                              ValueRange(outputs).getTypes()));
  kernel.setPrivate();
  kernel->setAttr(attr::kKernel, builder.getUnitAttr());
  Block *body = kernel.addEntryBlock();
  builder.setInsertionPointToStart(body);
  IRMapping mapping;
  for (auto [input, arg] : llvm::zip(inputs, body->getArguments()))
    mapping.map(input, arg);
  for (Operation *op : group.ops) {
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && isRematerialized(def) && !mapping.contains(operand))
        builder.clone(*def, mapping);
    Operation *copy = builder.clone(*op, mapping);
    // Where a step runs is the call's (placeOf), not its ops'.
    for (StringRef name : {attr::kStage, attr::kPhase, attr::kStages, attr::kBackward})
      copy->removeAttr(name);
  }
  SmallVector<Value> results;
  for (Value output : outputs)
    results.push_back(mapping.lookup(output));
  func::ReturnOp::create(builder, model.getLoc(), results);
  return kernel;
}
