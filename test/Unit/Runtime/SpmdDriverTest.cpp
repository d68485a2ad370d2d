//===- SpmdDriverTest.cpp - Executables run on several in-process ranks ---===//
//
// The MLP of SpmdModel.h, partitioned over dp=2 tp=2, tp=2, and a=2 b=2
// split with `+`: run on the mesh's ranks (threads of a LocalWorld), the
// partitioned plans must take and give the same files as the unpartitioned
// one on one rank.
//
//===----------------------------------------------------------------------===//

#include "SpmdModel.h"
#include "TestUtil.h"

#include "loom/runtime/io/Npy.h"
#include "loom/runtime/plan/Plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::readFile;
using loom::test::runDriverRanks;
using loom::test::RunResult;
using loom::test::sealLines;
using loom::test::TempDir;

using loom::test::spmdMlpPlan;
using loom::test::spmdMlpVariants;
using loom::test::SpmdVariant;
using loom::test::wholeMlpPlan;

namespace {
void writeExactFiles(const TempDir &dir) {
  std::string error;
  ASSERT_TRUE(loom::test::writeExactMlpFiles(dir.path("w.safetensors"),
                                             dir.path("x.npy"), error))
      << error;
}

std::vector<RunResult> runRanks(unsigned ranks,
                                const std::vector<std::string> &args,
                                const std::string &spmd,
                                const std::string &whole = wholeMlpPlan()) {
  Executable executable;
  executable.kernels = loom::test::kSpmdKernels;
  return runDriverRanks(ranks, args, executable, whole, spmd);
}

std::vector<float> readF32(const std::string &path) {
  std::vector<float> values(32);
  std::string error;
  EXPECT_TRUE(readNpy(path, "output", DType::F32, {4, 8}, values.data(), error))
      << error;
  return values;
}

/// Every rank's status is `status`; rank 0 printed `err0` to stderr, the
/// others nothing (unless `others` is given), and nothing to stdout but
/// rank 0.
void expectStatus(const std::vector<RunResult> &results, int status,
                  const std::string &err0, const char *what) {
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_EQ(results[rank].status, status) << what << " rank " << rank;
    if (rank == 0)
      EXPECT_EQ(results[rank].err, err0) << what;
    else
      EXPECT_EQ(results[rank].err, "") << what << " rank " << rank;
    if (rank)
      EXPECT_EQ(results[rank].out, "") << what << " rank " << rank;
  }
}
} // namespace

TEST(SpmdDriver, PartitionedRunsGiveTheSameFiles) {
  TempDir dir;
  writeExactFiles(dir);
  auto args = [&](const std::string &tag) {
    return std::vector<std::string>{
        "--weights", dir.path("w.safetensors"),
        "--input",   "x=" + dir.path("x.npy"),
        "--output",  "y=" + dir.path("y" + tag + ".npy"),
        "--output",  "hid=" + dir.path("hid" + tag + ".npy"),
        "--output",  "y2=" + dir.path("y2" + tag + ".npy")};
  };
  std::vector<RunResult> single =
      runRanks(1, args("1"), spmdMlpVariants()[0].plan);
  ASSERT_EQ(single[0].status, 0) << single[0].err;
  std::vector<float> y = readF32(dir.path("y1.npy"));
  EXPECT_NE(y, std::vector<float>(32, 0.0f)); // the test means something
  for (const SpmdVariant &variant : spmdMlpVariants()) {
    std::string tag = std::to_string(variant.ranks) + variant.name;
    std::vector<RunResult> runs =
        runRanks(variant.ranks, args(tag), variant.plan);
    expectStatus(runs, 0, "", variant.name);
    for (const char *output : {"y", "hid", "y2"})
      EXPECT_EQ(readFile(dir.path(output + tag + ".npy")),
                readFile(dir.path(std::string(output) + "1.npy")))
          << variant.name << ": " << output;
  }
}

TEST(SpmdDriver, OnlyRankZeroPrintsSummaries) {
  TempDir dir;
  writeExactFiles(dir);
  std::vector<std::string> args = {"--weights", dir.path("w.safetensors"),
                                   "--input", "x=" + dir.path("x.npy")};
  std::vector<RunResult> single = runRanks(1, args, spmdMlpVariants()[0].plan);
  ASSERT_EQ(single[0].status, 0) << single[0].err;
  EXPECT_NE(single[0].out.find("y2: f32 [4, 8] mean "), std::string::npos);
  for (const SpmdVariant &variant : spmdMlpVariants()) {
    std::vector<RunResult> runs = runRanks(variant.ranks, args, variant.plan);
    expectStatus(runs, 0, "", variant.name);
    EXPECT_EQ(runs[0].out, single[0].out) << variant.name;
  }
}

TEST(SpmdDriver, InitializedWeightsAndRandomInputsMatch) {
  // Initialized params and --random-inputs are made whole on rank 0 from
  // the same per-name streams: the saved weights are the same bytes, and
  // the outputs agree up to the order of the f32 sums.
  TempDir dir;
  auto args = [&](const std::string &tag) {
    return std::vector<std::string>{"--seed",
                                    "11",
                                    "--random-inputs",
                                    "--save-weights",
                                    dir.path("w" + tag + ".safetensors"),
                                    "--output",
                                    "y=" + dir.path("y" + tag + ".npy"),
                                    "--output",
                                    "y2=" + dir.path("y2" + tag + ".npy")};
  };
  ASSERT_EQ(runRanks(1, args("1"), spmdMlpVariants()[0].plan)[0].status, 0);
  std::vector<float> y = readF32(dir.path("y1.npy"));
  for (const SpmdVariant &variant : spmdMlpVariants()) {
    std::string tag = std::to_string(variant.ranks) + variant.name;
    std::vector<RunResult> runs =
        runRanks(variant.ranks, args(tag), variant.plan);
    expectStatus(runs, 0, "", variant.name);
    EXPECT_EQ(readFile(dir.path("w" + tag + ".safetensors")),
              readFile(dir.path("w1.safetensors")))
        << variant.name;
    std::vector<float> got = readF32(dir.path("y" + tag + ".npy"));
    for (int i = 0; i < 32; ++i)
      EXPECT_NEAR(got[i], y[i], 1e-5f * (1 + std::fabs(y[i])))
          << variant.name << " element " << i;
    // Both reductions sum the same partial results in the same order.
    EXPECT_EQ(readFile(dir.path("y2" + tag + ".npy")),
              readFile(dir.path("y" + tag + ".npy")))
        << variant.name;
  }
}

TEST(SpmdDriver, InfoShowsTheMeshAndTheCollectives) {
  std::string spmd = spmdMlpVariants()[0].plan;
  std::vector<RunResult> one = runRanks(1, {"--info"}, spmd);
  ASSERT_EQ(one[0].status, 0) << one[0].err;
  const std::string tail =
      "steps    4\n"
      "mesh     gpus dp=2 tp=2 (4 ranks: mpirun -np 4)\n"
      "spmd     arena 704 bytes per rank (0.00 MiB), 2 kernels, 6 steps (2 "
      "kernel steps, 4 collectives)\n"
      "  all-reduce     1\n"
      "  all-gather     2\n"
      "  reduce-scatter 1\n";
  ASSERT_GE(one[0].out.size(), tail.size());
  EXPECT_EQ(one[0].out.substr(one[0].out.size() - tail.size()), tail)
      << one[0].out;
  EXPECT_EQ(one[0].out.find("model    mlp\n"), 0u);
  // The same on 4 ranks, printed by rank 0 only.
  std::vector<RunResult> four = runRanks(4, {"--info"}, spmd);
  expectStatus(four, 0, "", "--info");
  EXPECT_EQ(four[0].out, one[0].out);
  // --help likewise.
  std::vector<RunResult> help = runRanks(4, {"--help"}, spmd);
  expectStatus(help, 0, "", "--help");
  EXPECT_EQ(help[0].out.find("usage: model [options]\n"), 0u);
  // Without a partitioned plan, --info is as before.
  std::vector<RunResult> plain = runRanks(1, {"--info"}, "");
  ASSERT_EQ(plain[0].status, 0);
  EXPECT_EQ(plain[0].out.substr(plain[0].out.size() - 11), "steps    4\n")
      << plain[0].out;
}

TEST(SpmdDriver, TracesOneFilePerRank) {
  TempDir dir;
  std::vector<RunResult> runs =
      runRanks(4, {"--random-inputs", "--trace", dir.path("t.json")},
               spmdMlpVariants()[0].plan);
  expectStatus(runs, 0, "", "trace");
  for (unsigned rank = 0; rank < 4; ++rank) {
    std::string path = rank
                           ? dir.path("t.rank" + std::to_string(rank) + ".json")
                           : dir.path("t.json");
    std::string trace = readFile(path);
    EXPECT_EQ(trace.find("{\"traceEvents\":["), 0u) << path;
    EXPECT_NE(trace.find("\"name\":\"reduce-scatter\",\"cat\":"
                         "\"collective\""),
              std::string::npos)
        << trace;
    EXPECT_NE(trace.find("\"pid\":" + std::to_string(rank) + ","),
              std::string::npos)
        << trace;
    EXPECT_NE(trace.find("\"name\":\"mm_2_8_4\",\"cat\":\"kernel\""),
              std::string::npos);
  }
  runs = runRanks(2, {"--random-inputs", "--trace", dir.path("trace")},
                  spmdMlpVariants()[1].plan);
  expectStatus(runs, 0, "", "trace");
  EXPECT_NE(readFile(dir.path("trace.rank1")), "");
  EXPECT_NE(readFile(dir.path("trace")), "");
}

TEST(SpmdDriver, RankCountsMustFitTheMesh) {
  std::string spmd = spmdMlpVariants()[0].plan;
  expectStatus(runRanks(3, {"--random-inputs"}, spmd), 1,
               "model: error: this run has 3 ranks, but this executable runs "
               "on 1 rank or on 4 (mesh 'gpus' dp=2 tp=2)\n",
               "3 ranks");
  expectStatus(runRanks(2, {"--info"}, spmd), 1,
               "model: error: this run has 2 ranks, but this executable runs "
               "on 1 rank or on 4 (mesh 'gpus' dp=2 tp=2)\n",
               "2 ranks");
  expectStatus(runRanks(2, {"--random-inputs"}, ""), 1,
               "model: error: this run has 2 ranks, but this executable is "
               "not partitioned: run it on 1 rank\n",
               "unpartitioned");
  // On GPUs too (CudaSpmdTest); this executable has no GPU kernels.
  expectStatus(runRanks(4, {"--random-inputs", "--device", "cuda"}, spmd), 1,
               "model: error: this executable was built without GPU "
               "kernels\n",
               "cuda");
}

TEST(SpmdDriver, AnErrorOnOneRankStopsEveryRank) {
  TempDir dir;
  std::string spmd = spmdMlpVariants()[0].plan;
  std::string missing = dir.path("missing.npy");
  // Rank 0 reads the files: its error, and every rank exits 1.
  expectStatus(runRanks(4, {"--input", "x=" + missing}, spmd), 1,
               "model: error: input 'x': cannot open " + missing +
                   ": No such file or directory\n",
               "input");
  expectStatus(runRanks(4, {}, spmd), 1,
               "model: error: input 'x' (f32 [4, 8]) is not given: pass "
               "--input x=FILE.npy, or --random-inputs\n",
               "no input");
  expectStatus(runRanks(4, {"--random-inputs", "--weights", missing}, spmd), 1,
               "model: error: cannot open " + missing +
                   ": No such file or directory\n",
               "weights");
  std::string nowhere = dir.path("no/dir/y.npy");
  expectStatus(
      runRanks(4, {"--random-inputs", "--output", "y=" + nowhere}, spmd), 1,
      "model: error: output 'y': cannot write " + nowhere +
          ": No such file or directory\n",
      "output");
  expectStatus(runRanks(4, {"--random-inputs", "--output", "p=o.npy"}, spmd), 1,
               "model: error: model 'mlp' has no output named 'p' (its "
               "outputs: y, hid, y2)\n",
               "names");
  // Every rank writes its trace beside rank 0's: rank 0 finds the missing
  // directory before the run, and every rank stops.
  std::string trace = dir.path("no/dir/t.json");
  std::vector<RunResult> runs =
      runRanks(4, {"--random-inputs", "--trace", trace}, spmd);
  for (unsigned rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(runs[rank].status, 1);
    EXPECT_EQ(runs[rank].err, rank ? "" : "model: error: cannot write " + trace +
                                              ": No such file or directory\n");
  }
}

TEST(SpmdDriver, RanksThatDisagreeStopAtTheStart) {
  std::string spmd = spmdMlpVariants()[0].plan;
  Executable executable;
  executable.kernels = loom::test::kSpmdKernels;
  auto run = [&](const std::vector<std::string> &odd, unsigned oddRank,
                 const char *oddBuild = "0123456789abcdef") {
    return loom::test::runDriverRanksEach(
        4,
        [&](unsigned rank) {
          std::vector<std::string> args{"--random-inputs"};
          if (rank == oddRank)
            args.insert(args.end(), odd.begin(), odd.end());
          return args;
        },
        [&](unsigned rank) { return rank == oddRank ? oddBuild : "0123456789abcdef"; },
        executable, wholeMlpPlan(), spmd);
  };
  // A start-up error of one rank's: that rank says it, and every rank
  // stops (the others had waited in the run's first exchange, and the
  // message was never printed).
  std::vector<RunResult> runs = run({"--bogus"}, 2);
  for (unsigned rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(runs[rank].status, 1) << rank;
    EXPECT_EQ(runs[rank].err, rank == 2 ? "model: error: rank 2: unknown option "
                                          "'--bogus' (see --help)\n"
                                        : "")
        << rank;
  }
  // Options that steer the run must be every rank's; rank 0 says which
  // differ.
  const std::string alike = ": every rank of a run takes the same command and options, "
                            "but for the files rank 0 alone reads and writes\n";
  expectStatus(run({"--repeat", "2"}, 3), 1,
               "model: error: the ranks were given different options (--repeat: rank 3 2, "
               "rank 0 1)" + alike,
               "repeat");
  expectStatus(run({"--help"}, 1), 1,
               "model: error: the ranks were given different options (--help: rank 1 "
               "given, rank 0 not given)" + alike,
               "help");
  // Files rank 0 alone reads may differ.
  EXPECT_EQ(run({"--seed", "7"}, 1)[0].status, 0);
  // Another build on one rank (a stale copy on one node).
  expectStatus(run({}, 1, "fedcba9876543210"), 1,
               "model: error: rank 1 runs another build of the model than rank 0 (build "
               "fedcba9876543210, rank 0's 0123456789abcdef): every rank must run the same "
               "executable (copy one build to every node)\n",
               "build");
}

TEST(SpmdDriver, ValidatesBothPlans) {
  // The partitioned plan is checked on any number of ranks, its errors
  // named after it.
  std::string spmd = spmdMlpVariants()[0].plan;
  std::string corrupted = spmd;
  corrupted[corrupted.find("gpus")] = 'G';
  std::vector<RunResult> one = runRanks(1, {"--random-inputs"}, corrupted);
  EXPECT_EQ(one[0].status, 1);
  EXPECT_EQ(one[0].err.find("model: error: spmd-plan:30: checksum mismatch"),
            0u)
      << one[0].err;
  std::string noMesh =
      sealLines({"loom-plan 1", "model mlp", "device cpu", "arena 0"});
  expectStatus(runRanks(1, {"--info"}, noMesh), 1,
               "model: error: spmd-plan: a partitioned plan needs a 'mesh' "
               "record\n",
               "no mesh");
  // Its kernels must be in the table too.
  std::string unknown = spmdMlpVariants()[2].plan;
  unknown = unknown.substr(0, unknown.rfind("end "));
  for (size_t at; (at = unknown.find("mm_4_2_8")) != std::string::npos;)
    unknown.replace(at, 8, "mm_4_2_9");
  unknown = sealPlan(unknown);
  expectStatus(runRanks(1, {"--info"}, unknown), 1,
               "model: error: spmd-plan:19: kernel 'mm_4_2_9' is not provided "
               "by this executable\n",
               "kernels");
  // Global shapes must be the whole plan's.
  std::string narrow = spmdMlpPlan("dp=2 tp=2", "tp", "tp", "", 2, 4);
  expectStatus(runRanks(4, {"--info"}, narrow), 1,
               "model: error: spmd-plan:6: input 'x' is f32 [2, 8] as a whole "
               "(f32 [2, 8] per rank), but f32 [4, 8] in the unpartitioned "
               "plan\n",
               "shapes");
  // The unpartitioned plan has no mesh.
  expectStatus(runRanks(1, {"--info"}, "", spmd), 1,
               "model: error: plan:4: the unpartitioned plan has a 'mesh' "
               "record\n",
               "mesh in loom_plan");
}
