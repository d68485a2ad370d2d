//===- AssembledOutputs.cpp - A microbatched forward's whole outputs ------===//

#include "loom/runtime/exec/AssembledOutputs.h"

#include <cstring>

using namespace loom::runtime;

void AssembledOutputs::reset(const Plan &plan, uint64_t count) {
  microbatches = count;
  taken = 0;
  values.clear();
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Output || buffer.assembly == Assembly::None)
      continue;
    uint64_t copies = buffer.assembly == Assembly::Rows ? count : 1;
    values[buffer.id].assign(buffer.bytes * copies, 0);
  }
}

/// `into += from`, elementwise, for the dtypes a sum or mean assembles.
template <typename T>
static void addInto(char *into, const char *from, uint64_t bytes) {
  for (uint64_t at = 0; at + sizeof(T) <= bytes; at += sizeof(T)) {
    T a, b;
    std::memcpy(&a, into + at, sizeof(T));
    std::memcpy(&b, from + at, sizeof(T));
    a += b;
    std::memcpy(into + at, &a, sizeof(T));
  }
}

void AssembledOutputs::take(const Plan &layout, uint64_t microbatch,
                            const char *arena) {
  for (auto &[id, bytes] : values) {
    const PlanBuffer &buffer = layout.buffers[id];
    const char *from = arena + buffer.offset;
    switch (buffer.assembly) {
    case Assembly::Rows:
      std::memcpy(bytes.data() + microbatch * buffer.bytes, from, buffer.bytes);
      break;
    case Assembly::Mean:
    case Assembly::Sum:
      if (buffer.dtype == DType::F32)
        addInto<float>(bytes.data(), from, buffer.bytes);
      else if (buffer.dtype == DType::I32)
        addInto<int32_t>(bytes.data(), from, buffer.bytes);
      else
        addInto<int64_t>(bytes.data(), from, buffer.bytes);
      break;
    case Assembly::None:
      break;
    }
  }
  if (++taken != microbatches)
    return;
  // The mean of equal microbatches' means is the batch's mean.
  for (auto &[id, bytes] : values)
    if (layout.buffers[id].assembly == Assembly::Mean)
      for (uint64_t at = 0; at + sizeof(float) <= bytes.size(); at += sizeof(float)) {
        float v;
        std::memcpy(&v, bytes.data() + at, sizeof(float));
        v /= static_cast<float>(microbatches);
        std::memcpy(bytes.data() + at, &v, sizeof(float));
      }
}

const char *AssembledOutputs::data(const PlanBuffer &buffer) const {
  auto it = values.find(buffer.id);
  return it == values.end() ? nullptr : it->second.data();
}

PlanBuffer AssembledOutputs::whole(const PlanBuffer &buffer) const {
  PlanBuffer result = buffer;
  if (buffer.assembly != Assembly::Rows || buffer.shape.empty())
    return result;
  result.shape[0] *= microbatches;
  result.numElements *= microbatches;
  result.bytes *= microbatches;
  result.globalShape = result.shape;
  result.globalElements = result.numElements;
  result.globalBytes = result.bytes;
  return result;
}
