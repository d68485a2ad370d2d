//===- StepAccess.cpp - What each step reads, writes and scratches --------===//

#include "loom/runtime/plan/Plan.h"

using namespace loom::runtime;

std::vector<StepAccess> loom::runtime::analyzeStepAccess(const Plan &plan) {
  // The first and last step naming each buffer (steps.size() for none).
  size_t none = plan.steps.size();
  std::vector<size_t> first(plan.buffers.size(), none);
  std::vector<size_t> last(plan.buffers.size(), none);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (unsigned id : plan.steps[i].buffers) {
      if (first[id] == none)
        first[id] = i;
      last[id] = i;
    }
  }
  std::vector<StepAccess> steps(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    StepAccess &access = steps[i];
    for (unsigned id : plan.steps[i].buffers) {
      const PlanBuffer &buffer = plan.buffers[id];
      BufferAccess kind = BufferAccess::Scratch;
      if (buffer.role == BufferRole::Input ||
          buffer.role == BufferRole::Param || first[id] < i)
        kind = BufferAccess::Read;
      else if (buffer.role == BufferRole::Output || last[id] > i)
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
