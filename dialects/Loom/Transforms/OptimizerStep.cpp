//===- OptimizerStep.cpp - The optimizer update of a training step --------===//
//
// Turns the gradient program loom-autodiff builds into one training step:
// each param's gradient feeds the update rule of the train section's
// optimizer, written as loom ops with exactly the arithmetic of
// torch.optim (SGD; Adam; AdamW with decoupled decay), and the step returns
// the new params and optimizer state (`next.<name>`, `loom.updates`) for
// the runtime to copy back after every step. What changes from step to step
// (the learning rate, Adam's bias corrections) comes in as rank-0 inputs
// `opt.*` that the runtime computes (docs/runtime.md, "Training").
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/VjpBuilders.h"
#include "Loom/Transforms/DeadOps.h"
#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMOPTIMIZERSTEP
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The hyperparameters, with torch.optim's defaults for those the script
/// leaves out.
struct Hyper {
  double lr, momentum, beta1, beta2, eps, weightDecay;
};

/// One training step built in place of a gradient program.
class StepBuilder {
public:
  StepBuilder(func::FuncOp model, TrainOp train, double bucketMb)
      : model(model), train(train), b(model.getContext()),
        bucketLimit(bucketMb > 0 ? gradientBucketBytes(bucketMb)
                                 : std::numeric_limits<int64_t>::max()) {}
  LogicalResult run();

private:
  /// A new argument after the others, with `role`; optimizer state (a
  /// param, `role` kParam) starts at zeros and is annotated with
  /// `sharding` where it has one.
  Value addArgument(RankedTensorType type, NamedAttribute role,
                    Value sharding = Value());
  /// A shard.sharding of `axes` (per dim) on the step's grid, at the
  /// body's start, where every annotation can use it.
  Value shardingAtStart(ArrayRef<SmallVector<int16_t>> axes);
  /// ZeRO-1: the data-parallel axes (those that split the batch, dim 0 of
  /// the inputs), or false if no input is split so.
  bool findDataParallelAxes();
  /// ZeRO-1: `param`'s sharding with the data-parallel axes added on its
  /// first whole dim they divide, as a shard.sharding at the body's start;
  /// null if none is.
  Value zeroShardingOf(BlockArgument param);
  /// `value` annotated with `sharding`.
  Value annotate(Value value, Value sharding) {
    return shard::ShardOp::create(b, loc, value, sharding, false).getResult();
  }
  Value scalarInput(StringRef name);
  Value cst(double value) { return vjp::scalar(b, loc, value); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  /// Unscales the gradients in place; returns their global L2 norm
  /// (after unscaling), and in `clip` the factor clip_grad_norm scales
  /// every gradient by (null without it), which each param's update
  /// applies: one pass over a gradient, and no kernel reading every
  /// gradient of the model (a deep model's largest kernel, compiled anew
  /// for each depth).
  Value prepareGradients(ArrayRef<BlockArgument> params,
                         llvm::StringMap<Value> &grads, Value &clip);
  /// torch's clipping factor min(1, `maxNorm` / (`norm` + 1e-6)), exactly 1
  /// where it does not clip.
  Value clipFactor(double maxNorm, Value norm);
  StringRef paramName(BlockArgument param) {
    return model.getArgAttrOfType<StringAttr>(param.getArgNumber(), attr::kParam)
        .getValue();
  }

  func::FuncOp model;
  TrainOp train;
  OpBuilder b;
  /// The attributes of the arguments addArgument added to the body, which
  /// run adds to the function's at its end.
  SmallVector<DictionaryAttr> addedArgAttrs;
  Location loc = UnknownLoc::get(model.getContext());
  llvm::StringMap<Value> scalars;
  /// The bytes of params one update bucket holds at most.
  int64_t bucketLimit;
  /// (value, name of the param or state it becomes) per new result.
  SmallVector<std::pair<Value, std::string>> updates;
  /// ZeRO-1's data-parallel axes of `grid`, and how many ranks they span.
  shard::GridOp grid;
  SmallVector<int16_t> dataAxes;
  int64_t dataWays = 1;
};
} // namespace

/// The terms of `sum`, a gradient: the operands of the f32 adds (of one
/// shape, read by nothing else) that make it.
static void collectTerms(Value sum, SmallVectorImpl<Value> &terms) {
  auto add = sum.getDefiningOp<AddOp>();
  if (add && sum.hasOneUse() && add.getLhs().getType() == add.getType() &&
      add.getRhs().getType() == add.getType()) {
    collectTerms(add.getLhs(), terms);
    collectTerms(add.getRhs(), terms);
    return;
  }
  terms.push_back(sum);
}

// The zeros loom-autodiff gives a param the loss does not read (a splat
// broadcast, perhaps annotated with the param's layout).
static bool isUnreadParamGradient(Value gradient) {
  if (auto annotation = gradient.getDefiningOp<shard::ShardOp>())
    gradient = annotation.getSrc();
  if (auto broadcast = gradient.getDefiningOp<BroadcastOp>())
    gradient = broadcast.getInput();
  auto zero = gradient.getDefiningOp<ConstantOp>();
  return zero && zero.getValue().isZero();
}

/// The pipeline stage of the op defining `v`, or -1 (none, or not placed).
static int64_t stageOfDefiningOp(Value v) {
  Operation *def = v.getDefiningOp();
  auto stage = def ? def->getAttrOfType<IntegerAttr>(attr::kStage) : nullptr;
  return stage ? stage.getInt() : -1;
}

/// The mean over the microbatches of gradient `value`. A gradient whose
/// terms different pipeline stages compute (a tied embedding's: the
/// lookup's on the first stage, the head's on the last) is accumulated
/// stage by stage and the stages' sums added once a step: adding the terms
/// per microbatch sent one from stage to stage once per microbatch
/// (GPT-3's head part of `wte`: 315 MB, 192 times a step). The sum is
/// linear, so a data-parallel sum over the ranks still comes once, after.
static Value accumulateByStage(OpBuilder &b, Value value, int64_t microbatches) {
  SmallVector<Value> terms;
  collectTerms(value, terms);
  llvm::MapVector<int64_t, SmallVector<Value>> byStage;
  for (Value term : terms)
    byStage[stageOfDefiningOp(term)].push_back(term);
  if (byStage.size() < 2 || byStage.count(-1))
    return AccumulateOp::create(b, value.getLoc(), value, microbatches);
  Value total;
  for (auto &[stage, stageTerms] : byStage) {
    Value sum = stageTerms.front();
    for (Value term : ArrayRef(stageTerms).drop_front()) {
      auto add = AddOp::create(b, value.getLoc(), sum, term);
      add->setDiscardableAttrs(term.getDefiningOp()->getDiscardableAttrDictionary());
      sum = add;
    }
    Value mean = AccumulateOp::create(b, sum.getLoc(), sum, microbatches);
    total = total ? AddOp::create(b, value.getLoc(), total, mean).getResult() : mean;
  }
  return total;
}

/// The sharding annotation of the argument `arg`, if it has one.
static shard::ShardOp annotationOf(Value arg) {
  for (Operation *user : arg.getUsers())
    if (auto annotation = dyn_cast<shard::ShardOp>(user))
      return annotation;
  return {};
}

/// The shard.sharding `annotation` uses, if any.
static shard::ShardingOp shardingOpOf(shard::ShardOp annotation) {
  return annotation ? annotation.getSharding().getDefiningOp<shard::ShardingOp>()
                    : shard::ShardingOp();
}

/// The split axes of each dim of `annotation` (all whole without one).
static SmallVector<SmallVector<int16_t>> splitAxesOf(shard::ShardOp annotation,
                                                     int64_t rank) {
  SmallVector<SmallVector<int16_t>> axes(rank);
  if (shard::ShardingOp sharding = shardingOpOf(annotation))
    for (auto [d, split] : llvm::enumerate(sharding.getSplitAxes().getAxes()))
      if (static_cast<int64_t>(d) < rank)
        axes[d].assign(split.asArrayRef().begin(), split.asArrayRef().end());
  return axes;
}

bool StepBuilder::findDataParallelAxes() {
  // The batch's axes: of the axis sets splitting dim 0 of an input over
  // more than one rank, one that splits no param (a param's axes are
  // tensor or expert parallel) before one that does, then the set of the
  // most inputs. The first input's had been taken: `k : [D, F] shard
  // [tp, _]` declared before the batch made ZeRO split over tp.
  Block &body = model.getBody().front();
  llvm::DenseSet<int16_t> paramAxes;
  for (BlockArgument arg : body.getArguments())
    if (model.getArgAttr(arg.getArgNumber(), attr::kParam))
      for (const SmallVector<int16_t> &split :
           splitAxesOf(annotationOf(arg), vjp::typeOf(arg).getRank()))
        paramAxes.insert(split.begin(), split.end());
  SmallVector<std::pair<SmallVector<int16_t>, unsigned>> candidates;
  for (BlockArgument arg : body.getArguments()) {
    if (!model.getArgAttr(arg.getArgNumber(), attr::kInput))
      continue;
    shard::ShardingOp sharding = shardingOpOf(annotationOf(arg));
    if (!sharding || sharding.getSplitAxes().getAxes().empty() ||
        sharding.getSplitAxes().getAxes().front().empty())
      continue;
    auto inputGrid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
        model, sharding.getGridAttr());
    if (!inputGrid)
      continue;
    ArrayRef<int16_t> axes = sharding.getSplitAxes().getAxes().front().asArrayRef();
    int64_t ways = 1;
    for (int16_t axis : axes)
      ways *= inputGrid.getShape()[axis];
    if (ways < 2)
      continue;
    grid = inputGrid;
    auto *known = llvm::find_if(candidates, [&](const auto &c) {
      return ArrayRef<int16_t>(c.first) == axes;
    });
    if (known == candidates.end())
      candidates.push_back({SmallVector<int16_t>(axes), 1});
    else
      ++known->second;
  }
  if (candidates.empty())
    return false;
  auto rank = [&](const std::pair<SmallVector<int16_t>, unsigned> &c) {
    bool splitsParam = llvm::any_of(c.first, [&](int16_t a) { return paramAxes.contains(a); });
    return std::make_pair(!splitsParam, c.second);
  };
  const auto *best = candidates.begin(); // the first of equals
  for (const auto *c = candidates.begin(); c != candidates.end(); ++c)
    if (rank(*c) > rank(*best))
      best = c;
  dataAxes.assign(best->first.begin(), best->first.end());
  for (int16_t axis : dataAxes)
    dataWays *= grid.getShape()[axis];
  return true;
}

Value StepBuilder::zeroShardingOf(BlockArgument param) {
  if (dataAxes.empty())
    return Value();
  auto type = vjp::typeOf(param);
  SmallVector<SmallVector<int16_t>> axes =
      splitAxesOf(annotationOf(param), type.getRank());
  for (const SmallVector<int16_t> &split : axes)
    for (int16_t axis : split)
      if (llvm::is_contained(dataAxes, axis))
        return Value(); // already split over them
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (!axes[d].empty() || type.getDimSize(d) % dataWays != 0)
      continue;
    axes[d] = dataAxes;
    return shardingAtStart(axes);
  }
  return Value();
}

Value StepBuilder::shardingAtStart(ArrayRef<SmallVector<int16_t>> axes) {
  SmallVector<shard::GridAxesAttr> split;
  for (const SmallVector<int16_t> &each : axes)
    split.push_back(b.getDenseI16ArrayAttr(each));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&model.getBody().front());
  return shard::ShardingOp::create(b, loc, grid.getSymName(), split);
}

Value StepBuilder::addArgument(RankedTensorType type, NamedAttribute role,
                               Value sharding) {
  SmallVector<NamedAttribute> attrs{role};
  if (role.getName() == attr::kParam)
    attrs.push_back(b.getNamedAttr(attr::kInit,
                                   InitAttr::get(b.getContext(), InitKind::zeros, DenseF64ArrayAttr())));
  // On the block now, in the function's type and attributes at the end
  // (run): func.insertArgument rebuilds both, which per argument made a
  // deep model's step quadratic (0.3 s of a 96-layer GPT's compile).
  Value arg = model.getBody().front().addArgument(type, loc);
  addedArgAttrs.push_back(b.getDictionaryAttr(attrs));
  if (!sharding)
    return arg;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(sharding);
  return annotate(arg, sharding);
}

Value StepBuilder::scalarInput(StringRef name) {
  Value &input = scalars[name];
  if (!input)
    input = addArgument(RankedTensorType::get({}, b.getF32Type()),
                        b.getNamedAttr(attr::kInput, b.getStringAttr(name)));
  return input;
}

Value StepBuilder::clipFactor(double maxNorm, Value norm) {
  // torch's min(1, C / (norm + 1e-6)) as C / (C + relu(norm + 1e-6 - C)),
  // elementwise, so that it fuses into the update kernels: exactly 1 while
  // norm + 1e-6 <= C, whatever C (1e8 too: x - relu(x - 1) rounded x - 1
  // from 2^24 on, which froze or doubled every step); above, exactly
  // torch's quotient where norm + 1e-6 <= 2C (the difference is exact), at
  // most an ulp from it beyond. (A min over a concatenated pair made
  // kernels of their own, one of a lone constant, which the GPU lowering
  // did not take.)
  Value c = cst(maxNorm);
  Value total = add(norm, cst(1e-6));
  Value excess = ReluOp::create(b, loc, SubOp::create(b, loc, total, c));
  return DivOp::create(b, loc, c, add(c, excess));
}

Value StepBuilder::prepareGradients(ArrayRef<BlockArgument> params,
                                    llvm::StringMap<Value> &grads, Value &clip) {
  // As torch's GradScaler.unscale_ and then clip_grad_norm_: the norm is
  // that of the true gradients.
  Value scale = scalars.lookup("opt.loss_scale");
  // The squares are summed per set of mesh axes the gradients are split
  // over, then the sets' sums: a split gradient's sum of squares is
  // partial over its axes, and partial sums added together stay partial,
  // so the partitioner sums each set over the mesh once (one 4-byte
  // all-reduce for all tp-split params, not one per param). Unsplit, one
  // set: the sum in param order, as before. In a pipelined model the sets
  // are also per stage, and each stage adds its own first: a sum in param
  // order crossed from stage to stage (4-byte sends, 4 each way a step on
  // two stages), where the stages' totals cross once.
  struct SquaresSet {
    int64_t stage;
    SmallVector<int16_t> axes;
    Value sum;
  };
  SmallVector<SquaresSet> sets;
  // The stage whose values a gradient is (-1: none, or several: a tied
  // embedding's parts), through ZeRO's annotation and the microbatches'
  // accumulate.
  auto stageOf = [](Value v) -> int64_t {
    for (;;) {
      if (auto annotation = v.getDefiningOp<shard::ShardOp>())
        v = annotation.getSrc();
      else if (auto accumulate = v.getDefiningOp<AccumulateOp>())
        v = accumulate.getInput();
      else
        return stageOfDefiningOp(v);
    }
  };
  for (BlockArgument param : params) {
    Value &g = grads[paramName(param)];
    int64_t rank = vjp::typeOf(g).getRank();
    int64_t stage = stageOf(g);
    auto annotation = g.getDefiningOp<shard::ShardOp>(); // ZeRO's split
    SmallVector<int16_t> axes;
    for (const SmallVector<int16_t> &split :
         splitAxesOf(annotation ? annotation : annotationOf(param), rank))
      axes.append(split.begin(), split.end());
    llvm::sort(axes);
    axes.erase(llvm::unique(axes), axes.end());
    if (scale)
      g = DivOp::create(b, loc, g, scale);
    Value squares = mul(g, g);
    for (int64_t i = 0; i < rank; ++i)
      squares = SumOp::create(b, loc, squares, 0, false);
    squares = vjp::toF32(b, loc, squares);
    auto set = llvm::find_if(sets, [&](const SquaresSet &each) {
      return each.stage == stage && each.axes == axes;
    });
    if (set == sets.end())
      sets.push_back({stage, axes, squares});
    else
      set->sum = add(set->sum, squares);
  }
  // Each stage's sets, then the stages' totals, in order of appearance.
  SmallVector<std::pair<int64_t, Value>> stages;
  for (const SquaresSet &set : sets) {
    auto total = llvm::find_if(stages, [&](const auto &each) { return each.first == set.stage; });
    if (total == stages.end())
      stages.push_back({set.stage, set.sum});
    else
      total->second = add(total->second, set.sum);
  }
  Value sumSquares;
  for (auto &[stage, sum] : stages)
    sumSquares = sumSquares ? add(sumSquares, sum) : sum;
  Value norm = SqrtOp::create(b, loc, sumSquares ? sumSquares : cst(0.0));
  clip = {};
  if (FloatAttr maxNorm = train.getClipGradNormAttr())
    clip = clipFactor(maxNorm.getValueAsDouble(), norm);
  return norm;
}

LogicalResult StepBuilder::run() {
  StringRef kind = train.getOptimizer();
  auto hyper = [&](StringRef name, double fallback) {
    auto value = train.getHyperparameters().getAs<FloatAttr>(name);
    return value ? value.getValueAsDouble() : fallback;
  };
  bool adamw = kind == "adamw";
  Hyper h{hyper("lr", TrainOp::defaultLearningRate(kind)), hyper("momentum", 0.0),
          hyper("beta1", 0.9), hyper("beta2", 0.999), hyper("eps", 1e-8),
          hyper("weight_decay", adamw ? 1e-2 : 0.0)};
  // The values used, recorded for the runtime (the plan's `optimizer`),
  // which computes the per-step scalars from them.
  SmallVector<NamedAttribute> used{b.getNamedAttr("lr", b.getF64FloatAttr(h.lr))};
  if (kind == "sgd") {
    used.push_back(b.getNamedAttr("momentum", b.getF64FloatAttr(h.momentum)));
  } else {
    used.push_back(b.getNamedAttr("beta1", b.getF64FloatAttr(h.beta1)));
    used.push_back(b.getNamedAttr("beta2", b.getF64FloatAttr(h.beta2)));
    used.push_back(b.getNamedAttr("eps", b.getF64FloatAttr(h.eps)));
  }
  used.push_back(b.getNamedAttr("weight_decay", b.getF64FloatAttr(h.weightDecay)));
  train.setHyperparametersAttr(b.getDictionaryAttr(used));
  Block &body = model.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  b.setInsertionPoint(ret);

  // The model's results without the gradients, which the update consumes.
  // With microbatches, what runs once per microbatch ends in accumulates
  // (the mean over the microbatches) of the gradients and of the loss; the
  // model's other outputs, one microbatch's each, are left out.
  int64_t microbatches = static_cast<int64_t>(train.getMicrobatches());
  auto accumulate = [&](Value value) -> Value {
    if (microbatches < 2)
      return value;
    return accumulateByStage(b, value, microbatches);
  };
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  llvm::StringMap<Value> grads;
  llvm::StringSet<> unread;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    auto name = model.getResultAttrOfType<StringAttr>(i, attr::kOutput);
    if (name && name.getValue().starts_with("grad.")) {
      // torch.optim skips a param whose .grad is None: no weight decay,
      // no moments, and its zeros are not summed over the data-parallel
      // ranks either.
      if (isUnreadParamGradient(value))
        unread.insert(name.getValue().drop_front(5));
      else
        grads[name.getValue().drop_front(5)] = accumulate(value);
      continue;
    }
    bool isLoss = model.getResultAttr(i, attr::kLoss) != nullptr;
    if (microbatches > 1 && !isLoss)
      continue;
    results.push_back(isLoss ? accumulate(value) : value);
    resultAttrs.push_back(model.getResultAttrDict(i));
  }
  SmallVector<BlockArgument> params;
  for (BlockArgument arg : body.getArguments()) {
    if (auto name = model.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam)) {
      if (grads.count(name.getValue()))
        params.push_back(arg);
      if (unread.contains(name.getValue()))
        emitWarning(arg.getLoc(), "param '")
            << name.getValue() << "' does not affect the loss: training "
            << "leaves it as initialized (torch.optim skips it too)";
    }
    // The scalars loom-autodiff added (opt.loss_scale).
    if (auto name = model.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kInput))
      if (name.getValue().starts_with("opt."))
        scalars[name.getValue()] = arg;
  }
  // Autodiff gives every float param a gradient (zeros where the loss does
  // not read it), so none means a model without one: a step would update
  // nothing, and the runtime would find no optimizer to run.
  // No gradient results at all: the pass ran before loom-autodiff (by
  // hand); "no float param" had been said of a model with many.
  bool hasFloatParam = llvm::any_of(body.getArguments(), [&](BlockArgument arg) {
    return model.getArgAttr(arg.getArgNumber(), attr::kParam) &&
           isa<FloatType>(vjp::typeOf(arg).getElementType());
  });
  if (params.empty() && unread.empty() && hasFloatParam)
    return emitError(train.getLoc(), "loom-optimizer-step updates the params of model '")
           << model.getSymName() << "' from their gradients, and it returns none: run "
           << "loom-autodiff first";
  if (params.empty() && !unread.empty())
    return emitError(train.getLoc(), "nothing to train: the loss of model '")
           << model.getSymName() << "' reads none of its params";
  if (params.empty())
    return emitError(train.getLoc(), "nothing to train: model '")
           << model.getSymName() << "' has no float param";
  loc = train.getLoc();
  // The gradients' producers, named for loom-bucket-gradients.
  auto tagGradients = [&] {
    for (BlockArgument param : params)
      if (Operation *def = grads.lookup(paramName(param)).getDefiningOp())
        def->setAttr(attr::kGradientOf, b.getStringAttr(paramName(param)));
  };
  tagGradients();
  // The step's grid, if the model has a mesh: replicated params' updates
  // are annotated on it.
  if (auto module = model->getParentOfType<ModuleOp>())
    for (auto each : module.getOps<shard::GridOp>()) {
      grid = each;
      break;
    }
  // ZeRO-1: each param's gradient, optimizer state and update live split
  // over the data-parallel axes. The annotation on the gradient turns its
  // partial sums into a reduce-scatter; the new param, annotated as the
  // param, is all-gathered.
  bool hasState = kind != "sgd" || h.momentum > 0;
  DenseMap<Value, Value> zeroShardings;
  bool splitsState = train.getZeroAttr() && hasState && findDataParallelAxes();
  if (splitsState)
    for (BlockArgument param : params)
      if (Value sharding = zeroShardingOf(param)) {
        zeroShardings[param] = sharding;
        Value &g = grads[paramName(param)];
        g = annotate(g, sharding);
      }
  // Said, not ignored: a user who asked for ZeRO expects the state split.
  if (train.getZeroAttr() && !splitsState)
    emitWarning(train.getLoc())
        << "zero 1 (or --zero) has no effect: "
        << (!hasState ? "sgd without momentum keeps no optimizer state to split"
                      : "no mesh axis of more than one rank splits the inputs' "
                        "batch (dimension 0) to split the state over");
  // Every dropout of the step, the forward's and its gradient's through the
  // same mask, draws from the step's keys: the run's seed and step, and
  // the microbatch (the runtime's). A forward without them drops nothing.
  // (After ZeRO's look at the arguments: the new ones have no attributes
  // until the step is built, and reading theirs had crashed.)
  SmallVector<DropoutOp> dropouts;
  model.walk([&](DropoutOp op) {
    if (op.getKeys().empty())
      dropouts.push_back(op);
  });
  if (!dropouts.empty()) {
    SmallVector<Value> keys{scalarInput("opt.dropout_seed"),
                            scalarInput("opt.dropout_microbatch")};
    for (DropoutOp op : dropouts)
      op.getKeysMutable().assign(keys);
  }
  Value clip;
  Value norm = prepareGradients(params, grads, clip);
  tagGradients(); // unscaled: the sums may come before or after
  results.push_back(norm);
  resultAttrs.push_back(b.getDictionaryAttr(
      b.getNamedAttr(attr::kOutput, b.getStringAttr("grad_norm"))));
  // The params' updates are grouped into update buckets of at most
  // `bucketMb` MiB of params, in order (one too large is a bucket of its
  // own), and a bucket is cut where the layer instance changes (the name
  // before its last dot: `block.3` of `block.3.w1`): every op of a param's
  // update carries its bucket's number (attr::kUpdateBucket), and the
  // kernel outlining makes each bucket one kernel, which the GPU runs as
  // one launch. Cut at the layers, the buckets of every layer are the same
  // kernel, which is compiled once (loom-dedup-kernels): a bucket of many
  // layers in one kernel compiled slower than the step's other kernels
  // together on the CPU.
  int64_t bucket = 0, bucketBytes = 0;
  std::optional<StringRef> instance;
  for (BlockArgument param : params) {
    StringRef name = paramName(param);
    auto type = vjp::typeOf(param);
    int64_t bytes = type.getNumElements() * 4;
    auto [prefix, last] = name.rsplit('.');
    StringRef layer = last.empty() ? StringRef() : prefix;
    if (instance && (*instance != layer ||
                     (bucketBytes > 0 && bucketBytes + bytes > bucketLimit))) {
      ++bucket;
      bucketBytes = 0;
    }
    instance = layer;
    bucketBytes += bytes;
    // Every op the rest of this iteration creates is this param's update.
    Operation *before = b.getInsertionPoint() == b.getBlock()->begin()
                            ? nullptr
                            : &*std::prev(b.getInsertionPoint());
    llvm::scope_exit tagUpdate([&, bucket] {
      Block::iterator first =
          before ? std::next(before->getIterator()) : b.getBlock()->begin();
      for (Operation &op : llvm::make_range(first, b.getInsertionPoint()))
        op.setAttr(attr::kUpdateBucket, b.getI64IntegerAttr(bucket));
    });
    if (!type.getElementType().isF32())
      return emitError(param.getLoc(), "training param '")
             << name << "' of type " << type
             << " needs an f32 master weight (loom-master-weights)";
    loc = param.getLoc();
    // The annotated param: what the forward reads.
    shard::ShardOp annotation = annotationOf(param);
    Value p = annotation ? annotation.getResult() : Value(param);
    Value g = grads.lookup(name);
    if (clip)
      g = mul(g, clip);
    // Every new value is annotated with the layout of what it replaces (the
    // update copies it into that buffer): the param's, or its state's
    // (ZeRO's split, when it has one). A gradient may arrive in another
    // layout (sequence parallelism, ZeRO).
    Value paramSharding = annotation ? annotation.getSharding() : Value();
    Value stateSharding = zeroShardings.lookup(param);
    // A replicated param's new value is replicated too, whatever layout its
    // gradient arrives in (under ZeRO: gathered whole).
    if (!paramSharding && grid)
      paramSharding = shardingAtStart(SmallVector<SmallVector<int16_t>>(type.getRank()));
    if (!stateSharding)
      stateSharding = paramSharding;
    auto laidOut = [&](Value next, Value sharding) {
      return sharding ? annotate(next, sharding) : next;
    };
    // Weight decay applies to matrices and embeddings only (rank >= 2),
    // not to biases and norm scales: an expert's by its declared rank, not
    // its stored [E, ...].
    int64_t declaredRank =
        type.getRank() - (model.getArgAttr(param.getArgNumber(), attr::kExpertParam) ? 1 : 0);
    bool decays = h.weightDecay > 0 && declaredRank >= 2;
    auto state = [&](StringRef what) {
      std::string stateName = ("opt." + what + "." + name).str();
      Value arg = addArgument(
          type, b.getNamedAttr(attr::kParam, b.getStringAttr(stateName)),
          stateSharding);
      return std::make_pair(arg, stateName);
    };
    if (kind == "sgd") {
      // torch.optim.SGD: d = g + wd p; buf = momentum buf + d; p -= lr buf.
      Value d = decays ? add(g, mul(p, cst(h.weightDecay))) : g;
      if (h.momentum > 0) {
        auto [buf, bufName] = state("momentum");
        d = add(mul(buf, cst(h.momentum)), d);
        updates.push_back({laidOut(d, stateSharding), bufName});
      }
      updates.push_back(
          {laidOut(SubOp::create(b, loc, p, mul(d, scalarInput("opt.lr"))), paramSharding),
           name.str()});
      continue;
    }
    // torch.optim.Adam / AdamW: Adam adds wd p to the gradient, AdamW
    // scales p by (1 - lr wd) first (decoupled); then
    // m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2 and
    // p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
    if (decays && !adamw)
      g = add(g, mul(p, cst(h.weightDecay)));
    Value start = decays && adamw ? mul(p, scalarInput("opt.decay")) : p;
    auto [m, mName] = state("m");
    auto [v, vName] = state("v");
    Value m1 = add(mul(m, cst(h.beta1)), mul(g, cst(1.0 - h.beta1)));
    Value v1 = add(mul(v, cst(h.beta2)), mul(mul(g, g), cst(1.0 - h.beta2)));
    Value denom = add(DivOp::create(b, loc, SqrtOp::create(b, loc, v1),
                                    scalarInput("opt.bc2_sqrt")),
                      cst(h.eps));
    Value step = mul(DivOp::create(b, loc, m1, denom), scalarInput("opt.step_size"));
    updates.push_back(
        {laidOut(SubOp::create(b, loc, start, step), paramSharding), name.str()});
    updates.push_back({laidOut(m1, stateSharding), mName});
    updates.push_back({laidOut(v1, stateSharding), vName});
  }
  for (auto &[value, target] : updates) {
    results.push_back(value);
    resultAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr(attr::kOutput, b.getStringAttr("next." + target)),
         b.getNamedAttr(attr::kUpdates, b.getStringAttr(target))}));
  }
  ret->setOperands(results);
  SmallVector<DictionaryAttr> argAttrs;
  model.getAllArgAttrs(argAttrs);
  argAttrs.append(addedArgAttrs.begin(), addedArgAttrs.end());
  model.setFunctionType(FunctionType::get(model.getContext(),
                                          body.getArgumentTypes(),
                                          ValueRange(results).getTypes()));
  model.setAllArgAttrs(argAttrs);
  model.setAllResultAttrs(resultAttrs);
  return success();
}

namespace {
struct LoomOptimizerStep
    : public loom::impl::LoomOptimizerStepBase<LoomOptimizerStep> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (TrainOp train : module.getOps<TrainOp>()) {
      auto model = module.lookupSymbol<func::FuncOp>(train.getModelAttr());
      if (!model || failed(StepBuilder(model, train, bucketMb).run()))
        return signalPassFailure();
      // What the step no longer returns goes with what only it read: an
      // MoE block whose result is unused kept its routing and the routing
      // counts of the forward's `moe_stats` output, which the plan then
      // computed after the last accumulate from a microbatch's values (a
      // plan the runtime refuses).
      eraseDeadOps(model.getBody().front());
    }
  }
};
} // namespace
