//===- PlanBuilder.cpp - Buffers, steps and the static memory plan --------===//

#include "Plan/PlanBuilder.h"

#include "Loom/IR/LoomDialect.h"
#include "Loom/IR/LoomOps.h"
#include "Loom/Transforms/Sharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

using namespace mlir;
namespace attr = mlir::loom::attr;

namespace {
struct Buffer {
  std::string name;
  std::string role; // input, param, output, temp
  RankedTensorType type;
  std::string init; // params: "normal 0.02" ...
  int64_t bytes = 0;
  int64_t first = 0, last = 0; // steps during which the bytes are live
  int64_t offset = 0;
  /// A param's update written over the param (inPlaceUpdates), or a view
  /// (isViewStep): the buffer whose bytes it has; it is not placed itself.
  long sharesBytesOf = -1;
  bool view = false; // the plan's `view ID OF` record
  std::string sharding; // SPMD plans: "dp,-" for a split input, param or output
  int64_t bound = 0;    // integer inputs: their values lie in [0, bound)
  /// A pipelined plan: the ranks of the pipeline axis that touch the
  /// buffer's bytes (empty: every rank). Buffers of disjoint ranks may
  /// share bytes whatever their lifetimes: no rank holds both.
  llvm::SmallBitVector ranks;
};

/// One `step` or `collective` record: its text up to the buffer ids.
struct Step {
  std::string head;
  std::vector<size_t> args;
  /// In a pipelined plan: the section (phase and stages), and the buffers
  /// the step reads and writes.
  std::string phase;
  SmallVector<int64_t> stages;
  std::vector<size_t> reads, writes;
  Operation *op = nullptr;
};

/// A pipelined plan's parts besides its steps' sections: the carries
/// between neighbouring stages and the update's transfers.
struct PipelineParts {
  std::string axis;
  int64_t stages = 1;
  std::string schedule;
  std::vector<std::vector<size_t>> forwardCarry, backwardCarry;
  /// Per step, the (from, to, buffer) transfers right before it.
  std::vector<std::vector<std::tuple<int64_t, int64_t, size_t>>> transfers;
};
} // namespace

/// Buffers start on 64-byte boundaries (a cache line, and enough for any
/// vector load the kernels use).
static constexpr int64_t kAlignment = 64;

static std::string dtypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  return type.isInteger(32) ? "i32" : "i64";
}

static std::string formatDouble(double value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.17g", value);
  return text;
}

/// The optimizer record's settings besides the hyperparameters: what the
/// runtime needs from step to step (the learning-rate schedule, the loss
/// scaling), and the clipping threshold, which the step applies itself.
static void writeTrainSettings(llvm::raw_ostream &os, mlir::loom::TrainOp train) {
  auto number = [](FloatAttr attr, double fallback) {
    return formatDouble(attr ? attr.getValueAsDouble() : fallback);
  };
  if (std::optional<StringRef> schedule = train.getLrSchedule())
    os << " lr_schedule=" << *schedule << " warmup="
       << number(train.getWarmupAttr(), 0) << " min_lr="
       << number(train.getMinLrAttr(), 0);
  if (train.getLossScale() != "none")
    os << " loss_scale=" << train.getLossScale() << " initial_scale="
       << number(train.getInitialScaleAttr(), 65536);
  if (FloatAttr clip = train.getClipGradNormAttr())
    os << " clip_grad_norm=" << number(clip, 0);
}

static std::string initText(mlir::loom::InitAttr init) {
  std::string text = mlir::loom::stringifyInitKind(init.getKind()).str();
  if (init.getArgs())
    for (double arg : init.getArgs().asArrayRef())
      text += " " + formatDouble(arg);
  return text;
}

StringRef (::loom::collectiveKind)(Operation *op) {
  if (isa<shard::AllReduceOp>(op))
    return "all-reduce";
  if (isa<shard::AllGatherOp>(op))
    return "all-gather";
  if (isa<shard::AllSliceOp>(op))
    return "all-slice";
  if (isa<shard::ReduceScatterOp>(op))
    return "reduce-scatter";
  if (isa<shard::AllToAllOp>(op))
    return "all-to-all";
  if (isa<shard::BroadcastOp>(op))
    return "broadcast";
  return "";
}

/// The `collective KIND AXES DIMS` head of a collective's record.
static FailureOr<std::string> collectiveHead(Operation *op,
                                             const mlir::loom::Grid &grid) {
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  auto dim = [&](StringRef name) {
    return std::to_string(op->getAttrOfType<IntegerAttr>(name).getInt());
  };
  StringRef kind = ::loom::collectiveKind(op);
  if (kind.empty())
    return op->emitError("'") << op->getName()
                              << "' has no plan record; the plan holds kernel "
                                 "calls and collectives";
  std::string dims = "-";
  if (isa<shard::AllGatherOp>(op))
    dims = dim("gather_axis");
  else if (isa<shard::AllSliceOp>(op))
    dims = dim("slice_axis");
  else if (isa<shard::ReduceScatterOp>(op))
    dims = dim("scatter_axis");
  else if (isa<shard::AllToAllOp>(op))
    dims = dim("split_axis") + ":" + dim("concat_axis");
  if (!axes || axes.empty())
    return op->emitError("collective without grid axes");
  return "collective " + kind.str() + " " + grid.format(axes.asArrayRef(), ",") +
         " " + dims;
}

/// "FILE:LINE:COL" of the first file location in `loc`, FILE without its
/// directory; empty if there is none or the name holds a space or a colon.
std::string (::loom::sourceOf)(Location loc) {
  std::string text;
  loc->walk([&](Location each) {
    auto file = dyn_cast<FileLineColLoc>(each);
    if (!file || !text.empty())
      return WalkResult::advance();
    StringRef name = file.getFilename().getValue();
    name = name.substr(name.find_last_of('/') + 1);
    // The plan's FILE has no spaces or colons (its fields are split at
    // them): a script named otherwise gives its kernels no source.
    if (!name.empty() && name.find_first_of(" \t\r\n:") == StringRef::npos)
      text = (name + ":" + Twine(file.getLine()) + ":" + Twine(file.getColumn())).str();
    return WalkResult::interrupt();
  });
  return text;
}

uint32_t (::loom::planChecksum)(llvm::StringRef text) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

/// First fit, largest buffers first: each buffer takes the lowest aligned
/// offset that no already placed buffer with an overlapping lifetime uses.
static int64_t placeBuffers(std::vector<Buffer> &buffers) {
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].sharesBytesOf < 0)
      order.push_back(i);
  // Equal sizes in program order.
  llvm::sort(order, [&](size_t a, size_t b) {
    return buffers[a].bytes != buffers[b].bytes ? buffers[a].bytes > buffers[b].bytes
                                                : a < b;
  });
  // The placed buffers on shelves, kept in the order of their offsets:
  // first fit walks them from the bottom and stops at the first gap,
  // instead of gathering and sorting the overlapping ones for every buffer
  // (deep models place tens of thousands). A shelf holds the buffers placed
  // at one offset for the same ranks: they share bytes, so their lifetimes
  // are disjoint, and kept in lifetime order the ones a lifetime meets are
  // one run, found by binary search (a 96-layer GPT places 30,000 buffers
  // at 11,000 offsets, most of them temps of short lives).
  struct Placed {
    int64_t end, first, last; // end aligned: where a buffer above may start
  };
  struct Shelf {
    int64_t begin;
    const llvm::SmallBitVector *ranks; // null: every rank
    std::vector<Placed> byLifetime;
    /// Over byLifetime: the highest end, the earliest first and the latest
    /// last. A buffer live through all of them (a param: every step) takes
    /// the highest end without walking them, which made deep models'
    /// placement quadratic (every param walked every temp of a shelf).
    int64_t maxEnd = 0;
    int64_t minFirst = std::numeric_limits<int64_t>::max();
    int64_t maxLast = std::numeric_limits<int64_t>::min();
  };
  std::vector<Shelf> shelves;
  auto sameRanks = [](const llvm::SmallBitVector *a, const llvm::SmallBitVector *b) {
    return a == b || (a && b && *a == *b);
  };
  int64_t arena = 0;
  for (size_t id : order) {
    Buffer &buffer = buffers[id];
    const llvm::SmallBitVector *ranks = buffer.ranks.empty() ? nullptr : &buffer.ranks;
    int64_t offset = 0;
    for (const Shelf &shelf : shelves) {
      if (offset + buffer.bytes <= shelf.begin)
        break;
      if (shelf.ranks && ranks && !shelf.ranks->anyCommon(*ranks))
        continue;
      if (shelf.maxLast < buffer.first || shelf.minFirst > buffer.last)
        continue;
      if (buffer.first <= shelf.minFirst && buffer.last >= shelf.maxLast) {
        offset = std::max(offset, shelf.maxEnd);
        continue;
      }
      auto met = llvm::lower_bound(shelf.byLifetime, buffer.first,
                                   [](const Placed &o, int64_t first) { return o.last < first; });
      for (; met != shelf.byLifetime.end() && met->first <= buffer.last; ++met)
        offset = std::max(offset, met->end);
    }
    buffer.offset = offset;
    arena = std::max(arena, offset + buffer.bytes);
    Placed range{(offset + buffer.bytes + kAlignment - 1) / kAlignment * kAlignment,
                 buffer.first, buffer.last};
    auto at = llvm::lower_bound(shelves, offset,
                                [](const Shelf &shelf, int64_t begin) { return shelf.begin < begin; });
    while (at != shelves.end() && at->begin == offset && !sameRanks(at->ranks, ranks))
      ++at;
    if (at == shelves.end() || at->begin != offset)
      at = shelves.insert(at, Shelf{offset, ranks, {}});
    at->maxEnd = std::max(at->maxEnd, range.end);
    at->minFirst = std::min(at->minFirst, range.first);
    at->maxLast = std::max(at->maxLast, range.last);
    at->byLifetime.insert(llvm::upper_bound(at->byLifetime, range,
                                            [](const Placed &a, const Placed &b) {
                                              return a.first < b.first;
                                            }),
                          range);
  }
  for (Buffer &buffer : buffers)
    if (buffer.sharesBytesOf >= 0)
      buffer.offset = buffers[buffer.sharesBytesOf].offset;
  return std::max<int64_t>(kAlignment, (arena + kAlignment - 1) / kAlignment * kAlignment);
}

/// Per buffer, the index of the (last) step that writes it; -1 for none.
static std::vector<long> writerOf(const std::vector<Step> &steps, size_t numBuffers) {
  std::vector<long> writer(numBuffers, -1);
  for (auto [index, step] : llvm::enumerate(steps))
    for (size_t id : step.writes)
      writer[id] = static_cast<long>(index);
  return writer;
}

/// The updates a CPU training step does in place: those whose kernel
/// writes the new value over the param (loom-in-place-updates marked its
/// result loom.in_place) get the param's bytes, so the runtime copies
/// nothing after the step. The pass checked what the plan relies on; a
/// plan that disagrees is a compiler bug, reported rather than run.
static LogicalResult inPlaceUpdates(const std::vector<Step> &steps,
                                    ArrayRef<std::pair<size_t, size_t>> updates,
                                    std::vector<Buffer> &buffers) {
  std::vector<long> writer = writerOf(steps, buffers.size());
  // Per buffer, the last step that reads or writes it.
  std::vector<long> lastUse(buffers.size(), -1);
  for (auto [index, step] : llvm::enumerate(steps))
    for (size_t id : step.args)
      lastUse[id] = static_cast<long>(index);
  for (auto [output, param] : updates) {
    if (writer[output] < 0)
      continue;
    const Step &step = steps[writer[output]];
    auto call = dyn_cast_or_null<func::CallOp>(step.op);
    auto kernel = call ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
                             call, call.getCalleeAttr())
                       : func::FuncOp();
    if (!kernel)
      continue;
    unsigned result = llvm::find(step.writes, output) - step.writes.begin();
    auto over = kernel.getResultAttrOfType<IntegerAttr>(result, attr::kInPlace);
    if (!over)
      continue;
    bool readLater = lastUse[param] > writer[output];
    unsigned operand = llvm::find(step.reads, param) - step.reads.begin();
    if (readLater || llvm::count(step.reads, param) != 1 ||
        over.getInt() != static_cast<int64_t>(operand))
      return call.emitError("internal: kernel '")
             << kernel.getSymName() << "' writes result " << result
             << " over its argument " << over.getInt()
             << ", which this step cannot give it";
    buffers[output].sharesBytesOf = static_cast<long>(param);
  }
  return success();
}

/// A pipelined plan's sections and what moves between its stages: a value
/// one stage computes and a later one reads goes forward, stage to stage,
/// after each forward; one an earlier stage's backward reads goes back
/// after each backward; an update step gets what it reads from the stage
/// that has it. A stage's backward steps that its backward carry does not
/// need are its weight-gradient part (the `weight` section), which a
/// zero-bubble schedule runs later.
static FailureOr<PipelineParts> planStages(func::FuncOp model,
                                           std::vector<Step> &steps,
                                           size_t numBuffers) {
  PipelineParts parts;
  parts.stages = model->getAttrOfType<IntegerAttr>(attr::kStagesCount).getInt();
  parts.schedule = model->getAttrOfType<StringAttr>(attr::kSchedule).str();
  parts.axis = model->getAttrOfType<StringAttr>(attr::kPipelineAxis).str();
  parts.forwardCarry.assign(parts.stages, {});
  parts.backwardCarry.assign(parts.stages, {});
  parts.transfers.assign(steps.size(), {});
  for (const Step &step : steps) {
    if (step.phase.empty() || step.stages.empty())
      return step.op->emitError("a step of a pipelined model without its "
                                "stage (loom-place-stages did not run)");
    if (step.phase != "update" && step.stages.size() != 1)
      return step.op->emitError("a per-microbatch step on several stages");
  }
  std::vector<long> writer = writerOf(steps, numBuffers);
  auto addOnce = [](std::vector<size_t> &list, size_t id) {
    if (!llvm::is_contained(list, id))
      list.push_back(id);
  };
  for (auto [index, step] : llvm::enumerate(steps)) {
    if (step.phase == "update")
      continue;
    int64_t t = step.stages.front();
    for (size_t id : step.reads) {
      long w = writer[id];
      if (w < 0 || steps[w].phase == "update")
        continue;
      const Step &source = steps[w];
      int64_t s = source.stages.front();
      if (t > s) {
        if (source.phase != "forward")
          return step.op->emitError("stage ")
                 << t << " reads a value of stage " << s
                 << "'s backward, which runs after it";
        for (int64_t k = s; k < t; ++k)
          addOnce(parts.forwardCarry[k], id);
      } else if (t < s) {
        if (step.phase != "backward")
          return step.op->emitError("the forward of stage ")
                 << t << " reads a value of stage " << s
                 << ", which runs after it";
        for (int64_t k = t + 1; k <= s; ++k)
          addOnce(parts.backwardCarry[k], id);
      }
    }
  }
  // The weight-gradient part: what the backward carry does not need.
  for (int64_t s = 0; s < parts.stages; ++s) {
    llvm::DenseSet<size_t> needed;
    for (size_t id : parts.backwardCarry[s])
      needed.insert(id);
    for (Step &step : llvm::reverse(steps)) {
      if (step.phase != "backward" || step.stages.front() != s)
        continue;
      bool feeds = llvm::any_of(step.writes, [&](size_t id) { return needed.contains(id); });
      if (!feeds) {
        step.phase = "weight";
        continue;
      }
      for (size_t id : step.reads)
        needed.insert(id);
    }
  }
  // The update: what a step reads is on every stage that runs the step.
  std::vector<SmallVector<int64_t>> present(numBuffers);
  for (auto [index, step] : llvm::enumerate(steps)) {
    if (step.phase == "update") {
      for (size_t id : step.reads) {
        long w = writer[id];
        if (w < 0)
          continue; // an argument: on every rank
        SmallVector<int64_t> &at = present[id];
        if (at.empty())
          at = steps[w].stages;
        for (int64_t t : step.stages)
          if (!llvm::is_contained(at, t)) {
            parts.transfers[index].push_back({at.front(), t, id});
            at.push_back(t);
          }
      }
    }
  }
  return parts;
}

/// One memory plan per stage: each temp, param (optimizer state included)
/// and param update is marked with the ranks of the pipeline axis whose
/// steps touch it (those running its steps, the receiver of a transfer).
/// A param and its update get the union of their ranks, since the runtime
/// copies one into the other. Inputs and the other outputs (the loss, which
/// every rank decides by) are on every rank. Received carries stay off the
/// arena until a step reads them, so relaying ranks do not count.
static void markRanks(const PipelineParts &pipeline, const mlir::loom::Grid &grid,
                      const std::vector<Step> &steps,
                      ArrayRef<std::pair<size_t, size_t>> updates,
                      std::vector<Buffer> &buffers) {
  auto at = llvm::find(grid.names, pipeline.axis);
  unsigned ranks = static_cast<unsigned>(grid.sizes[at - grid.names.begin()]);
  llvm::SmallBitVector updateOutput(buffers.size());
  for (auto [output, param] : updates)
    updateOutput.set(output);
  for (auto [id, buffer] : llvm::enumerate(buffers)) {
    bool everyRank = buffer.role == "input" ||
                     (buffer.role == "output" && !updateOutput.test(id));
    buffer.ranks = llvm::SmallBitVector(ranks, everyRank);
  }
  for (auto [index, step] : llvm::enumerate(steps)) {
    for (size_t id : step.args)
      for (int64_t stage : step.stages)
        buffers[id].ranks.set(stage % ranks);
    for (auto [from, to, id] : pipeline.transfers[index])
      buffers[id].ranks.set(to % ranks).set(from % ranks);
  }
  for (auto [output, param] : updates) {
    buffers[param].ranks |= buffers[output].ranks;
    buffers[output].ranks = buffers[param].ranks;
  }
  // A param no step reads still has a place: the first stage's.
  for (Buffer &buffer : buffers)
    if (buffer.role != "temp" && buffer.ranks.none())
      buffer.ranks.set(0);
}

LogicalResult(::loom::addModelBytes)(func::FuncOp model, int64_t &total, int64_t bytes) {
  total = std::min(kMostModelBytes + 1, total + std::min(kMostModelBytes, bytes));
  if (total <= kMostModelBytes)
    return success();
  return model.emitError("model '") << model.getSymName()
                                    << "' needs more than 2^62 bytes of buffers (4 EiB)";
}

FailureOr<::loom::Plan> (::loom::buildPlan)(
    func::FuncOp model,
    const llvm::StringMap<SmallVector<ShapedType>> &scratch,
    const GpuCode *gpu) {
  std::vector<Buffer> buffers;
  llvm::DenseMap<Value, size_t> bufferOf;
  auto addBufferOfType = [&](ShapedType type, std::string name, std::string role) {
    Buffer buffer;
    buffer.name = std::move(name);
    buffer.role = std::move(role);
    buffer.type = RankedTensorType::get(type.getShape(), type.getElementType());
    buffer.bytes = std::max<int64_t>(
        1, buffer.type.getNumElements() *
               (buffer.type.getElementTypeBitWidth() / 8));
    buffers.push_back(std::move(buffer));
  };
  auto addBuffer = [&](Value value, std::string name, std::string role) {
    bufferOf[value] = buffers.size();
    addBufferOfType(cast<ShapedType>(value.getType()), std::move(name),
                    std::move(role));
  };

  Block &body = model.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());
  int64_t numSteps = 0;
  // Steps: kernel calls, collectives and accumulates.
  auto isStep = [](Operation *op) {
    return isa<func::CallOp>(op) || mlir::loom::isPlanStepOp(op);
  };
  for (Operation &op : body.without_terminator())
    numSteps += isStep(&op) && !mlir::loom::joinsGradientBucket(&op) &&
                !::loom::isViewStep(&op);

  // An SPMD program runs over the grid it names.
  std::optional<mlir::loom::Grid> grid;
  if (model->hasAttr(attr::kPartitionOf)) {
    auto gridName = model->getAttrOfType<FlatSymbolRefAttr>(attr::kGrid);
    shard::GridOp gridOp;
    if (gridName)
      gridOp = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(model, gridName);
    if (!gridOp)
      return model.emitError("a partitioned model without its shard.grid");
    grid.emplace(gridOp);
  }
  // The `shard` record's spec ("dp,-") of a `loom.sharding` attribute.
  auto shardingText = [&](ArrayAttr sharding) {
    return sharding ? grid->format(mlir::loom::shardingFromAttr(sharding))
                    : std::string();
  };
  auto shardingOfArg = [&](unsigned i) {
    return shardingText(model.getArgAttrOfType<ArrayAttr>(i, attr::kSharding));
  };

  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (auto name = model.getArgAttrOfType<StringAttr>(i, attr::kInput)) {
      addBuffer(arg, name.str(), "input");
      if (auto bound = model.getArgAttrOfType<IntegerAttr>(i, attr::kIndexBound))
        buffers.back().bound = bound.getInt();
    } else {
      auto param = model.getArgAttrOfType<StringAttr>(i, attr::kParam);
      if (!param)
        return model.emitError("argument ") << i << " is neither an input nor a param";
      addBuffer(arg, param.str(), "param");
      if (auto init = model.getArgAttrOfType<mlir::loom::InitAttr>(i, attr::kInit))
        buffers.back().init = initText(init);
      else
        buffers.back().init = "zeros";
      buffers.back().last = numSteps; // weights stay for saving and training
    }
    buffers.back().first = -1;
    buffers.back().sharding = shardingOfArg(i);
  }

  // Outputs are named by the function's result attributes.
  llvm::DenseMap<Value, std::string> outputName;
  // The front end fuses the return's location from each result's
  // statement, tagged [kResultLocs, name...] (passes that add results keep
  // it; those that rebuild the return may not).
  llvm::StringMap<Location> statementOf;
  if (auto fused = dyn_cast<FusedLoc>(returnOp.getLoc()))
    if (auto names = dyn_cast_or_null<ArrayAttr>(fused.getMetadata());
        names && names.size() == fused.getLocations().size() + 1 &&
        names[0] == StringAttr::get(model.getContext(), attr::kResultLocs))
      for (auto [name, at] : llvm::zip(names.getValue().drop_front(), fused.getLocations()))
        if (auto text = dyn_cast_or_null<StringAttr>(name))
          statementOf.try_emplace(text.getValue(), at);
  for (auto [i, value] : llvm::enumerate(returnOp.getOperands())) {
    StringAttr name = model.getResultAttrOfType<StringAttr>(i, attr::kOutput);
    if (!name)
      name = model.getResultAttrOfType<StringAttr>(i, attr::kLoss);
    std::string text = name ? name.str() : "result" + std::to_string(i);
    Operation *def = value.getDefiningOp();
    auto statement = statementOf.find(text);
    Location at = statement != statementOf.end() ? statement->second : value.getLoc();
    if (!def || !isStep(def)) {
      std::string what = "an input or parameter", example = "x";
      if (auto arg = dyn_cast<BlockArgument>(value))
        for (auto [key, kind] : {std::pair{attr::kInput, "input"},
                                 std::pair{attr::kParam, "param"}})
          if (auto name = model.getArgAttrOfType<StringAttr>(arg.getArgNumber(), key)) {
            example = name.str();
            what = std::string(kind) + " '" + example + "'";
          }
      // `x * 1` is arithmetic, which an integer tensor has none of: its
      // copy is a reshape to its own shape.
      auto type = dyn_cast<RankedTensorType>(value.getType());
      std::string copy = example + " * 1";
      if (type && !isa<FloatType>(type.getElementType())) {
        copy = "reshape(" + example + ", [";
        for (auto [i, size] : llvm::enumerate(type.getShape()))
          copy += (i ? ", " : "") + std::to_string(size);
        copy += "])";
      }
      // The train section's loss is no output the user named.
      if (!model.getResultAttrOfType<StringAttr>(i, attr::kOutput) &&
          model.getResultAttrOfType<StringAttr>(i, attr::kLoss))
        return emitError(at, "the loss is ")
               << what << " itself; compute it (e.g. 'loss = " << copy
               << "') for a loss of its own";
      return emitError(at, "output '")
             << text << "' is " << what << " itself; compute it (e.g. '" << copy
             << "') to get a separate output";
    }
    if (!outputName.try_emplace(value, text).second)
      return emitError(at, "output '")
             << text << "' is the same tensor as output '" << outputName[value]
             << "'";
  }

  // Temporaries are t<id> and s<id>, unless a script named an input, param
  // or output so: then the temporary takes a '_' until its name is free.
  llvm::StringSet<> userNames;
  for (const auto &buffer : buffers)
    userNames.insert(buffer.name);
  for (const auto &named : outputName)
    userNames.insert(named.second);
  auto tempName = [&](char prefix) {
    std::string name = prefix + std::to_string(buffers.size());
    while (userNames.contains(name))
      name += "_";
    return name;
  };

  std::vector<KernelSignature> kernels;
  llvm::StringMap<size_t> kernelIndex;
  // Outputs of an SPMD program carry their split (the runtime gathers).
  llvm::DenseMap<Value, std::string> outputSharding;
  for (auto [i, value] : llvm::enumerate(returnOp.getOperands()))
    if (auto sharding = model.getResultAttrOfType<ArrayAttr>(i, attr::kSharding))
      outputSharding[value] = shardingText(sharding);

  std::vector<Step> steps;
  int64_t step = 0;
  for (Operation &op : body.without_terminator()) {
    auto call = dyn_cast<func::CallOp>(op);
    bool isCollective = isa<shard::ShardDialect>(op.getDialect());
    if (!isStep(&op))
      return op.emitError("'") << op.getName()
                               << "' is left in the model after outlining; "
                                  "the plan holds only kernel calls, "
                                  "collectives and accumulates";
    if (isCollective && !grid)
      return op.emitError("a collective in a model that is not partitioned");
    // A gradient bucket's later all-reduce joins the step of its first:
    // one collective of IN OUT pairs.
    bool joins = mlir::loom::joinsGradientBucket(&op);
    int64_t at = joins ? step - 1 : step;
    // A view (isViewStep): its result gets the bytes its argument has
    // (which live as long as it is read), and no step.
    if (::loom::isViewStep(&op)) {
      long bytes = static_cast<long>(bufferOf.lookup(op.getOperand(0)));
      while (buffers[bytes].sharesBytesOf >= 0)
        bytes = buffers[bytes].sharesBytesOf;
      addBuffer(op.getResult(0), tempName('t'), "temp");
      buffers.back().sharesBytesOf = bytes;
      buffers.back().view = true;
      buffers.back().first = buffers.back().last = at;
      continue;
    }
    std::vector<size_t> args;
    for (Value operand : op.getOperands()) {
      size_t id = bufferOf.lookup(operand);
      // (A view's reads keep the bytes it shares.)
      for (long each = static_cast<long>(id); each >= 0; each = buffers[each].sharesBytesOf)
        buffers[each].last = std::max(buffers[each].last, at);
      args.push_back(id);
    }
    size_t numReads = args.size();
    for (Value result : op.getResults()) {
      auto it = outputName.find(result);
      bool isOutput = it != outputName.end();
      addBuffer(result, isOutput ? it->second : tempName('t'),
                isOutput ? "output" : "temp");
      buffers.back().first = at;
      buffers.back().last = isOutput ? numSteps : at;
      if (isOutput)
        buffers.back().sharding = outputSharding.lookup(result);
      args.push_back(buffers.size() - 1);
    }
    if (joins) {
      Step &bucket = steps.back();
      bucket.args.insert(bucket.args.end(), args.begin(), args.end());
      bucket.reads.push_back(args[0]);
      bucket.writes.push_back(args[1]);
      continue;
    }
    auto addStep = [&](std::string head, std::vector<size_t> args) {
      Step each;
      each.head = std::move(head);
      each.args = args;
      each.reads.assign(args.begin(), args.begin() + numReads);
      each.writes.assign(args.begin() + numReads,
                         args.begin() + numReads + op.getNumResults());
      each.op = &op;
      if (auto phase = op.getAttrOfType<StringAttr>(attr::kPhase))
        each.phase = phase.str();
      if (auto stage = op.getAttrOfType<IntegerAttr>(attr::kStage))
        each.stages.push_back(stage.getInt());
      if (auto stages = op.getAttrOfType<DenseI64ArrayAttr>(attr::kStages))
        each.stages.assign(stages.asArrayRef().begin(), stages.asArrayRef().end());
      steps.push_back(std::move(each));
      ++step;
    };
    if (isa<mlir::loom::AccumulateOp>(op)) {
      // The sum grows over the microbatches: its bytes are the
      // accumulate's from the first step on.
      buffers.back().first = -1;
      addStep("accumulate", std::move(args));
      continue;
    }
    if (isCollective) {
      FailureOr<std::string> head = collectiveHead(&op, *grid);
      if (failed(head))
        return failure();
      addStep(*head, std::move(args));
      continue;
    }
    StringRef callee = call.getCallee();
    // A kernel's temporaries: plan buffers that live for this step only.
    for (ShapedType type : scratch.lookup(callee)) {
      addBufferOfType(type, tempName('s'), "temp");
      buffers.back().first = buffers.back().last = step;
      args.push_back(buffers.size() - 1);
    }
    if (kernelIndex.try_emplace(callee, kernels.size()).second)
      kernels.push_back({callee.str(), (unsigned)args.size(), sourceOf(call.getLoc())});
    addStep("step " + callee.str(), std::move(args));
  }
  // A training step: per param and optimizer state the output the runtime
  // copies into it after every step.
  SmallVector<std::pair<size_t, size_t>> updates; // (output, param) ids
  llvm::StringMap<size_t> paramNamed;
  for (auto [id, buffer] : llvm::enumerate(buffers))
    if (buffer.role == "param")
      paramNamed.try_emplace(buffer.name, id);
  for (auto [i, value] : llvm::enumerate(returnOp.getOperands()))
    if (auto target = model.getResultAttrOfType<StringAttr>(i, attr::kUpdates)) {
      auto param = paramNamed.find(target.getValue());
      if (param == paramNamed.end())
        return emitError(value.getLoc(), "the update of '")
               << target.getValue() << "' has no param of that name";
      updates.push_back({bufferOf.lookup(value), param->second});
    }
  std::optional<PipelineParts> pipeline;
  if (model->hasAttr(attr::kStagesCount)) {
    FailureOr<PipelineParts> parts = planStages(model, steps, buffers.size());
    if (failed(parts))
      return failure();
    pipeline = std::move(*parts);
    markRanks(*pipeline, *grid, steps, updates, buffers);
    // Zero-bubble runs a stage's weight part after its backward (chosen at
    // run time too, whatever the plan's schedule), so bytes that plan order
    // frees before a backward step are not free under it: an output a
    // per-microbatch step writes holds its bytes from the plan's start (a
    // --gradients build's grad.p7, written in a backward, shared them with
    // a temp of an earlier weight part, which then ran after it).
    for (const Step &step : steps)
      if (step.phase != "update")
        for (size_t id : step.writes)
          if (buffers[id].role == "output")
            buffers[id].first = -1;
  }
  // The steps up to the last accumulate run once per microbatch: what they
  // read of the inputs (the step's scalars, which come once per step) must
  // last until the last of them.
  int64_t lastAccumulate = -1;
  for (auto [index, each] : llvm::enumerate(steps))
    if (each.head == "accumulate")
      lastAccumulate = index;
  for (Buffer &buffer : buffers)
    if (buffer.role == "input")
      buffer.last = std::max(buffer.last, lastAccumulate);
  if (failed(inPlaceUpdates(steps, updates, buffers)))
    return failure();
  // The runtime finds inputs, outputs and params by name: a script's name
  // that a compiler-made buffer also takes (an output 'loss' beside the
  // train section's, a param 'grad_norm' beside clipping's) would build an
  // executable that refuses to start ("duplicate buffer name").
  auto withArticle = [](llvm::StringRef role) {
    return (role == "input" || role == "output" ? "an " : "a ") + role.str();
  };
  llvm::StringMap<const Buffer *> named;
  for (const Buffer &buffer : buffers) {
    auto [first, fresh] = named.try_emplace(buffer.name, &buffer);
    if (!fresh)
      return model.emitError("model '")
             << model.getSymName() << "' has two values named '" << buffer.name << "' ("
             << withArticle(first->second->role) << " and " << withArticle(buffer.role)
             << "): the compiler names one of them (the train section's loss, grad_norm, "
                "grad.NAME, next.NAME, opt.NAME, an expert's router); rename the script's";
  }
  int64_t totalBytes = 0;
  for (const Buffer &buffer : buffers)
    if (failed(addModelBytes(model, totalBytes,
                             (buffer.bytes + kAlignment - 1) / kAlignment * kAlignment)))
      return failure();
  Plan plan;
  plan.arenaBytes = placeBuffers(buffers);
  plan.kernels = kernels;
  if (grid)
    for (int64_t size : grid->sizes)
      plan.ranks *= size;
  llvm::raw_string_ostream os(plan.text);
  os << "loom-plan 1\n";
  // A per-rank program is still its model, to the user.
  auto of = model->getAttrOfType<StringAttr>(attr::kPartitionOf);
  os << "model " << (of ? of.getValue() : model.getSymName()) << "\n";
  os << "device cpu\n";
  if (grid) {
    os << "mesh " << grid->op.getSymName();
    for (auto [name, size] : llvm::zip(grid->names, grid->sizes))
      os << " " << name << "=" << size;
    os << "\n";
  }
  if (pipeline)
    os << "pipeline " << pipeline->axis << " " << pipeline->stages << " "
       << pipeline->schedule << "\n";
  os << "arena " << plan.arenaBytes << "\n";
  if (gpu)
    os << "gpu-image " << gpu->arch << " " << gpu->format << " "
       << gpu->image.size() << "\n";
  for (auto [id, buffer] : llvm::enumerate(buffers)) {
    os << "buffer " << id << " " << buffer.name << " " << buffer.role << " "
       << dtypeName(buffer.type.getElementType()) << " ";
    if (buffer.type.getRank() == 0)
      os << "scalar";
    else
      llvm::interleave(buffer.type.getShape(), os, ",");
    os << " " << buffer.offset;
    if (!buffer.init.empty())
      os << " " << buffer.init;
    os << "\n";
    if (!buffer.sharding.empty())
      os << "shard " << id << " " << buffer.sharding << "\n";
    if (buffer.bound)
      os << "bound " << id << " " << buffer.bound << "\n";
    if (buffer.view)
      os << "view " << id << " " << buffer.sharesBytesOf << "\n";
    // Params and their updates that only some stages' ranks hold.
    if (!buffer.ranks.empty() && !buffer.ranks.all() && buffer.role != "temp") {
      os << "held " << id << " ";
      llvm::interleave(buffer.ranks.set_bits(), os, ",");
      os << "\n";
    }
  }
  for (const KernelSignature &kernel : kernels) {
    os << "kernel " << kernel.name << " " << kernel.numArgs;
    if (!kernel.source.empty())
      os << " " << kernel.source;
    os << "\n";
    if (gpu)
      if (auto terms = gpu->termsArgs.find(kernel.name); terms != gpu->termsArgs.end())
        os << "terms " << kernel.name << " " << terms->second << "\n";
  }
  if (gpu) {
    for (const KernelSignature &kernel : kernels) {
      for (const GpuLaunch &launch : gpu->launches.lookup(kernel.name)) {
        os << "launch " << kernel.name << " " << launch.function;
        for (int64_t v : launch.grid)
          os << " " << v;
        for (int64_t v : launch.block)
          os << " " << v;
        for (const std::string &arg : launch.args)
          os << " " << arg;
        if (launch.sharedBytes > 0)
          os << " shared:" << launch.sharedBytes;
        os << "\n";
      }
    }
  }
  std::string section;
  for (auto [index, each] : llvm::enumerate(steps)) {
    if (pipeline) {
      std::string text = each.phase + " ";
      llvm::raw_string_ostream stages(text);
      llvm::interleave(each.stages, stages, ",");
      if (text != section)
        os << "section " << text << "\n";
      section = text;
      for (auto [from, to, id] : pipeline->transfers[index])
        os << "transfer " << from << " " << to << " " << id << "\n";
    }
    os << each.head;
    for (size_t id : each.args)
      os << " " << id;
    os << "\n";
  }
  if (pipeline)
    for (int64_t k = 0; k < pipeline->stages; ++k)
      for (bool forward : {true, false}) {
        const std::vector<size_t> &carry =
            forward ? pipeline->forwardCarry[k] : pipeline->backwardCarry[k];
        if (carry.empty())
          continue;
        os << "carry " << (forward ? "forward " : "backward ") << k;
        for (size_t id : carry)
          os << " " << id;
        os << "\n";
      }
  // A pipelined forward built for one microbatch: how many a run splits
  // the batch into, and how each output makes the whole batch's.
  if (auto count = model->getAttrOfType<IntegerAttr>(attr::kForwardMicrobatches)) {
    os << "microbatches " << count.getInt() << "\n";
    for (auto [i, value] : llvm::enumerate(returnOp.getOperands())) {
      auto kind = model.getResultAttrOfType<StringAttr>(i, attr::kAssemble);
      if (!kind)
        return emitError(value.getLoc(), "an output of a microbatched forward "
                                         "without its loom.assemble");
      os << "assemble " << bufferOf.lookup(value) << " " << kind.getValue() << "\n";
    }
  }
  // A training step: its optimizer, then the updates.
  StringRef modelName = of ? of.getValue() : model.getSymName();
  auto module = model->getParentOfType<ModuleOp>();
  if (!updates.empty() && module)
    for (auto train : module.getOps<mlir::loom::TrainOp>())
      if (train.getModel() == modelName) {
        os << "optimizer " << train.getOptimizer() << " " << train.getSteps();
        for (NamedAttribute hyper : train.getHyperparameters())
          os << " " << hyper.getName().getValue() << "="
             << formatDouble(cast<FloatAttr>(hyper.getValue()).getValueAsDouble());
        writeTrainSettings(os, train);
        if (train.getMicrobatches() > 1)
          os << " microbatches=" << train.getMicrobatches();
        os << "\n";
      }
  for (auto [output, param] : updates)
    os << "update " << output << " " << param << "\n";
  // The checksum covers every byte before the `end` line.
  uint32_t checksum = planChecksum(plan.text);
  os << "end " << llvm::format_hex_no_prefix(checksum, 8) << "\n";
  return plan;
}
