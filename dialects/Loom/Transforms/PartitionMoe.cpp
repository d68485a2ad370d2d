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
// Tokens split over data-parallel axes T too (dp and ep separate) are
// sliced over the expert axis as well and the experts split over [ep, T]:
// the same exchange over all those ranks, each holding whole experts.
// Any other layout runs the routed pieces whole (Partitioner::partitionWhole).
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::loom;

static RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A sharding of a rank-2 value with its rows split over `axes`.
static Sharding rowsOver(const GridAxes &axes) {
  Sharding s = Sharding::replicated(2);
  s.dims[0] = axes;
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

/// `counts` ([ranks, top_k, E], replicated) with its rank rows reordered
/// from token order (`tokenWays` blocks of `expertWays`, the expert axis
/// minor) to the all-to-all's member order (the expert axis major): a
/// reshape, a transpose and a reshape back.
static Value toMemberOrder(OpBuilder &b, Location loc, Value counts, int64_t tokenWays,
                           int64_t expertWays) {
  auto type = typeOf(counts);
  if (tokenWays == 1)
    return counts;
  int64_t topK = type.getDimSize(1), experts = type.getDimSize(2);
  auto split = RankedTensorType::get({tokenWays, expertWays, topK, experts},
                                     type.getElementType());
  auto swapped = RankedTensorType::get({expertWays, tokenWays, topK, experts},
                                       type.getElementType());
  Value blocks = ReshapeOp::create(b, loc, split, counts);
  Value moved = TransposeOp::create(b, loc, swapped, blocks,
                                    b.getDenseI64ArrayAttr({1, 0, 2, 3}));
  return ReshapeOp::create(b, loc, type, moved);
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
  if (!axis || !onlyRoutedUses(route))
    return partitionWhole(route);
  int16_t a = *axis;
  // Tokens split over the expert axis alone (or over nothing: sliced over
  // it here) route and exchange over that axis. Tokens split over other
  // axes T (data parallel) are sliced over the expert axis too, T major,
  // and the experts split over [axis, T]: each rank then holds whole
  // experts, and one all-to-all over [axis, T] reaches them.
  GridAxes tokenAxes = layout.dims[0], expertAxes;
  if (tokenAxes.empty() || tokenAxes == GridAxes{a}) {
    tokenAxes = expertAxes = {a};
  } else {
    if (llvm::is_contained(tokenAxes, a))
      return partitionWhole(route);
    expertAxes = {a};
    expertAxes.append(tokenAxes.begin(), tokenAxes.end());
    tokenAxes.push_back(a);
  }
  int64_t ranks = grid.ways(tokenAxes);
  int64_t topK = route.getTopK(), capacity = route.getCapacity();
  int64_t expertWays = grid.sizes[a], tokenWays = ranks / expertWays;
  // Each rank holds E / ranks whole experts; or, with one expert per rank
  // of the expert axis, the T ranks of its block share its slots, a block
  // of C / blocks each ([E, C] split [[axis], [T]]).
  int64_t blocks = 1;
  // The mesh asked for expert parallelism that these sizes cannot have:
  // say so at the block, as the whole routing is gathered instead.
  auto gathered = [&](const Twine &why) {
    auto block = route->getAttrOfType<StringAttr>(attr::kMoeBlock);
    route.emitWarning() << "MoE block '" << (block ? block.getValue() : "moe")
                        << "' is routed whole on every rank, its tokens and expert "
                           "outputs all-gathered: "
                        << why;
    return partitionWhole(route);
  };
  if (tokens % ranks)
    return gathered(Twine(tokens) + " tokens do not split over " + Twine(ranks) +
                    " ranks ('" + grid.format(tokenAxes) + "')");
  if (experts % ranks) {
    if (experts != expertWays || capacity % tokenWays)
      return gathered(Twine(experts) + " experts split over " + Twine(ranks) +
                      " ranks ('" + grid.format(expertAxes) +
                      "') neither whole nor one per '" + grid.names[a] +
                      "' rank with its " + Twine(capacity) + " slots in " +
                      Twine(tokenWays) + " blocks");
    blocks = tokenWays;
  }
  int64_t width = capacity / blocks;
  // A token's choices are distinct experts: one rank keeps at most its
  // token count for one expert (and block).
  int64_t buffer = std::min(width, tokens / ranks);
  FailureOr<Value> local = reshard(probs, rowsOver(tokenAxes), route);
  if (failed(local))
    return failure();
  OpBuilder b(route);
  IntegerAttr blocksAttr = blocks > 1 ? b.getI64IntegerAttr(blocks) : IntegerAttr();
  Location loc = route.getLoc();
  auto i32 = b.getI32Type();
  auto choices = RankedTensorType::get({tokens / ranks, topK}, i32);
  auto sourceType = RankedTensorType::get({experts * blocks * buffer}, i32);
  auto countsType = route.getFirstCounts().getType();

  // Every rank's choices per priority and expert, all-gathered in token
  // order (counts, never tokens); the choices ahead of each rank's own
  // follow from them.
  auto ranked = MoeRouteOp::create(b, loc, choices, choices, sourceType, countsType,
                                   *local, Value(), topK, capacity,
                                   b.getI64IntegerAttr(buffer), blocksAttr);
  auto perRank = RankedTensorType::get({ranks, topK, experts}, i32);
  auto counts = MoeCountsOp::create(b, loc, RankedTensorType::get({1, topK, experts}, i32),
                                    ranked.getExpert());
  Sharding byRank = Sharding::replicated(3), byExpert = Sharding::replicated(3);
  byRank.dims[0] = tokenAxes;
  // The counts of the rank's experts: with slot blocks, of its one expert.
  byExpert.dims[2] = blocks > 1 ? GridAxes{a} : expertAxes;
  globals[counts] = perRank;
  shardings[counts] = byRank;
  FailureOr<Value> all = reshard(counts, Sharding::replicated(3), route);
  if (failed(all))
    return failure();
  auto offsets = MoeOffsetsOp::create(b, loc, perRank, *all);
  globals[offsets] = perRank;
  shardings[offsets] = Sharding::replicated(3);
  FailureOr<Value> mine = reshard(offsets, byRank, route);
  if (failed(mine))
    return failure();
  // The expert side reads the rows of the ranks it receives from in the
  // all-to-all's member order.
  Value memberCounts = toMemberOrder(b, loc, *all, tokenWays, expertWays);
  Value memberOffsets = toMemberOrder(b, loc, offsets, tokenWays, expertWays);
  for (Value v : {memberCounts, memberOffsets}) {
    globals[v] = perRank;
    shardings[v] = Sharding::replicated(3);
  }
  FailureOr<Value> expertCounts = reshard(memberCounts, byExpert, route);
  FailureOr<Value> expertOffsets = reshard(memberOffsets, byExpert, route);
  if (failed(expertCounts) || failed(expertOffsets))
    return failure();

  auto routed = MoeRouteOp::create(b, loc, choices, choices, sourceType, countsType,
                                   *local, *mine, topK, capacity,
                                   b.getI64IntegerAttr(buffer), blocksAttr);
  for (NamedAttribute attr : route->getDiscardableAttrs())
    routed->setAttr(attr.getName(), attr.getValue());
  SmallVector<StringRef> names;
  for (int16_t x : expertAxes)
    names.push_back(grid.names[x]);
  routed->setAttr(attr::kMoeExchangeAxes, b.getStrArrayAttr(names));
  int64_t localExperts = experts * blocks / ranks;
  // The rank's slot block: its coordinate over the token axes T.
  Value block;
  if (blocks > 1) {
    GridAxes blockAxes(tokenAxes.begin(), tokenAxes.end() - 1);
    auto all = RankedTensorType::get({blocks}, i32);
    Value every = ArangeOp::create(b, loc, all);
    globals[every] = all;
    shardings[every] = Sharding::replicated(1);
    Sharding mineOnly = Sharding::replicated(1);
    mineOnly.dims[0] = blockAxes;
    FailureOr<Value> own = reshard(every, mineOnly, route);
    if (failed(own))
      return failure();
    block = *own;
  }
  auto map = MoeExchangeMapOp::create(
      b, loc, RankedTensorType::get({ranks * localExperts * buffer, 1}, i32),
      RankedTensorType::get({localExperts * width}, i32), *expertCounts,
      *expertOffsets, block, capacity, buffer, blocksAttr);
  for (Value v : {ranked.getSlot(), ranked.getSource(), ranked.getFirstCounts(),
                  routed.getSource(), map.getSlot(), map.getSource()})
    setLocal(v);
  globals[ranked.getExpert()] = globals[routed.getExpert()] = route.getExpert().getType();
  shardings[ranked.getExpert()] = shardings[routed.getExpert()] = rowsOver(tokenAxes);
  // The rank's slots number its send buffer: only routed pieces read them.
  globals[routed.getSlot()] = route.getSlot().getType();
  shardings[routed.getSlot()] = rowsOver(tokenAxes);
  // Each rank counts its own first choices: their sum is the batch's.
  Sharding partial = Sharding::replicated(1);
  partial.partial = tokenAxes;
  globals[routed.getFirstCounts()] = countsType;
  shardings[routed.getFirstCounts()] = partial;
  moeExchanges[routed] = {tokenAxes, expertAxes, capacity, buffer, map.getSlot(),
                          map.getSource()};
  route.replaceAllUsesWith(routed.getResults());
  route.erase();
  return success();
}

Value Partitioner::moeAllToAll(OpBuilder &b, Location loc, Value rows,
                               const GridAxes &axes, StringRef why) {
  // Blocks of rows to every rank over `axes`, received in member order:
  // the shape stays, the rows are each rank's own.
  auto type = typeOf(rows);
  auto sent = shard::AllToAllOp::create(b, loc, type, grid.op.getSymName(), axes, rows,
                                        llvm::APInt(64, 0), llvm::APInt(64, 0));
  return collective(sent, sent.getResult(), Sharding::replicated(2), type, loc, why);
}

Value Partitioner::moeRowsAtTokens(Value slots, const MoeExchange &exchange,
                                   Operation *user) {
  if (Value rows = moeTokenRows.lookup(slots))
    return rows;
  FailureOr<Value> local = reshard(slots, rowsOver(exchange.expertAxes), user);
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
  Value back = moeAllToAll(b, loc, rows, exchange.expertAxes,
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
  Sharding rows = rowsOver(exchange->tokenAxes);
  Sharding slotRows = rowsOver(exchange->expertAxes);
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
    partial.partial = exchange->tokenAxes;
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
    Value received = moeAllToAll(b, loc, send, exchange->expertAxes,
                                 "tokens to their experts");
    auto slotsType = RankedTensorType::get(
        {typeOf(exchange->slotRow).getDimSize(0), features}, element);
    auto slots = MoeDispatchOp::create(b, loc, slotsType, received, exchange->slotRow,
                                       exchange->rowSlot, Value());
    globals[slots] = global;
    shardings[slots] = slotRows;
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
