//===- MpiTest.cpp - The MPI communicator, run under mpirun -np 4 ---------===//
//
// Each rank runs the byte primitives and every collective kind through MPI,
// and the same collectives on an in-process LocalWorld of 4 threads (whose
// results CollectiveTest checks against the definitions); its MPI results
// must be the local ones. Transfers above 8 bytes go in pieces, so the
// pieces' code paths run too; every rank is its own local rank (one node).
// Exits 0 when every check passes.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/plan/Layout.h"
#include "loom/runtime/plan/Plan.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace loom::runtime;

namespace {
unsigned failures = 0;
unsigned worldRank = 0;

void check(bool ok, const std::string &what) {
  if (ok)
    return;
  ++failures;
  std::fprintf(stderr, "rank %u: FAILED: %s\n", worldRank, what.c_str());
}

/// Rank r's bytes for a primitive: byte k is r * 16 + k (mod 256).
std::vector<char> pattern(unsigned rank, size_t bytes, unsigned salt = 0) {
  std::vector<char> data(bytes);
  for (size_t k = 0; k < bytes; ++k)
    data[k] = static_cast<char>(rank * 16 + k + salt);
  return data;
}

void testPrimitives(Communicator &comm, const PlanMesh &mesh) {
  unsigned rank = comm.rank();
  const std::vector<std::vector<unsigned>> axisLists = {
      {1}, {0}, {1, 0}, {0, 1}};
  for (const std::vector<unsigned> &axes : axisLists) {
    CommGroup group = meshGroup(mesh, rank, axes);
    unsigned n = group.size();
    for (size_t bytes : {size_t(3), size_t(8), size_t(20)}) {
      std::string what = "axes " + formatAxes(mesh, axes) + ", " +
                         std::to_string(bytes) + " bytes: ";
      std::string error;
      std::vector<char> mine = pattern(rank, bytes);
      std::vector<char> gathered(n * bytes), want;
      for (unsigned j = 0; j < n; ++j) {
        std::vector<char> theirs = pattern(group.ranks[j], bytes);
        want.insert(want.end(), theirs.begin(), theirs.end());
      }
      check(comm.allGather(group, mine.data(), bytes, gathered.data(), error),
            what + error);
      check(gathered == want, what + "all-gather");

      std::vector<char> rooted(n * bytes, 0);
      check(comm.gather(group, n - 1, mine.data(), bytes, rooted.data(), error),
            what + error);
      if (group.index == n - 1)
        check(rooted == want, what + "gather");

      std::vector<char> sent = mine;
      check(comm.broadcast(group, 1, sent.data(), bytes, error), what + error);
      check(sent == pattern(group.ranks[1], bytes), what + "broadcast");

      std::vector<char> blocks, received(n * bytes), expected;
      for (unsigned j = 0; j < n; ++j) {
        std::vector<char> block = pattern(rank, bytes, 100 * j);
        blocks.insert(blocks.end(), block.begin(), block.end());
        std::vector<char> from =
            pattern(group.ranks[j], bytes, 100 * group.index);
        expected.insert(expected.end(), from.begin(), from.end());
      }
      check(comm.allToAll(group, blocks.data(), received.data(), bytes, error),
            what + error);
      check(received == expected, what + "all-to-all");
    }
  }
}

/// A plan with IN (buffer 0) and OUT (buffer 1) and one collective.
std::string collectivePlan(const std::string &dtype, const std::string &in,
                           const std::string &out, const std::string &record) {
  return sealPlan("loom-plan 1\nmodel c\ndevice cpu\nmesh g dp=2 tp=2\n"
                  "arena 4096\nbuffer 0 in temp " +
                  dtype + " " + in + " 0\nbuffer 1 out temp " + dtype + " " +
                  out + " 2048\ncollective " + record + " 0 1\n");
}

/// Runs the plan's collective as rank `rank` of `comm`; IN's bytes are a
/// pattern of the rank. Returns OUT's bytes.
std::vector<char> runCollective(const Plan &plan, Communicator &comm,
                                std::string &error) {
  Executor executor;
  executor.setCommunicator(&comm);
  if (!executor.bind(plan, nullptr, error) || !executor.allocate(error))
    return {};
  const PlanBuffer &in = plan.buffers[0];
  std::vector<char> bytes = pattern(comm.rank(), in.bytes, 7);
  // Keep 16-bit floats finite: clear the top exponent bits.
  if (dtypeSize(in.dtype) == 2)
    for (size_t i = 1; i < bytes.size(); i += 2)
      bytes[i] = static_cast<char>(bytes[i] & 0x3f);
  if (in.dtype == DType::F32)
    for (size_t i = 3; i < bytes.size(); i += 4)
      bytes[i] = static_cast<char>(bytes[i] & 0x3f);
  std::memcpy(executor.buffer(0), bytes.data(), bytes.size());
  if (!executor.run(nullptr, error))
    return {};
  const PlanBuffer &out = plan.buffers[1];
  return std::vector<char>(executor.buffer(1), executor.buffer(1) + out.bytes);
}

void testCollectives(Communicator &comm) {
  struct Case {
    const char *dtype, *in, *out, *record;
  };
  const Case cases[] = {
      {"f32", "4,6", "4,6", "all-reduce tp -"},
      {"bf16", "4,6", "4,6", "all-reduce dp,tp -"},
      {"f16", "3,5", "3,5", "all-reduce tp,dp -"},
      {"i64", "2,3", "2,3", "all-reduce dp -"},
      {"f32", "4,6", "4,12", "all-gather tp 1"},
      {"bf16", "4,6", "16,6", "all-gather tp,dp 0"},
      {"f32", "4,6", "4,3", "reduce-scatter tp 1"},
      {"bf16", "4,8", "1,8", "reduce-scatter dp,tp 0"},
      {"i32", "4,6", "2,6", "all-slice dp 0"},
      {"f32", "4,6", "8,3", "all-to-all tp 1:0"},
      {"i32", "4,8", "4,8", "all-to-all tp,dp 1:1"},
      {"bf16", "4,6", "4,6", "broadcast dp,tp -"},
  };
  for (const Case &c : cases) {
    Plan plan;
    std::string error;
    std::string text = collectivePlan(c.dtype, c.in, c.out, c.record);
    if (!parsePlan(text, plan, error)) {
      check(false, std::string(c.record) + ": " + error);
      continue;
    }
    std::vector<char> got = runCollective(plan, comm, error);
    check(error.empty(), std::string(c.record) + ": " + error);
    // The same on in-process ranks.
    std::vector<std::vector<char>> local(4);
    runLocalRanks(4, [&](unsigned rank, Communicator &threads) {
      std::string message;
      local[rank] = runCollective(plan, threads, message);
    });
    check(!got.empty() && got == local[comm.rank()],
          std::string(c.dtype) + " " + c.record + ": MPI and local differ");
  }
}
} // namespace

int main(int argc, char **argv) {
  std::unique_ptr<Communicator> world;
  std::string error;
  if (!openMpi(&argc, &argv, world, error, /*chunkBytes=*/8)) {
    std::fprintf(stderr, "LoomRuntimeMpiTest: %s\n", error.c_str());
    return 1;
  }
  worldRank = world->rank();
  if (world->size() != 4) {
    std::fprintf(stderr, "LoomRuntimeMpiTest: run it on 4 ranks\n");
    return 1;
  }
  Plan plan;
  if (!parsePlan(sealPlan("loom-plan 1\nmodel m\ndevice cpu\n"
                          "mesh g dp=2 tp=2\narena 0\n"),
                 plan, error)) {
    std::fprintf(stderr, "LoomRuntimeMpiTest: %s\n", error.c_str());
    return 1;
  }
  testPrimitives(*world, plan.mesh);
  testCollectives(*world);
  // The ranks of this test share one node: each is its own local rank,
  // as Open MPI also says where it is the launcher.
  unsigned local = 99;
  check(world->localRank(local, error), "localRank: " + error);
  check(local == worldRank, "localRank is " + std::to_string(local));
  if (const char *ompi = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
    check(std::to_string(local) == ompi,
          std::string("OMPI_COMM_WORLD_LOCAL_RANK is ") + ompi);
  std::printf("rank %u: %s\n", worldRank, failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
