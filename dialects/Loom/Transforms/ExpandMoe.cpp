//===- ExpandMoe.cpp - Rewrite loom.moe into routed ordinary ops ----------===//
//
// A loom.moe becomes: the router matmul in f32 and its softmax, the
// routing decision (loom.moe_route), the gates, the gather of tokens into
// an [experts * capacity, D] slot buffer, the expert body run once for all
// experts over [experts, capacity, ...] (every value of the body gains a
// leading expert dim, which the expert params already have), and the
// weighted gather back. Everything after is ordinary loom IR: autodiff
// differentiates it and the partitioner splits the expert dim like any
// batch dim, so the experts split over their axis with no MoE-specific
// rule.
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/VjpBuilders.h"
#include "Loom/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMEXPANDMOE
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;
using vjp::reshapeTo;
using vjp::typeOf;

/// `type` with a leading dim of size `experts`.
static RankedTensorType withExperts(RankedTensorType type, int64_t experts) {
  SmallVector<int64_t> shape{experts};
  llvm::append_range(shape, type.getShape());
  return type.clone(shape);
}

namespace {
/// Clones an expert body over all experts at once.
class BodyBatcher {
public:
  BodyBatcher(OpBuilder &b, int64_t experts) : b(b), experts(experts) {}

  void bind(Value unbatched, Value batched) { map.map(unbatched, batched); }
  Value lookup(Value unbatched) { return map.lookup(unbatched); }
  LogicalResult batch(Operation *op);

private:
  /// A batched operand of an op whose result has rank `rank` (unbatched):
  /// a lower-rank one (broadcast from the trailing end) gets size-1 dims
  /// after the expert dim, so that experts still line up.
  Value alignedOperand(Value operand, int64_t rank);

  bool isBatched(Value v) { return map.contains(v) && !constants.contains(v); }

  OpBuilder &b;
  int64_t experts;
  IRMapping map;
  /// Body constants, cloned as they are: they broadcast against any expert.
  llvm::SmallPtrSet<Value, 4> constants;
};
} // namespace

Value BodyBatcher::alignedOperand(Value operand, int64_t rank) {
  Value batched = map.lookup(operand);
  if (constants.contains(operand))
    return batched;
  int64_t own = typeOf(operand).getRank();
  if (own >= rank)
    return batched;
  SmallVector<int64_t> shape{experts};
  shape.append(rank - own, 1);
  llvm::append_range(shape, typeOf(operand).getShape());
  return reshapeTo(b, operand.getLoc(), batched, shape);
}

LogicalResult BodyBatcher::batch(Operation *op) {
  // Said of the dropout the script wrote, not of its positions' aranges,
  // which come first.
  for (Operation *user : op->getUsers())
    if (isa<DropoutOp>(user))
      return emitError(user->getLoc(), "dropout is not supported in an MoE expert body yet");
  if (isa<DropoutOp>(op))
    return emitError(op->getLoc(), "dropout is not supported in an MoE expert body yet");
  if (op->hasTrait<OpTrait::ConstantLike>()) {
    b.clone(*op, map);
    constants.insert(op->getResult(0));
    return success();
  }
  auto result = dyn_cast<RankedTensorType>(op->getNumResults() == 1
                                               ? op->getResult(0).getType()
                                               : Type());
  if (!result && !isa<SplitOp>(op))
    return emitError(op->getLoc(), "'") << op->getName()
                              << "' is not supported in an MoE expert body yet";
  int64_t rank = result ? result.getRank() : 0;

  SmallVector<Value> operands;
  NamedAttrList attrs(op->getAttrs());
  auto shiftAxis = [&](StringRef name, int64_t inputRank) {
    int64_t axis = cast<IntegerAttr>(op->getAttr(name)).getInt();
    if (axis < 0)
      axis += inputRank;
    attrs.set(name, b.getI64IntegerAttr(axis + 1));
  };
  if (isBroadcastBinary(op)) {
    for (Value operand : op->getOperands())
      operands.push_back(alignedOperand(operand, rank));
  } else if (auto matmul = dyn_cast<MatmulOp>(op)) {
    // [E, ..., M, K] x [E, K, N]: the expert dims line up once the lower
    // rank operand has the other's batch dims as ones.
    for (Value operand : op->getOperands()) {
      if (!isBatched(operand))
        return emitError(op->getLoc(), "an expert body's matmul needs both operands "
                             "computed from the tokens or the expert params");
      operands.push_back(alignedOperand(operand, rank));
    }
  } else if (op->hasTrait<OpTrait::SameOperandsAndResultType>() ||
             isa<CastOp, ReshapeOp, TransposeOp, SumOp, MeanOp, MaxOp, SplitOp,
                 ConcatOp, SoftmaxOp>(op)) {
    for (Value operand : op->getOperands()) {
      if (!isBatched(operand))
        return emitError(op->getLoc(), "'") << op->getName()
                                  << "' in an MoE expert body needs an operand "
                                     "computed from the tokens or the expert params";
      operands.push_back(map.lookup(operand));
    }
    int64_t inputRank = typeOf(op->getOperand(0)).getRank();
    if (op->hasAttr("axis"))
      shiftAxis("axis", isa<ConcatOp>(op) ? rank : inputRank);
    if (auto transpose = dyn_cast<TransposeOp>(op)) {
      SmallVector<int64_t> permutation{0};
      for (int64_t from : transpose.getPermutation())
        permutation.push_back(from + 1);
      attrs.set("permutation", b.getDenseI64ArrayAttr(permutation));
    }
  } else {
    return emitError(op->getLoc(), "'") << op->getName()
                              << "' is not supported in an MoE expert body yet";
  }

  OperationState state(op->getLoc(), op->getName());
  state.addOperands(operands);
  state.addAttributes(attrs);
  for (Type type : op->getResultTypes())
    state.addTypes(withExperts(cast<RankedTensorType>(type), experts));
  Operation *batched = b.create(state);
  for (auto [from, to] : llvm::zip(op->getResults(), batched->getResults()))
    map.map(from, to);
  return success();
}

/// The index of `model`'s loss result, if it has one: only a trained
/// model minimizes the auxiliary losses.
static std::optional<unsigned> lossResult(func::FuncOp model) {
  for (unsigned i = 0, e = model.getNumResults(); i < e; ++i)
    if (model.getResultAttr(i, attr::kLoss))
      return i;
  return std::nullopt;
}

/// Adds the scalar `term` to the loss result of `model`.
static void addToLoss(Location loc, func::FuncOp model, Value term) {
  auto ret = cast<func::ReturnOp>(model.getBody().front().getTerminator());
  unsigned index = *lossResult(model);
  OpBuilder atReturn(ret);
  Value loss = ret.getOperand(index);
  auto total = AddOp::create(atReturn, loc, loss, term);
  // The sum is made where the loss is (the last stage of a pipeline).
  if (Operation *def = loss.getDefiningOp())
    if (Attribute stage = def->getAttr(attr::kStage))
      total->setAttr(attr::kStage, stage);
  ret.setOperand(index, total);
}

/// `weight` times Switch's load-balancing loss, E * sum_e f_e * P_e (f_e
/// the fraction of first choices routed to e, P_e the mean router
/// probability of e). f_e is a count (no gradient); the loss's gradient
/// reaches the router through P_e.
static Value balanceLoss(OpBuilder &b, Location loc, Value probs, Value firstCounts,
                         double weight) {
  int64_t tokens = typeOf(probs).getDimSize(0), experts = typeOf(probs).getDimSize(1);
  Value fraction = MulOp::create(b, loc, firstCounts, vjp::scalar(b, loc, 1.0 / tokens));
  Value meanProb = MeanOp::create(b, loc, probs, /*axis=*/0, /*keepdim=*/false);
  Value sum = SumOp::create(b, loc, MulOp::create(b, loc, fraction, meanProb),
                            /*axis=*/0, /*keepdim=*/false);
  return MulOp::create(b, loc, sum, vjp::scalar(b, loc, experts * weight));
}

/// `weight` times ST-MoE's router z-loss, the mean over tokens of
/// logsumexp(logits)^2: it keeps the router's logits small. The
/// logsumexp subtracts the row's max first, so it never overflows.
static Value zLoss(OpBuilder &b, Location loc, Value logits, double weight) {
  Value max = MaxOp::create(b, loc, logits, /*axis=*/1, /*keepdim=*/true);
  Value shifted = ExpOp::create(b, loc, SubOp::create(b, loc, logits, max));
  Value sum = SumOp::create(b, loc, shifted, /*axis=*/1, /*keepdim=*/true);
  Value lse = AddOp::create(b, loc, LogOp::create(b, loc, sum), max);
  Value mean = MeanOp::create(b, loc, MulOp::create(b, loc, lse, lse), /*axis=*/0,
                              /*keepdim=*/false);
  Value scalar = SumOp::create(b, loc, mean, /*axis=*/0, /*keepdim=*/false);
  return MulOp::create(b, loc, scalar, vjp::scalar(b, loc, weight));
}

/// Appends the block's routing counts to the model's outputs as
/// `moe_stats.BLOCK` ([experts, 2]: routed, dropped), which the executable
/// prints with --moe-stats. In a pipeline stage too: a pipelined run
/// broadcasts each output from the stage that computes it.
static void addStatsOutput(OpBuilder &b, Location loc, MoeOp moe, MoeRouteOp route) {
  auto block = route->getAttrOfType<StringAttr>(attr::kMoeBlock);
  auto model = moe->getParentOfType<func::FuncOp>();
  if (!block || !model || model.isPrivate())
    return;
  Value stats = MoeStatsOp::create(
      b, loc, RankedTensorType::get({static_cast<int64_t>(moe.getExperts()), 2}, b.getF32Type()),
      route.getExpert(), route.getSlot());
  auto ret = cast<func::ReturnOp>(model.getBody().front().getTerminator());
  unsigned index = ret.getNumOperands();
  ret->insertOperands(index, stats);
  SmallVector<NamedAttribute> attrs = {b.getNamedAttr(
      attr::kOutput, b.getStringAttr("moe_stats." + block.getValue()))};
  // A microbatched forward's counts are the microbatches' added up.
  if (model->hasAttr(attr::kForwardMicrobatches))
    attrs.push_back(b.getNamedAttr(attr::kAssemble, b.getStringAttr("sum")));
  (void)model.insertResult(index, stats.getType(), b.getDictionaryAttr(attrs));
}

static LogicalResult expand(MoeOp moe) {
  OpBuilder b(moe);
  Operation *previous = moe->getPrevNode();
  Location loc = moe.getLoc();
  RankedTensorType inputType = moe.getInput().getType();
  int64_t model = inputType.getShape().back();
  int64_t tokens = inputType.getNumElements() / model;
  int64_t experts = moe.getExperts(), topK = moe.getTopK();
  int64_t capacity = moe.getCapacity(), slots = experts * capacity;
  Type f32 = b.getF32Type();
  auto i32 = b.getI32Type();

  // Routing, in f32 whatever the tokens' precision.
  Value x = reshapeTo(b, loc, moe.getInput(), {tokens, model});
  Value logits = MatmulOp::create(b, loc, vjp::toF32(b, loc, x), moe.getRouter(),
                                  TypeAttr::get(f32), TypeAttr());
  Value probs = SoftmaxOp::create(b, loc, logits, 1);
  auto choices = RankedTensorType::get({tokens, topK}, i32);
  auto route = MoeRouteOp::create(
      b, loc, choices, choices, RankedTensorType::get({slots}, i32),
      RankedTensorType::get({experts}, f32), probs, /*offsets=*/Value(), topK,
      capacity, /*buffer=*/IntegerAttr(), /*blocks=*/IntegerAttr());
  // Named after the block instance (its router param) and its expert axis,
  // for --explain.
  if (auto arg = dyn_cast<BlockArgument>(moe.getRouter()))
    if (auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam))
        route->setAttr(attr::kMoeBlock,
                       b.getStringAttr(name.getValue().rsplit('.').first));
  route->setAttr(attr::kMoeAxis, moe.getAxisAttr());
  addStatsOutput(b, loc, moe, route);
  Value gates = MoeGateOp::create(b, loc, RankedTensorType::get({tokens, topK}, f32),
                                  probs, route.getExpert());
  // A body that only reads its tokens narrowed (f32 tokens into bf16
  // experts) gets them narrowed before the dispatch: a cast commutes with
  // a gather, and the slots and the all-to-alls carry half the bytes.
  Block &body = moe.getBody().front();
  Value tile = body.getArgument(0);
  Type tileElement = inputType.getElementType();
  SmallVector<Operation *> narrowing;
  auto narrowed = [&](Operation *user) -> FloatType {
    auto cast = dyn_cast<CastOp>(user);
    return cast ? dyn_cast<FloatType>(cast.getType().getElementType()) : FloatType();
  };
  auto wide = dyn_cast<FloatType>(tileElement);
  FloatType narrow = tile.use_empty() ? FloatType() : narrowed(*tile.getUsers().begin());
  if (wide && narrow && narrow.getWidth() < wide.getWidth() &&
      llvm::all_of(tile.getUsers(), [&](Operation *user) { return narrowed(user) == narrow; })) {
    narrowing.assign(tile.getUsers().begin(), tile.getUsers().end());
    tileElement = narrow;
    x = CastOp::create(b, loc, RankedTensorType::get({tokens, model}, narrow), x);
  }
  Value tiles = MoeDispatchOp::create(
      b, loc, RankedTensorType::get({slots, model}, tileElement), x,
      route.getSource(), route.getSlot(), Value());

  // The experts, all at once.
  BodyBatcher batcher(b, experts);
  Value batchedTiles = reshapeTo(b, loc, tiles, {experts, capacity, model});
  batcher.bind(tile, batchedTiles);
  for (Operation *cast : narrowing)
    batcher.bind(cast->getResult(0), batchedTiles);
  for (auto [arg, param] : llvm::zip(body.getArguments().drop_front(),
                                     moe.getExpertParams()))
    batcher.bind(arg, param);
  for (Operation &op : body.without_terminator())
    if (!llvm::is_contained(narrowing, &op) && failed(batcher.batch(&op)))
      return failure();
  Value out = batcher.lookup(cast<YieldOp>(body.getTerminator()).getValues()[0]);
  int64_t features = typeOf(out).getShape().back();
  out = reshapeTo(b, loc, out, {slots, features});

  RankedTensorType resultType = moe.getType();
  Value combined = MoeCombineOp::create(
      b, loc, RankedTensorType::get({tokens, features}, resultType.getElementType()),
      out, route.getSource(), route.getSlot(), gates);
  moe.replaceAllUsesWith(reshapeTo(b, loc, combined, resultType.getShape()));
  auto parent = moe->getParentOfType<func::FuncOp>();
  if (parent && lossResult(parent)) {
    if (double weight = moe.getAuxLoss().convertToDouble(); weight > 0)
      addToLoss(loc, parent, balanceLoss(b, loc, probs, route.getFirstCounts(), weight));
    if (double weight = moe.getZLoss().convertToDouble(); weight > 0)
      addToLoss(loc, parent, zLoss(b, loc, logits, weight));
  }
  // The ops replacing a block inside a pipeline stage stay on it (they
  // were all built just before it; the loss's sum is after the loss).
  if (Attribute stage = moe->getAttr(attr::kStage))
    for (Operation &op : llvm::make_range(
             previous ? std::next(previous->getIterator()) : moe->getBlock()->begin(),
             moe->getIterator()))
      op.setAttr(attr::kStage, stage);
  moe.erase();
  return success();
}

namespace {
struct LoomExpandMoe : public loom::impl::LoomExpandMoeBase<LoomExpandMoe> {
  void runOnOperation() override {
    SmallVector<MoeOp> blocks;
    getOperation().walk([&](MoeOp moe) { blocks.push_back(moe); });
    for (MoeOp moe : blocks)
      if (failed(expand(moe)))
        return signalPassFailure();
  }
};
} // namespace
