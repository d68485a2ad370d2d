//===- CollectiveTest.cpp - Collectives on in-process ranks ---------------===//
//
// Every collective kind runs through the Executor on the ranks of a
// LocalWorld (threads), and its results are compared with the definitions
// of docs/plan-format.md, computed here element by element.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "loom/runtime/comm/Collective.h"
#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/plan/Layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::linear;
using loom::test::next;
using loom::test::product;
using loom::test::sealLines;

namespace {

std::string shapeText(const Shape &shape) {
  std::string text;
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? "," : "") + std::to_string(shape[d]);
  return text.empty() ? "scalar" : text;
}

uint64_t padded(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

/// A plan with two temps, IN (buffer 0) and OUT (buffer 1), and one
/// collective between them.
std::string collectivePlan(const std::string &mesh, const std::string &dtype,
                           const Shape &in, const Shape &out,
                           const std::string &record) {
  DType type;
  parseDType(dtype, type);
  uint64_t inBytes = product(in) * dtypeSize(type);
  uint64_t outBytes = product(out) * dtypeSize(type);
  return sealLines({"loom-plan 1", "model c", "device cpu", "mesh g " + mesh,
                    "arena " + std::to_string(padded(inBytes) + outBytes),
                    "buffer 0 in temp " + dtype + " " + shapeText(in) + " 0",
                    "buffer 1 out temp " + dtype + " " + shapeText(out) + " " +
                        std::to_string(padded(inBytes)),
                    "collective " + record + " 0 1"});
}

/// Runs `planText` on every rank of its mesh: rank r's IN is `input(r)`
/// (raw bytes); returns every rank's OUT bytes.
std::vector<std::vector<char>>
runOnRanks(const std::string &planText,
           const std::function<std::vector<char>(unsigned)> &input) {
  Plan plan;
  std::string error;
  EXPECT_TRUE(parsePlan(planText, plan, error)) << error;
  std::vector<std::vector<char>> outputs(plan.mesh.numRanks);
  std::mutex failures;
  runLocalRanks(
      plan.mesh.numRanks,
      [&](unsigned rank, Communicator &comm) {
        Executor executor;
        std::string message;
        executor.setCommunicator(&comm);
        bool ok =
            executor.bind(plan, nullptr, message) && executor.allocate(message);
        if (ok) {
          std::vector<char> in = input(rank);
          std::memcpy(executor.buffer(0), in.data(), in.size());
          ok = executor.run(nullptr, message);
        }
        if (!ok) {
          std::lock_guard<std::mutex> lock(failures);
          ADD_FAILURE() << "rank " << rank << ": " << message;
          return;
        }
        const PlanBuffer &out = plan.buffers[1];
        outputs[rank].assign(executor.buffer(1),
                             executor.buffer(1) + out.bytes);
      },
      20);
  return outputs;
}

/// Rank r's IN for f32 and i32 tests: element i is r * 1000 + i.
std::vector<char> indexed(DType dtype, uint64_t count, unsigned rank) {
  std::vector<char> bytes(count * dtypeSize(dtype));
  for (uint64_t i = 0; i < count; ++i)
    storeElement(dtype, bytes.data(), i,
                 rank * 1000.0 + static_cast<double>(i));
  return bytes;
}

/// The expected OUT of member `index` of a group of world ranks `members`,
/// whose INs are indexed(); f32 or i32, sums exact.
std::vector<double> expected(CollectiveKind kind, const Shape &in, const Shape &out,
                             unsigned dim, unsigned concat,
                             const std::vector<unsigned> &members,
                             unsigned index) {
  unsigned n = static_cast<unsigned>(members.size());
  auto value = [&](unsigned member, const std::vector<uint64_t> &at) {
    return members[member] * 1000.0 + static_cast<double>(linear(in, at));
  };
  std::vector<double> result(product(out), 0);
  std::vector<uint64_t> pos(out.size(), 0);
  do {
    std::vector<uint64_t> at = pos;
    double v = 0;
    switch (kind) {
    case CollectiveKind::AllReduce:
      for (unsigned j = 0; j < n; ++j)
        v += value(j, at);
      break;
    case CollectiveKind::AllGather: {
      unsigned j = static_cast<unsigned>(pos[dim] / in[dim]);
      at[dim] -= j * in[dim];
      v = value(j, at);
      break;
    }
    case CollectiveKind::ReduceScatter:
      at[dim] += index * out[dim];
      for (unsigned j = 0; j < n; ++j)
        v += value(j, at);
      break;
    case CollectiveKind::AllSlice:
      at[dim] += index * out[dim];
      v = value(index, at);
      break;
    case CollectiveKind::AllToAll: {
      Shape block = in;
      block[dim] /= n;
      unsigned j = static_cast<unsigned>(pos[concat] / block[concat]);
      at[concat] -= j * block[concat];
      at[dim] += index * block[dim];
      v = value(j, at);
      break;
    }
    case CollectiveKind::Broadcast:
      v = value(0, at);
      break;
    }
    result[linear(out, pos)] = v;
  } while (next(out, pos));
  return result;
}
} // namespace

TEST(Collective, SumsInGroupOrderWithF32Accumulation) {
  // f32: ((1e8 + 1) - 1e8) is 0 in f32; another order would give 1.
  float f32[3] = {1e8f, 1.0f, -1e8f};
  float sum = -1;
  sumArrays(DType::F32, f32, 3, 1, &sum);
  EXPECT_EQ(sum, 0.0f);
  // bf16: 1 + 3 * 2^-8 in f32 is 1 + 1.5 ulp, which rounds (ties to even)
  // to 1 + 2 ulp; rounding after each addition would stay at 1.
  uint16_t bf16[4] = {floatToBF16(1.0f), floatToBF16(0.00390625f),
                      floatToBF16(0.00390625f), floatToBF16(0.00390625f)};
  uint16_t bf16Sum = 0;
  sumArrays(DType::BF16, bf16, 4, 1, &bf16Sum);
  EXPECT_EQ(bf16ToFloat(bf16Sum), 1.015625f);
  uint16_t f16[4] = {floatToHalf(1.0f), floatToHalf(0.00048828125f),
                     floatToHalf(0.00048828125f), floatToHalf(0.00048828125f)};
  uint16_t f16Sum = 0;
  sumArrays(DType::F16, f16, 4, 1, &f16Sum);
  EXPECT_EQ(halfToFloat(f16Sum), 1.001953125f);
  // Integers wrap around.
  int32_t i32[2] = {2147483647, 1};
  int32_t i32Sum = 0;
  sumArrays(DType::I32, i32, 2, 1, &i32Sum);
  EXPECT_EQ(i32Sum, -2147483647 - 1);
  int64_t i64[3] = {5, -7, 9};
  int64_t i64Sum = 0;
  sumArrays(DType::I64, i64, 3, 1, &i64Sum);
  EXPECT_EQ(i64Sum, 7);
  // Several elements: arrays one after the other.
  float rows[2][3] = {{1, 2, 3}, {10, 20, 30}};
  float sums[3];
  sumArrays(DType::F32, rows, 2, 3, sums);
  EXPECT_EQ(sums[2], 33.0f);
}

TEST(Collective, PrimitivesOfTheLocalWorld) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines({"loom-plan 1", "model m", "device cpu",
                                   "mesh g dp=2 tp=2", "arena 0"}),
                        plan, error))
      << error;
  std::vector<std::string> failures(4);
  std::vector<std::vector<char>> gathered(4), rooted(4), broadcast(4),
      exchanged(4);
  runLocalRanks(4, [&](unsigned rank, Communicator &comm) {
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.size(), 4u);
    CommGroup tp = meshGroup(plan.mesh, rank, {1});
    CommGroup world = meshGroup(plan.mesh, rank, {0, 1});
    std::string message;
    char mine[3] = {static_cast<char>(rank), static_cast<char>(10 + rank),
                    static_cast<char>(20 + rank)};
    gathered[rank].resize(6);
    bool ok = comm.allGather(tp, mine, 3, gathered[rank].data(), message);
    rooted[rank].assign(12, 0);
    ok = ok && comm.gather(world, 1, mine, 3, rooted[rank].data(), message);
    broadcast[rank].assign(mine, mine + 3);
    ok = ok && comm.broadcast(world, 2, broadcast[rank].data(), 3, message);
    char send[4] = {
        static_cast<char>(rank * 10), static_cast<char>(rank * 10 + 1),
        static_cast<char>(rank * 10 + 2), static_cast<char>(rank * 10 + 3)};
    exchanged[rank].resize(4);
    ok = ok && comm.allToAll(world, send, exchanged[rank].data(), 1, message);
    if (!ok)
      failures[rank] = message;
  });
  for (unsigned rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(failures[rank], "") << rank;
    unsigned first = rank / 2 * 2; // the tp group {first, first + 1}
    EXPECT_EQ(gathered[rank],
              (std::vector<char>{char(first), char(10 + first),
                                 char(20 + first), char(first + 1),
                                 char(11 + first), char(21 + first)}));
    EXPECT_EQ(broadcast[rank], (std::vector<char>{2, 12, 22}));
    EXPECT_EQ(exchanged[rank],
              (std::vector<char>{char(rank), char(10 + rank), char(20 + rank),
                                 char(30 + rank)}));
  }
  EXPECT_EQ(rooted[1],
            (std::vector<char>{0, 10, 20, 1, 11, 21, 2, 12, 22, 3, 13, 23}));
  EXPECT_EQ(rooted[0], std::vector<char>(12, 0)); // not the root
}

TEST(Collective, LocalWorldReportsRanksThatDoNotCome) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines({"loom-plan 1", "model m", "device cpu",
                                   "mesh g a=2", "arena 0"}),
                        plan, error))
      << error;
  std::string message;
  runLocalRanks(
      2,
      [&](unsigned rank, Communicator &comm) {
        if (rank != 0)
          return; // rank 1 never calls
        char byte = 1, both[2];
        EXPECT_FALSE(comm.allGather(meshGroup(plan.mesh, 0, {0}), &byte, 1,
                                    both, message));
      },
      0.2);
  EXPECT_EQ(message,
            "all-gather: rank 0 waited more than 0.2 s for the other ranks");
  // A group that does not contain the caller at its index.
  LocalWorld world(2);
  CommGroup wrong = meshGroup(plan.mesh, 1, {0});
  char byte = 0;
  EXPECT_FALSE(world.communicator(0).broadcast(wrong, 0, &byte, 1, message));
  EXPECT_EQ(message, "broadcast: rank 0 is not member 1 of its group");
}

TEST(Collective, EveryKindMatchesItsDefinition) {
  struct Mesh {
    const char *text;
    std::vector<std::vector<unsigned>> axisLists;
    std::vector<const char *> axisNames;
  };
  const Mesh meshes[] = {
      {"dp=2 tp=3", {{1}, {0}, {0, 1}, {1, 0}}, {"tp", "dp", "dp,tp", "tp,dp"}},
      {"a=2 b=2 c=2", {{0, 2}, {2, 1, 0}}, {"a,c", "c,b,a"}},
  };
  const std::vector<Shape> shapes = {{12}, {6, 12}, {2, 6, 6}, {2, 1, 4, 6}};
  size_t runs = 0;
  for (const Mesh &mesh : meshes) {
    Plan meshPlan;
    std::string error;
    ASSERT_TRUE(
        parsePlan(sealLines({"loom-plan 1", "model m", "device cpu",
                             std::string("mesh g ") + mesh.text, "arena 0"}),
                  meshPlan, error));
    for (size_t a = 0; a < mesh.axisLists.size(); ++a) {
      const std::vector<unsigned> &axes = mesh.axisLists[a];
      unsigned n = axesSize(meshPlan.mesh, axes);
      for (const Shape &in : shapes) {
        for (const char *dtype : {"f32", "i32"}) {
          DType type;
          parseDType(dtype, type);
          struct Op {
            CollectiveKind kind;
            std::string name;
            unsigned dim, concat;
          };
          std::vector<Op> ops = {{CollectiveKind::AllReduce, "all-reduce", 0, 0},
                                 {CollectiveKind::Broadcast, "broadcast", 0, 0}};
          for (unsigned d = 0; d < in.size(); ++d) {
            ops.push_back({CollectiveKind::AllGather, "all-gather", d, 0});
            ops.push_back({CollectiveKind::ReduceScatter, "reduce-scatter", d, 0});
            ops.push_back({CollectiveKind::AllSlice, "all-slice", d, 0});
            for (unsigned c = 0; c < in.size(); ++c)
              ops.push_back({CollectiveKind::AllToAll, "all-to-all", d, c});
          }
          for (const Op &op : ops) {
            Shape out = in;
            std::string dims = "-";
            if (op.kind == CollectiveKind::AllGather) {
              out[op.dim] *= n;
              dims = std::to_string(op.dim);
            } else if (op.kind == CollectiveKind::ReduceScatter ||
                       op.kind == CollectiveKind::AllSlice) {
              if (in[op.dim] % n)
                continue;
              out[op.dim] /= n;
              dims = std::to_string(op.dim);
            } else if (op.kind == CollectiveKind::AllToAll) {
              if (in[op.dim] % n)
                continue;
              out[op.dim] /= n;
              out[op.concat] *= n;
              dims = std::to_string(op.dim) + ":" + std::to_string(op.concat);
            }
            std::string record = op.name + " " + mesh.axisNames[a] + " " + dims;
            std::string text =
                collectivePlan(mesh.text, dtype, in, out, record);
            std::vector<std::vector<char>> results =
                runOnRanks(text, [&](unsigned rank) {
                  return indexed(type, product(in), rank);
                });
            for (unsigned rank = 0; rank < meshPlan.mesh.numRanks; ++rank) {
              CommGroup group = meshGroup(meshPlan.mesh, rank, axes);
              std::vector<double> want =
                  expected(op.kind, in, out, op.dim, op.concat, group.ranks,
                           group.index);
              ASSERT_EQ(results[rank].size(), want.size() * dtypeSize(type));
              bool same = true;
              for (size_t i = 0; i < want.size(); ++i)
                same &= loadElement(type, results[rank].data(), i) == want[i];
              EXPECT_TRUE(same)
                  << record << " " << dtype << " " << formatShape(in) << " on "
                  << mesh.text << ", rank " << rank;
            }
            ++runs;
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 300u);
}

TEST(Collective, SixteenBitSumsAreBitIdenticalOnEveryMember) {
  // Random bf16 and f16 values: every member gets the same bits, the f32
  // sum in group order rounded once; reduce-scatter gives its block of it.
  for (const char *dtype : {"bf16", "f16"}) {
    DType type;
    parseDType(dtype, type);
    const Shape shape = {4, 6};
    uint64_t count = product(shape);
    auto input = [&](unsigned rank) {
      std::vector<char> bytes(count * 2);
      uint64_t state = 0x9E3779B97F4A7C15ull * (rank + 1);
      for (uint64_t i = 0; i < count; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        double value = static_cast<double>(state >> 40) / 16777216.0 - 0.5;
        storeElement(type, bytes.data(), i, value * (rank + 1) * 3);
      }
      return bytes;
    };
    // Group over b,a of a=2 b=3: member j is rank (j % 2) * 3 + j / 2.
    std::vector<std::vector<char>> reduced = runOnRanks(
        collectivePlan("a=2 b=3", dtype, shape, shape, "all-reduce b,a -"),
        input);
    std::vector<unsigned> order = {0, 3, 1, 4, 2, 5};
    std::vector<char> want(count * 2);
    for (uint64_t i = 0; i < count; ++i) {
      float sum =
          static_cast<float>(loadElement(type, input(order[0]).data(), i));
      for (size_t j = 1; j < order.size(); ++j)
        sum += static_cast<float>(loadElement(type, input(order[j]).data(), i));
      storeElement(type, want.data(), i, sum);
    }
    for (unsigned rank = 0; rank < 6; ++rank)
      EXPECT_EQ(reduced[rank], want) << dtype << " rank " << rank;

    std::vector<std::vector<char>> scattered = runOnRanks(
        collectivePlan("a=2 b=3", dtype, shape, {4, 1}, "reduce-scatter b,a 1"),
        input);
    for (unsigned rank = 0; rank < 6; ++rank) {
      unsigned index = (rank % 3) * 2 + rank / 3; // b major, a minor
      for (uint64_t row = 0; row < 4; ++row)
        EXPECT_EQ(std::memcmp(scattered[rank].data() + row * 2,
                              want.data() + (row * 6 + index) * 2, 2),
                  0)
            << dtype << " rank " << rank << " row " << row;
    }
  }
}

TEST(Collective, BucketedAllReduceSumsEachPairAsItsOwn) {
  // A gradient bucket: two IN OUT pairs of different shapes in one
  // all-reduce over 3 ranks (11 elements: the chunks are padded). Each OUT
  // must be its IN's sum, bit for bit the pair's own all-reduce.
  for (const char *dtype : {"f32", "bf16"}) {
    DType type;
    parseDType(dtype, type);
    std::string d = dtype;
    std::string text = sealLines(
        {"loom-plan 1", "model m", "device cpu", "mesh g a=3", "arena 256",
         "buffer 0 i0 temp " + d + " 5 0", "buffer 1 o0 temp " + d + " 5 64",
         "buffer 2 i1 temp " + d + " 2,3 128",
         "buffer 3 o1 temp " + d + " 2,3 192",
         "collective all-reduce a - 0 1 2 3"});
    Plan plan;
    std::string error;
    ASSERT_TRUE(parsePlan(text, plan, error)) << error;
    ASSERT_EQ(plan.steps[0].buffers, (std::vector<unsigned>{0, 1, 2, 3}));
    EXPECT_EQ(allReduceElements(plan, plan.steps[0]), 11u);
    // Send, receive and the sums of chunks of 4 elements.
    EXPECT_EQ(collectiveScratchBytes(plan, plan.steps[0]),
              7u * 4 * dtypeSize(type));
    // Rank r's element i of pair p: r * 10 + p * 5 + i (exact in bf16).
    auto value = [](unsigned rank, unsigned pair, uint64_t i) {
      return rank * 10.0 + pair * 5.0 + static_cast<double>(i);
    };
    std::vector<std::vector<char>> outs[2];
    outs[0].resize(3), outs[1].resize(3);
    std::mutex failures;
    runLocalRanks(3, [&](unsigned rank, Communicator &comm) {
      Executor executor;
      std::string message;
      executor.setCommunicator(&comm);
      bool ok =
          executor.bind(plan, nullptr, message) && executor.allocate(message);
      for (unsigned pair = 0; ok && pair < 2; ++pair)
        for (uint64_t i = 0; i < plan.buffers[2 * pair].numElements; ++i)
          storeElement(type, executor.buffer(2 * pair), i, value(rank, pair, i));
      if (!ok || !executor.run(nullptr, message)) {
        std::lock_guard<std::mutex> lock(failures);
        ADD_FAILURE() << "rank " << rank << ": " << message;
        return;
      }
      for (unsigned pair = 0; pair < 2; ++pair)
        outs[pair][rank].assign(executor.buffer(2 * pair + 1),
                                executor.buffer(2 * pair + 1) +
                                    plan.buffers[2 * pair + 1].bytes);
    });
    for (unsigned pair = 0; pair < 2; ++pair) {
      const PlanBuffer &out = plan.buffers[2 * pair + 1];
      // The pair's own all-reduce, on the same inputs.
      std::vector<std::vector<char>> own = runOnRanks(
          collectivePlan("a=3", dtype, out.shape, out.shape, "all-reduce a -"),
          [&](unsigned rank) {
            std::vector<char> bytes(out.bytes);
            for (uint64_t i = 0; i < out.numElements; ++i)
              storeElement(type, bytes.data(), i, value(rank, pair, i));
            return bytes;
          });
      for (unsigned rank = 0; rank < 3; ++rank) {
        ASSERT_EQ(outs[pair][rank].size(), out.bytes);
        EXPECT_EQ(outs[pair][rank], own[rank]) << dtype << " pair " << pair;
        for (uint64_t i = 0; i < out.numElements; ++i)
          EXPECT_EQ(loadElement(type, outs[pair][rank].data(), i),
                    value(0, pair, i) + value(1, pair, i) + value(2, pair, i))
              << dtype << " pair " << pair << " element " << i;
      }
    }
  }
}

namespace {
void scaleByTwo(void **args) {
  const float *in = static_cast<const float *>(args[0]);
  float *out = static_cast<float *>(args[1]);
  for (int i = 0; i < 4; ++i)
    out[i] = 2 * in[i];
}
} // namespace

TEST(Collective, ExecutorInterleavesKernelsAndCollectives) {
  // x (per rank) -> kernel doubles -> all-gather over a -> kernel doubles
  // the first 4 elements; traced, one event per step.
  std::string text = sealLines(
      {"loom-plan 1", "model m", "device cpu", "mesh g a=2", "arena 192",
       "buffer 0 x temp f32 4 0", "buffer 1 d temp f32 4 64",
       "buffer 2 g temp f32 8 128", "buffer 3 y temp f32 4 0", "kernel twice 2",
       "step twice 0 1", "collective all-gather a 0 1 2", "step twice 2 3"});
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(text, plan, error)) << error;
  const LoomKernel table[] = {{"twice", 2, scaleByTwo}, {nullptr, 0, nullptr}};
  std::vector<std::vector<float>> gathered(2), doubled(2);
  std::vector<std::string> traces(2);
  runLocalRanks(2, [&](unsigned rank, Communicator &comm) {
    Executor executor;
    std::string message;
    executor.setCommunicator(&comm);
    ASSERT_TRUE(executor.init(plan, table, message)) << message;
    float x[4] = {1.0f + rank, 2, 3, 4};
    std::memcpy(executor.buffer(0), x, sizeof(x));
    TraceRecorder trace;
    trace.setProcess(rank);
    ASSERT_TRUE(executor.run(&trace, message)) << message;
    const float *g = reinterpret_cast<const float *>(executor.buffer(2));
    const float *y = reinterpret_cast<const float *>(executor.buffer(3));
    gathered[rank].assign(g, g + 8);
    doubled[rank].assign(y, y + 4);
    traces[rank] = trace.toJson();
  });
  for (unsigned rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(gathered[rank], (std::vector<float>{2, 4, 6, 8, 4, 4, 6, 8}));
    EXPECT_EQ(doubled[rank], (std::vector<float>{4, 8, 12, 16}));
    const std::string &json = traces[rank];
    EXPECT_NE(json.find("{\"name\":\"all-gather\",\"cat\":\"collective\","
                        "\"ph\":\"X\","),
              std::string::npos)
        << json;
    EXPECT_NE(json.find("\"pid\":" + std::to_string(rank) +
                        ",\"tid\":0,\"args\":{\"step\":1,\"axes\":"
                        "\"a\"}}"),
              std::string::npos)
        << json;
    // g is read; y, which nothing reads after, is the step's scratch.
    EXPECT_NE(json.find("\"args\":{\"step\":2,\"bytes_read\":32,"
                        "\"bytes_written\":0}"),
              std::string::npos)
        << json;
  }

  // Without the mesh's ranks the collectives cannot run.
  Executor alone;
  EXPECT_FALSE(alone.init(plan, table, error));
  EXPECT_EQ(error, "plan:12: a collective needs the 2 ranks of mesh 'g', but "
                   "this run has 1");
  LocalWorld three(3);
  Executor wrong;
  wrong.setCommunicator(&three.communicator(0));
  EXPECT_FALSE(wrong.init(plan, table, error));
  EXPECT_EQ(error, "plan:12: a collective needs the 2 ranks of mesh 'g', but "
                   "this run has 3");
}

TEST(Collective, ScratchCoversEveryKind) {
  std::string text = sealLines(
      {"loom-plan 1", "model m", "device cpu", "mesh g a=4", "arena 1024",
       "buffer 0 i temp bf16 4,6 0", "buffer 1 r temp bf16 4,6 64",
       "buffer 2 s temp bf16 1,6 128", "buffer 3 g temp bf16 16,6 256",
       "collective all-reduce a - 0 1", "collective reduce-scatter a 0 0 2",
       "collective all-gather a 0 0 3", "collective all-slice a 0 0 2",
       "collective broadcast a - 0 1", "collective all-to-all a 0:0 0 1"});
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(text, plan, error)) << error;
  // 24 bf16 elements = 48 bytes; chunks of 6 elements for 4 members.
  EXPECT_EQ(collectiveScratchBytes(plan, plan.steps[0]), 9u * 6 * 2);
  EXPECT_EQ(collectiveScratchBytes(plan, plan.steps[1]), 96u);
  EXPECT_EQ(collectiveScratchBytes(plan, plan.steps[2]), 4u * 48);
  EXPECT_EQ(collectiveScratchBytes(plan, plan.steps[3]), 0u);
  EXPECT_EQ(collectiveScratchBytes(plan, plan.steps[4]), 0u);
  EXPECT_EQ(collectiveScratchBytes(plan, plan.steps[5]), 96u);
}

TEST(Collective, LocalWorldSendsWithoutWaitingInOrder) {
  // Rank 0 sends twice before rank 1 receives (a send never waits for its
  // receive, as the pipeline schedules' proof assumes); the messages come
  // in order, and a wrong size is an error.
  std::vector<std::string> failures(2);
  std::vector<int> got(2, -1);
  std::string sizeError;
  runLocalRanks(2, [&](unsigned rank, Communicator &comm) {
    std::string message;
    if (rank == 0) {
      int first = 7, second = 8;
      if (!comm.send(1, &first, sizeof(first), message) ||
          !comm.send(1, &second, sizeof(second), message) ||
          !comm.flushSends(message))
        failures[0] = message;
      char three[3] = {1, 2, 3};
      comm.send(1, three, 3, message);
      return;
    }
    if (!comm.recv(0, &got[0], sizeof(int), message) ||
        !comm.recv(0, &got[1], sizeof(int), message))
      failures[1] = message;
    int wrong;
    EXPECT_FALSE(comm.recv(0, &wrong, sizeof(wrong), sizeError));
  });
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  EXPECT_EQ(got, (std::vector<int>{7, 8}));
  EXPECT_EQ(sizeError, "a message from rank 0 holds 3 bytes, not the 4 expected");
}

TEST(Collective, LocalWorldReceiveTimesOut) {
  std::string error;
  runLocalRanks(
      2,
      [&](unsigned rank, Communicator &comm) {
        if (rank == 1) {
          char byte;
          EXPECT_FALSE(comm.recv(0, &byte, 1, error));
        }
      },
      0.2);
  EXPECT_EQ(error, "receive: rank 1 waited more than 0.2 s for the other ranks");
}
