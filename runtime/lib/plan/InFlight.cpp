//===- InFlight.cpp - The values a pipeline rank keeps, and their slots ---===//

#include "loom/runtime/plan/InFlight.h"

#include <algorithm>
#include <set>
#include <cstdint>

using namespace loom::runtime;

PipelineValues loom::runtime::analyzePipelineValues(
    const Plan &plan, const std::vector<StepAccess> &access,
    bool weightWithBackward) {
  PipelineValues values;
  // Which values cross sections: read by a step of another section (or
  // carried), written by a step before it in none.
  size_t count = plan.steps.size();
  std::vector<long> writer(plan.buffers.size(), -1);
  for (size_t i = 0; i < count; ++i)
    for (size_t k = 0; k < plan.steps[i].buffers.size(); ++k)
      if (access[i].buffers[k] == BufferAccess::Written &&
          plan.steps[i].kind != StepKind::Transfer)
        writer[plan.steps[i].buffers[k]] = static_cast<long>(i);
  auto persistent = [&](unsigned id) {
    const PlanBuffer &buffer = plan.buffers[id];
    long w = writer[id];
    // Inputs are put back per microbatch; an accumulate's sum and the
    // update's values live in the arena until the update reads them.
    return buffer.role == BufferRole::Input || buffer.role == BufferRole::Param ||
           w < 0 || plan.steps[w].kind == StepKind::Accumulate ||
           plan.steps[w].phase == StepPhase::Update;
  };
  values.crosses.assign(plan.buffers.size(), false);
  values.restores.assign(count, {});
  values.saves.assign(count, {});
  for (size_t j = 0; j < count; ++j) {
    const PlanStep &step = plan.steps[j];
    for (size_t k = 0; k < step.buffers.size(); ++k) {
      unsigned id = step.buffers[k];
      bool reads = access[j].buffers[k] == BufferAccess::Read ||
                   step.kind == StepKind::Transfer;
      if (!reads || persistent(id))
        continue;
      const PlanStep &source = plan.steps[writer[id]];
      // A stage's backward and weight part, run as one section in plan
      // order, read each other's values where the arena keeps them (it is
      // planned in plan order). Saved, every layer's values for its weight
      // part took a place at once: 22 GB for each of GPT-3's interleaved
      // stages.
      auto phaseOf = [&](StepPhase phase) {
        return weightWithBackward && phase == StepPhase::Weight ? StepPhase::Backward
                                                                : phase;
      };
      bool samePhase = phaseOf(source.phase) == phaseOf(step.phase);
      bool sameSection = step.phase != StepPhase::Update && samePhase &&
                         source.stages == step.stages &&
                         static_cast<size_t>(writer[id]) < j;
      if (sameSection)
        continue;
      values.restores[j].push_back(id);
      values.crosses[id] = true;
    }
  }
  for (unsigned k = 0; k < plan.pipeline.stages; ++k)
    for (const auto *carry : {&plan.pipeline.forwardCarry[k], &plan.pipeline.backwardCarry[k]})
      for (unsigned id : *carry)
        values.crosses[id] = true;
  for (size_t i = 0; i < count; ++i)
    for (size_t k = 0; k < plan.steps[i].buffers.size(); ++k) {
      unsigned id = plan.steps[i].buffers[k];
      if (access[i].buffers[k] == BufferAccess::Written && values.crosses[id] &&
          writer[id] == static_cast<long>(i))
        values.saves[i].push_back(id);
    }
  return values;
}

std::vector<uint64_t> loom::runtime::heldBytesPerStage(const Plan &plan,
                                                       const PipelineValues &values) {
  std::vector<uint64_t> held(plan.pipeline.stages, 0);
  std::vector<std::vector<bool>> counted(plan.pipeline.stages,
                                         std::vector<bool>(plan.buffers.size()));
  auto add = [&](unsigned stage, unsigned id) {
    if (!counted[stage][id]) {
      counted[stage][id] = true;
      held[stage] += plan.buffers[id].bytes;
    }
  };
  for (size_t i = 0; i < plan.steps.size(); ++i)
    if (plan.steps[i].phase != StepPhase::Update)
      for (unsigned id : values.saves[i])
        add(plan.steps[i].stages.front(), id);
  for (unsigned k = 0; k < plan.pipeline.stages; ++k) {
    for (unsigned id : plan.pipeline.forwardCarry[k])
      if (k + 1 < plan.pipeline.stages)
        add(k + 1, id);
    for (unsigned id : plan.pipeline.backwardCarry[k])
      if (k > 0)
        add(k - 1, id);
  }
  return held;
}

/// The values of the rank at `coordinate` that live within one
/// microbatch's backward of a stage: received gradients, what its backward
/// and weight-gradient steps save (for each other, or to send). Where the
/// rank's order runs each (microbatch, stage)'s receive, backward, weight
/// part and send without another microbatch's between them (not so under
/// zero-bubble, whose weight part waits), one copy serves every microbatch;
/// the slots would keep one per microbatch in flight. A value the update
/// or another stage reads stays in the slots.
static std::vector<bool> backwardTransients(const Plan &plan,
                                            const PipelineValues &values,
                                            const Schedule &order,
                                            unsigned coordinate) {
  std::vector<bool> transient(plan.buffers.size(), false);
  // Per value, the one stage whose backward (or weight part) reads it;
  // -2 when a step of another stage or phase does (the update; or another
  // stage's backward on this rank: a tied param's gradient part, summed
  // in the lower stage's backward, lives from one backward to another).
  constexpr int kNoReader = -1, kOtherReaders = -2;
  std::vector<int> reader(plan.buffers.size(), kNoReader);
  auto note = [](std::vector<int> &only, unsigned id, int stage) {
    only[id] = only[id] == kNoReader || only[id] == stage ? stage : kOtherReaders;
  };
  // Likewise the one stage whose backward (or weight part) saves it. A
  // value carried down from a later stage of this rank is saved by that
  // stage's forward: the interleaved schedule runs the next microbatch's
  // forward before this one's backward sends the value on (a loss term
  // carried from the last stage to the first, overwritten by the next
  // microbatch's: the reported loss used one microbatch's term twice).
  std::vector<int> saver(plan.buffers.size(), kNoReader);
  // Readers on this rank only: another rank's get the value by a carry.
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep &step = plan.steps[i];
    bool here = false;
    for (unsigned stage : step.stages)
      here |= order.ownerOf(stage) == coordinate;
    if (step.kind == StepKind::Transfer && order.ownerOf(step.from) == coordinate)
      note(reader, step.buffers[0], kOtherReaders);
    if (!here)
      continue;
    bool backward = step.phase == StepPhase::Backward || step.phase == StepPhase::Weight;
    int stage = backward ? static_cast<int>(step.stages.front()) : kOtherReaders;
    for (unsigned id : values.restores[i])
      note(reader, id, stage);
    for (unsigned id : values.saves[i])
      note(saver, id, stage);
  }
  const std::vector<PipeStep> &mine = order.steps[coordinate];
  // Each (microbatch, stage)'s backward, as positions in the rank's order.
  struct Span {
    size_t first = SIZE_MAX, last = 0;
  };
  auto apart = [](const Span &a, const Span &b) {
    return a.first == SIZE_MAX || b.first == SIZE_MAX || a.last < b.first ||
           b.last < a.first;
  };
  for (unsigned stage = 0; stage < plan.pipeline.stages; ++stage) {
    if (order.ownerOf(stage) != coordinate)
      continue;
    std::vector<Span> spans(order.microbatches);
    for (size_t k = 0; k < mine.size(); ++k) {
      const PipeStep &step = mine[k];
      bool backward =
          ((step.op == PipeOp::Backward || step.op == PipeOp::WeightGrad ||
            step.op == PipeOp::SendGradient) && step.stage == stage) ||
          (step.op == PipeOp::RecvGradient && step.stage == stage + 1);
      if (!backward)
        continue;
      Span &span = spans[step.microbatch];
      span.first = std::min(span.first, k);
      span.last = std::max(span.last, k);
    }
    // Pairwise apart: in order of their starts, each ends before the next
    // starts (comparing every pair took minutes at 65536 microbatches).
    std::vector<Span> met;
    for (const Span &span : spans)
      if (span.first != SIZE_MAX)
        met.push_back(span);
    std::sort(met.begin(), met.end(),
              [](const Span &a, const Span &b) { return a.first < b.first; });
    bool stageApart = true;
    for (size_t i = 1; i < met.size(); ++i)
      stageApart &= apart(met[i - 1], met[i]);
    if (!stageApart)
      continue;
    // A value another stage's backward reads too outlives this span.
    // (Each stage's values have places of their own: a place shared by a
    // rank's stages gave an interleaved GPT wrong gradients before that
    // check; with it, sharing is untested.)
    auto mark = [&](unsigned id) {
      auto only = [&](int at) { return at == static_cast<int>(stage) || at == kNoReader; };
      transient[id] = only(reader[id]) && only(saver[id]);
    };
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const PlanStep &step = plan.steps[i];
      if ((step.phase == StepPhase::Backward || step.phase == StepPhase::Weight) &&
          step.stages.front() == stage)
        for (unsigned id : values.saves[i])
          mark(id);
    }
    if (stage + 1 < plan.pipeline.stages)
      for (unsigned id : plan.pipeline.backwardCarry[stage + 1])
        mark(id);
  }
  return transient;
}

/// The stage of this rank a step of its order works for: a receive's is
/// the stage the values arrive at (its `stage` is the sender's).
static unsigned localStage(const PipeStep &step) {
  switch (step.op) {
  case PipeOp::RecvActivation:
    return step.stage + 1;
  case PipeOp::RecvGradient:
    return step.stage - 1;
  default:
    return step.stage;
  }
}

/// Gives each tenant of `pool` a slot: the lowest free one at its first
/// step on the rank, freed after its last (the last microbatch's last until
/// the update, which reads them). A tenant is a microbatch, whose steps of
/// any of the pool's stages count; in a pool of `perStage` slots, a
/// (stage, microbatch) pair, whose steps of that stage count.
static void assignSlots(InFlightLayout::Pool &pool, const Schedule &order,
                        unsigned coordinate) {
  unsigned microbatches = order.microbatches;
  size_t tenants = (pool.perStage ? pool.stages.size() : 1) * microbatches;
  const std::vector<PipeStep> &mine = order.steps[coordinate];
  std::vector<size_t> first(tenants, mine.size()), last(tenants, 0);
  for (size_t k = 0; k < mine.size(); ++k) {
    auto at = std::lower_bound(pool.stages.begin(), pool.stages.end(),
                               localStage(mine[k]));
    if (at == pool.stages.end() || *at != localStage(mine[k]))
      continue;
    size_t stage = pool.perStage ? static_cast<size_t>(at - pool.stages.begin()) : 0;
    size_t tenant = stage * microbatches + mine[k].microbatch;
    first[tenant] = std::min(first[tenant], k);
    last[tenant] = k;
  }
  if (microbatches > 0)
    for (size_t tenant = microbatches - 1; tenant < tenants; tenant += microbatches)
      last[tenant] = mine.size();
  pool.slotOf.assign(tenants, 0);
  // The tenants arriving and leaving at each step, in tenant order (every
  // step had scanned every tenant: minutes at 65536 microbatches); the
  // free slots in a set, the lowest taken first.
  std::vector<std::vector<size_t>> arrive(mine.size() + 1), leave(mine.size() + 1);
  for (size_t t = 0; t < tenants; ++t)
    if (first[t] <= mine.size() && last[t] >= first[t]) {
      arrive[first[t]].push_back(t);
      leave[last[t]].push_back(t);
    }
  std::set<unsigned> free;
  unsigned slots = 0;
  for (size_t k = 0; k <= mine.size(); ++k) {
    for (size_t t : arrive[k]) {
      unsigned slot = slots;
      if (!free.empty()) {
        slot = *free.begin();
        free.erase(free.begin());
      } else {
        ++slots;
      }
      pool.slotOf[t] = slot;
    }
    for (size_t t : leave[k])
      free.insert(pool.slotOf[t]);
  }
  // A tenant the order never meets here (none, in a verified schedule)
  // still has slot 0 to name.
  pool.slots = std::max(1u, slots);
}

InFlightLayout loom::runtime::planInFlight(const Plan &plan,
                                           const PipelineValues &values,
                                           const Schedule &order,
                                           unsigned coordinate) {
  InFlightLayout layout;
  size_t count = plan.buffers.size();
  layout.offset.assign(count, InFlightLayout::kNone);
  layout.transient.assign(count, false);
  layout.poolOf.assign(count, InFlightLayout::kNoPool);
  layout.tenantOf.assign(count, 0);
  auto owns = [&](unsigned stage) { return order.ownerOf(stage) == coordinate; };
  std::vector<bool> transient = backwardTransients(plan, values, order, coordinate);
  // The values the rank holds, in the order it first meets them, and per
  // value its stages whose steps save, read, send or receive it.
  std::vector<unsigned> held;
  std::vector<std::vector<unsigned>> users(count);
  std::vector<bool> isHeld(count, false);
  auto place = [&](unsigned id) {
    if (!isHeld[id]) {
      isHeld[id] = true;
      held.push_back(id);
    }
  };
  auto use = [&](unsigned id, unsigned stage) {
    std::vector<unsigned> &stages = users[id];
    auto at = std::lower_bound(stages.begin(), stages.end(), stage);
    if (at == stages.end() || *at != stage)
      stages.insert(at, stage);
  };
  // What the rank's steps save, the carries it receives, and the update's
  // transfers it receives of values that cross sections.
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep &step = plan.steps[i];
    for (unsigned stage : step.stages) {
      if (!owns(stage))
        continue;
      for (unsigned id : values.saves[i]) {
        place(id);
        use(id, stage);
      }
      for (unsigned id : values.restores[i])
        use(id, stage);
    }
    if (step.kind == StepKind::Transfer && owns(step.to) &&
        values.crosses[step.buffers[0]]) {
      place(step.buffers[0]);
      use(step.buffers[0], step.to);
    }
  }
  const PlanPipeline &pipeline = plan.pipeline;
  for (unsigned k = 0; k < pipeline.stages; ++k) {
    for (unsigned id : pipeline.forwardCarry[k]) {
      if (k + 1 < pipeline.stages && owns(k + 1)) {
        place(id);
        use(id, k + 1);
      }
      if (owns(k))
        use(id, k);
    }
    for (unsigned id : pipeline.backwardCarry[k]) {
      if (k > 0 && owns(k - 1)) {
        place(id);
        use(id, k - 1);
      }
      if (owns(k))
        use(id, k);
    }
  }
  // The values one stage alone uses share one pool, a slot per (stage,
  // microbatch) in flight: each stage's values from the slot's start (the
  // slot as large as the largest stage's), living from the microbatch's
  // first step of that stage to its last. Values of several stages (a tied
  // param's gradient part) have a pool per set of stages, a slot per
  // microbatch. (With several stages a rank, interleaved, one slot of every
  // stage's values lived from a microbatch's first stage here to its last
  // backward: GPT-3 took 268.9 GiB of activations a GPU where its backward
  // reads 77.5 at the peak.)
  std::vector<uint64_t> stageBytes(pipeline.stages, 0);
  for (unsigned id : held) {
    uint64_t bytes = alignedBytes(plan.buffers[id].bytes);
    if (transient[id]) {
      layout.transient[id] = true;
      layout.offset[id] = layout.transientBytes;
      layout.transientBytes += bytes;
      continue;
    }
    bool single = users[id].size() == 1;
    auto pool = std::find_if(layout.pools.begin(), layout.pools.end(),
                             [&](const InFlightLayout::Pool &p) {
                               return single ? p.perStage : !p.perStage && p.stages == users[id];
                             });
    if (pool == layout.pools.end()) {
      layout.pools.push_back({});
      pool = layout.pools.end() - 1;
      pool->perStage = single;
      if (!single)
        pool->stages = users[id];
    }
    layout.poolOf[id] = static_cast<int>(pool - layout.pools.begin());
    if (single) {
      unsigned stage = users[id].front();
      auto at = std::lower_bound(pool->stages.begin(), pool->stages.end(), stage);
      if (at == pool->stages.end() || *at != stage)
        pool->stages.insert(at, stage);
      layout.offset[id] = stageBytes[stage];
      stageBytes[stage] += bytes;
      pool->slotBytes = std::max(pool->slotBytes, stageBytes[stage]);
    } else {
      layout.offset[id] = pool->slotBytes;
      pool->slotBytes += bytes;
    }
  }
  for (unsigned id : held)
    if (layout.poolOf[id] != InFlightLayout::kNoPool &&
        layout.pools[layout.poolOf[id]].perStage) {
      const std::vector<unsigned> &stages = layout.pools[layout.poolOf[id]].stages;
      layout.tenantOf[id] = static_cast<unsigned>(
          std::lower_bound(stages.begin(), stages.end(), users[id].front()) -
          stages.begin());
    }
  // Pools in the order of their stages (reports list them so).
  std::vector<unsigned> rank(layout.pools.size());
  for (unsigned i = 0; i < rank.size(); ++i)
    rank[i] = i;
  std::sort(rank.begin(), rank.end(), [&](unsigned a, unsigned b) {
    const InFlightLayout::Pool &x = layout.pools[a], &y = layout.pools[b];
    return std::make_pair(!x.perStage, x.stages) < std::make_pair(!y.perStage, y.stages);
  });
  std::vector<InFlightLayout::Pool> sorted;
  std::vector<int> position(rank.size());
  for (unsigned i = 0; i < rank.size(); ++i) {
    position[rank[i]] = static_cast<int>(i);
    sorted.push_back(std::move(layout.pools[rank[i]]));
  }
  layout.pools = std::move(sorted);
  for (int &pool : layout.poolOf)
    if (pool != InFlightLayout::kNoPool)
      pool = position[static_cast<size_t>(pool)];
  uint64_t base = 0;
  for (InFlightLayout::Pool &pool : layout.pools) {
    assignSlots(pool, order, coordinate);
    pool.base = base;
    base += pool.bytes();
  }
  layout.transientBase = base;
  return layout;
}

std::vector<PipelineOutput> loom::runtime::pipelineOutputs(const Plan &plan,
                                                          const std::vector<StepAccess> &access) {
  unsigned ranks = plan.mesh.axes[plan.pipeline.axis].size;
  std::vector<long> writer(plan.buffers.size(), -1);
  for (size_t i = 0; i < plan.steps.size(); ++i)
    for (size_t k = 0; k < plan.steps[i].buffers.size(); ++k)
      if (access[i].buffers[k] == BufferAccess::Written)
        writer[plan.steps[i].buffers[k]] = static_cast<long>(i);
  std::vector<PipelineOutput> outputs;
  for (const PlanBuffer &buffer : plan.buffers)
    if (buffer.role == BufferRole::Output && writer[buffer.id] >= 0) {
      size_t step = static_cast<size_t>(writer[buffer.id]);
      outputs.push_back({buffer.id, step, plan.steps[step].stages.front() % ranks});
    }
  return outputs;
}

uint64_t loom::runtime::carryBytes(const Plan &plan, const std::vector<unsigned> &carry) {
  uint64_t bytes = 0;
  for (unsigned id : carry)
    bytes += plan.buffers[id].bytes;
  return bytes;
}

uint64_t loom::runtime::pipelineMessageBytes(const Plan &plan) {
  uint64_t largest = 0;
  for (unsigned k = 0; k < plan.pipeline.stages; ++k)
    for (const auto *carry : {&plan.pipeline.forwardCarry[k], &plan.pipeline.backwardCarry[k]})
      largest = std::max(largest, carryBytes(plan, *carry));
  return largest;
}

std::vector<uint64_t> loom::runtime::forwardPipelineBytes(const Plan &plan,
                                                          unsigned microbatches) {
  unsigned ranks = plan.mesh.axes[plan.pipeline.axis].size;
  std::vector<uint64_t> bytes(ranks, 0);
  // One microbatch keeps no outputs, but its carries are held in flight
  // as several microbatches' are.
  std::vector<StepAccess> access = analyzeStepAccess(plan);
  Schedule order = forwardSchedule(ranks, plan.pipeline.stages, microbatches);
  PipelineValues values = analyzePipelineValues(plan, access, /*weightWithBackward=*/true);
  for (unsigned r = 0; r < ranks; ++r)
    bytes[r] = planInFlight(plan, values, order, r).bytes();
  if (microbatches > 1)
    for (const PipelineOutput &output : pipelineOutputs(plan, access))
      bytes[output.root] += alignedBytes(plan.buffers[output.id].bytes) * microbatches;
  return bytes;
}

std::string loom::runtime::poolStages(const std::vector<unsigned> &stages,
                                      bool perStage) {
  std::string text = stages.size() == 1 ? "stage " : "stages ";
  for (size_t i = 0; i < stages.size(); ++i)
    text += (i ? (perStage ? "," : "+") : "") + std::to_string(stages[i]);
  return text;
}

std::vector<InFlightLayout> loom::runtime::planInFlightRanks(const Plan &plan,
                                                             const Schedule &order) {
  PipelineValues values =
      analyzePipelineValues(plan, analyzeStepAccess(plan), !order.splitsBackward());
  std::vector<InFlightLayout> layouts;
  for (unsigned r = 0; r < order.ranks; ++r)
    layouts.push_back(planInFlight(plan, values, order, r));
  return layouts;
}
