//===- Report.h - What compiled executables print ---------------*- C++ -*-===//
//
// Internal to the runtime library: the --info listing and the per-output
// summaries of the driver.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_LIB_EXEC_REPORT_H
#define LOOM_RUNTIME_LIB_EXEC_REPORT_H

#include "loom/runtime/plan/Plan.h"

#include <cstdio>
#include <string>

namespace loom::runtime {

/// Prints the model, device, arena size, buffers, kernels and step count.
void printPlanInfo(std::FILE *out, const Plan &plan);

/// Prints what --info adds for an executable with a partitioned plan: the
/// mesh, the partitioned plan's arena per rank, kernels and steps, and its
/// collectives per kind.
void printPartitionedInfo(std::FILE *out, const Plan &spmd);

/// Prints what --info adds for a pipelined partitioned plan: its stages
/// (steps per phase, activations held per microbatch), and with training
/// the schedule's bubble and, per rank, the microbatches in flight at peak
/// and the activations they hold. `schedule` overrides the plan's.
void printPipelineInfo(std::FILE *out, const Plan &spmd,
                       const std::string &schedule);

/// Prints one line for `buffer`: dtype, shape, mean, min, max and the
/// first four values of `data`.
void printSummary(std::FILE *out, const PlanBuffer &buffer, const void *data);

/// The prefix of the outputs loomc adds for each MoE block instance
/// (`moe_stats.BLOCK`, f32 [experts, 2]: choices routed to each expert and
/// of them dropped); script outputs cannot contain a '.'.
inline constexpr const char *kMoeStatsPrefix = "moe_stats.";

/// Whether `buffer` is such an output.
bool isMoeStats(const PlanBuffer &buffer);

/// Prints a `moe_stats.BLOCK` output as a table (--moe-stats): per expert,
/// the choices routed to it, dropped, and the dropped share.
void printMoeStats(std::FILE *out, const PlanBuffer &buffer, const void *data);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_LIB_EXEC_REPORT_H
