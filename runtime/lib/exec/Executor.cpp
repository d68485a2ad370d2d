//===- Executor.cpp - Running a plan's steps on the CPU -------------------===//

#include "loom/runtime/exec/Executor.h"

#include "loom/runtime/comm/Collective.h"
#include "loom/runtime/exec/Training.h"
#include "loom/runtime/plan/Layout.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

using namespace loom::runtime;

bool loom::runtime::bindKernels(const Plan &plan, const LoomKernel *table,
                                std::vector<const LoomKernel *> &bound,
                                std::string &error) {
  std::unordered_map<std::string_view, const LoomKernel *> byName;
  for (const LoomKernel *entry = table; entry && entry->name; ++entry)
    byName.emplace(entry->name, entry); // the first of duplicates wins
  bound.clear();
  for (const PlanKernel &kernel : plan.kernels) {
    std::string where = "plan:" + std::to_string(kernel.line) + ": kernel '" +
                        kernel.name + "' ";
    auto found = byName.find(kernel.name);
    if (found == byName.end() || !found->second->call) {
      error = where + "is not provided by this executable";
      return false;
    }
    if (found->second->numArgs != kernel.numArgs) {
      error = where + "takes " + std::to_string(kernel.numArgs) +
              " buffers in the plan but " +
              std::to_string(found->second->numArgs) + " in this executable";
      return false;
    }
    bound.push_back(found->second);
  }
  return true;
}

bool Executor::bind(const Plan &plan, const LoomKernel *table,
                    std::string &error) {
  this->plan = &plan;
  access = analyzeStepAccess(plan);
  dropoutKey = dropoutMicrobatchKey(plan);
  return bindKernels(plan, table, kernels, error);
}

bool Executor::allocate(std::string &error) {
  uint64_t scratchBytes = 0;
  groups.assign(plan->steps.size(), CommGroup());
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const PlanStep &step = plan->steps[i];
    if (step.kind != StepKind::Collective)
      continue;
    if (!comm || comm->size() != plan->mesh.numRanks) {
      error = "plan:" + std::to_string(step.line) +
              ": a collective needs the " +
              std::to_string(plan->mesh.numRanks) + " ranks of mesh '" +
              plan->mesh.name + "', but this run has " +
              std::to_string(comm ? comm->size() : 1);
      return false;
    }
    groups[i] = meshGroup(plan->mesh, comm->rank(), step.collective.axes);
    // Every rank is here; in a pipelined run they meet their first
    // collective of a group at different times.
    if (!comm->prepareGroup(groups[i], error))
      return false;
    uint64_t bytes = collectiveScratchBytes(*plan, step);
    scratchBytes = bytes > scratchBytes ? bytes : scratchBytes;
  }
  if (!memory.allocate(plan->arenaBytes, error)) {
    // Say where the memory goes: the rank, and the largest buffers.
    std::vector<const PlanBuffer *> largest;
    for (const PlanBuffer &buffer : plan->buffers)
      largest.push_back(&buffer);
    std::sort(largest.begin(), largest.end(), [](const PlanBuffer *a, const PlanBuffer *b) {
      return a->bytes > b->bytes;
    });
    largest.resize(std::min<size_t>(largest.size(), 3));
    std::string names;
    for (const PlanBuffer *buffer : largest) {
      char mib[32];
      std::snprintf(mib, sizeof(mib), "%.2f", static_cast<double>(buffer->bytes) / 1048576.0);
      names += std::string(names.empty() ? "" : ", ") + "'" + buffer->name + "' (" + mib + " MiB)";
    }
    // The driver names the other ranks in their errors; rank 0 too, here.
    if (comm && comm->size() > 1 && comm->rank() == 0)
      error = "rank 0: " + error;
    if (!names.empty())
      error += "; its largest buffers: " + names;
    return false;
  }
  if (!scratch.allocate(scratchBytes, error)) {
    error = "collectives' scratch memory: " + error;
    return false;
  }
  return true;
}

bool Executor::init(const Plan &plan, const LoomKernel *table,
                    std::string &error) {
  return bind(plan, table, error) && allocate(error);
}

char *Executor::buffer(unsigned id) const {
  return memory.data() + plan->buffers[id].offset;
}

void Executor::accumulate(const PlanStep &step, uint64_t microbatch) {
  const PlanBuffer &target = plan->buffers[step.buffers[1]];
  const float *in = reinterpret_cast<const float *>(buffer(step.buffers[0]));
  float *sum = reinterpret_cast<float *>(buffer(step.buffers[1]));
  uint64_t n = target.bytes / sizeof(float);
  if (microbatch == 0)
    std::memcpy(sum, in, target.bytes);
  else
    for (uint64_t i = 0; i < n; ++i)
      sum[i] += in[i];
  // The mean, rounded once: exactly the sum for a power-of-two count.
  uint64_t count = plan->optimizer.microbatches;
  if (microbatch + 1 == count)
    for (uint64_t i = 0; i < n; ++i)
      sum[i] /= static_cast<float>(count);
}

void Executor::checkFinite(size_t index) {
  const PlanStep &step = plan->steps[index];
  for (size_t b = 0; b < step.buffers.size(); ++b) {
    const PlanBuffer &buffer = plan->buffers[step.buffers[b]];
    if (access[index].buffers[b] != BufferAccess::Written ||
        !isFloatDType(buffer.dtype))
      continue;
    const char *data = this->buffer(buffer.id);
    uint64_t count = 0, first = 0;
    const char *firstKind = "";
    for (uint64_t i = 0; i < buffer.numElements; ++i) {
      // f16 and bf16 widen to f32 with their NaNs and infinities.
      double value = loadElement(buffer.dtype, data, i);
      if (!std::isfinite(value) && count++ == 0) {
        first = i;
        firstKind = std::isnan(value) ? "nan" : value < 0 ? "-inf" : "inf";
      }
    }
    if (!count)
      continue;
    const PlanKernel &kernel = plan->kernels[step.kernel];
    numericsFailure =
        "check-numerics: plan step " + std::to_string(index) + " (kernel '" +
        kernel.name + "'" +
        (kernel.source.empty() ? std::string() : ", from " + kernel.source) +
        ") wrote " + firstKind + " to '" + buffer.name +
        "' (" + dtypeName(buffer.dtype) + " " + formatShape(buffer.shape) +
        ") at element " + std::to_string(first) + "; " +
        std::to_string(count) + " of its " + std::to_string(buffer.numElements) +
        " elements are not finite";
    return;
  }
}

bool Executor::runSteps(size_t begin, size_t end, uint64_t microbatch,
                        TraceRecorder *trace, std::string &error) {
  using Clock = std::chrono::steady_clock;
  auto micros = [](Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  // Times count from the run's start (TraceRecorder::beginRun), however
  // many calls the run makes (a pipelined one, one per step).
  Clock::time_point start = trace ? trace->runStart() : Clock::now();
  // The dropout masks' microbatch key (a pipeline restores each
  // microbatch's inputs before its steps, this one among them).
  fillDropoutMicrobatch(dropoutKey, arena(), dropoutOff ? -1.0 : static_cast<double>(microbatch));
  for (size_t i = begin; i < end && i < plan->steps.size(); ++i) {
    const PlanStep &step = plan->steps[i];
    if (step.kind == StepKind::Transfer)
      continue; // the pipeline runner moves it (PipelineRunner.h)
    if (step.kind == StepKind::Accumulate) {
      Clock::time_point before = Clock::now();
      accumulate(step, microbatch);
      if (trace)
        trace->addStep(static_cast<unsigned>(i), "accumulate",
                       micros(before - start), micros(Clock::now() - before),
                       access[i].bytesRead, access[i].bytesWritten);
      continue;
    }
    if (step.kind == StepKind::Collective) {
      Clock::time_point before = Clock::now();
      collectiveBuffers.clear();
      for (unsigned id : step.buffers)
        collectiveBuffers.push_back(buffer(id));
      if (!runCollective(*plan, step, groups[i], *comm, collectiveBuffers,
                         scratch.data(), error))
        return false;
      if (trace)
        trace->addCollective(
            static_cast<unsigned>(i), collectiveKindName(step.collective.kind),
            formatAxes(plan->mesh, step.collective.axes),
            micros(before - start), micros(Clock::now() - before));
      continue;
    }
    Clock::time_point before = Clock::now();
    runKernelStep(i);
    if (checkNumerics && numericsFailure.empty())
      checkFinite(i);
    if (trace) {
      Clock::time_point after = Clock::now();
      trace->addStep(static_cast<unsigned>(i), kernels[step.kernel]->name,
                     micros(before - start), micros(after - before),
                     access[i].bytesRead, access[i].bytesWritten,
                     plan->kernels[step.kernel].source);
    }
  }
  return true;
}

void Executor::runKernelStep(size_t index) {
  const PlanStep &step = plan->steps[index];
  args.clear();
  for (unsigned id : step.buffers)
    args.push_back(buffer(id));
  kernels[step.kernel]->call(args.data());
}
