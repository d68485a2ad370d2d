//===- AssembledOutputs.h - A microbatched forward's whole outputs -*- C++ -*-===//
//
// A forward with a `microbatches M` record runs its program once per
// microbatch, each on 1/M of the batch's rows; its outputs are the whole
// batch's made from the M microbatches' values, as each output's
// `assemble` record says: stacked along dim 0 (rows), averaged (the loss:
// a mean over the batch) or added up (MoE routing counts).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_ASSEMBLEDOUTPUTS_H
#define LOOM_RUNTIME_EXEC_ASSEMBLEDOUTPUTS_H

#include "loom/runtime/plan/Plan.h"

#include <map>
#include <vector>

namespace loom::runtime {

class AssembledOutputs {
public:
  /// Starts over for the outputs of `plan` (the unpartitioned plan: one
  /// microbatch's whole values), of `microbatches` microbatches.
  void reset(const Plan &plan, uint64_t microbatches);
  /// Adds microbatch `microbatch`'s outputs, found at the offsets `layout`
  /// gives them in `arena` (`layout` names the same buffers as the plan of
  /// reset, e.g. a staging copy of it). Microbatches come in order, each
  /// once; after the last, means are divided.
  void take(const Plan &layout, uint64_t microbatch, const char *arena);
  /// Whether every microbatch was taken.
  bool complete() const { return taken == microbatches && microbatches > 0; }
  /// Output `buffer` for the whole batch: its shape (dim 0 times the
  /// microbatches for rows) and bytes; null for a buffer that is not
  /// assembled.
  const char *data(const PlanBuffer &buffer) const;
  PlanBuffer whole(const PlanBuffer &buffer) const;

private:
  uint64_t microbatches = 0, taken = 0;
  std::map<unsigned, std::vector<char>> values; // by buffer id
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_ASSEMBLEDOUTPUTS_H
