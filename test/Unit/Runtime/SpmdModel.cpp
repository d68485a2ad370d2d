//===- SpmdModel.cpp - A small partitioned model for runtime tests --------===//

#include "SpmdModel.h"

#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/io/Npy.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/io/Safetensors.h"

#include <cstring>

using namespace loom::runtime;

namespace {
/// c[M, N] = a[M, K] b[K, N] in f32, summing over k in order.
template <int M, int K, int N> void matmul(void **args) {
  const float *a = static_cast<const float *>(args[0]);
  const float *b = static_cast<const float *>(args[1]);
  float *c = static_cast<float *>(args[2]);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = 0;
      for (int k = 0; k < K; ++k)
        sum += a[i * K + k] * b[k * N + j];
      c[i * N + j] = sum;
    }
}

template <int N> void copy(void **args) {
  std::memcpy(args[1], args[0], N * sizeof(float));
}
} // namespace

const LoomKernel loom::test::kSpmdKernels[] = {{"mm_4_8_8", 3, matmul<4, 8, 8>},
                                               {"mm_2_8_4", 3, matmul<2, 8, 4>},
                                               {"mm_2_4_8", 3, matmul<2, 4, 8>},
                                               {"mm_4_8_4", 3, matmul<4, 8, 4>},
                                               {"mm_4_4_8", 3, matmul<4, 4, 8>},
                                               {"mm_4_8_2", 3, matmul<4, 8, 2>},
                                               {"mm_4_2_8", 3, matmul<4, 2, 8>},
                                               {"copy_32", 2, copy<32>},
                                               {nullptr, 0, nullptr}};

std::string loom::test::makePlan(const std::string &mesh,
                                 const std::vector<TestBuffer> &buffers,
                                 const std::vector<std::string> &rest) {
  std::string body = "loom-plan 1\nmodel mlp\ndevice cpu\n";
  if (!mesh.empty())
    body += "mesh gpus " + mesh + "\n";
  std::string records;
  uint64_t offset = 0;
  for (size_t id = 0; id < buffers.size(); ++id) {
    const TestBuffer &buffer = buffers[id];
    uint64_t elements = 1;
    size_t start = 0;
    while (true) {
      size_t comma = buffer.shape.find(',', start);
      elements *= std::stoull(buffer.shape.substr(start, comma - start));
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    records += "buffer " + std::to_string(id) + " " + buffer.name + " " +
               buffer.role + " f32 " + buffer.shape + " " +
               std::to_string(offset) +
               (buffer.init.empty() ? "" : " " + buffer.init) + "\n";
    if (!buffer.shard.empty())
      records += "shard " + std::to_string(id) + " " + buffer.shard + "\n";
    offset += (elements * 4 + 63) / 64 * 64;
  }
  body += "arena " + std::to_string(offset) + "\n" + records;
  for (const std::string &line : rest)
    body += line + "\n";
  return sealPlan(body);
}

std::string loom::test::wholeMlpPlan() {
  return makePlan("",
                  {{"x", "input", "4,8", "", ""},
                   {"w1", "param", "8,8", "normal 0.5", ""},
                   {"w2", "param", "8,8", "uniform -1 1", ""},
                   {"h", "temp", "4,8", "", ""},
                   {"y", "output", "4,8", "", ""},
                   {"hid", "output", "4,8", "", ""},
                   {"y2", "output", "4,8", "", ""}},
                  {"kernel mm_4_8_8 3", "kernel copy_32 2",
                   "step mm_4_8_8 0 1 3", "step mm_4_8_8 3 2 4",
                   "step copy_32 3 5", "step copy_32 4 6"});
}

std::string loom::test::spmdMlpPlan(const std::string &mesh,
                                    const std::string &axes,
                                    const std::string &split,
                                    const std::string &rows, int m, int k) {
  std::string xRows = std::to_string(m);
  std::string cols = std::to_string(k);
  std::string rowSpec = rows.empty() ? "" : rows + ",-";
  std::string hSpec = (rows.empty() ? "-" : rows) + "," + split;
  std::string mm1 = "mm_" + xRows + "_8_" + cols;
  std::string mm2 = "mm_" + xRows + "_" + cols + "_8";
  return makePlan(mesh,
                  {{"x", "input", xRows + ",8", "", rowSpec},
                   {"w1", "param", "8," + cols, "normal 0.5", "-," + split},
                   {"w2", "param", cols + ",8", "uniform -1 1", split + ",-"},
                   {"h", "temp", xRows + "," + cols, "", hSpec},
                   {"p", "temp", xRows + ",8", "", ""},
                   {"y", "output", xRows + ",8", "", rowSpec},
                   {"hid", "output", xRows + ",8", "", rowSpec},
                   {"z", "temp", xRows + "," + cols, "", ""},
                   {"y2", "output", xRows + ",8", "", rowSpec}},
                  {"kernel " + mm1 + " 3", "kernel " + mm2 + " 3",
                   "step " + mm1 + " 0 1 3", "step " + mm2 + " 3 2 4",
                   "collective all-reduce " + axes + " - 4 5",
                   "collective all-gather " + axes + " 1 3 6",
                   "collective reduce-scatter " + axes + " 1 4 7",
                   "collective all-gather " + axes + " 1 7 8"});
}

std::vector<loom::test::SpmdVariant> loom::test::spmdMlpVariants() {
  return {{"dp=2 tp=2", 4, spmdMlpPlan("dp=2 tp=2", "tp", "tp", "dp", 2, 4)},
          {"tp=2", 2, spmdMlpPlan("tp=2", "tp", "tp", "", 4, 4)},
          {"a=2 b=2, a+b", 4, spmdMlpPlan("a=2 b=2", "a,b", "a+b", "", 4, 2)}};
}

bool loom::test::writeExactMlpFiles(const std::string &weightsPath,
                                    const std::string &inputPath,
                                    std::string &error) {
  Plan plan;
  if (!parsePlan(wholeMlpPlan(), plan, error))
    return false;
  Arena arena;
  if (!arena.allocate(plan.arenaBytes, error))
    return false;
  for (const char *name : {"w1", "w2"}) {
    const PlanBuffer *buffer = plan.findBuffer(name);
    float *data = reinterpret_cast<float *>(arena.data() + buffer->offset);
    for (int i = 0; i < 64; ++i)
      data[i] = static_cast<float>((i * (name[1] == '1' ? 7 : 5)) % 5 - 2);
  }
  if (!saveWeights(plan, arena.data(), weightsPath, error))
    return false;
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i)
    x[i] = static_cast<float>((i * 3) % 7 - 3);
  return writeNpy(inputPath, DType::F32, {4, 8}, x.data(), error);
}
