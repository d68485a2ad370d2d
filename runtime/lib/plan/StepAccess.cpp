//===- StepAccess.cpp - What each step reads, writes and scratches --------===//

#include "loom/runtime/plan/Plan.h"

using namespace loom::runtime;

std::vector<StepAccess> loom::runtime::analyzeStepAccess(const Plan &plan) {
  // The first and last step naming each buffer's bytes (steps.size() for
  // none): a view's reads are its buffer's (a `view` record).
  size_t none = plan.steps.size();
  std::vector<size_t> first(plan.buffers.size(), none);
  std::vector<size_t> last(plan.buffers.size(), none);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (unsigned id : plan.steps[i].buffers) {
      unsigned bytes = plan.buffers[id].bytesId();
      if (first[bytes] == none)
        first[bytes] = i;
      last[bytes] = i;
    }
  }
  std::vector<StepAccess> steps(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    StepAccess &access = steps[i];
    for (unsigned id : plan.steps[i].buffers) {
      const PlanBuffer &buffer = plan.buffers[id];
      BufferAccess kind = BufferAccess::Scratch;
      unsigned bytes = buffer.bytesId();
      if (buffer.role == BufferRole::Input || buffer.role == BufferRole::Param ||
          buffer.viewOf >= 0 || first[bytes] < i)
        kind = BufferAccess::Read;
      else if (buffer.role == BufferRole::Output || last[bytes] > i)
        kind = BufferAccess::Written;
      access.buffers.push_back(kind);
      if (kind == BufferAccess::Read)
        access.bytesRead += buffer.bytes;
      else if (kind == BufferAccess::Written)
        access.bytesWritten += buffer.bytes;
    }
  }
  return steps;
}
