//===- ExplainPrint.cpp - loomc --explain's text and JSON forms -----------===//

#include "Explain/Explain.h"
#include "loom/runtime/plan/InFlight.h"
#include "llvm/ADT/StringExtras.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace loom {

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4)
    bytes /= 1024, ++unit;
  return unit == 0 ? formatv("{0} B", static_cast<int64_t>(bytes)).str()
                   : formatv("{0:f2} {1}", bytes, units[unit]).str();
}

std::string formatSeconds(double seconds) {
  if (seconds >= 1)
    return formatv("{0:f3} s", seconds).str();
  if (seconds >= 1e-3)
    return formatv("{0:f3} ms", seconds * 1e3).str();
  return formatv("{0:f2} us", seconds * 1e6).str();
}

/// "dp=1 tp=0" for rank `rank`.
static std::string coordinatesOf(const ExplainReport &report, int64_t rank) {
  std::string text;
  for (auto [i, name] : llvm::enumerate(report.axes))
    text += (i ? " " : "") + name + "=" + std::to_string(report.coordinate(rank, i));
  return text;
}

/// "3 slots of B" for one pool; for several (a rank of several stages)
/// "stages 0,2: 5 slots of B; stages 0+2: ...", a slot per (stage,
/// microbatch) for the values of one stage and per microbatch for those of
/// both.
static std::string activationSlots(const ExplainRank &rank) {
  std::string text;
  for (const ExplainRank::ActivationPool &pool : rank.activationPools) {
    if (!text.empty())
      text += "; ";
    if (rank.activationPools.size() > 1)
      text += ::loom::runtime::poolStages(pool.stages, pool.perStage) + ": ";
    text += formatv("{0} slot{1} of {2}", pool.slots, pool.slots == 1 ? "" : "s",
                    pool.slotBytes)
                .str();
  }
  // (A rank that keeps nothing between its sections, as --info says.)
  return text.empty() ? "no slots" : text;
}

/// A rank's stages: "0 4 8", or past 8 of them the first 4, "...", the
/// last and how many (65536 stages on 2 ranks had printed 32768 numbers a
/// line).
static std::string stageList(const std::vector<unsigned> &stages) {
  constexpr size_t kMostListed = 8;
  std::string text;
  for (auto [i, stage] : llvm::enumerate(stages)) {
    if (stages.size() > kMostListed && i == 4)
      return text + " ... " + std::to_string(stages.back()) + ", " +
             std::to_string(stages.size()) + " stages";
    text += (i ? " " : "") + std::to_string(stage);
  }
  return text;
}

std::string rankName(const ExplainReport &report, const ExplainRank &rank) {
  if (report.stages == 0)
    return report.ranks > 1 ? "every rank" : "the rank";
  int64_t first = rank.coordinate * report.pipelineStride();
  return formatv("{0}={1} (rank {2}: {3}; stages {4})", report.pipelineAxis,
                 rank.coordinate, first, coordinatesOf(report, first),
                 stageList(rank.stages))
      .str();
}

void printExplainText(const ExplainReport &r, raw_ostream &os) {
  os << "explain: model '" << r.model << "', "
     << (r.training ? "training step (" + r.optimizer + (r.zero ? ", ZeRO-1" : "") +
                          (r.recompute ? ", layers recomputed" : "") + ")"
                    : std::string("forward"))
     << ", " << r.microbatches << " microbatch" << (r.microbatches == 1 ? "" : "es")
     << " per step, on " << r.device << " (" << r.deviceName << ")\n";

  os << "\nmesh\n";
  if (r.axes.empty()) {
    os << "  none: one rank\n";
  } else {
    os << "  " << r.grid << ":";
    for (auto [name, size] : llvm::zip(r.axes, r.sizes))
      os << " " << name << "=" << size;
    os << ", " << r.ranks << " ranks; rank =";
    for (auto [i, name] : llvm::enumerate(r.axes))
      os << (i ? " + " : " ") << r.strides[i] << "*" << name;
    os << "\n";
    int64_t shown = r.ranks <= 16 ? r.ranks : 4;
    for (int64_t rank = 0; rank < shown; ++rank)
      os << "  rank " << rank << ": " << coordinatesOf(r, rank) << "\n";
    if (shown < r.ranks)
      os << "  ...\n  rank " << r.ranks - 1 << ": "
         << coordinatesOf(r, r.ranks - 1) << "\n";
  }

  os << "\nparams\n  " << r.paramElements << " elements, " << r.paramBytes
     << " bytes (" << formatBytes(r.paramBytes) << ") in the whole model\n";

  if (!r.moe.empty()) {
    os << "\nmixture of experts\n";
    for (const ExplainMoe &m : r.moe) {
      std::string axes = llvm::join(m.exchangeAxes, ",");
      os << "  " << (m.block.empty() ? "moe" : m.block) << " (" << m.source
         << "): " << m.experts << " experts, " << m.expertsPerRank
         << " per rank over '" << axes << "'"
         << (m.slotBlocks > 1 ? " (its slots in " + std::to_string(m.slotBlocks) +
                                    " blocks of " +
                                    std::to_string(m.capacity / m.slotBlocks) + ")"
                              : std::string())
         << "; top " << m.topK << " of "
         << m.tokens << " tokens; capacity " << m.capacity
         << " slots per expert (" << m.experts * m.capacity << " in all)\n"
         << (m.exchangeRows
                 ? "    dispatch and combine: all-to-alls over '" + axes +
                       "', each rank sending " + std::to_string(m.exchangeRows) +
                       (m.slotBlocks > 1 ? " rows per expert and slot block"
                                         : " rows per expert") +
                       " (the most it can keep for one)\n"
                 : std::string(r.ranks > 1 ? "    routed whole on every rank "
                                             "(no all-to-all for its tokens' "
                                             "layout)\n"
                                           : ""));
    }
  }

  os << "\nmemory per rank, bytes\n";
  for (const ExplainRank &rank : r.ranksByCoordinate) {
    os << "  " << rankName(r, rank) << ":\n";
    auto row = [&](StringRef what, int64_t bytes, std::string note = "") {
      os << "    " << left_justify(what, 16) << right_justify(std::to_string(bytes), 16)
         << "  " << formatBytes(bytes) << note << "\n";
    };
    row("params", rank.params);
    row("gradients", rank.gradients);
    row("optimizer state", rank.optimizer);
    row("inputs", rank.inputs);
    row("activations", rank.activations,
        !r.training ? std::string(rank.activationsAllocated
                                      ? (r.microbatches > 1
                                             ? " (each microbatch's copy of the outputs this rank "
                                               "computes, and the values it holds in flight, as "
                                               "the runtime allocates)"
                                             : " (the values it holds in flight, as the runtime "
                                               "allocates)")
                                      : " (a forward keeps none)")
        : rank.activationsAllocated
            ? formatv(" ({0}{1}, as the runtime allocates; "
                      "the backward reads {2} at the peak, {3} in flight)",
                      activationSlots(rank),
                      rank.activationTransientBytes
                          ? formatv(" and {0} for one backward at a time",
                                    rank.activationTransientBytes).str()
                          : std::string(),
                      rank.liveActivations, rank.inFlight)
                  .str()
            : formatv(" ({0} per microbatch, {1} in flight at the peak)",
                      rank.activationsPerMicrobatch, rank.inFlight)
                  .str());
    if (rank.messages)
      row("messages", rank.messages,
          " (the buffer it receives carries into: the largest carry, "
          "as the runtime allocates)");
    row("total", rank.total());
    os << "    largest:";
    for (auto [i, tensor] : llvm::enumerate(rank.largest))
      os << (i ? ", " : " ") << tensor.first << " " << formatBytes(tensor.second);
    os << "\n";
  }
  if (r.planArenaBytes) {
    os << "  static memory plan: an arena of " << r.planArenaBytes << " bytes ("
       << formatBytes(r.planArenaBytes) << ") on every rank";
    // The slots beside it are what the build checks too: the arena alone
    // had read as all a pipeline rank allocates.
    if (int64_t allocated = r.allocatedBytes(); allocated > r.planArenaBytes)
      os << "; with the activation slots and message buffer beside it, " << allocated << " bytes ("
         << formatBytes(allocated) << ") on the rank that keeps the most";
    os << "\n";
  }

  os << "\ncollectives per step, per rank\n";
  if (r.collectives.empty())
    os << "  none\n";
  else
    os << "  " << left_justify("kind", 15) << left_justify("group", 10)
       << right_justify("ranks", 6) << "  " << left_justify("link", 6)
       << right_justify("bytes", 14) << right_justify("calls", 7) << "  "
       << left_justify("phase", 9) << right_justify("each", 12) << "  source\n";
  for (const ExplainCollective &c : r.collectives)
    os << "  " << left_justify(c.kind, 15) << left_justify(c.axes, 10)
       << right_justify(std::to_string(c.groupSize), 6) << "  "
       << left_justify(c.intraNode ? "node" : "net", 6)
       << right_justify(std::to_string(c.bytes), 14)
       << right_justify(std::to_string(c.count), 7) << "  "
       << left_justify(c.phase, 9) << right_justify(formatSeconds(c.seconds), 12)
       << "  " << (c.source.empty() ? "-" : c.source)
       << (c.overlaps ? " (overlaps the backward)" : "") << "\n";

  if (r.stages) {
    os << "\npipeline\n  schedule " << r.schedule << ": " << r.stages
       << " stages on " << r.pipelineRanks << " '" << r.pipelineAxis
       << "' ranks (" << r.stages / r.pipelineRanks << " each), "
       << r.microbatches << " microbatches\n"
       << "  bubble " << format("%.4f", r.bubble)
       << " with the modelled stage costs, " << format("%.4f", r.uniformBubble)
       << " with uniform stages\n";
  }

  os << "\nstep time, modelled on " << r.device
     << " (kernels by roofline, collectives by alpha-beta)\n";
  for (const ExplainRank &rank : r.ranksByCoordinate)
    os << "  " << rankName(r, rank) << ": forward "
       << formatSeconds(rank.forwardSeconds) << ", backward "
       << formatSeconds(rank.backwardSeconds) << " per microbatch; exposed "
       << "gradient sums " << formatSeconds(rank.exposedBucketSeconds)
       << ", update " << formatSeconds(rank.updateSeconds) << "; done at "
       << formatSeconds(rank.finishSeconds) << "\n";
  os << "  step " << formatSeconds(r.stepSeconds) << "; model FLOPs "
     << format("%.4g", r.modelFlops) << " per step (the model's matmuls); MFU "
     << format("%.1f", 100 * r.mfu()) << "% of " << format("%g", r.peakTflops)
     << " TFLOP/s per GPU\n";
}

void printExplainJson(const ExplainReport &r, raw_ostream &os) {
  json::OStream j(os, 2);
  j.object([&] {
    j.attribute("model", r.model);
    j.attribute("device", r.device);
    j.attribute("training", r.training);
    j.attribute("optimizer", r.optimizer);
    j.attribute("zero", r.zero);
    j.attribute("recompute_layers", r.recompute);
    j.attribute("microbatches", r.microbatches);
    j.attributeObject("mesh", [&] {
      j.attribute("grid", r.grid);
      j.attributeObject("axes", [&] {
        for (auto [name, size] : llvm::zip(r.axes, r.sizes))
          j.attribute(name, size);
      });
      j.attribute("ranks", r.ranks);
    });
    j.attribute("param_elements", r.paramElements);
    j.attribute("param_bytes", r.paramBytes);
    j.attributeArray("moe", [&] {
      for (const ExplainMoe &m : r.moe)
        j.object([&] {
          j.attribute("block", m.block);
          j.attribute("source", m.source);
          j.attribute("axis", m.axis);
          j.attributeArray("exchange_axes", [&] {
            for (const std::string &axis : m.exchangeAxes)
              j.value(axis);
          });
          j.attribute("experts", m.experts);
          j.attribute("experts_per_rank", m.expertsPerRank);
          j.attribute("slot_blocks", m.slotBlocks);
          j.attribute("top_k", m.topK);
          j.attribute("tokens", m.tokens);
          j.attribute("capacity", m.capacity);
          j.attribute("exchange_rows", m.exchangeRows);
        });
    });
    j.attributeArray("memory", [&] {
      for (const ExplainRank &rank : r.ranksByCoordinate)
        j.object([&] {
          j.attribute("ranks", rankName(r, rank));
          j.attribute("coordinate", rank.coordinate);
          j.attributeArray("stages", [&] {
            for (unsigned s : rank.stages)
              j.value(s);
          });
          j.attribute("params", rank.params);
          j.attribute("gradients", rank.gradients);
          j.attribute("optimizer", rank.optimizer);
          j.attribute("inputs", rank.inputs);
          j.attribute("activations", rank.activations);
          j.attribute("activations_per_microbatch", rank.activationsPerMicrobatch);
          j.attribute("in_flight", rank.inFlight);
          if (rank.activationsAllocated) {
            j.attributeArray("activation_pools", [&] {
              for (const ExplainRank::ActivationPool &pool : rank.activationPools)
                j.object([&] {
                  j.attributeArray("stages", [&] {
                    for (unsigned stage : pool.stages)
                      j.value(static_cast<int64_t>(stage));
                  });
                  j.attribute("per_stage", pool.perStage);
                  j.attribute("slots", static_cast<int64_t>(pool.slots));
                  j.attribute("slot_bytes", pool.slotBytes);
                });
            });
            j.attribute("activation_transient_bytes", rank.activationTransientBytes);
            j.attribute("live_activations", rank.liveActivations);
            j.attribute("messages", rank.messages);
          }
          j.attribute("total", rank.total());
          j.attribute("forward_seconds", rank.forwardSeconds);
          j.attribute("backward_seconds", rank.backwardSeconds);
          j.attribute("exposed_bucket_seconds", rank.exposedBucketSeconds);
          j.attribute("update_seconds", rank.updateSeconds);
          j.attribute("finish_seconds", rank.finishSeconds);
        });
    });
    j.attribute("plan_arena_bytes", r.planArenaBytes);
    j.attribute("plan_allocated_bytes", r.allocatedBytes());
    j.attributeArray("collectives", [&] {
      for (const ExplainCollective &c : r.collectives)
        j.object([&] {
          j.attribute("kind", c.kind);
          j.attribute("group", c.axes);
          j.attribute("ranks", c.groupSize);
          j.attribute("intra_node", c.intraNode);
          j.attribute("bytes", c.bytes);
          j.attribute("count", c.count);
          j.attribute("phase", c.phase);
          j.attribute("source", c.source);
          j.attribute("seconds", c.seconds);
          j.attribute("overlaps", c.overlaps);
        });
    });
    if (r.stages)
      j.attributeObject("pipeline", [&] {
        j.attribute("axis", r.pipelineAxis);
        j.attribute("schedule", r.schedule);
        j.attribute("stages", r.stages);
        j.attribute("ranks", r.pipelineRanks);
        j.attribute("bubble", r.bubble);
        j.attribute("uniform_bubble", r.uniformBubble);
      });
    j.attribute("step_seconds", r.stepSeconds);
    j.attribute("model_flops", r.modelFlops);
    j.attribute("peak_tflops", r.peakTflops);
    j.attribute("mfu", r.mfu());
  });
  os << "\n";
}

} // namespace loom
