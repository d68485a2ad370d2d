//===- PlanTrainingRecords.cpp - Optimizer, microbatch, pipeline records --===//

#include "PlanParser.h"
#include "loom/runtime/plan/Schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace loom::runtime;
using namespace loom::runtime::plan_text;

bool PlanParser::parseOptimizer(size_t index) {
  if (fields.size() < 3)
    return fail(index, "expected 'optimizer KIND STEPS [NAME=VALUE...]'");
  std::string_view kind = fields[1];
  if (kind != "sgd" && kind != "adam" && kind != "adamw")
    return fail(index, "unknown optimizer '" + std::string(kind) +
                           "' (expected sgd, adam or adamw)");
  if (plan.forwardMicrobatches())
    return fail(index, "a training step gives its microbatches as "
                       "microbatches= of its 'optimizer' record, not as a "
                       "'microbatches' record");
  PlanOptimizer &optimizer = plan.optimizer;
  optimizer.kind = std::string(kind);
  if (!parseUnsigned(fields[2], optimizer.steps) || optimizer.steps == 0)
    return fail(index, "bad number of steps '" + std::string(fields[2]) +
                           "' (expected a positive integer)");
  for (size_t i = 3; i < fields.size(); ++i) {
    size_t equals = fields[i].find('=');
    std::string_view name = fields[i].substr(0, equals);
    std::string value(equals == std::string_view::npos
                          ? std::string_view()
                          : fields[i].substr(equals + 1));
    if (name == "microbatches") {
      uint64_t count = 0;
      if (!parseUnsigned(value, count) || count == 0 || count > kMaxMicrobatches)
        return fail(index, "bad microbatches '" + value +
                               "' (expected an integer from 1 to " +
                               std::to_string(kMaxMicrobatches) + ")");
      optimizer.microbatches = count;
      continue;
    }
    // The two settings that are words.
    if (name == "lr_schedule" || name == "loss_scale") {
      bool schedule = name == "lr_schedule";
      std::initializer_list<const char *> known =
          schedule ? std::initializer_list<const char *>{"constant", "warmup_cosine",
                                                         "warmup_linear"}
                   : std::initializer_list<const char *>{"none", "static", "dynamic"};
      bool ok = false;
      for (const char *word : known)
        ok |= value == word;
      if (!ok)
        return fail(index, "bad " + std::string(name) + " '" + value +
                               (schedule ? "' (expected constant, warmup_cosine or warmup_linear)"
                                         : "' (expected none, static or dynamic)"));
      (schedule ? optimizer.lrSchedule : optimizer.lossScale) = value;
      continue;
    }
    char *end = nullptr;
    double number = isDecimalText(value) ? std::strtod(value.c_str(), &end) : 0;
    if (name.empty() || !end || end != value.c_str() + value.size() ||
        !std::isfinite(number) || number < 0)
      return fail(index, "bad hyperparameter '" + std::string(fields[i]) +
                             "' (expected NAME=VALUE, a number >= 0)");
    for (const auto &[known, ignored] : optimizer.hyperparameters)
      if (known == name)
        return fail(index, "hyperparameter '" + std::string(name) +
                               "' given twice");
    optimizer.hyperparameters.emplace_back(std::string(name), number);
  }
  return true;
}

bool PlanParser::parseAccumulate(size_t index) {
  if (!expectFields(index, 3, "accumulate IN OUT"))
    return false;
  PlanStep step;
  step.kind = StepKind::Accumulate;
  step.line = static_cast<unsigned>(index + 1);
  unsigned in, out;
  if (!parseBufferId(index, fields[1], "accumulate", in) ||
      !parseBufferId(index, fields[2], "accumulate", out))
    return false;
  if (in == out)
    return fail(index, "accumulate reads and writes the same buffer " +
                           std::string(fields[1]));
  const PlanBuffer &source = plan.buffers[in];
  const PlanBuffer &target = plan.buffers[out];
  if (source.role != BufferRole::Temp ||
      (target.role != BufferRole::Temp && target.role != BufferRole::Output))
    return fail(index, "an accumulate reads a temp and writes a temp or an "
                       "output ('" + source.name + "' is " +
                           roleName(source.role) + ", '" + target.name +
                           "' " + roleName(target.role) + ")");
  if (source.dtype != DType::F32 || target.dtype != DType::F32 ||
      source.shape != target.shape)
    return fail(index, "an accumulate needs two f32 buffers of one shape ('" +
                           source.name + "' is " + dtypeName(source.dtype) +
                           " " + formatShape(source.shape) + ", '" +
                           target.name + "' " + dtypeName(target.dtype) + " " +
                           formatShape(target.shape) + ")");
  if (source.offset < target.offset + target.bytes &&
      target.offset < source.offset + source.bytes)
    return fail(index, "accumulate buffers '" + source.name + "' and '" +
                           target.name + "' share arena bytes");
  for (const PlanStep &other : plan.steps)
    if (other.kind == StepKind::Accumulate && other.buffers[1] == out)
      return fail(index, "buffer '" + target.name +
                             "' is the result of two accumulates");
  step.buffers = {in, out};
  if (!placeInSection(index, step))
    return false;
  plan.steps.push_back(std::move(step));
  return true;
}

bool PlanParser::parseMicrobatches(size_t index) {
  if (!expectFields(index, 2, "microbatches M"))
    return false;
  uint64_t count;
  if (!parseUnsigned(fields[1], count) || count < 2 || count > kMaxMicrobatches)
    return fail(index, "bad microbatches '" + std::string(fields[1]) +
                           "' (expected an integer from 2 to " +
                           std::to_string(kMaxMicrobatches) + ")");
  plan.optimizer.microbatches = count;
  plan.forwardMicrobatchesLine = static_cast<unsigned>(index + 1);
  return true;
}

bool PlanParser::parseAssemble(size_t index) {
  if (!expectFields(index, 3, "assemble OUTPUT rows|mean|sum"))
    return false;
  if (!plan.forwardMicrobatches())
    return fail(index, "'assemble' without a 'microbatches' record");
  unsigned id;
  if (!parseBufferId(index, fields[1], "assemble", id))
    return false;
  PlanBuffer &buffer = plan.buffers[id];
  if (buffer.role != BufferRole::Output)
    return fail(index, "an assemble belongs to an output, not to " +
                           std::string(roleName(buffer.role)) + " '" +
                           buffer.name + "'");
  if (buffer.assembly != Assembly::None)
    return fail(index, "output '" + buffer.name + "' is assembled twice");
  std::string_view kind = fields[2];
  if (kind == "rows" && !buffer.shape.empty())
    buffer.assembly = Assembly::Rows;
  else if (kind == "mean" && buffer.dtype == DType::F32)
    buffer.assembly = Assembly::Mean;
  else if (kind == "sum" && (buffer.dtype == DType::F32 ||
                             buffer.dtype == DType::I32 || buffer.dtype == DType::I64))
    buffer.assembly = Assembly::Sum;
  else
    return fail(index, "output '" + buffer.name + "' (" +
                           dtypeName(buffer.dtype) + " " + formatShape(buffer.shape) +
                           ") cannot be assembled by '" + std::string(kind) +
                           "' (rows: a tensor of rank >= 1; mean: f32; sum: "
                           "f32, i32 or i64)");
  return true;
}

bool PlanParser::checkMicrobatches(size_t endIndex) {
  size_t boundary = plan.microbatchSteps();
  uint64_t count = plan.optimizer.microbatches;
  if (plan.forwardMicrobatches()) {
    if (boundary)
      return fail(plan.steps[boundary - 1].line - 1,
                  "an 'accumulate' step in a forward with a 'microbatches' "
                  "record (a training step gives them as microbatches= of its "
                  "'optimizer' record)");
    for (const PlanBuffer &buffer : plan.buffers)
      if (buffer.role == BufferRole::Output && buffer.assembly == Assembly::None)
        return fail(endIndex, "output '" + buffer.name +
                                  "' of a forward in microbatches has no "
                                  "'assemble' record");
    return true;
  }
  if (boundary && count < 2)
    return fail(plan.steps[boundary - 1].line - 1,
                "an 'accumulate' step needs an 'optimizer' record with "
                "microbatches=M, M >= 2");
  if (!boundary && count > 1)
    return fail(endIndex, "microbatches=" + std::to_string(count) +
                              " without an 'accumulate' step");
  if (!boundary)
    return true;
  std::vector<StepAccess> access = analyzeStepAccess(plan);
  std::vector<bool> carried(plan.buffers.size(), false), written = carried;
  for (size_t i = 0; i < boundary; ++i) {
    const PlanStep &step = plan.steps[i];
    if (step.kind == StepKind::Accumulate)
      carried[step.buffers[1]] = true;
    for (size_t k = 0; k < step.buffers.size(); ++k)
      if (access[i].buffers[k] != BufferAccess::Read)
        written[step.buffers[k]] = true;
  }
  for (size_t i = boundary; i < plan.steps.size(); ++i)
    for (unsigned id : plan.steps[i].buffers)
      if (unsigned bytes = plan.buffers[id].bytesId(); written[bytes] && !carried[bytes])
        return fail(plan.steps[i].line - 1,
                    "this step reads buffer '" + plan.buffers[id].name +
                        "', which a step of the microbatches wrote: past the "
                        "last 'accumulate' only accumulates' results carry "
                        "values");
  return true;
}

bool PlanParser::parseUpdate(size_t index) {
  if (!expectFields(index, 3, "update OUTPUT PARAM"))
    return false;
  if (plan.optimizer.kind.empty())
    return fail(index, "'update' without an 'optimizer' record");
  PlanUpdate update;
  if (!parseBufferId(index, fields[1], "update", update.output) ||
      !parseBufferId(index, fields[2], "update", update.param))
    return false;
  const PlanBuffer &out = plan.buffers[update.output];
  const PlanBuffer &param = plan.buffers[update.param];
  if (out.role != BufferRole::Output || param.role != BufferRole::Param)
    return fail(index, "an update copies an output into a param ('" +
                           out.name + "' is " + roleName(out.role) + ", '" +
                           param.name + "' " + roleName(param.role) + ")");
  if (out.dtype != param.dtype || out.shape != param.shape ||
      out.shard != param.shard || out.held != param.held)
    return fail(index, "output '" + out.name + "' cannot update param '" +
                           param.name + "': their dtype, shape, sharding or "
                           "holding ranks differ");
  for (const PlanUpdate &other : plan.updates)
    if (other.param == update.param || other.output == update.output)
      return fail(index, "param '" + param.name + "' or output '" + out.name +
                             "' is in two updates");
  plan.updates.push_back(update);
  return true;
}

bool PlanParser::parsePipeline(size_t index) {
  if (!expectFields(index, 4, "pipeline AXIS STAGES SCHEDULE"))
    return false;
  if (!plan.mesh.present)
    return fail(index, "'pipeline' record without a 'mesh' record");
  PlanPipeline &pipeline = plan.pipeline;
  int axis = plan.mesh.findAxis(fields[1]);
  if (axis < 0)
    return fail(index, "the pipeline axis '" + std::string(fields[1]) +
                           "' is not an axis of mesh '" + plan.mesh.name +
                           "' (" + meshAxisNames() + ")");
  pipeline.axis = static_cast<unsigned>(axis);
  uint64_t stages;
  unsigned ranks = plan.mesh.axes[pipeline.axis].size;
  if (!parseUnsigned(fields[2], stages) || stages == 0 || stages > 65536)
    return fail(index, "bad stage count '" + std::string(fields[2]) +
                           "' (expected 1 to 65536)");
  if (stages % ranks != 0)
    return fail(index, std::to_string(stages) + " stages cannot be dealt "
                       "evenly over the " + std::to_string(ranks) +
                       " ranks of axis '" + std::string(fields[1]) + "'");
  pipeline.stages = static_cast<unsigned>(stages);
  ScheduleKind kind;
  if (!parseScheduleKind(fields[3], kind))
    return fail(index, "unknown schedule '" + std::string(fields[3]) +
                           "' (expected gpipe, 1f1b, interleaved or "
                           "zero_bubble)");
  pipeline.schedule = std::string(fields[3]);
  pipeline.forwardCarry.assign(pipeline.stages, {});
  pipeline.backwardCarry.assign(pipeline.stages, {});
  pipeline.present = true;
  pipeline.line = static_cast<unsigned>(index + 1);
  return true;
}

/// A comma-separated list of distinct stages below `stages`.
static bool parseStageList(std::string_view text, unsigned stages,
                           std::vector<unsigned> &list) {
  list.clear();
  for (std::string_view piece : splitAt(text, ',')) {
    uint64_t stage;
    if (!parseUnsigned(piece, stage) || stage >= stages)
      return false;
    for (unsigned seen : list)
      if (seen == stage)
        return false;
    list.push_back(static_cast<unsigned>(stage));
  }
  return !list.empty();
}

bool PlanParser::parseSection(size_t index) {
  if (!expectFields(index, 3, "section PHASE STAGES"))
    return false;
  if (!plan.pipeline.present)
    return fail(index, "'section' record without a 'pipeline' record");
  bool known = false;
  for (StepPhase phase : {StepPhase::Forward, StepPhase::Backward,
                          StepPhase::Weight, StepPhase::Update})
    if (fields[1] == stepPhaseName(phase)) {
      section.phase = phase;
      known = true;
    }
  if (!known)
    return fail(index, "unknown phase '" + std::string(fields[1]) +
                           "' (expected forward, backward, weight or update)");
  if (!parseStageList(fields[2], plan.pipeline.stages, section.stages))
    return fail(index, "bad stages '" + std::string(fields[2]) +
                           "' (expected distinct stages below " +
                           std::to_string(plan.pipeline.stages) +
                           ", separated by ',')");
  if (section.phase != StepPhase::Update && section.stages.size() != 1)
    return fail(index, std::string("a ") + stepPhaseName(section.phase) +
                           " section belongs to one stage");
  inSection = true;
  return true;
}

bool PlanParser::placeInSection(size_t index, PlanStep &step) {
  if (!plan.pipeline.present)
    return true;
  if (!inSection)
    return fail(index, "a step of a pipelined plan needs a 'section' record "
                       "before it");
  step.phase = section.phase;
  step.stages = section.stages;
  return true;
}

bool PlanParser::parseCarry(size_t index) {
  if (fields.size() < 4)
    return fail(index, "expected 'carry forward|backward STAGE ID...'");
  if (!plan.pipeline.present)
    return fail(index, "'carry' record without a 'pipeline' record");
  bool forward = fields[1] == "forward";
  if (!forward && fields[1] != "backward")
    return fail(index, "bad carry direction '" + std::string(fields[1]) +
                           "' (expected forward or backward)");
  uint64_t stage;
  unsigned stages = plan.pipeline.stages;
  if (!parseUnsigned(fields[2], stage) || stage >= stages ||
      (forward && stage + 1 == stages) || (!forward && stage == 0))
    return fail(index, "bad carry stage '" + std::string(fields[2]) + "' (a " +
                           std::string(fields[1]) + " carry leaves a stage " +
                           (forward ? "below " + std::to_string(stages - 1)
                                    : std::string("above 0")) + ")");
  std::vector<unsigned> &carry = forward ? plan.pipeline.forwardCarry[stage]
                                         : plan.pipeline.backwardCarry[stage];
  if (!carry.empty())
    return fail(index, "duplicate carry " + std::string(fields[1]) + " " +
                           std::string(fields[2]));
  for (size_t i = 3; i < fields.size(); ++i) {
    unsigned id;
    if (!parseBufferId(index, fields[i], "carry", id))
      return false;
    const PlanBuffer &buffer = plan.buffers[id];
    if (buffer.role != BufferRole::Temp && buffer.role != BufferRole::Output)
      return fail(index, "a carry moves temps and outputs, not " +
                             std::string(roleName(buffer.role)) + " '" +
                             buffer.name + "'");
    carry.push_back(id);
  }
  return true;
}

bool PlanParser::parseTransfer(size_t index) {
  if (!expectFields(index, 4, "transfer FROM TO ID"))
    return false;
  if (!plan.pipeline.present)
    return fail(index, "'transfer' record without a 'pipeline' record");
  PlanStep step;
  step.kind = StepKind::Transfer;
  step.line = static_cast<unsigned>(index + 1);
  uint64_t from, to;
  unsigned stages = plan.pipeline.stages;
  if (!parseUnsigned(fields[1], from) || !parseUnsigned(fields[2], to) ||
      from >= stages || to >= stages || from == to)
    return fail(index, "bad transfer stages '" + std::string(fields[1]) +
                           " " + std::string(fields[2]) +
                           "' (two different stages below " +
                           std::to_string(stages) + ")");
  step.from = static_cast<unsigned>(from);
  step.to = static_cast<unsigned>(to);
  unsigned id;
  if (!parseBufferId(index, fields[3], "transfer", id))
    return false;
  step.buffers = {id};
  if (!placeInSection(index, step))
    return false;
  if (step.phase != StepPhase::Update)
    return fail(index, "a transfer belongs to an update section (between "
                       "microbatches, stages exchange values by 'carry')");
  plan.steps.push_back(std::move(step));
  return true;
}

bool PlanParser::checkPipeline(size_t endIndex) {
  if (!plan.pipeline.present)
    return true;
  // Every loop step of a stage comes before the update's, so that the
  // schedule runs a contiguous prefix.
  bool updating = false;
  for (const PlanStep &step : plan.steps) {
    if (step.phase == StepPhase::Update)
      updating = true;
    else if (updating)
      return fail(step.line - 1, std::string("a ") + stepPhaseName(step.phase) +
                                     " step after an update step");
  }
  (void)endIndex;
  return true;
}
