//===- Checkpoint.cpp - Saving and resuming a training run ----------------===//

#include "loom/runtime/exec/Checkpoint.h"

#include "loom/runtime/io/Safetensors.h"
#include "loom/runtime/support/Hash.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace loom::runtime;

/// FNV-1a (64-bit) over every param's bytes, by name: the order the file
/// holds them in. A torn or flipped byte in the data changes it.
static std::string paramsChecksum(const Plan &plan, const char *arena) {
  std::vector<const PlanBuffer *> params;
  for (const PlanBuffer &buffer : plan.buffers)
    if (buffer.role == BufferRole::Param)
      params.push_back(&buffer);
  std::sort(params.begin(), params.end(),
            [](const PlanBuffer *a, const PlanBuffer *b) { return a->name < b->name; });
  uint64_t hash = fnv1a64({});
  for (const PlanBuffer *param : params)
    hash = fnv1a64(std::string_view(arena + param->offset, param->bytes), hash);
  return hashText(hash);
}

bool loom::runtime::saveCheckpoint(const Plan &plan, const char *arena,
                                   const std::string &path,
                                   const TrainState &state, uint64_t seed,
                                   std::string &error) {
  char scale[32];
  // %.17g: the double comes back exactly.
  std::snprintf(scale, sizeof(scale), "%.17g", state.lossScale);
  WeightsWriteOptions how;
  how.metadata = {{kCheckpointVersionKey, kCheckpointVersion},
                  {"optimizer", plan.optimizer.kind},
                  {"step", std::to_string(state.step)},
                  {"applied", std::to_string(state.applied)},
                  {"loss_scaling", plan.optimizer.lossScale},
                  {"loss_scale", scale},
                  {"clean_steps", std::to_string(state.cleanSteps)},
                  {"seed", std::to_string(seed)},
                  {"checksum", paramsChecksum(plan, arena)}};
  return saveWeights(plan, arena, path, error, how);
}

namespace {
/// The metadata of one checkpoint, read with errors naming the file.
struct MetadataReader {
  const SafetensorsHeader &header;
  const std::string &path;
  std::string &error;

  const std::string *find(const char *key) const { return header.metadataValue(key); }
  bool missing(const char *key) {
    error = path + ": the checkpoint has no \"" + std::string(key) +
            "\" in its metadata";
    return false;
  }
  bool bad(const char *key, const std::string &value) {
    error = path + ": bad \"" + std::string(key) + "\" in the checkpoint's "
            "metadata: '" + value + "'";
    return false;
  }
  bool unsignedValue(const char *key, uint64_t &value) {
    const std::string *text = find(key);
    if (!text)
      return missing(key);
    if (text->empty() || text->find_first_not_of("0123456789") != std::string::npos)
      return bad(key, *text);
    errno = 0;
    value = std::strtoull(text->c_str(), nullptr, 10);
    return errno == 0 || bad(key, *text);
  }
  bool positiveValue(const char *key, double &value) {
    const std::string *text = find(key);
    if (!text)
      return missing(key);
    char *end = nullptr;
    value = std::strtod(text->c_str(), &end);
    if (text->empty() || *end || !std::isfinite(value) || !(value > 0))
      return bad(key, *text);
    return true;
  }
};
} // namespace

bool loom::runtime::loadCheckpoint(const Plan &plan, char *arena,
                                   const std::string &path, TrainState &state,
                                   uint64_t &seed, std::string &error) {
  SafetensorsHeader header;
  if (!readSafetensorsHeader(path, header, error))
    return false;
  MetadataReader meta{header, path, error};
  const std::string *version = meta.find(kCheckpointVersionKey);
  if (!version) {
    error = path + " is not a checkpoint (no \"loom.checkpoint\" in its "
                   "metadata); pass weights with --weights";
    return false;
  }
  if (!checkpointFormatKnown(path, *version, error))
    return false;
  const std::string *model = meta.find("model");
  if (!model || *model != plan.model) {
    error = path + " is a checkpoint of model '" + (model ? *model : "?") +
            "', not of '" + plan.model + "'";
    return false;
  }
  const std::string *optimizer = meta.find("optimizer");
  if (!optimizer || *optimizer != plan.optimizer.kind) {
    error = path + " holds the state of optimizer '" +
            (optimizer ? *optimizer : "?") + "', but this step's is '" +
            plan.optimizer.kind + "'";
    return false;
  }
  TrainState read;
  if (!meta.unsignedValue("step", read.step) ||
      !meta.unsignedValue("applied", read.applied) ||
      !meta.unsignedValue("clean_steps", read.cleanSteps) ||
      !meta.positiveValue("loss_scale", read.lossScale) ||
      !meta.unsignedValue("seed", seed))
    return false;
  if (read.applied > read.step)
    return meta.bad("applied", std::to_string(read.applied));
  // What a run could have reached (loomc refuses such a scale in a script,
  // "rounds to 0 in f32" or "is out of range for f32"): a scale f32 cannot
  // hold had run every step skipped, and a count past the growth interval
  // never doubled the scale again.
  float scale = static_cast<float>(read.lossScale);
  if (!std::isfinite(scale) || !(scale > 0)) {
    meta.bad("loss_scale", *meta.find("loss_scale"));
    error += " (a loss scale is a positive f32)";
    return false;
  }
  if (read.cleanSteps >= kScaleGrowthInterval) {
    meta.bad("clean_steps", std::to_string(read.cleanSteps));
    error += " (fewer than the " + std::to_string(kScaleGrowthInterval) +
             " clean steps after which the loss scale doubles)";
    return false;
  }
  // The loss scale is this step's to decide: a checkpoint's scale goes on
  // only from dynamic scaling into dynamic scaling (a run without loss
  // scaling, in another precision, had logged its 16-bit run's scale; one
  // with it started at 1). Checkpoints before the key went on as written.
  const std::string *scaling = meta.find("loss_scaling");
  if (scaling && *scaling != "none" && *scaling != "static" && *scaling != "dynamic")
    return meta.bad("loss_scaling", *scaling);
  if (plan.optimizer.lossScale != "dynamic" || (scaling && *scaling != "dynamic")) {
    TrainState initial = initialTrainState(plan.optimizer);
    read.lossScale = initial.lossScale;
    read.cleanSteps = initial.cleanSteps;
  }
  std::vector<std::string> warnings;
  if (!loadWeights(plan, arena, path, warnings, error, /*strict=*/true))
    return false;
  if (*version != "1") {
    const std::string *stated = meta.find("checksum");
    if (!stated)
      return meta.missing("checksum");
    if (!checkpointHashMatches(path, paramsChecksum(plan, arena), *stated, error))
      return false;
  }
  state = read;
  return true;
}
