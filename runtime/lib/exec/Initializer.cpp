//===- Initializer.cpp - Deterministic param and random-input filling -----===//

#include "loom/runtime/exec/Initializer.h"

#include "loom/runtime/support/Random.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include <pthread.h>

using namespace loom::runtime;

/// Stores `value` in element 0 and copies that element's bytes everywhere:
/// constants need one conversion, not one per element.
static void fillConstant(DType dtype, uint64_t count, double value,
                         void *data) {
  if (!count)
    return;
  char *bytes = static_cast<char *>(data);
  size_t size = dtypeSize(dtype);
  storeElement(dtype, bytes, 0, value);
  for (uint64_t i = 1; i < count; ++i)
    std::memcpy(bytes + i * size, bytes, size);
}

void loom::runtime::initializeTensor(const Initializer &init, DType dtype,
                                     uint64_t count, uint64_t seed,
                                     std::string_view name, void *data) {
  switch (init.kind) {
  case InitKind::None:
    return;
  case InitKind::Zeros:
    // All-zero bits are zero in every dtype.
    std::memset(data, 0, count * dtypeSize(dtype));
    return;
  case InitKind::Ones:
    fillConstant(dtype, count, 1.0, data);
    return;
  case InitKind::Constant:
    fillConstant(dtype, count, init.a, data);
    return;
  case InitKind::Normal: {
    Xoshiro256 rng(tensorStreamSeed(seed, name));
    NormalSampler normal;
    for (uint64_t i = 0; i < count; ++i)
      storeElement(dtype, data, i,
                   static_cast<float>(init.a * normal.next(rng)));
    return;
  }
  case InitKind::Uniform: {
    Xoshiro256 rng(tensorStreamSeed(seed, name));
    for (uint64_t i = 0; i < count; ++i)
      storeElement(
          dtype, data, i,
          static_cast<float>(init.a + (init.b - init.a) * rng.uniform()));
    return;
  }
  }
}

namespace {
/// The params initializeParams fills, shared by its threads: each takes the
/// next one until none is left.
struct ParamFill {
  std::vector<const PlanBuffer *> params;
  char *arena;
  uint64_t seed;
  std::atomic<size_t> next{0};

  void run() {
    for (size_t i; (i = next.fetch_add(1)) < params.size();) {
      const PlanBuffer &buffer = *params[i];
      initializeTensor(buffer.init, buffer.dtype, buffer.numElements, seed,
                       buffer.name, arena + buffer.offset);
    }
  }
};
} // namespace

void loom::runtime::initializeParams(const Plan &plan, char *arena,
                                     uint64_t seed) {
  // Each param draws from a stream of its own (tensorStreamSeed), so params
  // fill in any order, on any thread, to the same bytes. A large model's
  // normal draws (libm's log, sin and cos per pair: ~30 ns an element, 25 s
  // for 0.8 B params) then spread over the cores, largest params first.
  ParamFill fill;
  fill.arena = arena;
  fill.seed = seed;
  uint64_t elements = 0;
  for (const PlanBuffer &buffer : plan.buffers)
    if (buffer.role == BufferRole::Param) {
      fill.params.push_back(&buffer);
      elements += buffer.numElements;
    }
  std::sort(fill.params.begin(), fill.params.end(),
            [](const PlanBuffer *a, const PlanBuffer *b) {
              return a->numElements > b->numElements;
            });
  // A thread per core, and per 4 M elements: small models stay on one.
  constexpr uint64_t kElementsPerThread = uint64_t(1) << 22;
  uint64_t threads = std::min<uint64_t>(
      {std::max(1u, std::thread::hardware_concurrency()), fill.params.size(),
       elements / kElementsPerThread + 1});
  std::vector<pthread_t> helpers;
  for (uint64_t t = 1; t < threads; ++t) {
    pthread_t helper;
    // (A helper that cannot start leaves its share to the others.)
    if (pthread_create(
            &helper, nullptr,
            [](void *work) -> void * {
              static_cast<ParamFill *>(work)->run();
              return nullptr;
            },
            &fill) == 0)
      helpers.push_back(helper);
  }
  fill.run();
  for (pthread_t helper : helpers)
    pthread_join(helper, nullptr);
}

void loom::runtime::fillRandomInput(const PlanBuffer &buffer, uint64_t seed,
                                    void *data) {
  Xoshiro256 rng(tensorStreamSeed(seed, buffer.name));
  if (isFloatDType(buffer.dtype)) {
    NormalSampler normal;
    for (uint64_t i = 0; i < buffer.numElements; ++i)
      storeElement(buffer.dtype, data, i, static_cast<float>(normal.next(rng)));
    return;
  }
  // Integers (token ids, labels, indices): 0 or 1, valid for any vocabulary
  // (0 alone where the bound is 1: one row or class).
  bool single = buffer.bound == 1;
  for (uint64_t i = 0; i < buffer.numElements; ++i)
    storeElement(buffer.dtype, data, i, !single && rng.uniform() >= 0.5 ? 1.0 : 0.0);
}

bool loom::runtime::checkIndexBound(const PlanBuffer &buffer, const void *data,
                                    const std::string &what, std::string &error) {
  if (!buffer.bound || isFloatDType(buffer.dtype))
    return true;
  for (uint64_t i = 0; i < buffer.numElements; ++i) {
    int64_t value = buffer.dtype == DType::I64
                        ? static_cast<const int64_t *>(data)[i]
                        : static_cast<const int32_t *>(data)[i];
    if (value >= 0 && value < buffer.bound)
      continue;
    // The index as coordinates, row-major.
    std::string at;
    uint64_t rest = i;
    for (size_t d = buffer.shape.size(); d-- > 0;) {
      uint64_t size = static_cast<uint64_t>(buffer.shape[d]);
      at = std::to_string(rest % size) + (at.empty() ? "" : ", ") + at;
      rest /= size;
    }
    error = what + ": element [" + at + "] is " + std::to_string(value) +
            ", outside [0, " + std::to_string(buffer.bound) +
            ") (the rows or classes it indexes)";
    return false;
  }
  return true;
}
