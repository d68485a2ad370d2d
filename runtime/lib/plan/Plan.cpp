//===- Plan.cpp - Parsing a plan, and checking a per-rank plan ------------===//

#include "PlanParser.h"

#include <string>

using namespace loom::runtime;
using namespace loom::runtime::plan_text;

/// The initializer as a record writes it, for messages.
static std::string formatInitializer(const Initializer &init) {
  char args[64] = "";
  if (init.kind == InitKind::Constant || init.kind == InitKind::Normal)
    std::snprintf(args, sizeof(args), " %.17g", init.a);
  else if (init.kind == InitKind::Uniform)
    std::snprintf(args, sizeof(args), " %.17g %.17g", init.a, init.b);
  return initKindName(init.kind) + std::string(args);
}

/// "an input", "a param", "an output", "a temp".
static std::string withArticle(BufferRole role) {
  bool vowel = role == BufferRole::Input || role == BufferRole::Output;
  return (vowel ? "an " : "a ") + std::string(roleName(role));
}

bool loom::runtime::checkPartitionedPlan(const Plan &whole, const Plan &spmd,
                                         std::string &error) {
  auto fail = [&](unsigned line, const std::string &message) {
    error = "plan:" + (line ? std::to_string(line) + ":" : std::string()) +
            " " + message;
    return false;
  };
  if (!spmd.mesh.present)
    return fail(0, "a partitioned plan needs a 'mesh' record");
  if (spmd.model != whole.model)
    return fail(2, "model '" + spmd.model +
                       "' differs from the unpartitioned plan's '" +
                       whole.model + "'");
  if (spmd.optimizer.microbatches != whole.optimizer.microbatches)
    return fail(0, "the partitioned plan runs " +
                       std::to_string(spmd.optimizer.microbatches) +
                       " microbatches per step, the unpartitioned one " +
                       std::to_string(whole.optimizer.microbatches));
  auto describe = [](const PlanBuffer &buffer, const Shape &shape) {
    return std::string(dtypeName(buffer.dtype)) + " " + formatShape(shape);
  };
  // Every input, param and output of one plan is one of the other, with
  // the same role, dtype, whole shape and initializer.
  for (const PlanBuffer &buffer : spmd.buffers) {
    if (buffer.role == BufferRole::Temp)
      continue;
    std::string what =
        std::string(roleName(buffer.role)) + " '" + buffer.name + "'";
    const PlanBuffer *other = whole.findBuffer(buffer.name);
    if (!other || other->role != buffer.role)
      return fail(buffer.line, what + " is not " + withArticle(buffer.role) +
                                   " of the unpartitioned plan");
    if (other->dtype != buffer.dtype || other->shape != buffer.globalShape)
      return fail(buffer.line,
                  what + " is " + describe(buffer, buffer.globalShape) +
                      " as a whole (" + describe(buffer, buffer.shape) +
                      " per rank), but " + describe(*other, other->shape) +
                      " in the unpartitioned plan");
    if (other->assembly != buffer.assembly)
      return fail(buffer.line, what + " is assembled from its microbatches by " +
                                   assemblyName(buffer.assembly) + ", but by " +
                                   assemblyName(other->assembly) +
                                   " in the unpartitioned plan");
    if (other->init.kind != buffer.init.kind ||
        other->init.a != buffer.init.a || other->init.b != buffer.init.b)
      return fail(buffer.line, what + " is initialized with " +
                                   formatInitializer(buffer.init) +
                                   ", but with " +
                                   formatInitializer(other->init) +
                                   " in the unpartitioned plan");
  }
  for (const PlanBuffer &buffer : whole.buffers) {
    if (buffer.role == BufferRole::Temp)
      continue;
    const PlanBuffer *other = spmd.findBuffer(buffer.name);
    if (!other || other->role != buffer.role)
      return fail(other ? other->line : 0,
                  "the unpartitioned plan's " +
                      std::string(roleName(buffer.role)) + " '" + buffer.name +
                      "' (" + describe(buffer, buffer.shape) + ") is missing");
  }
  return true;
}

bool loom::runtime::parsePlan(std::string_view text, Plan &plan,
                              std::string &error) {
  return PlanParser(text, plan, error).parse();
}
