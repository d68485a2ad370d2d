//===- Collective.cpp - The plan's collectives over a Communicator --------===//

#include "loom/runtime/comm/Collective.h"

#include "loom/runtime/plan/Layout.h"

#include <cstring>

using namespace loom::runtime;

namespace {
template <typename T> T load(const char *data, uint64_t index) {
  T value;
  std::memcpy(&value, data + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T> void store(char *data, uint64_t index, T value) {
  std::memcpy(data + index * sizeof(T), &value, sizeof(T));
}

/// Sums with accumulator type `Acc` over elements of type `T`, converting
/// with `widen` and `narrow`.
template <typename T, typename Acc, typename Widen, typename Narrow>
void sumWith(const char *arrays, unsigned n, uint64_t count, char *out,
             Widen widen, Narrow narrow) {
  uint64_t stride = count * sizeof(T);
  for (uint64_t i = 0; i < count; ++i) {
    Acc sum = widen(load<T>(arrays, i));
    for (unsigned j = 1; j < n; ++j)
      sum += widen(load<T>(arrays + j * stride, i));
    store<T>(out, i, narrow(sum));
  }
}
} // namespace

void loom::runtime::sumArrays(DType dtype, const void *arrays, unsigned n,
                              uint64_t count, void *out) {
  const char *in = static_cast<const char *>(arrays);
  char *result = static_cast<char *>(out);
  auto same = [](auto value) { return value; };
  switch (dtype) {
  case DType::F32:
    sumWith<float, float>(in, n, count, result, same, same);
    return;
  case DType::F16:
    sumWith<uint16_t, float>(in, n, count, result, halfToFloat, floatToHalf);
    return;
  case DType::BF16:
    sumWith<uint16_t, float>(in, n, count, result, bf16ToFloat, floatToBF16);
    return;
  case DType::I32:
    // Unsigned: wrapping is defined.
    sumWith<uint32_t, uint32_t>(in, n, count, result, same, same);
    return;
  case DType::I64:
    sumWith<uint64_t, uint64_t>(in, n, count, result, same, same);
    return;
  }
}

namespace {
/// Elements per member in an all-reduce: the flattened tensor in n equal
/// chunks, the last one padded.
uint64_t reduceChunk(uint64_t count, unsigned n) { return (count + n - 1) / n; }

/// `shape` with dim `dim` divided by `n`: one of n blocks along it.
Shape blockShape(Shape shape, unsigned dim, unsigned n) {
  shape[dim] /= n;
  return shape;
}
} // namespace

uint64_t loom::runtime::collectiveScratchBytes(const Plan &plan,
                                               const PlanStep &step) {
  if (step.kind != StepKind::Collective)
    return 0;
  const PlanBuffer &in = plan.buffers[step.buffers[0]];
  uint64_t n = step.collective.groupSize;
  switch (step.collective.kind) {
  case CollectiveKind::AllReduce:
    // Send (then the gathered sums), receive, and this member's sums, of
    // every pair's elements.
    return (2 * n + 1) *
           reduceChunk(allReduceElements(plan, step), static_cast<unsigned>(n)) *
           dtypeSize(in.dtype);
  case CollectiveKind::AllGather:
    return n * in.bytes;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return 2 * in.bytes; // the blocks to send, the blocks received
  case CollectiveKind::AllSlice:
  case CollectiveKind::Broadcast:
    return 0;
  }
  return 0;
}

uint64_t loom::runtime::allReduceElements(const Plan &plan,
                                          const PlanStep &step) {
  uint64_t count = 0;
  for (size_t pair = 0; pair < step.buffers.size(); pair += 2)
    count += plan.buffers[step.buffers[pair]].numElements;
  return count;
}

bool loom::runtime::runCollective(const Plan &plan, const PlanStep &step,
                                  const CommGroup &group, Communicator &comm,
                                  const std::vector<char *> &buffers,
                                  char *scratch, std::string &error) {
  const char *in = buffers[0];
  char *out = buffers[1];
  const PlanCollective &op = step.collective;
  const PlanBuffer &source = plan.buffers[step.buffers[0]];
  const PlanBuffer &target = plan.buffers[step.buffers[1]];
  unsigned n = group.size();
  size_t element = dtypeSize(source.dtype);
  size_t rank = source.shape.size();
  bool ok = true;
  switch (op.kind) {
  case CollectiveKind::AllReduce: {
    // A bucket's pairs go one after the other in one message: the sums
    // are elementwise, so each pair's are those of its own all-reduce.
    uint64_t count = allReduceElements(plan, step);
    uint64_t bytes = count * element;
    uint64_t chunk = reduceChunk(count, n);
    uint64_t chunkBytes = chunk * element;
    char *send = scratch; // later the gathered sums
    char *recv = send + n * chunkBytes;
    char *mine = recv + n * chunkBytes;
    uint64_t at = 0;
    for (size_t pair = 0; pair < step.buffers.size(); pair += 2) {
      uint64_t size = plan.buffers[step.buffers[pair]].bytes;
      std::memcpy(send + at, buffers[pair], size);
      at += size;
    }
    std::memset(send + bytes, 0, n * chunkBytes - bytes);
    ok = comm.allToAll(group, send, recv, chunkBytes, error);
    if (!ok)
      break;
    sumArrays(source.dtype, recv, n, chunk, mine);
    ok = comm.allGather(group, mine, chunkBytes, send, error);
    at = 0;
    for (size_t pair = 0; ok && pair < step.buffers.size(); pair += 2) {
      uint64_t size = plan.buffers[step.buffers[pair + 1]].bytes;
      std::memcpy(buffers[pair + 1], send + at, size);
      at += size;
    }
    break;
  }
  case CollectiveKind::AllGather: {
    // Concatenating along a dim with nothing but 1s before it is
    // concatenating the bytes: gather straight into OUT.
    bool contiguous = true;
    for (unsigned d = 0; d < op.dim; ++d)
      contiguous &= source.shape[d] == 1;
    if (contiguous) {
      ok = comm.allGather(group, in, source.bytes, out, error);
      break;
    }
    ok = comm.allGather(group, in, source.bytes, scratch, error);
    for (unsigned j = 0; ok && j < n; ++j)
      copyBlockIn(out, target.shape, scratch + j * source.bytes, source.shape,
                  blockAlong(rank, op.dim, j), element);
    break;
  }
  case CollectiveKind::ReduceScatter: {
    // Member j receives block j along DIM from everyone, then sums them.
    uint64_t blockBytes = target.bytes;
    char *send = scratch;
    char *recv = scratch + source.bytes;
    for (unsigned j = 0; j < n; ++j)
      copyBlockOut(in, source.shape, send + j * blockBytes, target.shape,
                   blockAlong(rank, op.dim, j), element);
    ok = comm.allToAll(group, send, recv, blockBytes, error);
    if (ok)
      sumArrays(source.dtype, recv, n, target.numElements, out);
    break;
  }
  case CollectiveKind::AllSlice:
    copyBlockOut(in, source.shape, out, target.shape,
                 blockAlong(rank, op.dim, group.index), element);
    break;
  case CollectiveKind::AllToAll: {
    Shape block = blockShape(source.shape, op.dim, n);
    uint64_t blockBytes = source.bytes / n;
    char *send = scratch;
    char *recv = scratch + source.bytes;
    for (unsigned j = 0; j < n; ++j)
      copyBlockOut(in, source.shape, send + j * blockBytes, block,
                   blockAlong(rank, op.dim, j), element);
    ok = comm.allToAll(group, send, recv, blockBytes, error);
    for (unsigned j = 0; ok && j < n; ++j)
      copyBlockIn(out, target.shape, recv + j * blockBytes, block,
                  blockAlong(rank, op.concatDim, j), element);
    break;
  }
  case CollectiveKind::Broadcast:
    if (group.index == 0)
      std::memcpy(out, in, source.bytes);
    ok = comm.broadcast(group, 0, out, target.bytes, error);
    break;
  }
  if (!ok)
    error = "plan:" + std::to_string(step.line) + ": " +
            collectiveKindName(op.kind) + ": " + error;
  return ok;
}
