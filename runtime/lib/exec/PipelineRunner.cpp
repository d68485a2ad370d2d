//===- PipelineRunner.cpp - One rank's stages of a pipelined plan ---------===//

#include "loom/runtime/exec/PipelineRunner.h"

#include "loom/runtime/plan/Layout.h"

#include <algorithm>
#include <cstring>

using namespace loom::runtime;

PipelineDevice::~PipelineDevice() = default;

bool CpuPipelineDevice::allocate(uint64_t bytes, char *&memory,
                                 std::string &error) {
  blocks.push_back(std::make_unique<Arena>());
  if (!blocks.back()->allocate(bytes, error))
    return false;
  memory = blocks.back()->data();
  return true;
}

bool CpuPipelineDevice::copy(char *to, const char *from, uint64_t bytes,
                             std::string &) {
  std::memcpy(to, from, bytes);
  return true;
}

bool PipelineRunner::prepare(const Plan &plan, PipelineDevice &device,
                             Communicator &world, uint64_t microbatches,
                             bool train, const std::string &scheduleName,
                             std::string &error) {
  this->plan = &plan;
  this->device = &device;
  this->train = train;
  comm = &world;
  const PlanPipeline &pipeline = plan.pipeline;
  scheduleFailed = true;
  if (comm->size() != plan.mesh.numRanks) {
    error = "a pipelined plan runs on the " +
            std::to_string(plan.mesh.numRanks) + " ranks of mesh '" +
            plan.mesh.name + "'";
    return false;
  }
  coordinates = meshCoordinates(plan.mesh, comm->rank());
  coordinate = coordinates[pipeline.axis];
  unsigned ranks = plan.mesh.axes[pipeline.axis].size;
  if (train) {
    ScheduleKind kind;
    std::string name = scheduleName.empty() ? pipeline.schedule : scheduleName;
    if (!parseScheduleKind(name, kind) ||
        !buildSchedule(kind, ranks, pipeline.stages,
                       static_cast<unsigned>(microbatches), order, error)) {
      error = (scheduleName.empty() ? "plan:" + std::to_string(pipeline.line) + ": "
                                    : "--schedule " + name + ": ") + error;
      return false;
    }
  } else {
    order = forwardSchedule(ranks, pipeline.stages,
                        static_cast<unsigned>(microbatches));
  }
  // The forward-only chain has no backward for the verifier to find; it
  // cannot deadlock (each stage waits only for the one before).
  if (train && !verifySchedule(order, error)) {
    error = "the " + pipeline.schedule + " schedule: " + error;
    return false;
  }
  scheduleFailed = false;
  if (!comm->prepareGroup(meshGroup(plan.mesh, comm->rank(), {pipeline.axis}), error))
    return false;

  const std::vector<StepAccess> access = analyzeStepAccess(plan);
  PipelineValues values = analyzePipelineValues(plan, access, !order.splitsBackward());
  // The memory of the values in flight, once, before the first step.
  inFlight = planInFlight(plan, values, order, coordinate);
  if (!device.allocate(inFlight.bytes(), pool, error))
    return false;
  present.assign(static_cast<size_t>(order.microbatches) * plan.buffers.size(),
                 false);
  if (!device.allocate(pipelineMessageBytes(plan), message, error))
    return false;
  restores = std::move(values.restores);
  saves = std::move(values.saves);
  crosses = std::move(values.crosses);
  sections.clear();
  sectionInputs.clear();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep &step = plan.steps[i];
    if (step.stages.size() != 1)
      continue;
    // Every schedule but zero-bubble runs a stage's weight part with its
    // backward: one section, in plan order (analyzePipelineValues keeps
    // their values in the arena, which plan order lays out).
    StepPhase phase = step.phase == StepPhase::Weight && !order.splitsBackward()
                          ? StepPhase::Backward
                          : step.phase;
    std::pair<StepPhase, unsigned> section{phase, step.stages[0]};
    sections[section].push_back(i);
    std::vector<unsigned> &read = sectionInputs[section];
    for (unsigned id : step.buffers)
      if (plan.buffers[id].role == BufferRole::Input &&
          std::find(read.begin(), read.end(), id) == read.end())
        read.push_back(id);
  }

  // Each output's first stage, where its broadcast comes from. A forward
  // of several microbatches overwrites its outputs with each: the rank
  // that computes one keeps each microbatch's copy (forwardPipelineBytes
  // counts them for loomc's --memory-limit).
  outputs.clear();
  keeps.assign(plan.steps.size(), {});
  keptOffset.clear();
  keptBytes = 0;
  for (const PipelineOutput &computed : pipelineOutputs(plan, access)) {
    OutputSync output;
    output.id = computed.id;
    output.root = computed.root;
    for (const PlanUpdate &update : plan.updates)
      if (update.output == computed.id)
        output.param = static_cast<long>(update.param);
    outputs.push_back(output);
    if (keepsOutputs() && computed.root == coordinate) {
      keeps[computed.writer].push_back(computed.id);
      keptOffset[computed.id] = keptBytes;
      keptBytes += alignedBytes(plan.buffers[computed.id].bytes);
    }
  }
  if (keepsOutputs() && !device.allocate(keptBytes * order.microbatches, kept, error))
    return false;
  return true;
}

unsigned PipelineRunner::peerOf(unsigned stage) const {
  std::vector<unsigned> at = coordinates;
  at[plan->pipeline.axis] = stage % order.ranks;
  return meshRank(plan->mesh, at);
}

bool PipelineRunner::hold(uint64_t microbatch, unsigned id, const char *data,
                          std::string &error) {
  // planInFlight placed every value this rank saves or receives.
  present[microbatch * plan->buffers.size() + id] = true;
  return device->copy(slotData(microbatch, id), data, plan->buffers[id].bytes,
                      error);
}

bool PipelineRunner::restore(uint64_t microbatch, unsigned id,
                             std::string &error) {
  return !holds(microbatch, id) ||
         device->copy(device->buffer(id), slotData(microbatch, id),
                      plan->buffers[id].bytes, error);
}

void PipelineRunner::release(uint64_t microbatch) {
  auto begin = present.begin() + static_cast<long>(microbatch * plan->buffers.size());
  std::fill(begin, begin + static_cast<long>(plan->buffers.size()), false);
}

bool PipelineRunner::runStep(size_t index, uint64_t microbatch,
                             TraceRecorder *trace, std::string &error) {
  for (unsigned id : restores[index]) {
    if (!holds(microbatch, id)) {
      error = "plan:" + std::to_string(plan->steps[index].line) +
              ": buffer '" + plan->buffers[id].name +
              "' is read here, but this rank's stages neither computed nor "
              "received it (microbatch " + std::to_string(microbatch) + ")";
      return false;
    }
    if (!restore(microbatch, id, error))
      return false;
  }
  if (!device->runStep(index, microbatch, trace, error))
    return false;
  for (unsigned id : keeps[index])
    if (!device->copy(keptData(microbatch, id), device->buffer(id),
                      plan->buffers[id].bytes, error))
      return false;
  for (unsigned id : saves[index])
    if (!hold(microbatch, id, device->buffer(id), error))
      return false;
  return true;
}

bool PipelineRunner::runSection(StepPhase phase, unsigned stage,
                                uint64_t microbatch, TraceRecorder *trace,
                                std::string &error) {
  // An empty section (a backward without a weight-gradient part) needs no
  // inputs either.
  auto section = sections.find({phase, stage});
  if (section == sections.end())
    return true;
  // The microbatch's inputs the section reads (its rows of the batch, the
  // step's scalars). Only those: the arena may hold another section's
  // value where an input no longer read lay (a backward's values for its
  // weight part, which stay in the arena between the two sections).
  for (unsigned id : sectionInputs[{phase, stage}]) {
    const std::vector<char> &bytes = inputs[microbatch][id];
    if (!device->upload(device->buffer(id), bytes.data(), bytes.size(), error))
      return false;
  }
  for (size_t i : section->second)
    if (!runStep(i, microbatch, trace, error))
      return false;
  return true;
}

void PipelineRunner::traceMessage(TraceRecorder *trace, const char *kind,
                                  unsigned peer, uint64_t bytes,
                                  std::optional<uint64_t> microbatch,
                                  std::optional<unsigned> step,
                                  std::chrono::steady_clock::time_point before) {
  if (!trace)
    return;
  auto micros = [](std::chrono::steady_clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  trace->addMessage(kind, peer, bytes, microbatch, step,
                    micros(before - trace->runStart()),
                    micros(std::chrono::steady_clock::now() - before));
}

bool PipelineRunner::sendCarry(const std::vector<unsigned> &carry,
                               unsigned toStage, uint64_t microbatch,
                               TraceRecorder *trace, std::string &error) {
  auto before = std::chrono::steady_clock::now();
  uint64_t at = 0;
  for (unsigned id : carry) {
    if (!holds(microbatch, id)) {
      error = "buffer '" + plan->buffers[id].name +
              "' is carried to stage " + std::to_string(toStage) +
              ", but this rank's stages neither computed nor received it "
              "(microbatch " + std::to_string(microbatch) + ")";
      return false;
    }
    if (!device->copy(message + at, slotData(microbatch, id),
                      plan->buffers[id].bytes, error))
      return false;
    at += plan->buffers[id].bytes;
  }
  unsigned peer = peerOf(toStage);
  if (!device->send(peer, message, at, error))
    return false;
  traceMessage(trace, "send", peer, at, microbatch, std::nullopt, before);
  return true;
}

bool PipelineRunner::recvCarry(const std::vector<unsigned> &carry,
                               unsigned fromStage, uint64_t microbatch,
                               TraceRecorder *trace, std::string &error) {
  auto before = std::chrono::steady_clock::now();
  uint64_t bytes = carryBytes(*plan, carry);
  unsigned peer = peerOf(fromStage);
  if (!device->recv(peer, message, bytes, error))
    return false;
  uint64_t at = 0;
  for (unsigned id : carry) {
    if (!hold(microbatch, id, message + at, error))
      return false;
    at += plan->buffers[id].bytes;
  }
  traceMessage(trace, "recv", peer, bytes, microbatch, std::nullopt, before);
  return true;
}

bool PipelineRunner::syncOutputs(bool updates, std::string &error) {
  // Outputs end on every rank, from the first stage that computed them:
  // each step the reported ones (the loss, grad_norm, a forward's logits),
  // which every rank decides by; with `updates`, the params' new values and
  // the params themselves, which only their stages read between steps.
  CommGroup group = meshGroup(plan->mesh, comm->rank(), {plan->pipeline.axis});
  auto broadcast = [&](unsigned id, unsigned root) {
    return device->broadcast(group, root, device->buffer(id),
                             plan->buffers[id].bytes, error);
  };
  for (const OutputSync &output : outputs) {
    bool isUpdate = output.param >= 0;
    // A stage-placed param stays on its stages: the driver gathers it from
    // them (holderOfBlock) where it needs it whole.
    if (isUpdate != updates || (isUpdate && !plan->buffers[output.id].held.empty()))
      continue;
    if (!broadcast(output.id, output.root) ||
        (isUpdate && !broadcast(static_cast<unsigned>(output.param), output.root)))
      return false;
  }
  return true;
}

bool PipelineRunner::run(const std::function<bool(uint64_t)> &place,
                         TraceRecorder *trace, std::string &error) {
  if (!device->begin(error))
    return false;
  unsigned microbatches = order.microbatches;
  inputs.resize(microbatches); // kept between runs, with their bytes
  for (unsigned mb = 0; mb < microbatches; ++mb) {
    if (!place(mb))
      return false;
    for (const PlanBuffer &buffer : plan->buffers)
      if (buffer.role == BufferRole::Input) {
        const char *data = device->hostBuffer(buffer.id);
        inputs[mb][buffer.id].assign(data, data + buffer.bytes);
      }
  }

  // A microbatch's values go after its last step here; the update reads
  // the last microbatch's (without microbatches, its only one).
  const std::vector<PipeStep> &mine = order.steps[coordinate];
  std::vector<size_t> lastStep(microbatches, 0);
  for (size_t k = 0; k < mine.size(); ++k)
    lastStep[mine[k].microbatch] = k;
  for (size_t k = 0; k < mine.size(); ++k) {
    const PipeStep &step = mine[k];
    bool ok = true;
    switch (step.op) {
    case PipeOp::Forward:
      ok = runSection(StepPhase::Forward, step.stage, step.microbatch, trace, error);
      break;
    case PipeOp::Backward:
      // (With the weight part's steps, unless zero-bubble splits them.)
      ok = runSection(StepPhase::Backward, step.stage, step.microbatch, trace, error);
      break;
    case PipeOp::WeightGrad:
      ok = runSection(StepPhase::Weight, step.stage, step.microbatch, trace, error);
      break;
    case PipeOp::SendActivation:
      ok = sendCarry(plan->pipeline.forwardCarry[step.stage], step.stage + 1,
                     step.microbatch, trace, error);
      break;
    case PipeOp::RecvActivation:
      ok = recvCarry(plan->pipeline.forwardCarry[step.stage], step.stage,
                     step.microbatch, trace, error);
      break;
    case PipeOp::SendGradient:
      ok = sendCarry(plan->pipeline.backwardCarry[step.stage], step.stage - 1,
                     step.microbatch, trace, error);
      break;
    case PipeOp::RecvGradient:
      ok = recvCarry(plan->pipeline.backwardCarry[step.stage], step.stage,
                     step.microbatch, trace, error);
      break;
    }
    if (!ok)
      return false;
    if (lastStep[step.microbatch] == k && step.microbatch != microbatches - 1)
      release(step.microbatch);
  }

  // The update, once, in plan order: a stage's ranks run its steps, and
  // transfers move what another stage computed.
  uint64_t last = microbatches - 1;
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const PlanStep &step = plan->steps[i];
    if (step.phase != StepPhase::Update)
      continue;
    if (step.kind == StepKind::Transfer) {
      bool sends = ownsStage(step.from) && !ownsStage(step.to);
      bool receives = ownsStage(step.to) && !ownsStage(step.from);
      unsigned id = step.buffers[0];
      for (unsigned restored : restores[i])
        if (!restore(last, restored, error))
          return false;
      const PlanBuffer &buffer = plan->buffers[id];
      auto before = std::chrono::steady_clock::now();
      if (sends && !device->send(peerOf(step.to), device->buffer(id), buffer.bytes, error))
        return false;
      if (receives && !device->recv(peerOf(step.from), device->buffer(id), buffer.bytes, error))
        return false;
      if (sends || receives)
        traceMessage(trace, sends ? "send" : "recv", peerOf(sends ? step.to : step.from),
                     buffer.bytes, std::nullopt, static_cast<unsigned>(i), before);
      // A loop's value, which its readers put back.
      if (receives && crosses[id] && !hold(last, id, device->buffer(id), error))
        return false;
      continue;
    }
    bool runs = false;
    for (unsigned stage : step.stages)
      runs |= ownsStage(stage);
    if (runs && !runStep(i, last, trace, error))
      return false;
  }
  // An output this rank also holds (one it carries to another stage) may
  // have had its bytes taken since by a value restored into the same
  // offset (the arena's plan orders the stages' steps one way, a schedule
  // another): its held copy goes back before the outputs are shared.
  for (const OutputSync &output : outputs)
    if (output.root == coordinate && !restore(last, output.id, error))
      return false;
  for (unsigned mb = 0; mb < microbatches; ++mb)
    release(mb);
  // A forward of several microbatches gives its outputs by putOutputs.
  if (keepsOutputs())
    return device->end(error);
  return syncOutputs(/*updates=*/false, error) && device->end(error);
}

bool PipelineRunner::putOutputs(uint64_t microbatch, std::string &error) {
  // The kept copies back into the outputs, then broadcast as a run's are.
  for (const OutputSync &output : outputs)
    if (output.root == coordinate &&
        !device->copy(device->buffer(output.id), keptData(microbatch, output.id),
                      plan->buffers[output.id].bytes, error))
      return false;
  return syncOutputs(/*updates=*/false, error) && device->end(error);
}
