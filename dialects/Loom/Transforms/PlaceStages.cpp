//===- PlaceStages.cpp - Every op of a pipelined program on its stages ----===//
//
// After partitioning, a pipelined model's per-rank program is still one
// function. This pass says, for every op, which stage runs it and when:
// the per-microbatch program is a forward and a backward per stage, the
// rest an update that runs once per step on the stages that hold its
// operands. The plan builder cuts the program into per-stage sections from
// these attributes and adds the carries and transfers between stages.
//
//===----------------------------------------------------------------------===//

#include "Loom/Transforms/Passes.h"
#include "Loom/Transforms/Sharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMPLACESTAGES
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Where one op of the per-microbatch program runs.
struct LoopPlace {
  int64_t stage = -1;
  bool backward = false;
};

/// Places the ops of one per-rank program over `numStages` stages.
class StagePlacer {
public:
  StagePlacer(func::FuncOp func, int64_t numStages)
      : func(func), numStages(numStages) {}
  void run();

private:
  void findLoop();
  void placeLoop();
  void copyParamReadsPerStage();
  void placeUpdate();

  func::FuncOp func;
  int64_t numStages;
  llvm::SetVector<Operation *> loop;
  DenseMap<Operation *, LoopPlace> places;
};
} // namespace

/// The per-microbatch program. With microbatches, what the accumulates
/// read (what loom-outline-kernels keeps before them); without, what the
/// forward and backward ops (those with a stage or built by loom-autodiff)
/// read; without a backward, everything.
void StagePlacer::findLoop() {
  Block &body = func.getBody().front();
  SmallVector<Operation *> anchors;
  bool training = false, accumulates = false;
  for (Operation &op : body.without_terminator()) {
    training |= op.hasAttr(attr::kBackward);
    accumulates |= isa<AccumulateOp>(op);
  }
  for (Operation &op : body.without_terminator()) {
    bool anchor = !training ||
                  (accumulates ? isa<AccumulateOp>(op)
                               : op.hasAttr(attr::kStage) ||
                                     op.hasAttr(attr::kBackward));
    if (anchor)
      anchors.push_back(&op);
  }
  SmallVector<Operation *> work(anchors.begin(), anchors.end());
  loop.insert(anchors.begin(), anchors.end());
  while (!work.empty())
    for (Value operand : work.pop_back_val()->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (loop.insert(def))
          work.push_back(def);
}

void StagePlacer::placeLoop() {
  Block &body = func.getBody().front();
  for (Operation *op : loop) {
    auto stage = op->getAttrOfType<IntegerAttr>(attr::kStage);
    if (!stage || isa<AccumulateOp>(op))
      continue;
    // A second run (after the gradient buckets) keeps the first's places.
    if (auto phase = op->getAttrOfType<StringAttr>(attr::kPhase))
      places[op] = {stage.getInt(), phase.getValue() == "backward"};
    else
      places[op] = {stage.getInt(), op->hasAttr(attr::kBackward) ||
                                        op->hasAttr(attr::kRecomputed)};
  }
  // An op that computes only from arguments (a constant, a slice of an
  // input, a slice of that slice over a second mesh axis) goes where its
  // readers are; it neither places itself by its operands nor holds back
  // a reader placed by its other operands (forward-only, the loss reads
  // the logits and a slice of the labels).
  llvm::SmallPtrSet<Operation *, 16> fromArguments;
  for (Operation &op : body.without_terminator())
    if (llvm::all_of(op.getOperands(), [&](Value operand) {
          Operation *def = operand.getDefiningOp();
          return !def || !loop.contains(def) || fromArguments.contains(def);
        }))
      fromArguments.insert(&op);
  // An op without a stage runs where its first reader does (a collective
  // the partitioner put before its consumer, a cast of a param), else
  // where its operands are (an accumulate, the loss); until nothing moves.
  // The backward runs its stages last to first: what only the backward
  // reads runs in it, at its readers' last stage (a data-parallel sum of
  // a gradient that stages 2 and 1 read runs on stage 2, which then
  // sends it back; at stage 1, stage 2's backward would have read it
  // before it ran).
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (!loop.contains(&op) || places.count(&op) || isa<AccumulateOp>(op))
        continue;
      LoopPlace place;
      int64_t lastStage = -1;
      bool anyForward = false;
      for (Operation *user : op.getUsers()) {
        auto found = places.find(user);
        if (found == places.end())
          continue;
        if (place.stage < 0 || found->second.stage < place.stage)
          place.stage = found->second.stage;
        lastStage = std::max(lastStage, found->second.stage);
        anyForward |= !found->second.backward;
      }
      if (place.stage < 0)
        continue;
      place.backward = !anyForward;
      if (place.backward)
        place.stage = lastStage;
      places[&op] = place;
      changed = true;
    }
    for (Operation &op : body.without_terminator()) {
      if (!loop.contains(&op) || places.count(&op))
        continue;
      LoopPlace place;
      bool known = true;
      // The backward runs its stages last to first: an op reading the
      // backward of several stages runs at the lowest, the last of them
      // (the sum of a tied param's gradient parts, of a statement outside
      // the stages and of a stage, at stage 1 read stage 0's backward
      // before it ran).
      int64_t firstBackward = -1;
      for (Value operand : op.getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!def || !loop.contains(def))
          continue;
        auto found = places.find(def);
        if (found == places.end() && fromArguments.contains(def) &&
            !isa<AccumulateOp>(def))
          continue;
        if (found == places.end()) {
          known = false;
          break;
        }
        place.stage = std::max(place.stage, found->second.stage);
        place.backward |= found->second.backward;
        if (found->second.backward &&
            (firstBackward < 0 || found->second.stage < firstBackward))
          firstBackward = found->second.stage;
      }
      if (!known || (place.stage < 0 && !isa<AccumulateOp>(op)))
        continue;
      if (firstBackward >= 0)
        place.stage = firstBackward;
      if (place.stage < 0)
        place.stage = 0;
      places[&op] = place;
      changed = true;
    }
  }
  copyParamReadsPerStage();
  Builder b(func.getContext());
  for (Operation *op : loop) {
    LoopPlace place = places.lookup(op);
    if (place.stage < 0)
      place.stage = 0;
    op->setAttr(attr::kStage, b.getI64IntegerAttr(place.stage));
    op->setAttr(attr::kPhase, b.getStringAttr(place.backward ? "backward" : "forward"));
    op->removeAttr(attr::kStages);
  }
}

/// A loom op computed from params alone (a master weight's 16-bit copy, its
/// transpose) that stages other than its own read is computed again on
/// each of them: those stages hold the params (a tied embedding's, on the
/// first and the last), and a copy is cheaper than sending the value from
/// stage to stage once per microbatch (GPT-3's tied `wte`: 157 MB a
/// microbatch, 192 times a step). Collectives are not copied.
void StagePlacer::copyParamReadsPerStage() {
  Block &body = func.getBody().front();
  llvm::SmallPtrSet<Operation *, 16> fromParams;
  for (Operation &op : body.without_terminator()) {
    bool params = op.getNumResults() == 1 && op.getNumOperands() > 0 &&
                  isa<LoomDialect>(op.getDialect()) && isMemoryEffectFree(&op);
    for (Value operand : op.getOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      params &= arg ? static_cast<bool>(func.getArgAttr(arg.getArgNumber(),
                                                        attr::kParam))
                    : fromParams.contains(operand.getDefiningOp());
    }
    if (params)
      fromParams.insert(&op);
  }
  // Readers first, so that a copy's own operand (the cast under a
  // transpose) is then copied to the copy's stage too.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
    auto own = places.find(&op);
    if (!fromParams.contains(&op) || own == places.end())
      continue;
    llvm::MapVector<int64_t, SmallVector<OpOperand *>> readers;
    for (OpOperand &use : op.getResult(0).getUses())
      if (auto found = places.find(use.getOwner());
          found != places.end() && found->second.stage != own->second.stage)
        readers[found->second.stage].push_back(&use);
    for (auto &[stage, uses] : readers) {
      OpBuilder builder(&op);
      Operation *copy = builder.clone(op);
      LoopPlace place{stage, true};
      for (OpOperand *use : uses) {
        place.backward &= places.lookup(use->getOwner()).backward;
        use->set(copy->getResult(0));
      }
      places[copy] = place;
      loop.insert(copy);
    }
  }
}

/// The stages of an update op whose operands lie on disjoint stages: those
/// of its largest operands, so that the smaller ones cross (a stage's
/// gradient is scaled by the clip factor where it is, not sent to the
/// factor's stage). Equally large tensors each keep their stages and
/// exchange their values (a tied embedding's two gradient parts, summed on
/// both its stages, as Megatron-LM's embedding group all-reduces them). A
/// scalar is computed once, on its first operand's stages: the stages'
/// sums of squares then gather on one stage, one 4-byte transfer each,
/// where computing each partial total on every stage it had reached sent
/// O(stages^2) of them.
static llvm::SmallSetVector<int64_t, 4>
stagesAcross(Operation *op,
             ArrayRef<std::pair<Value, llvm::SmallSetVector<int64_t, 4>>> placed) {
  auto elements = [](Value v) -> int64_t {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() ? type.getNumElements()
                                         : std::numeric_limits<int64_t>::max();
  };
  int64_t largest = 0;
  for (const auto &[value, at] : placed)
    largest = std::max(largest, elements(value));
  bool scalar = llvm::all_of(op->getResultTypes(), [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && tensor.getRank() == 0;
  });
  llvm::SmallSetVector<int64_t, 4> stages;
  for (const auto &[value, at] : placed) {
    if (elements(value) != largest)
      continue;
    stages.insert(at.begin(), at.end());
    if (scalar)
      break;
  }
  return stages;
}

/// An update op runs on the stages that hold every operand it reads (the
/// stage of a per-microbatch value, the stages of an update value); one
/// that reads only arguments runs where its readers do; one whose operands
/// lie on disjoint stages runs as stagesAcross says.
void StagePlacer::placeUpdate() {
  Block &body = func.getBody().front();
  using Stages = llvm::SmallSetVector<int64_t, 4>;
  DenseMap<Operation *, Stages> present;
  SmallVector<Operation *> free;
  for (Operation &op : body.without_terminator()) {
    if (loop.contains(&op))
      continue;
    std::optional<Stages> common;
    SmallVector<std::pair<Value, Stages>> placed;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      // A constant is cloned into each kernel that reads it: it places
      // nothing (clip_grad_norm = 1.0 shared the backward's seed 1.0 on the
      // last stage, and the clip factor went there and back).
      if (!def || def->hasTrait<OpTrait::ConstantLike>())
        continue;
      Stages at;
      if (loop.contains(def)) {
        at.insert(def->getAttrOfType<IntegerAttr>(attr::kStage).getInt());
      } else {
        auto found = present.find(def);
        if (found == present.end() || found->second.empty())
          continue; // reads only arguments: placed below
        at = found->second;
      }
      placed.push_back({operand, at});
      if (!common) {
        common = at;
      } else {
        Stages both;
        for (int64_t s : *common)
          if (at.contains(s))
            both.insert(s);
        *common = both;
      }
    }
    if (!common) {
      present[&op] = {};
      free.push_back(&op);
      continue;
    }
    present[&op] = common->empty() ? stagesAcross(&op, placed) : *common;
  }
  // What reads only arguments runs where its readers do.
  for (Operation *op : llvm::reverse(free)) {
    Stages at;
    for (Operation *user : op->getUsers()) {
      if (loop.contains(user))
        at.insert(user->getAttrOfType<IntegerAttr>(attr::kStage).getInt());
      else if (auto found = present.find(user); found != present.end())
        at.insert(found->second.begin(), found->second.end());
    }
    if (at.empty())
      for (int64_t s = 0; s < numStages; ++s)
        at.insert(s);
    present[op] = at;
  }
  // A param's new value is computed on every stage that reads the param
  // (a tied embedding's on the first and the last): only they hold it
  // between steps. Reads outside the per-microbatch program count too: a
  // loss term of an earlier stage's param (`mean(w0 * w0)`, computed once
  // a step on the loss's stage) read a copy no update reached.
  // (The params by name, found once: a search of the arguments per update
  // made a deep model's placement quadratic.)
  DenseMap<StringAttr, SmallVector<BlockArgument, 1>> paramsNamed;
  for (BlockArgument arg : body.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam))
      paramsNamed[name].push_back(arg);
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    auto target = func.getResultAttrOfType<StringAttr>(i, attr::kUpdates);
    Operation *def = value.getDefiningOp();
    if (!target || !def || loop.contains(def))
      continue;
    for (BlockArgument arg : paramsNamed.lookup(target))
      for (Operation *user : arg.getUsers()) {
        if (loop.contains(user))
          present[def].insert(user->getAttrOfType<IntegerAttr>(attr::kStage).getInt());
        else if (auto found = present.find(user); found != present.end() && user != def)
          present[def].insert(found->second.begin(), found->second.end());
      }
  }
  Builder b(func.getContext());
  for (auto &[op, at] : present) {
    SmallVector<int64_t> sorted(at.begin(), at.end());
    llvm::sort(sorted);
    op->setAttr(attr::kPhase, b.getStringAttr("update"));
    op->setAttr(attr::kStages, b.getDenseI64ArrayAttr(sorted));
    op->removeAttr(attr::kStage);
  }
}

void StagePlacer::run() {
  findLoop();
  placeLoop();
  placeUpdate();
}

namespace {
struct LoomPlaceStages
    : public loom::impl::LoomPlaceStagesBase<LoomPlaceStages> {
  using LoomPlaceStagesBase::LoomPlaceStagesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grids = llvm::to_vector(module.getOps<shard::GridOp>());
    if (grids.empty())
      return;
    Grid grid(grids.front());
    for (auto func : module.getOps<func::FuncOp>()) {
      auto axis = func->getAttrOfType<StringAttr>(attr::kPipelineAxis);
      if (!func->hasAttr(attr::kPartitionOf) || !axis || func.isExternal())
        continue;
      auto at = llvm::find(grid.names, axis.getValue());
      if (at == grid.names.end())
        continue;
      int64_t ranks = grid.sizes[at - grid.names.begin()];
      if (ranks <= 1)
        continue;
      // A plan holds at most 65536 stages, as the front end says at the
      // script; hand-written IR's larger numbers had wrapped around.
      constexpr int64_t kMostStages = 65536;
      int64_t numStages = 0;
      Operation *outOfRange = nullptr;
      func.walk([&](Operation *op) {
        if (auto stage = op->getAttrOfType<IntegerAttr>(attr::kStage);
            stage && !op->hasAttr(attr::kPhase)) {
          if (stage.getInt() < 0 || stage.getInt() >= kMostStages)
            outOfRange = op;
          else
            numStages = std::max(numStages, stage.getInt() + 1);
        }
      });
      if (outOfRange) {
        outOfRange->emitError("stage ")
            << outOfRange->getAttrOfType<IntegerAttr>(attr::kStage).getInt()
            << " is not a stage a plan may have (0 to " << kMostStages - 1 << ")";
        return signalPassFailure();
      }
      if (auto known = func->getAttrOfType<IntegerAttr>(attr::kStagesCount))
        numStages = known.getInt();
      if (numStages < ranks || numStages % ranks != 0) {
        emitError(func.getLoc(), "model '")
            << func->getAttrOfType<StringAttr>(attr::kPartitionOf).getValue()
            << "' has " << numStages << " pipeline stage"
            << (numStages == 1 ? "" : "s") << ", which the " << ranks
            << " ranks of axis '" << axis.getValue()
            << "' cannot share: give it a multiple of " << ranks
            << " stages (a rank holds stages/" << ranks << " of them)";
        return signalPassFailure();
      }
      std::string kind = schedule;
      if (kind.empty()) {
        kind = "1f1b";
        for (auto train : module.getOps<TrainOp>())
          if (train.getModel() ==
              func->getAttrOfType<StringAttr>(attr::kPartitionOf).getValue())
            kind = train.getSchedule().str();
      }
      Builder b(func.getContext());
      func->setAttr(attr::kStagesCount, b.getI64IntegerAttr(numStages));
      func->setAttr(attr::kSchedule, b.getStringAttr(kind));
      StagePlacer(func, numStages).run();
    }
  }
};
} // namespace
