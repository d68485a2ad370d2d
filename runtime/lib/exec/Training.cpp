//===- Training.cpp - What ./model train adds to a run --------------------===//

#include "loom/runtime/exec/Training.h"

#include "io/File.h"
#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/io/Npy.h"
#include "loom/runtime/plan/Layout.h"
#include "loom/runtime/support/DType.h"
#include "loom/runtime/support/Hash.h"
#include "loom/runtime/support/Random.h"
#include "loom/runtime/support/Shape.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>

using namespace loom::runtime;

bool loom::runtime::isStepScalar(const Plan &plan, const PlanBuffer &buffer) {
  return !plan.optimizer.kind.empty() && buffer.role == BufferRole::Input &&
         buffer.name.compare(0, 4, "opt.") == 0 && buffer.shape.empty() &&
         buffer.dtype == DType::F32;
}

TrainState loom::runtime::initialTrainState(const PlanOptimizer &optimizer) {
  TrainState state;
  if (optimizer.lossScale != "none")
    state.lossScale = optimizer.get("initial_scale", 65536.0);
  return state;
}

double loom::runtime::learningRate(const PlanOptimizer &optimizer,
                                   uint64_t step) {
  double lr = optimizer.get("lr", 0.0);
  if (optimizer.lrSchedule != "warmup_cosine" && optimizer.lrSchedule != "warmup_linear")
    return lr;
  double s = static_cast<double>(step);
  double warmup = optimizer.get("warmup", 0.0);
  double total = static_cast<double>(optimizer.steps);
  double minLr = optimizer.get("min_lr", 0.0);
  // Past the section's steps the floor, even within a warmup longer than
  // them (--steps past S had gone on warming up, then fallen to L).
  if (s > total)
    return minLr;
  if (s <= warmup)
    return lr * s / warmup;
  double progress = total > warmup ? (s - warmup) / (total - warmup) : 1.0;
  if (progress > 1)
    progress = 1;
  // Megatron-LM's schedules: steps counted from 1, the last at the floor.
  if (optimizer.lrSchedule == "warmup_linear")
    return minLr + (lr - minLr) * (1 - progress);
  return minLr + (lr - minLr) * (1 + std::cos(M_PI * progress)) / 2;
}

uint32_t loom::runtime::dropoutSeedBits(uint64_t seed, uint64_t step) {
  uint32_t key = lowbias32(static_cast<uint32_t>(seed) ^ static_cast<uint32_t>(seed >> 32));
  return lowbias32(key + static_cast<uint32_t>(step));
}

const PlanBuffer *loom::runtime::dropoutMicrobatchKey(const Plan &plan) {
  const PlanBuffer *buffer = plan.findBuffer("opt.dropout_microbatch");
  return buffer && isStepScalar(plan, *buffer) ? buffer : nullptr;
}

void loom::runtime::fillDropoutMicrobatch(const PlanBuffer *key, char *arena,
                                          double microbatch) {
  if (!key)
    return;
  float stored = static_cast<float>(microbatch);
  std::memcpy(arena + key->offset, &stored, sizeof(stored));
}

void loom::runtime::fillStepScalars(const Plan &plan, char *arena,
                                    const TrainState &state, uint64_t seed) {
  const PlanOptimizer &optimizer = plan.optimizer;
  double lr = learningRate(optimizer, state.step + 1);
  double t = static_cast<double>(state.applied + 1);
  double beta1 = optimizer.get("beta1", 0.9), beta2 = optimizer.get("beta2", 0.999);
  for (const PlanBuffer &buffer : plan.buffers) {
    if (!isStepScalar(plan, buffer))
      continue;
    double value = 0;
    if (buffer.name == "opt.lr")
      value = lr;
    else if (buffer.name == "opt.step_size")
      value = lr / (1.0 - std::pow(beta1, t));
    else if (buffer.name == "opt.bc2_sqrt")
      value = std::sqrt(1.0 - std::pow(beta2, t));
    else if (buffer.name == "opt.decay")
      value = 1.0 - lr * optimizer.get("weight_decay", 0.0);
    else if (buffer.name == "opt.loss_scale")
      // It seeds each microbatch's backward, whose loss is its microbatch's
      // mean: over M, as torch's scaler.scale(loss / M), so the 16-bit
      // activation gradients are the whole batch's size (seeded with the
      // scale, they were M times larger and overflowed f16 where the
      // whole batch's did not). The unscale divides by the same value.
      value = state.lossScale / static_cast<double>(optimizer.microbatches);
    else if (buffer.name == "opt.dropout_seed") {
      // A key, not a number: its bits (the kernels bitcast them back).
      uint32_t bits = dropoutSeedBits(seed, state.step + 1);
      std::memcpy(arena + buffer.offset, &bits, sizeof(bits));
      continue;
    }
    float stored = static_cast<float>(value);
    std::memcpy(arena + buffer.offset, &stored, sizeof(stored));
  }
}

bool loom::runtime::advanceTrainState(const PlanOptimizer &optimizer,
                                      TrainState &state, double gradNorm) {
  ++state.step;
  bool finite = std::isfinite(gradNorm);
  if (optimizer.lossScale == "none" || finite) {
    ++state.applied;
    if (optimizer.lossScale == "dynamic" && ++state.cleanSteps == kScaleGrowthInterval) {
      state.lossScale *= 2;
      state.cleanSteps = 0;
    }
    return true;
  }
  if (optimizer.lossScale == "dynamic")
    state.lossScale *= 0.5;
  state.cleanSteps = 0;
  return false;
}

void loom::runtime::applyUpdates(const Plan &plan, const Executor &executor,
                                 unsigned rank) {
  for (const PlanUpdate &update : plan.updates)
    if (!plan.isInPlace(update) && holdsBuffer(plan, plan.buffers[update.param], rank))
      std::memcpy(executor.buffer(update.param), executor.buffer(update.output),
                  plan.buffers[update.param].bytes);
}

/// Calls `each(param)` for the in-place updates' params rank `rank` holds.
template <typename Each>
static void forInPlaceParams(const Plan &plan, unsigned rank, Each each) {
  for (const PlanUpdate &update : plan.updates) {
    const PlanBuffer &param = plan.buffers[update.param];
    if (plan.isInPlace(update) && holdsBuffer(plan, param, rank))
      each(param);
  }
}

std::vector<char> loom::runtime::saveInPlaceParams(const Plan &plan,
                                                   const Executor &executor,
                                                   unsigned rank) {
  std::vector<char> saved;
  forInPlaceParams(plan, rank, [&](const PlanBuffer &param) {
    const char *bytes = executor.buffer(param.id);
    saved.insert(saved.end(), bytes, bytes + param.bytes);
  });
  return saved;
}

void loom::runtime::restoreInPlaceParams(const Plan &plan, const Executor &executor,
                                         unsigned rank,
                                         const std::vector<char> &saved) {
  size_t at = 0;
  forInPlaceParams(plan, rank, [&](const PlanBuffer &param) {
    std::memcpy(executor.buffer(param.id), saved.data() + at, param.bytes);
    at += param.bytes;
  });
}

bool loom::runtime::isUpdateOutput(const Plan &plan, const PlanBuffer &buffer) {
  for (const PlanUpdate &update : plan.updates)
    if (update.output == buffer.id)
      return true;
  return false;
}

bool loom::runtime::readScalarOutput(const Plan &plan, const Executor &executor,
                                     std::string_view name, double &value) {
  const PlanBuffer *buffer = plan.findScalarOutput(name);
  if (!buffer)
    return false;
  float stored;
  std::memcpy(&stored, executor.buffer(buffer->id), sizeof(stored));
  value = stored;
  return true;
}

int64_t TokenIds::operator[](size_t i) const {
  const char *at = raw.data() + offset + i * width;
  switch (width) {
  case 1:
    return isSigned ? static_cast<int8_t>(*at) : static_cast<uint8_t>(*at);
  case 2: {
    uint16_t v;
    std::memcpy(&v, at, 2);
    return isSigned ? static_cast<int16_t>(v) : v;
  }
  case 4: {
    int32_t v;
    std::memcpy(&v, at, 4);
    return v;
  }
  default: {
    int64_t v;
    std::memcpy(&v, at, 8);
    return v;
  }
  }
}

void TokenIds::push_back(int64_t id) {
  if (width != 8 || offset != 0) { // make room as 8-byte ids first
    std::string wide(count * 8, '\0');
    for (size_t i = 0; i < count; ++i) {
      int64_t v = (*this)[i];
      std::memcpy(&wide[i * 8], &v, 8);
    }
    adopt(std::move(wide), 0, count, 8, true);
  }
  raw.append(reinterpret_cast<const char *>(&id), 8);
  ++count;
}

void TokenIds::assign(size_t n, int64_t id) {
  clear();
  raw.reserve(n * 8);
  for (size_t i = 0; i < n; ++i)
    push_back(id);
}

void TokenIds::adopt(std::string bytes, size_t start, size_t n, unsigned size,
                     bool isSignedId) {
  raw = std::move(bytes);
  offset = start;
  count = n;
  width = size;
  isSigned = isSignedId;
}

bool loom::runtime::loadTokenData(const std::string &path, TokenData &data,
                                  std::string &error) {
  data.path = path;
  data.tokens.clear();
  FilePtr file;
  uint64_t size;
  if (!openForReading(path, file, size, error))
    return false;
  std::string bytes(size, '\0');
  if (size && !readAt(file.get(), 0, bytes.data(), size)) {
    error = "cannot read " + path;
    return false;
  }
  if (bytes.compare(0, 6, "\x93NUMPY") != 0) {
    data.tokens.adopt(std::move(bytes), 0, size, 1, false);
    return true;
  }
  NpyHeader header;
  if (!parseNpyHeader(bytes, header, error)) {
    error = path + ": " + error;
    return false;
  }
  unsigned width = header.descr == "<i8"   ? 8
                   : header.descr == "<i4" ? 4
                   : header.descr == "<i2" || header.descr == "<u2" ? 2
                   : header.descr == "|u1" || header.descr == "|i1" ? 1
                                                                    : 0;
  if (!width || header.fortranOrder || header.shape.size() != 1) {
    error = path + ": --data takes a 1-D .npy array of integers (<i8, <i4, "
                   "<i2, <u2, |u1 or |i1) in C order, got " + header.descr + " " +
            formatShape(header.shape) + (header.fortranOrder ? " in Fortran order" : "");
    return false;
  }
  uint64_t count = static_cast<uint64_t>(header.shape[0]);
  if (header.dataOffset > size || (size - header.dataOffset) / width < count) {
    error = path + ": the file is shorter than its " + std::to_string(count) +
            " ids";
    return false;
  }
  // As an --input's: bytes past the ids are not a file numpy wrote.
  if (size - header.dataOffset != count * width) {
    error = path + ": the file has " + std::to_string(size - header.dataOffset) +
            " data bytes, expected " + std::to_string(count * width) + " for its " +
            std::to_string(count) + " ids";
    return false;
  }
  bool isSigned = header.descr[1] == 'i';
  data.tokens.adopt(std::move(bytes), header.dataOffset, count, width, isSigned);
  for (uint64_t i = 0; isSigned && i < count; ++i)
    if (int64_t id = data.tokens[i]; id < 0) {
      error = path + ": token " + std::to_string(i) + " is " +
              std::to_string(id) + ", not a vocabulary id";
      data.tokens.clear();
      return false;
    }
  return true;
}

bool loom::runtime::findBatchInputs(const Plan &plan, const TokenData &data,
                                    const PlanBuffer *&tokens,
                                    const PlanBuffer *&labels,
                                    std::string &error) {
  tokens = plan.findBuffer("tokens");
  labels = plan.findBuffer("labels");
  auto isBatch = [](const PlanBuffer *buffer) {
    return buffer->shape.size() == 2 &&
           (buffer->dtype == DType::I32 || buffer->dtype == DType::I64);
  };
  auto isInput = [](const PlanBuffer *buffer) {
    return buffer && buffer->role == BufferRole::Input;
  };
  const char *what = "--data fills the inputs 'tokens' and 'labels' (integers "
                     "of one shape [B, T])";
  if (!isInput(tokens) || !isInput(labels)) {
    error = std::string(what) + ", which model '" + plan.model + "' does not have";
    return false;
  }
  // Each may be i32 or i64 (fillBatch writes each in its own).
  if (!isBatch(tokens) || !isBatch(labels) || tokens->shape != labels->shape) {
    auto describe = [](const PlanBuffer *buffer) {
      return std::string(dtypeName(buffer->dtype)) + " " + formatShape(buffer->shape);
    };
    error = std::string(what) + ", but model '" + plan.model + "' has tokens " +
            describe(tokens) + " and labels " + describe(labels);
    return false;
  }
  uint64_t window = static_cast<uint64_t>(tokens->shape[1]) + 1;
  if (data.tokens.size() <= window) {
    error = data.path + ": " + std::to_string(data.tokens.size()) +
            " tokens, but a row of tokens and labels needs T + 1 = " +
            std::to_string(window) + " and the offsets need one more";
    return false;
  }
  // Every id may be read (the offsets wrap around): all must index the
  // tables and classes the inputs feed.
  const PlanBuffer *tighter =
      labels->bound && (!tokens->bound || labels->bound < tokens->bound) ? labels
                                                                         : tokens;
  if (!tighter->bound)
    return true;
  for (size_t i = 0; i < data.tokens.size(); ++i)
    if (data.tokens[i] >= tighter->bound) {
      error = data.path + ": token " + std::to_string(i) + " is " +
              std::to_string(data.tokens[i]) + ", outside the vocabulary of " +
              "input '" + tighter->name + "' (ids 0 to " +
              std::to_string(tighter->bound - 1) + ")";
      return false;
    }
  return true;
}

void loom::runtime::fillBatch(const TokenData &data, const PlanBuffer &tokens,
                              const PlanBuffer &labels, char *arena,
                              uint64_t step, uint64_t microbatches,
                              uint64_t microbatch) {
  uint64_t rows = tokens.shape[0], cols = tokens.shape[1];
  uint64_t span = data.tokens.size() - cols - 1;
  uint64_t first = microbatch * rows; // of the step's rows
  // Element `at` of an i32 or i64 input (tokens and labels may differ).
  auto put = [&](const PlanBuffer &buffer, uint64_t at, int64_t id) {
    if (buffer.dtype == DType::I64) {
      std::memcpy(arena + buffer.offset + 8 * at, &id, 8);
    } else {
      int32_t id32 = static_cast<int32_t>(id);
      std::memcpy(arena + buffer.offset + 4 * at, &id32, 4);
    }
  };
  for (uint64_t b = 0; b < rows; ++b) {
    uint64_t start = windowStart(data, step, rows * microbatches, first + b, cols, span);
    for (uint64_t t = 0; t < cols; ++t) {
      uint64_t at = b * cols + t;
      put(tokens, at, data.tokens[start + t]);
      put(labels, at, data.tokens[start + t + 1]);
    }
  }
}

uint64_t loom::runtime::windowStart(const TokenData &data, uint64_t step,
                                    uint64_t rows, uint64_t row, uint64_t cols,
                                    uint64_t span) {
  // splitmix64(x) is the first output of SplitMix64 started at x.
  if (data.shuffled)
    return SplitMix64(SplitMix64(data.seed).next() + step * rows + row).next() % span;
  return ((step * rows + row) * cols) % span;
}

uint64_t loom::runtime::batchesIn(const TokenData &data, const PlanBuffer &tokens,
                                  uint64_t microbatches) {
  uint64_t rows = tokens.shape[0], cols = tokens.shape[1];
  uint64_t span = data.tokens.size() - cols - 1; // findBatchInputs: > 0
  // Window k starts at k cols (mod span): those below span do not wrap.
  uint64_t windows = (span + cols - 1) / cols;
  return std::max<uint64_t>(1, windows / (rows * microbatches));
}

bool loom::runtime::wholeBatchOf(const PlanBuffer &buffer, uint64_t microbatches,
                                 PlanBuffer &whole) {
  whole = buffer;
  if (buffer.shape.empty() || microbatches == 0 ||
      buffer.bytes > UINT64_MAX / microbatches ||
      buffer.globalBytes > UINT64_MAX / microbatches ||
      static_cast<uint64_t>(buffer.shape[0]) > INT64_MAX / microbatches)
    return false;
  auto m = static_cast<int64_t>(microbatches);
  whole.shape[0] *= m;
  if (!whole.globalShape.empty())
    whole.globalShape[0] *= m;
  whole.numElements *= microbatches;
  whole.bytes *= microbatches;
  whole.globalElements *= microbatches;
  whole.globalBytes *= microbatches;
  return true;
}
