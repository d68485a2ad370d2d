//===- Explain.cpp - Memory, collectives and modelled time of a plan ------===//
//
// One walk over the per-rank program places every step (forward or
// backward of a stage, once per microbatch; or the update, once per step),
// costs it (a kernel by its roofline, a collective by alpha-beta), and
// records what the backward keeps; the pipeline schedule is then simulated
// with those costs. See docs/explain.md for every formula.
//
//===----------------------------------------------------------------------===//

#include "Explain/Explain.h"

#include "Loom/IR/LoomDialect.h"
#include "Loom/IR/LoomOps.h"
#include "Loom/Transforms/Sharding.h"
#include "Plan/PlanBuilder.h"
#include "loom/runtime/plan/InFlight.h"
#include "loom/runtime/plan/Schedule.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <map>
#include <set>

using namespace mlir;
namespace attr = mlir::loom::attr;
namespace rt = ::loom::runtime;

namespace loom {
namespace {

int64_t bytesOf(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  return shaped.getNumElements() *
         ((shaped.getElementTypeBitWidth() + 7) / 8);
}

enum class Phase { Forward, Backward, Update };

const char *phaseName(Phase phase) {
  return phase == Phase::Forward    ? "forward"
         : phase == Phase::Backward ? "backward"
                                    : "update";
}

/// Where and when a step of the per-rank program runs.
struct Place {
  Phase phase = Phase::Forward;
  std::vector<unsigned> stages{0};
};

/// What a kernel costs on the device.
struct KernelCost {
  double seconds = 0;
  /// The model's matmul FLOPs (MFU's numerator): a fused attention's as
  /// its unfused matmuls', whatever its kernel skips or recomputes.
  double matmulFlops = 0;
  /// Of those, the recomputed copies' (not the model's).
  double recomputedMatmulFlops = 0;
  /// The matmul FLOPs by the peak they run at (tensor 16-bit, tf32, f32).
  double flops16 = 0, flopsTf32 = 0, flopsF32 = 0;
};

class Explainer {
public:
  Explainer(ModuleOp module, func::FuncOp model, func::FuncOp spmd,
            const ExplainOptions &options)
      : module(module), model(model), spmd(spmd), options(options),
        device(*options.device), symbols(module) {}

  FailureOr<ExplainReport> run();

private:
  void readMesh();
  void placeSteps();
  void findOverlaps();
  KernelCost costKernel(func::CallOp call);
  double collectiveSeconds(StringRef kind, int64_t ranks, int64_t bytes,
                           bool intraNode) const;
  bool groupIsIntraNode(ArrayRef<int16_t> axes) const;
  LogicalResult costSteps();
  void findTransfers();
  void findMemory();
  void findMoe();
  void simulate();
  /// A pipelined training plan's activations as the runtime allocates
  /// them (its in-flight slots), from the built plan's text.
  void allocateActivations(const std::string &planText);
  /// A pipelined forward's: the values each rank holds in flight and, in
  /// microbatches, each one's outputs it keeps (rt::forwardPipelineBytes).
  void allocateForwardPipeline(const std::string &planText);
  bool onRank(const Place &place, unsigned coordinate) const {
    for (unsigned stage : place.stages)
      if (stage % pipelineRanks == coordinate)
        return true;
    return false;
  }
  std::string argName(BlockArgument arg) {
    unsigned i = arg.getArgNumber();
    if (auto name = spmd.getArgAttrOfType<StringAttr>(i, attr::kParam))
      return name.str();
    if (auto name = spmd.getArgAttrOfType<StringAttr>(i, attr::kInput))
      return name.str();
    return "arg" + std::to_string(i);
  }

  ModuleOp module;
  func::FuncOp model, spmd;
  const ExplainOptions &options;
  const DeviceSpec &device;
  /// The kernels by name (a module's own lookup is a linear scan).
  SymbolTable symbols;
  ExplainReport report;
  std::optional<mlir::loom::Grid> grid;
  unsigned stagesCount = 1, pipelineRanks = 1;
  int pipelineAxis = -1;
  bool zeroBubble = false;

  std::vector<Operation *> ops;
  llvm::DenseMap<Operation *, Place> places;
  llvm::DenseMap<Operation *, double> seconds;
  llvm::DenseSet<Operation *> overlapping;
  /// Backward steps that read a sum of `overlapping` (through others):
  /// they start when it ends.
  llvm::DenseSet<Operation *> waitsForSums;
  /// Per stage and phase: compute and blocking collectives, in seconds.
  std::vector<double> forwardCost, backwardCost, weightCost, exposedCost;
  /// Per pipeline rank: the update's transfers it receives, in seconds.
  std::vector<double> updateTransferCost;
  std::vector<double> stageActivationBytes;
  double flops16 = 0, flopsTf32 = 0, flopsF32 = 0;
  /// The collectives, one line per kind, group, size, phase and source,
  /// in the order the program first reaches them.
  std::vector<ExplainCollective> lines;
  std::map<std::string, size_t> lineOf;
  /// Per line, its calls on each pipeline coordinate: a line's count is
  /// that of the rank that runs it most (its ops may sit on many stages).
  std::vector<std::vector<int64_t>> callsOn;
  /// Adds `calls` of `line` on the ranks of `place`: lines that agree in
  /// kind, group, bytes, phase, source and overlap are one.
  void addCalls(const ExplainCollective &line, const Place &place, int64_t calls) {
    std::string key = line.kind + "|" + line.axes + "|" + std::to_string(line.bytes) +
                      "|" + line.phase + "|" + line.source + "|" +
                      (line.overlaps ? "o" : "");
    lineFor(key, line);
    std::vector<int64_t> &on = callsOn[lineOf[key]];
    llvm::SmallDenseSet<unsigned> ranks;
    for (unsigned stage : place.stages)
      ranks.insert(stage % pipelineRanks);
    for (unsigned r : ranks)
      on[r] += calls;
  }
  ExplainCollective &lineFor(const std::string &key, const ExplainCollective &line) {
    auto [it, inserted] = lineOf.try_emplace(key, lines.size());
    if (inserted) {
      lines.push_back(line);
      callsOn.emplace_back(pipelineRanks, 0);
    }
    return lines[it->second];
  }
};

} // namespace

/// The mesh, its row-major strides (the last axis fastest, as the runtime
/// numbers ranks) and the pipeline axis.
void Explainer::readMesh() {
  report.model = model.getSymName().str();
  if (auto of = spmd->getAttrOfType<StringAttr>(attr::kPartitionOf))
    report.model = of.str();
  if (auto gridName = spmd->getAttrOfType<FlatSymbolRefAttr>(attr::kGrid))
    if (auto gridOp =
            SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(spmd, gridName))
      grid.emplace(gridOp);
  if (grid) {
    report.grid = grid->op.getSymName().str();
    for (auto [name, size] : llvm::zip(grid->names, grid->sizes)) {
      report.axes.push_back(name);
      report.sizes.push_back(size);
      report.ranks *= size;
    }
    report.strides.assign(report.sizes.size(), 1);
    for (int i = static_cast<int>(report.strides.size()) - 2; i >= 0; --i)
      report.strides[i] = report.strides[i + 1] * report.sizes[i + 1];
  }
  if (auto axis = spmd->getAttrOfType<StringAttr>(attr::kPipelineAxis);
      axis && grid) {
    report.pipelineAxis = axis.str();
    for (auto [i, name] : llvm::enumerate(grid->names))
      if (name == axis.getValue())
        pipelineAxis = i;
  }
  if (auto count = spmd->getAttrOfType<IntegerAttr>(attr::kStagesCount)) {
    stagesCount = count.getInt();
    pipelineRanks = pipelineAxis >= 0 ? report.sizes[pipelineAxis] : 1;
    report.stages = stagesCount;
    report.pipelineRanks = pipelineRanks;
    if (auto kind = spmd->getAttrOfType<StringAttr>(attr::kSchedule))
      report.schedule = kind.str();
    if (!options.schedule.empty())
      report.schedule = options.schedule;
    zeroBubble = report.schedule == "zero_bubble";
  }
  report.device = device.name.str();
  report.deviceName = device.description.str();
  for (BlockArgument arg : model.getArguments())
    if (auto name = model.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       attr::kParam);
        name && !name.getValue().starts_with("opt.")) {
      auto type = cast<ShapedType>(arg.getType());
      report.paramElements += type.getNumElements();
      report.paramBytes += bytesOf(type);
      ExplainParam param;
      param.name = name.str();
      param.shape.assign(type.getShape().begin(), type.getShape().end());
      param.local = param.shape;
      param.split.resize(param.shape.size());
      param.localBytes = bytesOf(type);
      report.params.push_back(std::move(param));
    }
  // The per-rank program's param arguments have the same names.
  llvm::StringMap<size_t> paramIndex;
  for (auto [i, param] : llvm::enumerate(report.params))
    paramIndex[param.name] = i;
  if (grid && spmd != model)
    for (BlockArgument arg : spmd.getArguments()) {
      unsigned i = arg.getArgNumber();
      auto name = spmd.getArgAttrOfType<StringAttr>(i, attr::kParam);
      auto it = name ? paramIndex.find(name.getValue()) : paramIndex.end();
      if (it == paramIndex.end())
        continue;
      ExplainParam &param = report.params[it->second];
      auto type = cast<ShapedType>(arg.getType());
      param.local.assign(type.getShape().begin(), type.getShape().end());
      param.localBytes = bytesOf(type);
      if (auto sharding = spmd.getArgAttrOfType<ArrayAttr>(i, attr::kSharding)) {
        mlir::loom::Sharding split = mlir::loom::shardingFromAttr(sharding);
        for (auto [d, axes] : llvm::enumerate(split.dims))
          if (d < param.split.size())
            for (int16_t axis : axes)
              param.split[d].push_back(grid->names[axis]);
      }
    }
}

/// A pipelined program's steps carry their place (loom-place-stages).
/// Without stages, data flow tells: the forward is what the loss and the
/// model's own outputs are computed from; the update is what reads the
/// optimizer's state and scalars (`opt.` arguments, the loss scale aside),
/// and with microbatches everything after the last accumulate (as the plan
/// runs it); the rest is the backward.
void Explainer::placeSteps() {
  Block &body = spmd.getBody().front();
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (unsigned i = 0; i < spmd.getNumResults(); ++i)
    report.training |= static_cast<bool>(
        spmd.getResultAttrOfType<StringAttr>(i, attr::kUpdates));
  // A forward pipelined in microbatches (loomc --microbatches) runs the
  // one-microbatch program that many times, as a training step does.
  auto forwardMicrobatches = spmd->getAttrOfType<IntegerAttr>(attr::kForwardMicrobatches);
  if (!report.training)
    report.schedule = "forward-only"; // the runtime's order for a forward
  report.microbatches = report.training      ? options.microbatches
                        : forwardMicrobatches ? forwardMicrobatches.getInt()
                                              : 1;
  report.optimizer = options.optimizer;
  report.zero = options.zero;
  if (spmd->hasAttr(attr::kStagesCount)) {
    for (Operation *op : ops) {
      Place place;
      if (auto phase = op->getAttrOfType<StringAttr>(attr::kPhase))
        place.phase = phase.getValue() == "backward" ? Phase::Backward
                      : phase.getValue() == "update" ? Phase::Update
                                                     : Phase::Forward;
      if (auto stage = op->getAttrOfType<IntegerAttr>(attr::kStage))
        place.stages = {static_cast<unsigned>(stage.getInt())};
      if (auto stages = op->getAttrOfType<DenseI64ArrayAttr>(attr::kStages))
        place.stages.assign(stages.asArrayRef().begin(),
                            stages.asArrayRef().end());
      places[op] = place;
    }
    return;
  }
  llvm::DenseSet<Operation *> forward, update;
  SmallVector<Operation *> work;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    auto output = spmd.getResultAttrOfType<StringAttr>(i, attr::kOutput);
    bool own = spmd.getResultAttrOfType<StringAttr>(i, attr::kLoss) ||
               (output && !output.getValue().starts_with("next.") &&
                !output.getValue().starts_with("grad.") &&
                output.getValue() != "grad_norm");
    if (Operation *def = value.getDefiningOp(); own && def && forward.insert(def).second)
      work.push_back(def);
  }
  while (!work.empty())
    for (Value operand : work.pop_back_val()->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && forward.insert(def).second)
        work.push_back(def);
  int64_t lastAccumulate = -1;
  for (auto [i, op] : llvm::enumerate(ops))
    if (isa<mlir::loom::AccumulateOp>(op))
      lastAccumulate = i;
  for (auto [i, op] : llvm::enumerate(ops)) {
    bool readsOptimizer = llvm::any_of(op->getOperands(), [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      if (!arg)
        return update.contains(v.getDefiningOp());
      std::string name = argName(arg);
      return StringRef(name).starts_with("opt.") && name != "opt.loss_scale";
    });
    if (readsOptimizer || (lastAccumulate >= 0 && static_cast<int64_t>(i) > lastAccumulate))
      update.insert(op);
    Place place;
    place.phase = update.contains(op)    ? Phase::Update
                  : forward.contains(op) ? Phase::Forward
                                         : Phase::Backward;
    places[op] = place;
  }
}

/// The data-parallel axes: those splitting dim 0 of an input (the batch).
/// In the backward, the only collectives over them alone are gradient sums,
/// which nothing else of the backward waits for: they run beside it (DDP's
/// buckets), and so do the kernels that only finish them.
void Explainer::findOverlaps() {
  llvm::SmallDenseSet<int16_t> dataParallel;
  for (BlockArgument arg : spmd.getArguments())
    if (spmd.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kInput))
      if (auto sharding = spmd.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(),
                                                           attr::kSharding)) {
        mlir::loom::Sharding split = mlir::loom::shardingFromAttr(sharding);
        if (!split.dims.empty())
          dataParallel.insert(split.dims[0].begin(), split.dims[0].end());
      }
  // What reads a finished sum waits for it: a collective of those (the
  // gradient norm's 4-byte sum over dp, of the reduce-scattered ZeRO
  // gradients' squares) runs after the sums it reads, not beside the
  // backward (it had been modelled as hidden by the sums it depends on).
  auto readsSums = [&](Operation *op) {
    return llvm::any_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return overlapping.contains(def) || waitsForSums.contains(def);
    });
  };
  for (Operation *op : ops) {
    if (places[op].phase != Phase::Backward) {
      if (readsSums(op))
        waitsForSums.insert(op);
      continue;
    }
    if (!collectiveKind(op).empty()) {
      auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
      if (readsSums(op))
        waitsForSums.insert(op);
      else if (isa<shard::AllReduceOp, shard::ReduceScatterOp>(op) && axes &&
               !axes.empty() &&
               llvm::all_of(axes.asArrayRef(),
                            [&](int16_t axis) { return dataParallel.contains(axis); }))
        overlapping.insert(op);
      continue;
    }
    bool finishesSum =
        isa<func::CallOp>(op) &&
        llvm::any_of(op->getOperands(), [&](Value v) {
          return overlapping.contains(v.getDefiningOp());
        }) &&
        llvm::all_of(op->getUsers(), [&](Operation *user) {
          return isa<func::ReturnOp>(user) || places.lookup(user).phase == Phase::Update;
        });
    if (finishesSum)
      overlapping.insert(op);
    else if (readsSums(op))
      waitsForSums.insert(op);
  }
}

/// The roofline of one call: its matmuls at the tensor-core (16-bit, tf32)
/// or f32 peak and its other ops at one FLOP per element, against the
/// bytes its operands and results move through device memory.
KernelCost Explainer::costKernel(func::CallOp call) {
  KernelCost cost;
  int64_t bytes = 0;
  for (Value v : call.getOperands())
    bytes += bytesOf(v.getType());
  for (Value v : call.getResults())
    bytes += bytesOf(v.getType());
  double computeSeconds = 0;
  // A 16-bit product of `flops` on the tensor cores.
  auto tensorCores = [&](double flops) {
    cost.matmulFlops += flops;
    cost.flops16 += flops;
    computeSeconds += flops / (device.tensorTflops16 * 1e12);
  };
  auto costOp = [&](Operation *op) {
    // Fused attention (16-bit in a GPU plan: loom-fuse-attention's
    // gpu-kernel rule): the products the GPU kernels compute over the
    // (query, key) pairs, as the kernel report counts them.
    if (isa<mlir::loom::AttentionOp, mlir::loom::AttentionGradOp>(op)) {
      auto shape = [&](unsigned i) {
        return cast<ShapedType>(op->getOperand(i).getType()).getShape();
      };
      auto forward = dyn_cast<mlir::loom::AttentionOp>(op);
      bool causal = forward ? forward.getCausal()
                            : cast<mlir::loom::AttentionGradOp>(op).getCausal();
      double computed = mlir::loom::attentionFlops(shape(0), shape(1), shape(2), causal,
                                                   /*gradient=*/!forward);
      tensorCores(computed);
      // The model's FLOPs are those of the unfused matmuls, as Megatron-
      // LM's and PaLM's formulas count them: every pair (the causal half a
      // kernel skips is its saving, not less model), and a backward of
      // twice the forward's (not the kernel's recomputed scores). They
      // had followed the kernel, so --fuse-attention changed the MFU.
      double model = mlir::loom::attentionFlops(shape(0), shape(1), shape(2),
                                                /*causal=*/false, /*gradient=*/false);
      cost.matmulFlops += (forward ? model : 2 * model) - computed;
      return;
    }
    if (op->getNumResults() != 1)
      return;
    auto result = dyn_cast<ShapedType>(op->getResult(0).getType());
    if (!result || !result.hasStaticShape())
      return;
    if (auto matmul = dyn_cast<mlir::loom::MatmulOp>(op)) {
      auto lhs = cast<ShapedType>(matmul.getLhs().getType());
      double flops = 2.0 * result.getNumElements() * lhs.getShape().back();
      Type multiply = matmul.getMultiply() ? *matmul.getMultiply()
                                           : lhs.getElementType();
      if (multiply.isBF16() || multiply.isF16()) {
        tensorCores(flops);
      } else if (isa<FloatTF32Type>(multiply)) {
        cost.matmulFlops += flops;
        cost.flopsTf32 += flops;
        computeSeconds += flops / (device.tensorTflopsTf32 * 1e12);
      } else {
        cost.matmulFlops += flops;
        cost.flopsF32 += flops;
        computeSeconds += flops / (device.f32Tflops * 1e12);
      }
      return;
    }
    if (op->getDialect() && op->getDialect()->getNamespace() == "loom")
      computeSeconds += result.getNumElements() / (device.f32Tflops * 1e12);
  };
  // A recomputed layer's copies are work the model does not count: the
  // kernel that holds them may hold the backward's own ops too (the
  // attention gradient beside its recomputed forward).
  if (auto kernel = symbols.lookup<func::FuncOp>(call.getCallee()))
    kernel.walk([&](Operation *op) {
      double before = cost.matmulFlops;
      costOp(op);
      if (op->hasAttr(attr::kRecomputed))
        cost.recomputedMatmulFlops += cost.matmulFlops - before;
    });
  cost.seconds = std::max(computeSeconds, bytes / (device.bandwidthGBs * 1e9));
  return cost;
}

/// Ring algorithms: an all-reduce moves 2(n-1)/n of its tensor over each
/// rank's link in 2(n-1) hops; an all-gather, reduce-scatter or all-to-all
/// (n-1)/n in n-1 hops; a send one tensor in one hop.
double Explainer::collectiveSeconds(StringRef kind, int64_t n, int64_t bytes,
                                    bool intraNode) const {
  const NetworkSpec &net = options.network;
  double bandwidth = (intraNode ? net.intraNodeGBs : net.interNodeGBs) * 1e9;
  double hop = (intraNode ? net.intraNodeLatencyUs : net.interNodeLatencyUs) * 1e-6;
  if (kind == "send/recv")
    return bytes / bandwidth + hop;
  if (n <= 1)
    return 0;
  double share = static_cast<double>(n - 1) / n;
  if (kind == "all-reduce")
    return 2 * share * bytes / bandwidth + 2 * (n - 1) * hop;
  if (kind == "broadcast")
    return bytes / bandwidth + (n - 1) * hop;
  return share * bytes / bandwidth + (n - 1) * hop;
}

/// Whether every group over `axes` fits in one node: consecutive ranks
/// share a node, so a group does when its first and last ranks do. (Rank
/// 0's group alone had decided: with --gpus-per-node not a multiple of
/// the groups' span, later groups straddle two nodes.)
bool Explainer::groupIsIntraNode(ArrayRef<int16_t> axes) const {
  int64_t perNode = options.network.gpusPerNode;
  int64_t last = 0;
  for (int16_t axis : axes)
    last += (report.sizes[axis] - 1) * report.strides[axis];
  if (last >= perNode)
    return false;
  // The groups' first ranks: every rank whose coordinates on `axes` are 0.
  // (Past 2^16 ranks, rank 0's group stands for them: a search of a
  // million devices explains many meshes.)
  if (report.ranks > (int64_t(1) << 16))
    return true;
  for (int64_t rank = 0; rank < report.ranks; ++rank) {
    bool first = llvm::all_of(axes, [&](int16_t axis) {
      return (rank / report.strides[axis]) % report.sizes[axis] == 0;
    });
    if (first && rank / perNode != (rank + last) / perNode)
      return false;
  }
  return true;
}


LogicalResult Explainer::costSteps() {
  for (Operation *op : ops) {
    const Place &place = places[op];
    if (auto call = dyn_cast<func::CallOp>(op)) {
      // A view is no launch: the plan gives it its argument's bytes.
      if (::loom::isViewStep(call)) {
        seconds[op] = 0;
        continue;
      }
      KernelCost cost = costKernel(call);
      seconds[op] = cost.seconds;
      ++report.kernelCalls;
      flops16 += cost.flops16, flopsTf32 += cost.flopsTf32,
          flopsF32 += cost.flopsF32;
      continue;
    }
    StringRef kind = collectiveKind(op);
    if (kind.empty() || kind == "all-slice")
      continue; // accumulate, and all-slice (local): no traffic
    // A gradient bucket is one message: its first all-reduce carries the
    // bytes of all.
    if (mlir::loom::joinsGradientBucket(op)) {
      seconds[op] = 0;
      continue;
    }
    auto axesAttr = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    if (!grid || !axesAttr)
      return op->emitError("a collective in a model that is not partitioned");
    ArrayRef<int16_t> axes = axesAttr.asArrayRef();
    ExplainCollective line;
    line.kind = kind.str();
    line.axes = grid->format(axes);
    line.groupSize = grid->ways(axes);
    line.intraNode = groupIsIntraNode(axes);
    line.bytes = kind == "all-gather" ? bytesOf(op->getResult(0).getType())
                                      : bytesOf(op->getOperand(0).getType());
    for (Operation *next = op->getNextNode();
         next && mlir::loom::joinsGradientBucket(next); next = next->getNextNode())
      line.bytes += bytesOf(next->getOperand(0).getType());
    line.phase = phaseName(place.phase);
    line.source = sourceOf(op->getLoc());
    line.seconds = collectiveSeconds(kind, line.groupSize, line.bytes,
                                     line.intraNode);
    line.overlaps = overlapping.contains(op);
    seconds[op] = line.seconds;
    addCalls(line, place, place.phase == Phase::Update ? 1 : report.microbatches);
  }
  return success();
}

/// Pipeline transfers: a step of one stage reading a value another stage
/// computed receives it, once per microbatch (the plan's carries); an
/// update step on stages that lack a value it reads, once per step from
/// the first stage that has it (the plan's `transfer`s: a tied
/// embedding's gradient parts, the stages' sums of squares for the norm).
void Explainer::findTransfers() {
  if (!report.stages)
    return;
  std::set<std::pair<Operation *, unsigned>> seen;
  int64_t stride = report.pipelineStride();
  auto transfer = [&](unsigned from, unsigned to, Value value, Operation *user,
                      const Place &place) {
    unsigned a = from % pipelineRanks, b = to % pipelineRanks;
    ExplainCollective line;
    line.kind = "send/recv";
    line.axes = report.pipelineAxis + " " + std::to_string(from) + "->" +
                std::to_string(to);
    line.groupSize = 2;
    int64_t distance = (a > b ? a - b : b - a) * stride;
    line.intraNode = distance < options.network.gpusPerNode;
    line.bytes = bytesOf(value.getType());
    line.phase = phaseName(place.phase);
    line.source = sourceOf(user->getLoc());
    line.seconds = collectiveSeconds(line.kind, 2, line.bytes, line.intraNode);
    return line;
  };
  for (Operation *user : ops) {
    const Place &to = places[user];
    if (to.phase == Phase::Update || to.stages.size() != 1)
      continue;
    for (Value operand : user->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !places.count(def))
        continue;
      const Place &from = places[def];
      if (from.phase == Phase::Update || from.stages.size() != 1 ||
          from.stages[0] == to.stages[0] ||
          !seen.insert({def, to.stages[0]}).second)
        continue;
      if (from.stages[0] % pipelineRanks == to.stages[0] % pipelineRanks)
        continue; // virtual stages of one rank: no message
      ExplainCollective line = transfer(from.stages[0], to.stages[0], operand, user, to);
      // The sender's link is busy for it: charge its stage.
      (from.phase == Phase::Forward ? forwardCost : backwardCost)[from.stages[0]] +=
          line.seconds;
      addCalls(line, to, report.microbatches);
    }
  }
  llvm::DenseMap<Operation *, SmallVector<unsigned, 2>> present;
  for (Operation *user : ops) {
    const Place &to = places[user];
    if (to.phase != Phase::Update)
      continue;
    for (Value operand : user->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !places.count(def))
        continue;
      SmallVector<unsigned, 2> &at = present[def];
      if (at.empty())
        at.assign(places[def].stages.begin(), places[def].stages.end());
      for (unsigned stage : to.stages) {
        if (llvm::is_contained(at, stage))
          continue;
        unsigned from = at.front();
        at.push_back(stage);
        if (from % pipelineRanks == stage % pipelineRanks)
          continue; // virtual stages of one rank: no message
        ExplainCollective line = transfer(from, stage, operand, user, to);
        updateTransferCost[stage % pipelineRanks] += line.seconds;
        Place receiver = to;
        receiver.stages = {stage};
        addCalls(line, receiver, 1);
      }
    }
  }
}

/// What each pipeline rank holds: the arguments its steps read, a gradient
/// per trained param, and the forward values its backward reads (kept
/// from the forward to the backward of their microbatch).
void Explainer::findMemory() {
  llvm::StringSet<> trained;
  for (unsigned i = 0; i < spmd.getNumResults(); ++i)
    if (auto name = spmd.getResultAttrOfType<StringAttr>(i, attr::kUpdates))
      if (!name.getValue().starts_with("opt."))
        trained.insert(name.getValue());
  // Per stage, the kept values (each once per stage that reads it).
  std::vector<std::vector<std::pair<Value, int64_t>>> kept(stagesCount);
  for (Operation *def : ops) {
    if (places[def].phase != Phase::Forward)
      continue;
    for (Value result : def->getResults()) {
      std::set<unsigned> readers;
      for (Operation *user : result.getUsers())
        if (places.count(user) && places[user].phase == Phase::Backward)
          for (unsigned stage : places[user].stages)
            readers.insert(stage);
      for (unsigned stage : readers) {
        stageActivationBytes[stage] += bytesOf(result.getType());
        kept[stage].push_back({result, bytesOf(result.getType())});
      }
    }
  }
  report.ranksByCoordinate.resize(pipelineRanks);
  for (unsigned r = 0; r < pipelineRanks; ++r) {
    ExplainRank &rank = report.ranksByCoordinate[r];
    rank.coordinate = r;
    for (unsigned s = 0; s < stagesCount; ++s)
      if (s % pipelineRanks == r)
        rank.stages.push_back(s);
    std::vector<std::pair<std::string, int64_t>> tensors;
    for (BlockArgument arg : spmd.getArguments()) {
      bool read = llvm::any_of(arg.getUsers(), [&](Operation *user) {
        return places.count(user) && onRank(places[user], r);
      });
      if (!read)
        continue;
      std::string name = argName(arg);
      int64_t bytes = bytesOf(arg.getType());
      bool isInput = static_cast<bool>(
          spmd.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kInput));
      if (isInput)
        rank.inputs += bytes;
      else if (StringRef(name).starts_with("opt."))
        rank.optimizer += bytes;
      else
        rank.params += bytes;
      if (trained.contains(name))
        rank.gradients += bytes;
      tensors.push_back({name, bytes});
    }
    // Kept activations by script line: a line's ops keep several.
    std::map<std::string, std::pair<int64_t, unsigned>> byLine;
    for (unsigned s : rank.stages) {
      rank.activationsPerMicrobatch += stageActivationBytes[s];
      for (auto [value, bytes] : kept[s]) {
        std::string where = value.getDefiningOp()
                                ? sourceOf(value.getDefiningOp()->getLoc())
                                : std::string();
        auto &line = byLine[where.empty() ? "?" : where];
        line.first += bytes;
        ++line.second;
      }
    }
    for (auto &[where, line] : byLine)
      tensors.push_back({"activations at " + where + " (" +
                             std::to_string(line.second) +
                             (line.second == 1 ? " tensor)" : " tensors)"),
                         line.first});
    rank.activations = rank.activationsPerMicrobatch;
    llvm::sort(tensors, [](auto &a, auto &b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    tensors.resize(std::min<size_t>(tensors.size(), 5));
    rank.largest = std::move(tensors);
  }
}

/// The MoE blocks, from their routing ops in the kernels the program calls
/// (each block once, however often its kernel runs).
void Explainer::findMoe() {
  llvm::SmallPtrSet<Operation *, 4> seen;
  for (Operation *op : ops) {
    auto call = dyn_cast<func::CallOp>(op);
    auto kernel = call ? symbols.lookup<func::FuncOp>(call.getCallee()) : nullptr;
    if (!kernel)
      continue;
    kernel.walk([&](mlir::loom::MoeRouteOp route) {
      // Routes without an axis rank a rank's tokens for its counts only.
      if (!route->hasAttr(attr::kMoeAxis) || !seen.insert(route).second)
        return;
      ExplainMoe moe;
      if (auto block = route->getAttrOfType<StringAttr>(attr::kMoeBlock))
        moe.block = block.str();
      if (auto axis = route->getAttrOfType<StringAttr>(attr::kMoeAxis))
        moe.axis = axis.str();
      moe.source = sourceOf(route.getLoc());
      auto probs = route.getProbs().getType();
      moe.tokens = probs.getDimSize(0);
      moe.experts = probs.getDimSize(1);
      moe.topK = route.getTopK();
      moe.capacity = route.getCapacity();
      // A route with offsets ranks its rank's tokens, exchanged by
      // all-to-all over the expert axis (and the tokens' data-parallel
      // axes, when they split the experts too; loom-partition).
      moe.exchangeAxes = {moe.axis};
      if (auto axes = route->getAttrOfType<ArrayAttr>(attr::kMoeExchangeAxes)) {
        moe.exchangeAxes.clear();
        for (StringRef name : axes.getAsValueRange<StringAttr>())
          moe.exchangeAxes.push_back(name.str());
      }
      int64_t ways = 1;
      for (auto [name, size] : llvm::zip(report.axes, report.sizes))
        if (llvm::is_contained(moe.exchangeAxes, name))
          ways *= size;
      // With slot blocks the ranks of one expert share its slots.
      moe.slotBlocks = route.getBlocks().value_or(1);
      moe.expertsPerRank = moe.experts * moe.slotBlocks / ways;
      if (route.getOffsets()) {
        moe.tokens *= ways;
        moe.exchangeRows = route.getBuffer().value_or(moe.capacity);
      }
      report.moe.push_back(moe);
    });
  }
}

/// Per stage, the forward, the backward (its input-gradient part alone
/// when zero-bubble splits off the weight gradients) and the exposed part
/// of the gradient sums that overlap it; then the schedule with those
/// costs, or the microbatches one after another.
void Explainer::simulate() {
  // The backward steps a later message depends on are the input gradient;
  // the rest are the weight gradient (what the plan's weight section holds).
  llvm::DenseSet<Operation *> inputGradient;
  if (zeroBubble)
    for (Operation *op : llvm::reverse(ops)) {
      const Place &place = places[op];
      if (place.phase != Phase::Backward || place.stages.size() != 1)
        continue;
      for (Operation *user : op->getUsers()) {
        const Place &to = places.lookup(user);
        if (to.phase == Phase::Backward && to.stages.size() == 1 &&
            (to.stages[0] != place.stages[0] || inputGradient.contains(user))) {
          inputGradient.insert(op);
          break;
        }
      }
    }
  std::vector<double> network(stagesCount, 0), clock(stagesCount, 0);
  std::vector<double> updateCost = updateTransferCost;
  for (Operation *op : ops) {
    const Place &place = places[op];
    double cost = seconds.lookup(op);
    if (overlapping.contains(op)) {
      for (unsigned stage : place.stages) {
        double start = std::max(clock[stage], network[stage]);
        network[stage] = start + cost / place.stages.size();
      }
      continue;
    }
    if (place.phase == Phase::Update) {
      for (unsigned r = 0; r < pipelineRanks; ++r)
        if (onRank(place, r))
          updateCost[r] += cost;
      continue;
    }
    for (unsigned stage : place.stages) {
      double share = cost / place.stages.size();
      if (place.phase == Phase::Forward) {
        forwardCost[stage] += share;
        continue;
      }
      // Waiting for the network is charged to the backward.
      if (waitsForSums.contains(op) && network[stage] > clock[stage]) {
        backwardCost[stage] += network[stage] - clock[stage];
        clock[stage] = network[stage];
      }
      clock[stage] += share;
      (zeroBubble && !inputGradient.contains(op) ? weightCost : backwardCost)[stage] +=
          share;
    }
  }
  for (unsigned s = 0; s < stagesCount; ++s)
    exposedCost[s] = std::max(0.0, network[s] - clock[s]);

  unsigned m = report.microbatches;
  std::vector<double> lastEnd(pipelineRanks, 0);
  if (report.stages) {
    rt::ScheduleKind kind;
    rt::Schedule schedule;
    std::string error;
    // A forward runs the runtime's forward-only order (any number of
    // stages a rank); the train section's schedule is the training step's.
    bool scheduled = !report.training
                         ? (schedule = rt::forwardSchedule(pipelineRanks, stagesCount, m), true)
                         : rt::parseScheduleKind(report.schedule, kind) &&
                               rt::buildSchedule(kind, pipelineRanks, stagesCount, m,
                                                 schedule, error);
    if (scheduled) {
      std::vector<rt::StageCost> costs(stagesCount);
      for (unsigned s = 0; s < stagesCount; ++s) {
        costs[s].forward = forwardCost[s];
        costs[s].backward = backwardCost[s] + exposedCost[s];
        costs[s].weightGrad = weightCost[s];
        costs[s].activationBytes = stageActivationBytes[s];
      }
      if (!report.training)
        for (rt::StageCost &cost : costs)
          cost.backward = cost.weightGrad = 0;
      rt::ScheduleTimeline timeline = rt::simulateSchedule(schedule, costs);
      report.bubble = timeline.bubble;
      report.uniformBubble =
          rt::simulateSchedule(schedule, {rt::uniformStageCost(schedule)}).bubble;
      for (unsigned r = 0; r < pipelineRanks; ++r) {
        for (const auto &interval : timeline.steps[r])
          lastEnd[r] = std::max(lastEnd[r], interval.end);
        ExplainRank &rank = report.ranksByCoordinate[r];
        rank.inFlight = timeline.peakActivations[r];
        if (report.training)
          rank.activations = static_cast<int64_t>(timeline.peakActivationBytes[r]);
      }
    }
  } else {
    lastEnd[0] = m * (forwardCost[0] + backwardCost[0] + weightCost[0] +
                      exposedCost[0]);
  }
  for (unsigned r = 0; r < pipelineRanks; ++r) {
    ExplainRank &rank = report.ranksByCoordinate[r];
    for (unsigned s : rank.stages) {
      rank.forwardSeconds += forwardCost[s];
      rank.backwardSeconds += backwardCost[s] + weightCost[s];
      rank.exposedBucketSeconds += exposedCost[s] * m;
    }
    if (!report.training)
      rank.activations = rank.activationsPerMicrobatch = 0;
    rank.updateSeconds = updateCost[r];
    rank.finishSeconds = lastEnd[r] + updateCost[r];
    report.stepSeconds = std::max(report.stepSeconds, rank.finishSeconds);
  }
  // The model's FLOPs are the one-rank model's, whatever the mesh does
  // with them: work replicated over ranks is not the model's.
  double modelMatmulFlops = 0;
  model.walk([&](func::CallOp call) {
    KernelCost cost = costKernel(call);
    modelMatmulFlops += cost.matmulFlops - cost.recomputedMatmulFlops;
  });
  report.modelFlops = modelMatmulFlops * m;
  // The peak of the FLOPs' mix: their total over the time each precision's
  // share takes at its own peak. (The peak of the precision most of them ran
  // at gave a model of bf16 and f32 matmuls an MFU of 187%.)
  double total = flops16 + flopsTf32 + flopsF32;
  double idealSeconds = flops16 / device.tensorTflops16 +
                        flopsTf32 / device.tensorTflopsTf32 +
                        flopsF32 / device.f32Tflops;
  report.peakTflops = total > 0 ? total / idealSeconds : device.f32Tflops;
}

FailureOr<ExplainReport> Explainer::run() {
  // The report's sums stay in int64 where all the program holds does (a
  // model of 2^61 params' elements had printed negative bytes and passed
  // --memory-limit): the plan's bound, on every value.
  int64_t held = 0;
  SmallVector<Type> types(model.getArgumentTypes());
  model.walk([&](Operation *op) { llvm::append_range(types, op->getResultTypes()); });
  for (Type type : types)
    if (failed(addModelBytes(model, held, bytesOf(type))))
      return failure();
  readMesh();
  placeSteps();
  for (auto &[op, place] : places)
    for (unsigned stage : place.stages)
      if (stage >= stagesCount)
        return op->emitError("a step of stage ")
               << stage << " in a program of " << stagesCount << " stages";
  forwardCost.assign(stagesCount, 0);
  updateTransferCost.assign(pipelineRanks, 0);
  backwardCost.assign(stagesCount, 0);
  weightCost.assign(stagesCount, 0);
  exposedCost.assign(stagesCount, 0);
  stageActivationBytes.assign(stagesCount, 0);
  findOverlaps();
  if (failed(costSteps()))
    return failure();
  findTransfers();
  findMemory();
  findMoe();
  simulate();
  for (auto [line, on] : llvm::zip(lines, callsOn))
    line.count = *llvm::max_element(on);
  report.collectives = lines;
  for (const ExplainCollective &line : lines)
    report.communicationSeconds += line.seconds * line.count;
  // The static memory plan, without the kernels' own scratch (explain
  // compiles no kernel): a program the plan cannot hold has no figure. A
  // pipelined training step's activations come from it too, in the
  // search's probes as well (whose loops are cut: the figure extrapolates).
  bool pipelinedTraining = report.training && report.stages;
  // A pipelined forward holds its carries in flight, and in microbatches
  // keeps each one's outputs.
  bool pipelinedForward = !report.training && report.stages;
  if (options.planArena || pipelinedTraining || pipelinedForward) {
    ScopedDiagnosticHandler quiet(spmd.getContext(),
                                  [](Diagnostic &) { return success(); });
    FailureOr<Plan> plan = buildPlan(spmd, {});
    if (succeeded(plan) && options.planArena)
      report.planArenaBytes = plan->arenaBytes;
    if (succeeded(plan) && pipelinedTraining)
      allocateActivations(plan->text);
    if (succeeded(plan) && pipelinedForward)
      allocateForwardPipeline(plan->text);
  }
  return report;
}

void Explainer::allocateForwardPipeline(const std::string &planText) {
  rt::Plan plan;
  std::string error;
  if (!rt::parsePlan(planText, plan, error) || !plan.pipeline.present)
    return;
  std::vector<uint64_t> bytes = rt::forwardPipelineBytes(plan, report.microbatches);
  int64_t messages = static_cast<int64_t>(rt::pipelineMessageBytes(plan));
  for (unsigned r = 0; r < report.pipelineRanks && r < bytes.size(); ++r) {
    ExplainRank &rank = report.ranksByCoordinate[r];
    rank.activations = static_cast<int64_t>(bytes[r]);
    rank.activationsAllocated = true;
    rank.messages = messages;
  }
}

void Explainer::allocateActivations(const std::string &planText) {
  rt::Plan plan;
  rt::Schedule schedule;
  rt::ScheduleKind kind;
  std::string error;
  if (!rt::parsePlan(planText, plan, error) || !plan.pipeline.stages ||
      !rt::parseScheduleKind(report.schedule, kind) ||
      !rt::buildSchedule(kind, report.pipelineRanks, plan.pipeline.stages,
                         report.microbatches, schedule, error))
    return;
  std::vector<rt::InFlightLayout> layouts = rt::planInFlightRanks(plan, schedule);
  int64_t messages = static_cast<int64_t>(rt::pipelineMessageBytes(plan));
  for (unsigned r = 0; r < report.pipelineRanks; ++r) {
    const rt::InFlightLayout &layout = layouts[r];
    ExplainRank &rank = report.ranksByCoordinate[r];
    rank.liveActivations = rank.activations;
    rank.activations = static_cast<int64_t>(layout.bytes());
    rank.activationPools.clear();
    rank.activationsAllocated = true;
    for (const rt::InFlightLayout::Pool &pool : layout.pools)
      rank.activationPools.push_back({pool.stages, pool.perStage, pool.slots,
                                      static_cast<int64_t>(pool.slotBytes)});
    rank.activationTransientBytes = static_cast<int64_t>(layout.transientBytes);
    rank.messages = messages;
  }
}

int64_t ExplainReport::pipelineStride() const {
  for (auto [name, stride] : llvm::zip(axes, strides))
    if (name == pipelineAxis)
      return stride;
  return 1;
}

int64_t ExplainReport::coordinate(int64_t rank, size_t axis) const {
  return rank / strides[axis] % sizes[axis];
}

int64_t ExplainReport::allocatedBytes() const {
  if (!planArenaBytes)
    return 0;
  int64_t slots = 0;
  for (const ExplainRank &rank : ranksByCoordinate)
    if (rank.activationsAllocated)
      slots = std::max(slots, rank.activations + rank.messages);
  return planArenaBytes + slots;
}

int64_t ExplainReport::neededBytes() const {
  return std::max(largestRank().total(), allocatedBytes());
}

double ExplainReport::timelineBubble() const {
  double busy = 0, makespan = 0;
  for (const ExplainRank &rank : ranksByCoordinate) {
    busy += microbatches * (rank.forwardSeconds + rank.backwardSeconds) +
            rank.exposedBucketSeconds;
    makespan = std::max(makespan, rank.finishSeconds - rank.updateSeconds);
  }
  return makespan > 0 ? 1.0 - busy / (pipelineRanks * makespan) : 0;
}

const ExplainRank &ExplainReport::largestRank() const {
  const ExplainRank *largest = &ranksByCoordinate.front();
  for (const ExplainRank &rank : ranksByCoordinate)
    if (rank.total() > largest->total())
      largest = &rank;
  return *largest;
}

FailureOr<ExplainReport> explainProgram(ModuleOp module, func::FuncOp model,
                                        func::FuncOp spmd,
                                        const ExplainOptions &options) {
  return Explainer(module, model, spmd, options).run();
}

} // namespace loom
