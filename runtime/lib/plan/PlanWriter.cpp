//===- PlanWriter.cpp - Writing plans and their checksums -----------------===//

#include "loom/runtime/support/Hash.h"
#include "loom/runtime/plan/Plan.h"

#include <cstdio>

using namespace loom::runtime;

uint32_t loom::runtime::computeChecksum(std::string_view bytes) {
  return fnv1a32(bytes);
}

std::string loom::runtime::sealPlan(std::string_view body) {
  char end[16];
  std::snprintf(end, sizeof(end), "end %08x\n",
                static_cast<unsigned>(computeChecksum(body)));
  return std::string(body) + end;
}

static std::string formatFloat(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

/// `values[0..count)` joined by 'x'; "-" for none.
template <typename T>
static std::string joinExtents(const T *values, unsigned count) {
  if (!count)
    return "-";
  std::string text;
  for (unsigned i = 0; i < count; ++i)
    text += (i ? "x" : "") + std::to_string(values[i]);
  return text;
}

std::string loom::runtime::formatLaunchArg(const LaunchArg &arg) {
  char text[48];
  const TensorMapArg &map = arg.tensorMap;
  switch (arg.kind) {
  case LaunchArg::Kind::Buffer:
    return "b:" + std::to_string(arg.buffer);
  case LaunchArg::Kind::I64:
    return "i64:" + std::to_string(arg.integer);
  case LaunchArg::Kind::I32:
    return "i32:" + std::to_string(arg.integer);
  case LaunchArg::Kind::F32:
    // 9 significant digits read back to the same float.
    std::snprintf(text, sizeof(text), "f32:%.9g",
                  static_cast<double>(arg.real));
    return text;
  case LaunchArg::Kind::TensorMap:
    return "tmap:" + std::to_string(arg.buffer) + ":" +
           std::to_string(map.offset) + ":" + dtypeName(map.dtype) + ":" +
           joinExtents(map.dims, map.rank) + ":" +
           joinExtents(map.strides, map.rank ? map.rank - 1 : 0) + ":" +
           joinExtents(map.box, map.rank) + ":" + std::to_string(map.swizzle);
  }
  return "?";
}

std::string loom::runtime::writePlan(const Plan &plan) {
  std::string body = "loom-plan " + std::to_string(plan.version) + "\n";
  body += "model " + plan.model + "\n";
  body += std::string("device ") + deviceName(plan.device) + "\n";
  if (plan.mesh.present)
    body += "mesh " + plan.mesh.name + " " + formatMeshAxes(plan.mesh) + "\n";
  const PlanPipeline &pipeline = plan.pipeline;
  if (pipeline.present)
    body += "pipeline " + plan.mesh.axes[pipeline.axis].name + " " +
            std::to_string(pipeline.stages) + " " + pipeline.schedule + "\n";
  body += "arena " + std::to_string(plan.arenaBytes) + "\n";
  if (plan.gpuImage.present)
    body += "gpu-image " + plan.gpuImage.archName + " " +
            gpuImageFormatName(plan.gpuImage.format) + " " +
            std::to_string(plan.gpuImage.bytes) + "\n";
  for (const PlanBuffer &buffer : plan.buffers) {
    body += "buffer " + std::to_string(buffer.id) + " " + buffer.name + " " +
            roleName(buffer.role) + " " + dtypeName(buffer.dtype) + " ";
    if (buffer.shape.empty())
      body += "scalar";
    for (size_t i = 0; i < buffer.shape.size(); ++i)
      body += (i ? "," : "") + std::to_string(buffer.shape[i]);
    body += " " + std::to_string(buffer.offset);
    switch (buffer.init.kind) {
    case InitKind::None:
      break;
    case InitKind::Zeros:
    case InitKind::Ones:
      body += std::string(" ") + initKindName(buffer.init.kind);
      break;
    case InitKind::Constant:
    case InitKind::Normal:
      body += std::string(" ") + initKindName(buffer.init.kind) + " " +
              formatFloat(buffer.init.a);
      break;
    case InitKind::Uniform:
      body += " uniform " + formatFloat(buffer.init.a) + " " +
              formatFloat(buffer.init.b);
      break;
    }
    body += "\n";
    if (buffer.viewOf >= 0)
      body += "view " + std::to_string(buffer.id) + " " + std::to_string(buffer.viewOf) + "\n";
    if (!buffer.shard.empty())
      body += "shard " + std::to_string(buffer.id) + " " +
              formatShardSpec(plan.mesh, buffer) + "\n";
    if (buffer.bound)
      body += "bound " + std::to_string(buffer.id) + " " +
              std::to_string(buffer.bound) + "\n";
    if (!buffer.held.empty()) {
      body += "held " + std::to_string(buffer.id) + " ";
      for (size_t i = 0; i < buffer.held.size(); ++i)
        body += (i ? "," : "") + std::to_string(buffer.held[i]);
      body += "\n";
    }

  }
  for (const PlanKernel &kernel : plan.kernels) {
    body += "kernel " + kernel.name + " " + std::to_string(kernel.numArgs) +
            (kernel.source.empty() ? "" : " " + kernel.source) + "\n";
    if (kernel.termsArg >= 0)
      body += "terms " + kernel.name + " " + std::to_string(kernel.termsArg) + "\n";
  }
  for (const PlanLaunch &launch : plan.launches) {
    body +=
        "launch " + plan.kernels[launch.kernel].name + " " + launch.function;
    for (unsigned dim : launch.grid)
      body += " " + std::to_string(dim);
    for (unsigned dim : launch.block)
      body += " " + std::to_string(dim);
    for (const LaunchArg &arg : launch.args)
      body += " " + formatLaunchArg(arg);
    if (launch.sharedBytes)
      body += " shared:" + std::to_string(launch.sharedBytes);
    body += "\n";
  }
  const PlanStep *sectionOf = nullptr; // the step that opened the section
  for (const PlanStep &step : plan.steps) {
    if (pipeline.present &&
        (!sectionOf || sectionOf->phase != step.phase ||
         sectionOf->stages != step.stages)) {
      body += std::string("section ") + stepPhaseName(step.phase) + " ";
      for (size_t i = 0; i < step.stages.size(); ++i)
        body += (i ? "," : "") + std::to_string(step.stages[i]);
      body += "\n";
      sectionOf = &step;
    }
    if (step.kind == StepKind::Transfer) {
      body += "transfer " + std::to_string(step.from) + " " +
              std::to_string(step.to) + " " + std::to_string(step.buffers[0]) +
              "\n";
      continue;
    }
    if (step.kind == StepKind::Collective) {
      const PlanCollective &op = step.collective;
      body += std::string("collective ") + collectiveKindName(op.kind) + " " +
              formatAxes(plan.mesh, op.axes) + " ";
      switch (op.kind) {
      case CollectiveKind::AllReduce:
      case CollectiveKind::Broadcast:
        body += "-";
        break;
      case CollectiveKind::AllToAll:
        body += std::to_string(op.dim) + ":" + std::to_string(op.concatDim);
        break;
      default:
        body += std::to_string(op.dim);
        break;
      }
      for (unsigned id : step.buffers) // IN OUT, or a bucket's pairs
        body += " " + std::to_string(id);
      body += "\n";
      continue;
    }
    if (step.kind == StepKind::Accumulate) {
      body += "accumulate " + std::to_string(step.buffers[0]) + " " +
              std::to_string(step.buffers[1]) + "\n";
      continue;
    }
    body += "step " + plan.kernels[step.kernel].name;
    for (unsigned id : step.buffers)
      body += " " + std::to_string(id);
    body += "\n";
  }
  if (pipeline.present)
    for (unsigned k = 0; k < pipeline.stages; ++k)
      for (bool forward : {true, false}) {
        const std::vector<unsigned> &carry =
            forward ? pipeline.forwardCarry[k] : pipeline.backwardCarry[k];
        if (carry.empty())
          continue;
        body += std::string("carry ") + (forward ? "forward " : "backward ") +
                std::to_string(k);
        for (unsigned id : carry)
          body += " " + std::to_string(id);
        body += "\n";
      }
  if (!plan.optimizer.kind.empty()) {
    body += "optimizer " + plan.optimizer.kind + " " +
            std::to_string(plan.optimizer.steps);
    if (plan.optimizer.lrSchedule != "constant")
      body += " lr_schedule=" + plan.optimizer.lrSchedule;
    if (plan.optimizer.lossScale != "none")
      body += " loss_scale=" + plan.optimizer.lossScale;
    char number[32];
    for (const auto &[name, value] : plan.optimizer.hyperparameters) {
      std::snprintf(number, sizeof(number), "%.17g", value);
      body += " " + name + "=" + number;
    }
    if (plan.optimizer.microbatches > 1)
      body += " microbatches=" + std::to_string(plan.optimizer.microbatches);
    body += "\n";
  }
  if (plan.forwardMicrobatches()) {
    body += "microbatches " + std::to_string(plan.optimizer.microbatches) + "\n";
    for (const PlanBuffer &buffer : plan.buffers)
      if (buffer.assembly != Assembly::None)
        body += "assemble " + std::to_string(buffer.id) + " " +
                assemblyName(buffer.assembly) + "\n";
  }
  for (const PlanUpdate &update : plan.updates)
    body += "update " + std::to_string(update.output) + " " +
            std::to_string(update.param) + "\n";
  return sealPlan(body);
}
