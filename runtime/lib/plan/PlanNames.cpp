//===- PlanNames.cpp - Names, formatting and queries of plan types --------===//

#include "loom/runtime/plan/Plan.h"

#include <cstdint>

using namespace loom::runtime;

const char *loom::runtime::deviceName(Device device) {
  return device == Device::CUDA ? "cuda" : "cpu";
}

const char *loom::runtime::assemblyName(Assembly assembly) {
  switch (assembly) {
  case Assembly::None:
    return "none";
  case Assembly::Rows:
    return "rows";
  case Assembly::Mean:
    return "mean";
  case Assembly::Sum:
    return "sum";
  }
  return "?";
}

const char *loom::runtime::roleName(BufferRole role) {
  switch (role) {
  case BufferRole::Input:
    return "input";
  case BufferRole::Param:
    return "param";
  case BufferRole::Output:
    return "output";
  case BufferRole::Temp:
    return "temp";
  }
  return "?";
}

const char *loom::runtime::initKindName(InitKind kind) {
  switch (kind) {
  case InitKind::None:
    return "none";
  case InitKind::Zeros:
    return "zeros";
  case InitKind::Ones:
    return "ones";
  case InitKind::Constant:
    return "constant";
  case InitKind::Normal:
    return "normal";
  case InitKind::Uniform:
    return "uniform";
  }
  return "?";
}

const char *loom::runtime::gpuImageFormatName(GpuImageFormat format) {
  return format == GpuImageFormat::PTX ? "ptx" : "cubin";
}

bool loom::runtime::parseGpuArch(std::string_view text, GpuArch &arch) {
  if (text.substr(0, 3) != "sm_")
    return false;
  std::string_view rest = text.substr(3);
  char variant = 0;
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    variant = rest.back();
    rest.remove_suffix(1);
  }
  if (rest.size() < 2 || rest.size() > 3 || rest[0] == '0')
    return false;
  unsigned number = 0;
  for (char c : rest) {
    if (c < '0' || c > '9')
      return false;
    number = number * 10 + static_cast<unsigned>(c - '0');
  }
  arch.major = number / 10;
  arch.minor = number % 10;
  arch.variant = variant;
  return true;
}

double PlanOptimizer::get(std::string_view name, double fallback) const {
  for (const auto &[known, value] : hyperparameters)
    if (known == name)
      return value;
  return fallback;
}

const PlanBuffer *Plan::findBuffer(std::string_view name) const {
  for (const PlanBuffer &buffer : buffers)
    if (buffer.name == name)
      return &buffer;
  return nullptr;
}

size_t Plan::numCollectives() const {
  size_t count = 0;
  for (const PlanStep &step : steps)
    count += step.kind == StepKind::Collective;
  return count;
}

size_t Plan::microbatchSteps() const {
  for (size_t i = steps.size(); i > 0; --i)
    if (steps[i - 1].kind == StepKind::Accumulate)
      return i;
  return 0;
}

int PlanMesh::findAxis(std::string_view name) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i].name == name)
      return static_cast<int>(i);
  return -1;
}

bool PlanBuffer::isSharded() const {
  for (const std::vector<unsigned> &axes : shard)
    if (!axes.empty())
      return true;
  return false;
}

const char *loom::runtime::collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all-reduce";
  case CollectiveKind::AllGather:
    return "all-gather";
  case CollectiveKind::ReduceScatter:
    return "reduce-scatter";
  case CollectiveKind::AllSlice:
    return "all-slice";
  case CollectiveKind::AllToAll:
    return "all-to-all";
  case CollectiveKind::Broadcast:
    return "broadcast";
  }
  return "?";
}

std::string loom::runtime::formatMeshAxes(const PlanMesh &mesh) {
  std::string text;
  for (const MeshAxis &axis : mesh.axes)
    text +=
        (text.empty() ? "" : " ") + axis.name + "=" + std::to_string(axis.size);
  return text;
}

std::string loom::runtime::formatAxes(const PlanMesh &mesh,
                                      const std::vector<unsigned> &axes) {
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? "," : "") + mesh.axes[axes[i]].name;
  return text;
}

std::string loom::runtime::formatShardSpec(const PlanMesh &mesh,
                                           const PlanBuffer &buffer) {
  std::string text;
  for (size_t d = 0; d < buffer.shard.size(); ++d) {
    text += d ? "," : "";
    if (buffer.shard[d].empty())
      text += "-";
    for (size_t i = 0; i < buffer.shard[d].size(); ++i)
      text += (i ? "+" : "") + mesh.axes[buffer.shard[d][i]].name;
  }
  return text;
}

bool loom::runtime::parseUnsigned(std::string_view text, uint64_t &value) {
  if (text.empty() || text.size() > 20)
    return false;
  uint64_t result = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (result > (UINT64_MAX - digit) / 10)
      return false;
    result = result * 10 + digit;
  }
  value = result;
  return true;
}

const char *loom::runtime::stepPhaseName(StepPhase phase) {
  switch (phase) {
  case StepPhase::Forward:
    return "forward";
  case StepPhase::Backward:
    return "backward";
  case StepPhase::Weight:
    return "weight";
  case StepPhase::Update:
    return "update";
  }
  return "?";
}
