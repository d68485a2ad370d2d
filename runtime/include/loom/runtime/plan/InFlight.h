//===- InFlight.h - What a pipeline rank keeps per microbatch in flight ---===//
//
// A value one section of a pipelined plan writes and another reads is kept
// per microbatch beside the arena (runtime/exec/PipelineRunner.h runs it);
// here, which values those are and the memory they take on each rank. No
// device or communicator: loomc --explain reports the same figure.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLAN_INFLIGHT_H
#define LOOM_RUNTIME_PLAN_INFLIGHT_H

#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/plan/Schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

/// The values of a pipelined plan that cross sections: per step, those to
/// put back before it and those to save after it; per buffer, whether it
/// crosses (read in another section than its writer's, or carried).
/// `weightWithBackward`: the schedule runs a stage's weight-gradient
/// section right after its backward (every schedule but zero-bubble), so
/// what the backward leaves the weight part is still in the arena.
struct PipelineValues {
  std::vector<std::vector<unsigned>> restores, saves;
  std::vector<bool> crosses;
};
PipelineValues analyzePipelineValues(const Plan &plan,
                                     const std::vector<StepAccess> &access,
                                     bool weightWithBackward);
/// Per stage, the bytes one microbatch's saved and received values take on
/// its rank: the activations that stage holds per microbatch in flight.
std::vector<uint64_t> heldBytesPerStage(const Plan &plan, const PipelineValues &values);

/// Where one pipeline rank keeps the values of its microbatches in flight:
/// one block allocated before the first step, of pools of `slots` slots of
/// `slotBytes`. The values one stage alone uses are in the `perStage` pool:
/// a slot holds one (stage, microbatch)'s, from that microbatch's first
/// step of the stage on the rank to its last, each stage's values at fixed
/// offsets from the slot's start. The values of several stages (a tied
/// param's gradient part) are in a pool per set of stages: a slot holds one
/// microbatch's, from its first step of any of them to its last. A slot is
/// the lowest free one at the tenant's first step, and the last
/// microbatch's last until the update, which reads them. Values only one
/// microbatch's backward of a stage needs at a time (received gradients,
/// what the backward keeps for its weight part under zero-bubble, or
/// sends) are `transient`: one copy after the pools, which every
/// microbatch reuses, where the order runs those backwards one at a time.
struct InFlightLayout {
  static constexpr uint64_t kNone = ~uint64_t(0);
  static constexpr int kNoPool = -1;
  struct Pool {
    std::vector<unsigned> stages; // the rank's stages using its values, ascending
    bool perStage = false;        // a slot per (stage, microbatch), not per microbatch
    uint64_t base = 0, slotBytes = 0;
    unsigned slots = 0;
    /// Per tenant: microbatch mb's slot, or with perStage the slot of
    /// (stages[i], mb) at i * microbatches + mb.
    std::vector<unsigned> slotOf;
    uint64_t bytes() const { return slotBytes * slots; }
  };
  std::vector<Pool> pools;
  std::vector<uint64_t> offset; // per buffer, in its slot or the transient place; kNone: never held here
  std::vector<int> poolOf;      // per buffer; kNoPool: transient or never held
  std::vector<unsigned> tenantOf; // per buffer of the perStage pool: its stage's index there
  std::vector<bool> transient;  // per buffer
  uint64_t transientBase = 0, transientBytes = 0;
  uint64_t bytes() const { return transientBase + transientBytes; }
  /// Buffer `id`'s place for `microbatch`, from the block's start.
  uint64_t at(unsigned id, unsigned microbatch) const {
    if (transient[id])
      return transientBase + offset[id];
    const Pool &pool = pools[static_cast<size_t>(poolOf[id])];
    size_t microbatches = pool.slotOf.size() / (pool.perStage ? pool.stages.size() : 1);
    size_t tenant = (pool.perStage ? tenantOf[id] : 0) * microbatches + microbatch;
    return pool.base + pool.slotOf[tenant] * pool.slotBytes + offset[id];
  }
  /// The slots of every pool.
  unsigned slots() const {
    unsigned total = 0;
    for (const Pool &pool : pools)
      total += pool.slots;
    return total;
  }
};
/// How --info and --explain name a pool of a rank of several stages:
/// "stage 3", "stages 0,2" (a slot per stage and microbatch) or "stages
/// 0+2" (the values both use, a slot per microbatch).
std::string poolStages(const std::vector<unsigned> &stages, bool perStage);

/// The layout for the rank at `coordinate` of the pipeline axis running
/// `order` (its stages are those ownerOf gives it).
InFlightLayout planInFlight(const Plan &plan, const PipelineValues &values,
                            const Schedule &order, unsigned coordinate);

/// Every pipeline rank's layout (by coordinate) for a training step run in
/// `order`: what loomc's --explain and --memory-limit count beside each
/// rank's arena.
std::vector<InFlightLayout> planInFlightRanks(const Plan &plan, const Schedule &order);

/// An output of a pipelined plan: the step that writes it, and the
/// pipeline rank that computes it (the rank of that step's first stage),
/// which shares it with the others. In a forward of several microbatches
/// that rank keeps each microbatch's copy of it (PipelineRunner), of
/// alignedBytes each.
struct PipelineOutput {
  unsigned id;
  size_t writer;
  unsigned root;
};
/// The outputs some step writes, in buffer order.
std::vector<PipelineOutput> pipelineOutputs(const Plan &plan,
                                            const std::vector<StepAccess> &access);

/// The bytes of a carry's message: its buffers' bytes, packed.
uint64_t carryBytes(const Plan &plan, const std::vector<unsigned> &carry);

/// The bytes of the buffer every pipeline rank receives its carries into
/// (PipelineRunner): the largest carry of any stage, forward or backward.
/// It is allocated beside the arena and the values in flight, and loomc's
/// --explain and --memory-limit count it with them.
uint64_t pipelineMessageBytes(const Plan &plan);

/// What each pipeline rank (by coordinate) allocates beside its arena to
/// run a forward of `microbatches` in its pipeline (forwardSchedule): the
/// values it holds in flight and, for several microbatches, each one's
/// copy of the outputs it computes. loomc's --explain and --memory-limit
/// count it.
std::vector<uint64_t> forwardPipelineBytes(const Plan &plan, unsigned microbatches);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_INFLIGHT_H
