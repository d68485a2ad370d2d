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
#include <vector>

namespace loom::runtime {

/// The values of a pipelined plan that cross sections: per step, those to
/// put back before it and those to save after it; per buffer, whether it
/// crosses (read in another section than its writer's, or carried).
struct PipelineValues {
  std::vector<std::vector<unsigned>> restores, saves;
  std::vector<bool> crosses;
};
PipelineValues analyzePipelineValues(const Plan &plan,
                                     const std::vector<StepAccess> &access);
/// Per stage, the bytes one microbatch's saved and received values take on
/// its rank: the activations that stage holds per microbatch in flight.
std::vector<uint64_t> heldBytesPerStage(const Plan &plan, const PipelineValues &values);

/// Where one pipeline rank keeps the values of its microbatches in flight:
/// one block allocated before the first step, of `slots` slots of
/// `slotBytes`. Each value the rank saves or receives has a fixed offset in
/// a slot, and each microbatch the slot that the schedule's order gives it:
/// the lowest free one at its first step on the rank, freed after its last
/// (the last microbatch's lasts until the update, which reads it).
/// Values only one microbatch's backward of a stage needs at a time
/// (received gradients, what the backward keeps for its weight part or
/// sends) are `transient`: one copy after the slots, which every
/// microbatch reuses, where the order runs those backwards one at a time.
struct InFlightLayout {
  static constexpr uint64_t kNone = ~uint64_t(0);
  std::vector<uint64_t> offset; // per buffer; kNone: never held here
  std::vector<bool> transient;  // per buffer: offset is after the slots
  uint64_t slotBytes = 0, transientBytes = 0;
  unsigned slots = 0;
  std::vector<unsigned> slotOf; // per microbatch
  uint64_t bytes() const { return slotBytes * slots + transientBytes; }
};
/// The layout for the rank at `coordinate` of the pipeline axis running
/// `order` (its stages are those ownerOf gives it).
InFlightLayout planInFlight(const Plan &plan, const PipelineValues &values,
                            const Schedule &order, unsigned coordinate);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_INFLIGHT_H
