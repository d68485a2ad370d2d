//===- Report.cpp - What compiled executables print -----------------------===//

#include "exec/Report.h"

#include "loom/runtime/exec/PipelineRunner.h"
#include "loom/runtime/plan/Layout.h"
#include "loom/runtime/plan/Schedule.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace loom::runtime;

static std::string mebibytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MiB",
                static_cast<double>(bytes) / 1048576.0);
  return text;
}

void loom::runtime::printPlanInfo(std::FILE *out, const Plan &plan) {
  std::fprintf(out, "model    %s\n", plan.model.c_str());
  std::fprintf(out, "device   %s\n", deviceName(plan.device));
  std::fprintf(out, "arena    %llu bytes (%s, peak of the memory plan)\n",
               static_cast<unsigned long long>(plan.arenaBytes),
               mebibytes(plan.arenaBytes).c_str());
  const PlanGpuImage &gpu = plan.gpuImage;
  if (gpu.present)
    std::fprintf(out, "gpu      %s %s, %llu bytes (run with --device cuda)\n",
                 gpu.archName.c_str(), gpuImageFormatName(gpu.format),
                 static_cast<unsigned long long>(gpu.bytes));

  // A table with columns as wide as their widest cell.
  std::vector<std::vector<std::string>> rows = {
      {"id", "name", "role", "dtype", "shape", "offset", "bytes", "init"}};
  for (const PlanBuffer &buffer : plan.buffers) {
    std::string init;
    if (buffer.init.kind != InitKind::None) {
      char args[64] = "";
      if (buffer.init.kind == InitKind::Constant ||
          buffer.init.kind == InitKind::Normal)
        std::snprintf(args, sizeof(args), " %g", buffer.init.a);
      else if (buffer.init.kind == InitKind::Uniform)
        std::snprintf(args, sizeof(args), " %g %g", buffer.init.a,
                      buffer.init.b);
      init = std::string(initKindName(buffer.init.kind)) + args;
    } else if (buffer.bound) {
      // What an input's values must be (the column says how a buffer gets them).
      init = "ids < " + std::to_string(buffer.bound);
    }
    rows.push_back({std::to_string(buffer.id), buffer.name,
                    roleName(buffer.role), dtypeName(buffer.dtype),
                    formatShape(buffer.shape), std::to_string(buffer.offset),
                    std::to_string(buffer.bytes), init});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto &row : rows)
    for (size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  std::fprintf(out, "buffers  %zu\n", plan.buffers.size());
  for (const auto &row : rows) {
    std::string line = " ";
    for (size_t i = 0; i < row.size(); ++i) {
      std::string cell = row[i];
      // Numbers right-aligned, text left-aligned.
      bool numeric = i == 0 || i == 5 || i == 6;
      std::string pad(widths[i] - cell.size(), ' ');
      line += " " + (numeric ? pad + cell : cell + pad);
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    std::fprintf(out, "%s\n", line.c_str());
  }
  std::fprintf(out, "kernels  %zu\n", plan.kernels.size());
  std::vector<size_t> launches(plan.kernels.size(), 0);
  for (const PlanLaunch &launch : plan.launches)
    ++launches[launch.kernel];
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const PlanKernel &kernel = plan.kernels[i];
    if (gpu.present)
      std::fprintf(out, "  %s (%u buffers, %zu GPU launch%s)\n",
                   kernel.name.c_str(), kernel.numArgs, launches[i],
                   launches[i] == 1 ? "" : "es");
    else
      std::fprintf(out, "  %s (%u buffers)\n", kernel.name.c_str(),
                   kernel.numArgs);
  }
  if (gpu.present)
    std::fprintf(out, "launches %zu\n", plan.launches.size());
  std::fprintf(out, "steps    %zu\n", plan.steps.size());
  if (size_t perMicrobatch = plan.microbatchSteps())
    std::fprintf(out,
                 "microbatches %llu per step: steps 0 to %zu run once per "
                 "microbatch, the batch inputs hold %llu times their rows\n",
                 static_cast<unsigned long long>(plan.optimizer.microbatches),
                 perMicrobatch - 1,
                 static_cast<unsigned long long>(plan.optimizer.microbatches));
  if (plan.forwardMicrobatches()) {
    std::string assembled;
    for (const PlanBuffer &buffer : plan.buffers)
      if (buffer.assembly != Assembly::None)
        assembled += std::string(assembled.empty() ? "" : ", ") + buffer.name +
                     " by " + assemblyName(buffer.assembly);
    std::fprintf(out,
                 "microbatches %llu per run: every step runs once per "
                 "microbatch, the batch inputs hold %llu times their rows; "
                 "outputs for the whole batch: %s\n",
                 static_cast<unsigned long long>(plan.optimizer.microbatches),
                 static_cast<unsigned long long>(plan.optimizer.microbatches),
                 assembled.c_str());
  }
}

void loom::runtime::printPartitionedInfo(std::FILE *out, const Plan &spmd) {
  const PlanMesh &mesh = spmd.mesh;
  std::fprintf(out, "mesh     %s %s (%u rank%s: mpirun -np %u)\n",
               mesh.name.c_str(), formatMeshAxes(mesh).c_str(), mesh.numRanks,
               mesh.numRanks == 1 ? "" : "s", mesh.numRanks);
  size_t collectives = spmd.numCollectives();
  size_t accumulates = 0, transfers = 0;
  for (const PlanStep &step : spmd.steps) {
    accumulates += step.kind == StepKind::Accumulate;
    transfers += step.kind == StepKind::Transfer;
  }
  auto count = [](size_t n, const char *what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  std::fprintf(out,
               "spmd     arena %llu bytes per rank (%s), %s, %s (%s, %s)\n",
               static_cast<unsigned long long>(spmd.arenaBytes),
               mebibytes(spmd.arenaBytes).c_str(),
               count(spmd.kernels.size(), "kernel").c_str(),
               count(spmd.steps.size(), "step").c_str(),
               count(spmd.steps.size() - collectives - accumulates - transfers,
                     "kernel step").c_str(),
               count(collectives, "collective").c_str());
  size_t counts[kNumCollectiveKinds] = {};
  // The all-reduces that sum a gradient bucket (several IN OUT pairs) and
  // the sums they carry.
  size_t buckets = 0, bucketSums = 0;
  for (const PlanStep &step : spmd.steps)
    if (step.kind == StepKind::Collective) {
      ++counts[static_cast<unsigned>(step.collective.kind)];
      if (step.buffers.size() > 2) {
        ++buckets;
        bucketSums += step.buffers.size() / 2;
      }
    }
  for (unsigned kind = 0; kind < kNumCollectiveKinds; ++kind) {
    if (!counts[kind])
      continue;
    std::string bucketed;
    if (static_cast<CollectiveKind>(kind) == CollectiveKind::AllReduce && buckets)
      bucketed = " (" + count(buckets, "gradient bucket") + ": " +
                 std::to_string(bucketSums) + " sums)";
    std::fprintf(out, "  %-14s %zu%s\n",
                 collectiveKindName(static_cast<CollectiveKind>(kind)),
                 counts[kind], bucketed.c_str());
  }
}

static std::string formatValue(DType dtype, double value) {
  char text[32];
  // printf writes a NaN's sign ("-nan" for inf + -inf); a NaN is "nan".
  if (std::isnan(value))
    return "nan";
  if (isFloatDType(dtype))
    std::snprintf(text, sizeof(text), "%.6g", value);
  else
    std::snprintf(text, sizeof(text), "%.0f", value);
  return text;
}

bool loom::runtime::isMoeStats(const PlanBuffer &buffer) {
  return buffer.role == BufferRole::Output &&
         buffer.name.rfind(kMoeStatsPrefix, 0) == 0 && buffer.shape.size() == 2 &&
         buffer.shape[1] == 2 && buffer.dtype == DType::F32;
}

void loom::runtime::printMoeStats(std::FILE *out, const PlanBuffer &buffer,
                                  const void *data) {
  std::string block = buffer.name.substr(std::string(kMoeStatsPrefix).size());
  std::fprintf(out, "moe %s: expert  routed  dropped\n", block.c_str());
  double routed = 0, dropped = 0;
  for (int64_t e = 0; e < buffer.shape[0]; ++e) {
    double r = loadElement(buffer.dtype, data, 2 * e);
    double d = loadElement(buffer.dtype, data, 2 * e + 1);
    routed += r;
    dropped += d;
    std::fprintf(out, "moe %s: %6lld  %6.0f  %7.0f\n", block.c_str(),
                 static_cast<long long>(e), r, d);
  }
  std::fprintf(out, "moe %s: total   %6.0f  %7.0f (%.1f%% dropped)\n",
               block.c_str(), routed, dropped,
               routed > 0 ? 100.0 * dropped / routed : 0.0);
}

void loom::runtime::printSummary(std::FILE *out, const PlanBuffer &buffer,
                                 const void *data) {
  double sum = 0, lo = INFINITY, hi = -INFINITY;
  uint64_t nans = 0;
  for (uint64_t i = 0; i < buffer.numElements; ++i) {
    double value = loadElement(buffer.dtype, data, i);
    if (std::isnan(value)) {
      ++nans;
      continue;
    }
    sum += value;
    lo = std::min(lo, value);
    hi = std::max(hi, value);
  }
  uint64_t counted = buffer.numElements - nans;
  double mean = nans ? NAN : counted ? sum / static_cast<double>(counted) : 0;
  std::string first = "[";
  for (uint64_t i = 0; i < buffer.numElements && i < 4; ++i)
    first += (i ? ", " : "") +
             formatValue(buffer.dtype, loadElement(buffer.dtype, data, i));
  if (buffer.numElements > 4)
    first += ", ...";
  first += "]";
  std::fprintf(
      out, "%s: %s %s mean %s min %s max %s first %s", buffer.name.c_str(),
      dtypeName(buffer.dtype), formatShape(buffer.shape).c_str(),
      formatValue(DType::F32, mean).c_str(),
      counted ? formatValue(buffer.dtype, lo).c_str() : "nan",
      counted ? formatValue(buffer.dtype, hi).c_str() : "nan", first.c_str());
  if (nans)
    std::fprintf(out, " (%llu NaN)", static_cast<unsigned long long>(nans));
  std::fprintf(out, "\n");
}

void loom::runtime::printPipelineInfo(std::FILE *out, const Plan &spmd,
                                      const std::string &scheduleName) {
  const PlanPipeline &pipeline = spmd.pipeline;
  if (!pipeline.present)
    return;
  unsigned ranks = spmd.mesh.axes[pipeline.axis].size;
  bool train = !spmd.optimizer.kind.empty();
  std::string name = scheduleName.empty() ? pipeline.schedule : scheduleName;
  unsigned microbatches = static_cast<unsigned>(spmd.optimizer.microbatches);
  std::fprintf(out, "pipeline %u stages over axis %s (%u ranks, %u per rank), "
               "schedule %s, %u microbatch%s\n",
               pipeline.stages, spmd.mesh.axes[pipeline.axis].name.c_str(),
               ranks, pipeline.stages / ranks,
               train ? name.c_str() : "forward only", microbatches,
               microbatches == 1 ? "" : "es");
  ScheduleKind kind;
  bool known = parseScheduleKind(name, kind);
  PipelineValues values = analyzePipelineValues(
      spmd, analyzeStepAccess(spmd), !(known && kind == ScheduleKind::ZeroBubble));
  std::vector<uint64_t> held = heldBytesPerStage(spmd, values);
  for (unsigned stage = 0; stage < pipeline.stages; ++stage) {
    size_t counts[4] = {};
    for (const PlanStep &step : spmd.steps)
      if (step.phase != StepPhase::Update && step.stages.front() == stage)
        ++counts[static_cast<unsigned>(step.phase)];
    std::fprintf(out, "  stage %u (rank %u): %zu forward, %zu backward, %zu "
                 "weight-gradient steps; holds %s per microbatch in flight\n",
                 stage, stage % ranks, counts[0], counts[1], counts[2],
                 mebibytes(held[stage]).c_str());
  }
  uint64_t messages = pipelineMessageBytes(spmd);
  std::fprintf(out, "  every rank receives its carries into a buffer of %s "
               "(%llu bytes, the largest carry)\n", mebibytes(messages).c_str(),
               static_cast<unsigned long long>(messages));
  // Params and optimizer state stay on the stages that use them (`held`).
  uint64_t params = 0;
  std::vector<uint64_t> heldParams(ranks, 0);
  for (const PlanBuffer &buffer : spmd.buffers) {
    if (buffer.role != BufferRole::Param)
      continue;
    params += buffer.bytes;
    for (unsigned rank = 0; rank < ranks; ++rank)
      if (heldAt(buffer, rank))
        heldParams[rank] += buffer.bytes;
  }
  for (unsigned rank = 0; rank < ranks; ++rank)
    std::fprintf(out, "  rank %u holds %s of the %s of params%s\n", rank,
                 mebibytes(heldParams[rank]).c_str(), mebibytes(params).c_str(),
                 train ? " and optimizer state" : "");
  if (!train)
    return;
  Schedule schedule;
  std::string error;
  if (!known ||
      !buildSchedule(kind, ranks, pipeline.stages, microbatches, schedule, error) ||
      !verifySchedule(schedule, error)) {
    std::fprintf(out, "  schedule %s: %s\n", name.c_str(), error.c_str());
    return;
  }
  ScheduleTimeline timeline =
      simulateSchedule(schedule, {uniformStageCost(schedule)});
  std::fprintf(out, "  bubble %.4f with uniform stages (backward = 2 forwards)\n",
               timeline.bubble);
  // What the runtime allocates for them: one slot per microbatch the rank
  // holds at once, each with room for every value its stages keep.
  for (unsigned rank = 0; rank < ranks; ++rank) {
    unsigned peak = timeline.peakActivations[rank];
    InFlightLayout layout = planInFlight(spmd, values, schedule, rank);
    // With several stages a rank, each held (microbatch, stage) counts.
    const char *held = schedule.stages > schedule.ranks
                           ? (peak == 1 ? "microbatch-stage" : "microbatch-stages")
                           : (peak == 1 ? "microbatch" : "microbatches");
    std::string transient =
        layout.transientBytes ? " and " + mebibytes(layout.transientBytes) +
                                    " for one backward at a time"
                              : "";
    // One pool: "N slots of X"; with several stages a rank, a pool each.
    std::string slots;
    for (const InFlightLayout::Pool &pool : layout.pools) {
      if (!slots.empty())
        slots += "; ";
      // "stages 0,2: " a slot per (stage, microbatch); "stages 0+2: "
      // the values both use, a slot per microbatch.
      if (layout.pools.size() > 1)
        slots += poolStages(pool.stages, pool.perStage) + ": ";
      slots += std::to_string(pool.slots) + (pool.slots == 1 ? " slot of " : " slots of ") +
               mebibytes(pool.slotBytes);
    }
    if (slots.empty())
      slots = "no slots";
    std::fprintf(out, "  rank %u: %u %s in flight at peak, "
                 "activations %s (%s%s, allocated before the first step)\n",
                 rank, peak, held, mebibytes(layout.bytes()).c_str(),
                 slots.c_str(), transient.c_str());
  }
}
