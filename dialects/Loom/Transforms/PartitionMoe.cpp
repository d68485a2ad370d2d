//===- PartitionMoe.cpp - Expert parallelism by all-to-alls ---------------===//
//
// When a routing's tokens and its experts are split over the same axis
// (ep = dp, the common layout), each rank routes its own tokens and only
// routing counts are gathered: every rank's choices per expert, from which
// each finds where its choices fall among all ranks' (loom.moe_offsets),
// so that the same tokens are kept as on one rank. A dispatch then packs
// the rank's kept tokens into a send buffer of `buffer` rows per expert
// (the most one rank can keep for one expert), one all-to-all brings each
// expert rank its rows, and a gather through loom.moe_exchange_map puts
// them in the expert slots the one-rank program uses; a combine runs the
// same path backwards. Forward: two all-to-alls; with the backward, four.
// Any other layout runs the routed pieces whole (Partitioner::partitionWhole).
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::loom;

static RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A sharding of a rank-2 value with its rows split over `axis`.
static Sharding rowsOver(int16_t axis) {
  Sharding s = Sharding::replicated(2);
  s.dims[0] = {axis};
  return s;
}

void Partitioner::setLocal(Value value) {
  globals[value] = typeOf(value);
  shardings[value] = Sharding::replicated(typeOf(value).getRank());
}

const Partitioner::MoeExchange *Partitioner::moeExchangeOf(Operation *op) {
  for (Value operand : op->getOperands())
    if (Operation *def = operand.getDefiningOp())
      if (auto it = moeExchanges.find(def); it != moeExchanges.end())
        return &it->second;
  return nullptr;
}

/// Whether every use of the routing's decisions is a routed piece this
/// file partitions (anything else would read per-rank slot numbers).
static bool onlyRoutedUses(MoeRouteOp route) {
  for (Value result : {route.getExpert(), route.getSlot(), route.getSource()})
    for (Operation *user : result.getUsers())
      if (!isa<MoeGateOp, MoeGateGradOp, MoeDispatchOp, MoeCombineOp,
               MoeSlotDotOp, MoeStatsOp>(user))
        return false;
  return true;
}

LogicalResult Partitioner::partitionMoeRoute(MoeRouteOp route) {
  auto axisName = route->getAttrOfType<StringAttr>(attr::kMoeAxis);
  std::optional<int16_t> axis;
  for (auto [i, name] : llvm::enumerate(grid.names))
    if (axisName && name == axisName.getValue() && grid.sizes[i] > 1)
      axis = static_cast<int16_t>(i);
  Value probs = route.getProbs();
  RankedTensorType global = globalType(probs);
  int64_t tokens = global.getDimSize(0), experts = global.getDimSize(1);
  Sharding layout = shardingOf(probs);
  if (!axis || !onlyRoutedUses(route) || tokens % grid.sizes[*axis] ||
      experts % grid.sizes[*axis] ||
      !(layout.dims[0].empty() || layout.dims[0] == GridAxes{*axis}))
    return partitionWhole(route);

  int16_t a = *axis;
  int64_t ranks = grid.sizes[a], topK = route.getTopK();
  int64_t capacity = route.getCapacity();
  // A token's choices are distinct experts: one rank keeps at most its
  // token count for one expert.
  int64_t buffer = std::min(capacity, tokens / ranks);
  FailureOr<Value> local = reshard(probs, rowsOver(a), route);
  if (failed(local))
    return failure();
  OpBuilder b(route);
  Location loc = route.getLoc();
  auto i32 = b.getI32Type();
  auto choices = RankedTensorType::get({tokens / ranks, topK}, i32);
  auto sourceType = RankedTensorType::get({experts * buffer}, i32);
  auto countsType = route.getFirstCounts().getType();

  // Every rank's choices per priority and expert, all-gathered (counts,
  // never tokens); the choices ahead of each rank's own follow from them.
  auto ranked = MoeRouteOp::create(b, loc, choices, choices, sourceType, countsType,
                                   *local, Value(), topK, capacity,
                                   b.getI64IntegerAttr(buffer));
  auto perRank = RankedTensorType::get({ranks, topK, experts}, i32);
  auto counts = MoeCountsOp::create(b, loc, RankedTensorType::get({1, topK, experts}, i32),
                                    ranked.getExpert());
  Sharding byRank = Sharding::replicated(3), byExpert = Sharding::replicated(3);
  byRank.dims[0] = {a};
  byExpert.dims[2] = {a};
  globals[counts] = perRank;
  shardings[counts] = byRank;
  FailureOr<Value> all = reshard(counts, Sharding::replicated(3), route);
  if (failed(all))
    return failure();
  auto offsets = MoeOffsetsOp::create(b, loc, perRank, *all);
  globals[offsets] = perRank;
  shardings[offsets] = Sharding::replicated(3);
  FailureOr<Value> mine = reshard(offsets, byRank, route);
  FailureOr<Value> expertCounts = reshard(*all, byExpert, route);
  FailureOr<Value> expertOffsets = reshard(offsets, byExpert, route);
  if (failed(mine) || failed(expertCounts) || failed(expertOffsets))
    return failure();

  auto routed = MoeRouteOp::create(b, loc, choices, choices, sourceType, countsType,
                                   *local, *mine, topK, capacity,
                                   b.getI64IntegerAttr(buffer));
  for (NamedAttribute attr : route->getDiscardableAttrs())
    routed->setAttr(attr.getName(), attr.getValue());
  int64_t localExperts = experts / ranks;
  auto map = MoeExchangeMapOp::create(
      b, loc, RankedTensorType::get({ranks * localExperts * buffer, 1}, i32),
      RankedTensorType::get({localExperts * capacity}, i32), *expertCounts,
      *expertOffsets, capacity, buffer);
  for (Value v : {ranked.getSlot(), ranked.getSource(), ranked.getFirstCounts(),
                  routed.getSource(), map.getSlot(), map.getSource()})
    setLocal(v);
  globals[ranked.getExpert()] = globals[routed.getExpert()] = route.getExpert().getType();
  shardings[ranked.getExpert()] = shardings[routed.getExpert()] = rowsOver(a);
  // The rank's slots number its send buffer: only routed pieces read them.
  globals[routed.getSlot()] = route.getSlot().getType();
  shardings[routed.getSlot()] = rowsOver(a);
  // Each rank counts its own first choices: their sum is the batch's.
  Sharding partial = Sharding::replicated(1);
  partial.partial = {a};
  globals[routed.getFirstCounts()] = countsType;
  shardings[routed.getFirstCounts()] = partial;
  moeExchanges[routed] = {a, capacity, buffer, map.getSlot(), map.getSource()};
  route.replaceAllUsesWith(routed.getResults());
  route.erase();
  return success();
}

Value Partitioner::moeAllToAll(OpBuilder &b, Location loc, Value rows, int16_t axis,
                               StringRef why) {
  // Blocks of rows to every rank over `axis`, received in rank order: the
  // shape stays, the rows are each rank's own.
  auto type = typeOf(rows);
  auto sent = shard::AllToAllOp::create(b, loc, type, grid.op.getSymName(), {axis}, rows,
                                        llvm::APInt(64, 0), llvm::APInt(64, 0));
  return collective(sent, sent.getResult(), Sharding::replicated(2), type, loc, why);
}

Value Partitioner::moeRowsAtTokens(Value slots, const MoeExchange &exchange,
                                   Operation *user) {
  if (Value rows = moeTokenRows.lookup(slots))
    return rows;
  FailureOr<Value> local = reshard(slots, rowsOver(exchange.axis), user);
  if (failed(local))
    return Value();
  OpBuilder b(user);
  Location loc = user->getLoc();
  int64_t features = typeOf(*local).getDimSize(1);
  Type element = typeOf(*local).getElementType();
  auto rowsType = RankedTensorType::get(
      {typeOf(exchange.rowSlot).getDimSize(0), features}, element);
  Value rows = MoeCombineOp::create(b, loc, rowsType, *local, exchange.slotRow,
                                    exchange.rowSlot, Value());
  setLocal(rows);
  Value back = moeAllToAll(b, loc, rows, exchange.axis,
                          "expert outputs back to their tokens");
  moeTokenRows[slots] = back;
  return back;
}

LogicalResult Partitioner::partitionMoe(Operation *op) {
  if (auto route = dyn_cast<MoeRouteOp>(op))
    return partitionMoeRoute(route);
  const MoeExchange *exchange = moeExchangeOf(op);
  if (!exchange)
    return partitionWhole(op);
  int16_t a = exchange->axis;
  Sharding rows = rowsOver(a);
  auto tokenSide = [&](Value v) -> FailureOr<Value> {
    return v ? reshard(v, rows, op) : FailureOr<Value>(Value());
  };

  if (isa<MoeGateOp, MoeGateGradOp>(op)) {
    // Per token: the rank's rows of probabilities, choices and gradients.
    SmallVector<Sharding> operands(op->getNumOperands(), rows);
    return apply(op, operands, {rows});
  }
  if (auto stats = dyn_cast<MoeStatsOp>(op)) {
    Sharding partial = Sharding::replicated(2);
    partial.partial = {a};
    setResult(stats.getResult(), partial);
    return success();
  }
  if (auto dot = dyn_cast<MoeSlotDotOp>(op)) {
    FailureOr<Value> tokens = tokenSide(dot.getTokens());
    Value slots = moeRowsAtTokens(dot.getSlots(), *exchange, op);
    if (failed(tokens) || !slots)
      return failure();
    dot.getTokensMutable().assign(*tokens);
    dot.getSlotsMutable().assign(slots);
    setResult(dot.getResult(), rows);
    return success();
  }

  OpBuilder b(op);
  Location loc = op->getLoc();
  if (auto dispatch = dyn_cast<MoeDispatchOp>(op)) {
    FailureOr<Value> input = tokenSide(dispatch.getInput());
    FailureOr<Value> weights = tokenSide(dispatch.getWeights());
    if (failed(input) || failed(weights))
      return failure();
    RankedTensorType global = dispatch.getType();
    Type element = global.getElementType();
    int64_t features = global.getDimSize(1);
    auto sendType = RankedTensorType::get(
        {typeOf(dispatch.getSource()).getDimSize(0), features}, element);
    Value send = MoeDispatchOp::create(b, loc, sendType, *input, dispatch.getSource(),
                                       dispatch.getSlot(), *weights);
    setLocal(send);
    Value received = moeAllToAll(b, loc, send, a, "tokens to their experts");
    auto slotsType = RankedTensorType::get(
        {typeOf(exchange->slotRow).getDimSize(0), features}, element);
    auto slots = MoeDispatchOp::create(b, loc, slotsType, received, exchange->slotRow,
                                       exchange->rowSlot, Value());
    globals[slots] = global;
    shardings[slots] = rows;
    dispatch.replaceAllUsesWith(slots.getResult());
    dispatch.erase();
    return success();
  }
  auto combine = cast<MoeCombineOp>(op);
  FailureOr<Value> weights = tokenSide(combine.getWeights());
  Value back = moeRowsAtTokens(combine.getInput(), *exchange, op);
  if (failed(weights) || !back)
    return failure();
  combine.getInputMutable().assign(back);
  if (*weights)
    combine.getWeightsMutable().assign(*weights);
  setResult(combine.getResult(), rows);
  return success();
}
