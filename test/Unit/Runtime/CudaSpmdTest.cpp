//===- CudaSpmdTest.cpp - --device cuda on several in-process ranks -------===//
//
// Partitioned plans on the fake CUDA driver with the fake NCCL: ranks are
// threads of a LocalWorld, device memory is host memory, and NCCL's
// collectives copy between the threads' buffers. A model whose outputs go
// through every collective kind (along dim 0 and dim 1, over one axis,
// over two in an order other than the ranks', and in groups that run side
// by side) must give the files the unpartitioned plan gives on one rank.
// Without cuda.h or nccl.h at build time only the errors that need neither
// run.
//
//===----------------------------------------------------------------------===//

#include "SpmdModel.h"
#include "TestUtil.h"

#include "loom/runtime/exec/Cuda.h"
#include "loom/runtime/io/Npy.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <string>
#include <vector>

#if defined(LOOM_FAKE_CUDA_DRIVER) && defined(LOOM_FAKE_NCCL)
#include "FakeCudaDriver.h"
#include "FakeNccl.h"
#define LOOM_FAKE_GPUS 1
#endif

using namespace loom::runtime;
using loom::test::makePlan;
using loom::test::readFile;
using loom::test::runDriverRanks;
using loom::test::RunResult;
using loom::test::sealLines;
using loom::test::TempDir;
using loom::test::TestBuffer;

namespace {
// The kernels run on the device only; the CPU's table just has to bind.
void nothing(void **) {}
const LoomKernel kKernels[] = {{"k_sum", 2, nothing}, {"k_half", 2, nothing},
                               {"k_id", 2, nothing},  {"k_dbl", 2, nothing},
                               {"k_tri", 2, nothing}, {"k_none", 2, nothing},
                               {"k_add", 3, nothing}, {nullptr, 0, nullptr}};

const char kImage[] = "FAKE PTX\n"; // what the fake driver loads

/// `plan` with a gpu-image record for kImage after its arena record.
std::string withGpuImage(const std::string &plan) {
  std::string body = plan.substr(0, plan.rfind("end "));
  size_t arena = body.find("\narena ");
  body.insert(body.find('\n', arena + 1) + 1, "gpu-image sm_90 ptx 9\n");
  return sealPlan(body);
}

/// "launch KERNEL fake_scale ..." computing out = in * `scale` over
/// `elements` floats.
std::string scaleLaunch(const std::string &kernel, const char *scale,
                        int elements) {
  return "launch " + kernel + " fake_scale 1 1 1 32 1 1 b:0 b:1 f32:" + scale +
         " i64:" + std::to_string(elements);
}

/// The outputs of the model, each [4, 8] as a whole: y = (p0 + ... +
/// p(n-1)) / 2 with p = [p0; ...; p(n-1)] in blocks of 4 rows; r1 = r0 =
/// that sum; g1 = 2 x; g0 = 3 x; s1 = t = t2 = x; b = p0.
const char *const kOutputs[] = {"y",  "r1", "r0", "g1", "g0",
                                "s1", "t",  "t2", "b"};

/// The model on one rank, for a group of `n`.
std::string wholePlan(int n) {
  std::string p = std::to_string(4 * n);
  std::vector<TestBuffer> buffers = {{"p", "input", p + ",8", "", ""},
                                     {"x", "input", "4,8", "", ""},
                                     {"f", "temp", "4,8", "", ""}};
  for (const char *output : kOutputs)
    buffers.push_back({output, "output", "4,8", "", ""});
  // Buffers: p 0, x 1, f 2, then the outputs from 3 in kOutputs' order.
  return withGpuImage(
      makePlan("", buffers,
               {"kernel k_sum 2",
                "kernel k_half 2",
                "kernel k_id 2",
                "kernel k_dbl 2",
                "kernel k_tri 2",
                "launch k_sum fake_sum 1 1 1 32 1 1 b:0 b:1 i64:32 i64:" +
                    std::to_string(n),
                scaleLaunch("k_half", "0.5", 32),
                scaleLaunch("k_id", "1", 32),
                scaleLaunch("k_dbl", "2", 32),
                scaleLaunch("k_tri", "3", 32),
                "step k_sum 0 2",
                "step k_half 2 3",
                "step k_id 2 4",
                "step k_id 2 5",
                "step k_dbl 1 6",
                "step k_tri 1 7",
                "step k_id 1 8",
                "step k_id 1 9",
                "step k_id 1 10",
                "step k_id 0 11"}));
}

/// The model on the ranks of `mesh`, its collectives over `axes` (a group
/// of `n`; `spec` is the axes as a shard record writes them).
std::string partitionedPlan(const std::string &mesh, const std::string &axes,
                            const std::string &spec, int n) {
  std::string rows = std::to_string(4 / n), cols = std::to_string(8 / n);
  std::string byRows = spec + ",-", byCols = "-," + spec;
  std::string over = " " + axes + " ";
  return withGpuImage(
      makePlan(mesh,
               {{"p", "input", "4,8", "", byRows},         // 0: block j is p_j
                {"x", "input", "4," + cols, "", byCols},   // 1
                {"ar", "temp", "4,8", "", ""},             // 2
                {"y", "output", "4,8", "", ""},            // 3
                {"r1", "output", "4," + cols, "", byCols}, // 4
                {"r0", "output", rows + ",8", "", byRows}, // 5
                {"xg", "temp", "4,8", "", ""},             // 6
                {"g1", "output", "4,8", "", ""},           // 7
                {"xr", "temp", rows + ",8", "", byRows},   // 8
                {"xr2", "temp", rows + ",8", "", byRows},  // 9
                {"g0", "output", "4,8", "", ""},           // 10
                {"s1", "output", "4," + cols, "", byCols}, // 11
                {"t", "output", rows + ",8", "", byRows},  // 12
                {"t2", "output", "4," + cols, "", byCols}, // 13
                {"b", "output", "4,8", "", ""}},           // 14
               {"kernel k_half 2", "kernel k_dbl 2", "kernel k_tri 2",
                scaleLaunch("k_half", "0.5", 32), scaleLaunch("k_dbl", "2", 32),
                scaleLaunch("k_tri", "3", 32 / n),
                "collective all-reduce" + over + "- 0 2", "step k_half 2 3",
                "collective reduce-scatter" + over + "1 0 4",
                "collective reduce-scatter" + over + "0 0 5",
                "collective all-gather" + over + "1 1 6", "step k_dbl 6 7",
                "collective all-slice" + over + "0 6 8", "step k_tri 8 9",
                "collective all-gather" + over + "0 9 10",
                "collective all-slice" + over + "1 6 11",
                "collective all-to-all" + over + "0:1 1 12",
                "collective all-to-all" + over + "1:0 8 13",
                "collective broadcast" + over + "- 0 14"}));
}

struct Variant {
  const char *name;
  unsigned ranks;
  int n; // the group size
  std::string plan;
};
std::vector<Variant> variants() {
  return {
      {"a=2", 2, 2, partitionedPlan("a=2", "a", "a", 2)},
      {"a=4", 4, 4, partitionedPlan("a=4", "a", "a", 4)},
      // Member j of the group is not rank j: index = b * 2 + a.
      {"a=2 b=2 over b,a", 4, 4, partitionedPlan("a=2 b=2", "b,a", "b+a", 4)},
      // Two groups of 2 at once, each with its own communicator.
      {"a=2 b=2 over b", 4, 2, partitionedPlan("a=2 b=2", "b", "b", 2)}};
}

Executable gpuExecutable(const char *driver, const char *nccl) {
  Executable executable;
  executable.kernels = kKernels;
  executable.gpuImage = reinterpret_cast<const unsigned char *>(kImage);
  executable.gpuImageSize = 9;
  executable.cudaDriver = driver;
  executable.ncclLibrary = nccl;
  return executable;
}

/// Small integers as p [4n, 8] and x [4, 8]: every sum is exact.
void writeInputs(const TempDir &dir, int n) {
  std::vector<float> p(32 * n), x(32);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<float>(static_cast<int>(i * 5 % 11) - 5);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i * 3 % 7) - 3);
  std::string error;
  ASSERT_TRUE(
      writeNpy(dir.path("p.npy"), DType::F32, {4 * n, 8}, p.data(), error))
      << error;
  ASSERT_TRUE(writeNpy(dir.path("x.npy"), DType::F32, {4, 8}, x.data(), error))
      << error;
}

std::vector<std::string> inputArgs(const TempDir &dir) {
  return {"--device", "cuda",
          "--input",  "p=" + dir.path("p.npy"),
          "--input",  "x=" + dir.path("x.npy")};
}

std::string errorLine(unsigned rank, const std::string &message) {
  return "model: error: " +
         (rank ? "rank " + std::to_string(rank) + ": " : std::string()) +
         message + "\n";
}

/// Every rank exits 1, each having printed `message` (a rank R > 0 as
/// "rank R: ..."), and nothing on stdout.
void expectEveryRankFails(const std::vector<RunResult> &runs,
                          const std::string &message, const char *what) {
  for (unsigned rank = 0; rank < runs.size(); ++rank) {
    EXPECT_EQ(runs[rank].status, 1) << what << " rank " << rank;
    EXPECT_EQ(runs[rank].err, errorLine(rank, message))
        << what << " rank " << rank;
    EXPECT_EQ(runs[rank].out, "") << what << " rank " << rank;
  }
}
/// Every rank exits 1 and only rank 0 prints `message`: a failure every
/// rank met alike (no NCCL or driver on any node) is said once.
void expectRankZeroSays(const std::vector<RunResult> &runs,
                        const std::string &message, const char *what) {
  for (unsigned rank = 0; rank < runs.size(); ++rank) {
    EXPECT_EQ(runs[rank].status, 1) << what << " rank " << rank;
    EXPECT_EQ(runs[rank].err, rank ? "" : errorLine(0, message))
        << what << " rank " << rank;
    EXPECT_EQ(runs[rank].out, "") << what << " rank " << rank;
  }
}
} // namespace

TEST(CudaSpmd, ReportsAMissingNccl) {
  // NCCL is loaded before the CUDA driver: no driver is needed to tell.
  Variant variant = variants()[0];
  std::string whole = wholePlan(variant.n);
  std::vector<std::string> args = {"--device", "cuda", "--random-inputs"};
  auto run = [&](const char *nccl) {
    return runDriverRanks(2, args,
                          gpuExecutable("/nonexistent/libcuda.so.1", nccl),
                          whole, variant.plan);
  };
  if (!cudaSupported()) {
    // Found alike by every rank: rank 0 says it.
    std::vector<RunResult> runs = run("/nonexistent/libnccl.so.2");
    EXPECT_EQ(runs[0].err,
              errorLine(0, "this runtime was built without CUDA support"));
    EXPECT_EQ(runs[1].status, 1);
    EXPECT_EQ(runs[1].err, "");
    return;
  }
  // Missing on every rank alike: rank 0 says so, once (each rank had).
  std::vector<RunResult> runs = run("/nonexistent/libnccl.so.2");
  EXPECT_EQ(runs[1].status, 1);
  EXPECT_EQ(runs[1].err, "");
  EXPECT_EQ(runs[0].status, 1);
  std::string prefix =
      errorLine(0, "multi-rank runs on cuda need NCCL "
                   "(/nonexistent/libnccl.so.2): /nonexistent/"
                   "libnccl.so.2: cannot open shared object file");
  prefix.pop_back(); // the newline
  EXPECT_EQ(runs[0].err.find(prefix), 0u) << runs[0].err;
  EXPECT_NE(runs[0].err.find(" (install NCCL 2.10 or later, or add its "
                             "directory to LD_LIBRARY_PATH)\n"),
            std::string::npos)
      << runs[0].err;
  // A library without NCCL's functions.
  expectRankZeroSays(run("libm.so.6"),
                       "multi-rank runs on cuda need NCCL (libm.so.6): it has "
                       "no function ncclGetErrorString",
                       "libm");
}

TEST(CudaSpmd, ChecksThePartitionedPlansImage) {
  // Several ranks run the partitioned plan's launches: it needs the image.
  Variant variant = variants()[0];
  std::string noImage = variant.plan.substr(0, variant.plan.rfind("end "));
  noImage.erase(noImage.find("gpu-image sm_90 ptx 9\n"), 22);
  for (size_t at = 0; (at = noImage.find("launch ", at)) != std::string::npos;)
    noImage.erase(at, noImage.find('\n', at) + 1 - at);
  noImage = sealPlan(noImage);
  std::vector<std::string> args = {"--device", "cuda", "--random-inputs"};
  std::vector<RunResult> runs = runDriverRanks(
      2, args, gpuExecutable("/nonexistent/libcuda.so.1", "libnccl.so.2"),
      wholePlan(variant.n), noImage);
  EXPECT_EQ(runs[0].err,
            errorLine(0, "this executable was built without GPU kernels"));
  EXPECT_EQ(runs[1].status, 1);
  EXPECT_EQ(runs[1].err, "");
  // --check-kernels compares the unpartitioned plan's kernels.
  args.push_back("--check-kernels");
  runs = runDriverRanks(
      2, args, gpuExecutable("/nonexistent/libcuda.so.1", "libnccl.so.2"),
      wholePlan(variant.n), variant.plan);
  EXPECT_EQ(runs[0].err, errorLine(0, "--check-kernels runs the unpartitioned "
                                      "plan: run it on 1 rank"));
  EXPECT_EQ(runs[1].status, 1);
}

#ifdef LOOM_FAKE_GPUS

namespace {
/// The state of the fake library at `path` (the one the runtime dlopen()s),
/// reset.
template <typename State>
State &fakeState(const char *path, const char *getter) {
  void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(library, nullptr) << dlerror();
  auto get = reinterpret_cast<State *(*)()>(library ? dlsym(library, getter)
                                                    : nullptr);
  static State fallback;
  State &state = get ? *get() : fallback;
  state.reset();
  return state;
}
FakeCudaState &fakeCuda() {
  return fakeState<FakeCudaState>(LOOM_FAKE_CUDA_DRIVER, "loomFakeCuda");
}
FakeNcclState &fakeNccl() {
  return fakeState<FakeNcclState>(LOOM_FAKE_NCCL, "loomFakeNccl");
}

std::vector<RunResult> runOnFakes(unsigned ranks,
                                  const std::vector<std::string> &args,
                                  const std::string &whole,
                                  const std::string &spmd) {
  return runDriverRanks(ranks, args,
                        gpuExecutable(LOOM_FAKE_CUDA_DRIVER, LOOM_FAKE_NCCL),
                        whole, spmd);
}

std::vector<std::string> outputArgs(const TempDir &dir,
                                    const std::string &tag) {
  std::vector<std::string> args = inputArgs(dir);
  for (const char *output : kOutputs) {
    args.push_back("--output");
    args.push_back(std::string(output) + "=" +
                   dir.path(std::string(output) + tag + ".npy"));
  }
  return args;
}

/// Each output of the run tagged `tag` is the one of the run tagged "1".
void expectSameOutputs(const TempDir &dir, const std::string &tag,
                       const char *what) {
  for (const char *output : kOutputs)
    EXPECT_EQ(readFile(dir.path(std::string(output) + tag + ".npy")),
              readFile(dir.path(std::string(output) + "1.npy")))
        << what << ": " << output;
}

/// Every rank exits 0 and only rank 0 prints.
void expectSuccess(const std::vector<RunResult> &runs, const char *what) {
  for (unsigned rank = 0; rank < runs.size(); ++rank) {
    EXPECT_EQ(runs[rank].status, 0) << what << " rank " << rank;
    EXPECT_EQ(runs[rank].err, "") << what << " rank " << rank;
    if (rank)
      EXPECT_EQ(runs[rank].out, "") << what << " rank " << rank;
  }
}
} // namespace

TEST(CudaSpmd, PartitionedRunsGiveTheSameFilesAsOneRank) {
  for (const Variant &variant : variants()) {
    TempDir dir;
    writeInputs(dir, variant.n);
    std::string whole = wholePlan(variant.n);
    fakeCuda();
    std::vector<RunResult> single =
        runOnFakes(1, outputArgs(dir, "1"), whole, variant.plan);
    ASSERT_EQ(single[0].status, 0) << variant.name << ": " << single[0].err;
    // The test means something: y is neither zero nor p's first block.
    EXPECT_NE(readFile(dir.path("y1.npy")), readFile(dir.path("b1.npy")));

    // Two devices for up to four ranks: local rank r takes device r % 2.
    FakeCudaState &cuda = fakeCuda();
    cuda.deviceCount = 2;
    FakeNcclState &nccl = fakeNccl();
    std::vector<RunResult> runs =
        runOnFakes(variant.ranks, outputArgs(dir, "n"), whole, variant.plan);
    expectSuccess(runs, variant.name);
    expectSameOutputs(dir, "n", variant.name);

    unsigned ranks = variant.ranks;
    EXPECT_EQ(cuda.retainsOf[0], static_cast<int>(ranks / 2)) << variant.name;
    EXPECT_EQ(cuda.retainsOf[1], static_cast<int>(ranks / 2)) << variant.name;
    EXPECT_EQ(cuda.liveAllocations, 0) << variant.name;
    EXPECT_EQ(cuda.retainedContexts, 0) << variant.name;
    EXPECT_GT(cuda.copies2D, 0u) << variant.name; // the rearranged blocks
    // One group per rank (every collective is over the same axes): one id
    // per group, one communicator per rank, all destroyed.
    EXPECT_EQ(nccl.uniqueIds, static_cast<int>(ranks) / variant.n)
        << variant.name;
    EXPECT_EQ(nccl.commsMade, static_cast<int>(ranks)) << variant.name;
    EXPECT_EQ(nccl.largestComm, variant.n) << variant.name;
    EXPECT_EQ(nccl.liveComms, 0) << variant.name;
    EXPECT_EQ(nccl.allReduces, ranks) << variant.name;
    EXPECT_EQ(nccl.reduceScatters, 2 * ranks) << variant.name;
    EXPECT_EQ(nccl.allGathers, 2 * ranks) << variant.name;
    EXPECT_EQ(nccl.broadcasts, ranks) << variant.name;
    EXPECT_EQ(nccl.groups, 2 * ranks) << variant.name;
    EXPECT_EQ(nccl.sends, 2 * ranks * (variant.n - 1)) << variant.name;
    EXPECT_EQ(nccl.lastSumType, 7) << variant.name; // ncclFloat32
  }
}

TEST(CudaSpmd, RowsWiderThanTheMaximumPitchAreCopiedOneByOne) {
  Variant variant = variants()[0];
  TempDir dir;
  writeInputs(dir, variant.n);
  std::string whole = wholePlan(variant.n);
  fakeCuda();
  ASSERT_EQ(runOnFakes(1, outputArgs(dir, "1"), whole, variant.plan)[0].status,
            0);
  // x's column blocks are 16 bytes wide in rows of 32.
  FakeCudaState &cuda = fakeCuda();
  cuda.maxPitch = 16;
  fakeNccl();
  std::vector<RunResult> runs =
      runOnFakes(2, outputArgs(dir, "n"), whole, variant.plan);
  expectSuccess(runs, "pitch");
  expectSameOutputs(dir, "n", "pitch");
  EXPECT_EQ(cuda.copies2D, 0u);
  EXPECT_GT(cuda.copies, 0u);
}

TEST(CudaSpmd, SumsBf16InNcclsType) {
  // NCCL adds bf16 in bf16 (the CPU path adds in f32 and rounds once; loomc
  // keeps partial sums in f32, so it reduces f32 tensors).
  std::string whole = sealLines(
      {"loom-plan 1", "model m", "device cpu", "arena 128",
       "gpu-image sm_90 ptx 9", "buffer 0 p input bf16 8 0",
       "buffer 1 y output bf16 4 64", "kernel k_none 2", "step k_none 0 1"});
  std::string spmd = sealLines(
      {"loom-plan 1", "model m", "device cpu", "mesh g a=2", "arena 128",
       "gpu-image sm_90 ptx 9", "buffer 0 p input bf16 4 0", "shard 0 a",
       "buffer 1 y output bf16 4 64", "collective all-reduce a - 0 1"});
  TempDir dir;
  std::vector<float> p = {1, 2, 3, 4, 10, 20, 30, 40};
  std::string error;
  ASSERT_TRUE(writeNpy(dir.path("p.npy"), DType::F32, {8}, p.data(), error))
      << error;
  fakeCuda();
  FakeNcclState &nccl = fakeNccl();
  std::vector<RunResult> runs =
      runOnFakes(2,
                 {"--device", "cuda", "--input", "p=" + dir.path("p.npy"),
                  "--output", "y=" + dir.path("y.npy")},
                 whole, spmd);
  expectSuccess(runs, "bf16");
  std::vector<float> y(4);
  ASSERT_TRUE(readNpy(dir.path("y.npy"), "y", DType::F32, {4}, y.data(), error))
      << error;
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(nccl.lastSumType, 9); // ncclBfloat16
}

TEST(CudaSpmd, TracesLaunchesAndCollectivesPerRank) {
  Variant variant = variants()[0];
  TempDir dir;
  fakeCuda();
  fakeNccl();
  std::vector<RunResult> runs = runOnFakes(
      2, {"--device", "cuda", "--random-inputs", "--trace", dir.path("t.json")},
      wholePlan(variant.n), variant.plan);
  expectSuccess(runs, "trace");
  for (const char *file : {"t.json", "t.rank1.json"}) {
    std::string trace = readFile(dir.path(file));
    EXPECT_NE(trace.find("{\"name\":\"all-to-all\",\"cat\":\"collective\""),
              std::string::npos)
        << trace;
    EXPECT_NE(trace.find("\"args\":{\"step\":10,\"axes\":\"a\"}"),
              std::string::npos)
        << trace;
    EXPECT_NE(trace.find("{\"name\":\"fake_scale\",\"cat\":\"cuda\""),
              std::string::npos)
        << trace;
  }
}

TEST(CudaSpmd, ReportsNcclErrors) {
  Variant variant = variants()[0];
  std::string whole = wholePlan(variant.n);
  std::vector<std::string> args = {"--device", "cuda", "--random-inputs"};

  fakeCuda();
  FakeNcclState &nccl = fakeNccl();
  nccl.version = 20909;
  expectRankZeroSays(runOnFakes(2, args, whole, variant.plan),
                       std::string("multi-rank runs on cuda need NCCL (") +
                           LOOM_FAKE_NCCL +
                           "): it is NCCL 2.9.9, and 2.10 or later is needed",
                       "version");

  // Opening: every rank fails before any work, naming the group.
  fakeCuda();
  fakeNccl();
  nccl.failCall = "ncclGetUniqueId";
  nccl.failResult = 2; // ncclSystemError
  std::vector<RunResult> runs = runOnFakes(2, args, whole, variant.plan);
  std::string group =
      "spmd-plan:37: the NCCL communicator of the group over a (2 ranks): ";
  EXPECT_EQ(runs[0].err,
            errorLine(0, group + "ncclGetUniqueId failed: unhandled system "
                                 "error (run with NCCL_DEBUG=INFO for "
                                 "details) (fake NCCL: ncclGetUniqueId fails "
                                 "on request)"));
  EXPECT_EQ(runs[1].err,
            errorLine(1, group + "rank 0 could not make its NCCL id"));
  EXPECT_EQ(runs[1].status, 1);
  EXPECT_EQ(nccl.commsMade, 0);

  fakeCuda();
  fakeNccl();
  nccl.failCall = "ncclCommInitRank";
  nccl.failResult = 3; // ncclInternalError
  expectEveryRankFails(
      runOnFakes(2, args, whole, variant.plan),
      "spmd-plan:37: the NCCL communicator of the group over a (2 ranks): "
      "ncclCommInitRank failed: internal error - please report this issue to "
      "the NCCL developers (fake NCCL: ncclCommInitRank fails on request)",
      "init");

  // Running: the step's line and kind.
  FakeCudaState &cuda = fakeCuda();
  fakeNccl();
  nccl.failCall = "ncclSend";
  nccl.failResult = 5; // ncclInvalidUsage
  expectEveryRankFails(
      runOnFakes(2, args, whole, variant.plan),
      "spmd-plan:47: all-to-all: ncclSend failed: invalid usage (run with "
      "NCCL_DEBUG=WARN for details) (fake NCCL: ncclSend fails on request)",
      "send");
  EXPECT_EQ(cuda.liveAllocations, 0);
  EXPECT_EQ(nccl.liveComms, 0);
  // The failed run had collectives queued: its communicators are aborted,
  // not destroyed (ncclCommDestroy would wait for them).
  EXPECT_GT(nccl.aborts, 0);
}

// The NCCL watchdog ends the process: death tests, in a child that runs
// two ranks (threads) whose all-reduce never finishes, with NCCL's
// asynchronous error `asyncError` and --collective-timeout `timeout`, and
// prints to its own stderr.
static void expectWatchdogExit(int asyncError, const char *timeout, const char *message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Variant variant = variants()[0];
  std::string whole = wholePlan(variant.n);
  EXPECT_EXIT(
      {
        fakeCuda();
        FakeNcclState &nccl = fakeNccl();
        nccl.hangCall = "ncclAllReduce";
        nccl.asyncError = asyncError;
        loom::test::passThroughOutput = true;
        runOnFakes(2, {"--device", "cuda", "--random-inputs", "--collective-timeout", timeout},
                   whole, variant.plan);
        std::exit(0);
      },
      testing::ExitedWithCode(1), message);
}

TEST(CudaSpmdDeathTest, AbortsTheCommunicatorsOnAnAsynchronousError) {
  // The peer's NCCL reports it gone (6, ncclRemoteError) while this rank's
  // all-reduce waits: no time limit is needed to end the run.
  expectWatchdogExit(
      6, "0",
      "model: error: rank [01]: spmd-plan:37: the NCCL communicator of the group over a \\(2 "
      "ranks\\): an asynchronous operation failed: remote process exited or there was a "
      "network error; the NCCL communicators are aborted");
}

TEST(CudaSpmdDeathTest, AbortsTheCommunicatorsPastTheCollectiveTimeout) {
  // A peer that hangs: nothing reports an error, the clock does.
  expectWatchdogExit(
      0, "0.3",
      "model: error: rank [01]: the GPU's collectives did not finish within 0.3 s: another "
      "rank failed, died or hangs \\(--collective-timeout\\); the NCCL communicators are "
      "aborted");
}

TEST(CudaSpmd, FinishedRunsDestroyTheirCommunicators) {
  // The watchdog is quiet while the collectives finish, and a run that
  // ends normally destroys its communicators (no abort).
  Variant variant = variants()[0];
  fakeCuda();
  FakeNcclState &nccl = fakeNccl();
  nccl.asyncError = 7; // ncclInProgress: not an error
  std::vector<RunResult> runs =
      runOnFakes(2, {"--device", "cuda", "--random-inputs"}, wholePlan(variant.n), variant.plan);
  expectSuccess(runs, variant.name);
  EXPECT_EQ(nccl.aborts, 0);
  EXPECT_EQ(nccl.liveComms, 0);
}

namespace {
/// A forward-only model in four stages: a = 2x, c = x (stage 0); b = 3a
/// (stage 1); d = c / 2, e = b (stage 2); y = 2e (stage 3). Stage 1 relays
/// c, which only stage 2 reads. Outputs d = x / 2 and y = 12x.
const char *const kStageLines[] = {
    "section forward 0", "step k_dbl 0 1",  "step k_id 0 2",
    "section forward 1", "step k_tri 1 3",  "section forward 2",
    "step k_half 2 4",   "step k_id 3 5",   "section forward 3",
    "step k_dbl 5 6"};

/// `steps` (section and step records) at the end of `lines`; an
/// unpipelined plan leaves out the sections.
template <size_t N>
void appendSteps(std::vector<std::string> &lines, const char *const (&steps)[N],
                 bool pipelined) {
  for (const char *line : steps)
    if (pipelined || std::string(line).rfind("section", 0) != 0)
      lines.push_back(line);
}

/// With `microbatches` m > 1, a forward in microbatches: each buffer holds
/// 4/m of the rows, and the outputs are the microbatches' stacked.
std::string stagedPlan(const std::string &mesh, bool pipelined,
                       unsigned microbatches = 1) {
  int rows = 4 / static_cast<int>(microbatches);
  std::vector<std::string> lines = {"loom-plan 1", "model m", "device cpu"};
  if (pipelined) {
    lines.push_back("mesh g " + mesh);
    lines.push_back("pipeline pp 4 interleaved");
  }
  lines.push_back("arena 896");
  lines.push_back("gpu-image sm_90 ptx 9");
  const char *names[] = {"x", "a", "c", "b", "d", "e", "y"};
  for (int id = 0; id < 7; ++id) {
    bool output = id == 4 || id == 6;
    lines.push_back("buffer " + std::to_string(id) + " " + names[id] + " " +
                    (id == 0 ? "input" : output ? "output" : "temp") +
                    " f32 " + std::to_string(rows) + ",8 " + std::to_string(128 * id));
  }
  for (const char *kernel : {"k_half", "k_id", "k_dbl", "k_tri"})
    lines.push_back(std::string("kernel ") + kernel + " 2");
  lines.push_back(scaleLaunch("k_half", "0.5", rows * 8));
  lines.push_back(scaleLaunch("k_id", "1", rows * 8));
  lines.push_back(scaleLaunch("k_dbl", "2", rows * 8));
  lines.push_back(scaleLaunch("k_tri", "3", rows * 8));
  appendSteps(lines, kStageLines, pipelined);
  if (pipelined) {
    lines.push_back("carry forward 0 1 2");
    lines.push_back("carry forward 1 3 2");
    lines.push_back("carry forward 2 5");
  }
  if (microbatches > 1) {
    lines.push_back("microbatches " + std::to_string(microbatches));
    lines.push_back("assemble 4 rows");
    lines.push_back("assemble 6 rows");
  }
  return sealLines(lines);
}
} // namespace

TEST(CudaSpmd, PipelinedForwardRunsEachStageOnItsGpu) {
  // Four stages on two ranks (interleaved: rank 0 holds stages 0 and 2),
  // on four with dp = 2 beside them, and one stage per rank on four. The activations go from GPU
  // to GPU by ncclSend / ncclRecv; the outputs are those of one rank.
  TempDir dir;
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i * 3 % 7) - 3);
  std::string error;
  ASSERT_TRUE(writeNpy(dir.path("x.npy"), DType::F32, {4, 8}, x.data(), error))
      << error;
  auto args = [&](const std::string &tag) {
    return std::vector<std::string>{
        "--device", "cuda", "--input", "x=" + dir.path("x.npy"),
        "--output", "d=" + dir.path("d" + tag + ".npy"),
        "--output", "y=" + dir.path("y" + tag + ".npy")};
  };
  std::string whole = stagedPlan("", false);
  fakeCuda();
  std::vector<RunResult> single =
      runOnFakes(1, args("1"), whole, stagedPlan("pp=2", true));
  ASSERT_EQ(single[0].status, 0) << single[0].err;
  std::vector<float> y(32);
  ASSERT_TRUE(readNpy(dir.path("y1.npy"), "y", DType::F32, {4, 8}, y.data(), error))
      << error;
  EXPECT_EQ(y[1], 12 * x[1]); // the test means something

  struct Mesh {
    const char *axes;
    unsigned ranks, pipelineRanks;
  };
  for (Mesh mesh : {Mesh{"pp=2", 2, 2}, Mesh{"dp=2 pp=2", 4, 2}, Mesh{"pp=4", 4, 4}}) {
    unsigned ranks = mesh.ranks;
    FakeCudaState &cuda = fakeCuda();
    cuda.deviceCount = 2;
    FakeNcclState &nccl = fakeNccl();
    std::vector<RunResult> runs =
        runOnFakes(ranks, args("n"), whole, stagedPlan(mesh.axes, true));
    expectSuccess(runs, mesh.axes);
    for (const char *output : {"d", "y"})
      EXPECT_EQ(readFile(dir.path(std::string(output) + "n.npy")),
                readFile(dir.path(std::string(output) + "1.npy")))
          << mesh.axes << ": " << output;
    // Three messages forward per pipeline; the outputs d and y are
    // broadcast over the pipeline axis from their stages.
    unsigned pipelines = ranks / mesh.pipelineRanks;
    EXPECT_EQ(nccl.sends, 3 * pipelines) << mesh.axes;
    EXPECT_EQ(nccl.recvs, 3 * pipelines) << mesh.axes;
    EXPECT_EQ(nccl.broadcasts, 2 * ranks) << mesh.axes;
    EXPECT_EQ(nccl.liveComms, 0) << mesh.axes;
    EXPECT_EQ(cuda.liveAllocations, 0) << mesh.axes;
  }

  // The same forward in 2 microbatches of 2 rows: on one GPU, each runs
  // in turn; pipelined, both go through the stages, each rank keeps the
  // outputs it computes per microbatch, and every rank gets each
  // microbatch's after the schedule. Both give the outputs of one piece.
  fakeCuda();
  single = runOnFakes(1, args("m1"), stagedPlan("", false, 2),
                      stagedPlan("pp=2", true, 2));
  ASSERT_EQ(single[0].status, 0) << single[0].err;
  for (const char *output : {"d", "y"})
    EXPECT_EQ(readFile(dir.path(std::string(output) + "m1.npy")),
              readFile(dir.path(std::string(output) + "1.npy")))
        << output;
  for (Mesh mesh : {Mesh{"pp=2", 2, 2}, Mesh{"pp=4", 4, 4}}) {
    unsigned ranks = mesh.ranks;
    FakeCudaState &cuda = fakeCuda();
    cuda.deviceCount = 2;
    FakeNcclState &nccl = fakeNccl();
    std::vector<RunResult> runs = runOnFakes(
        ranks, args("mn"), stagedPlan("", false, 2), stagedPlan(mesh.axes, true, 2));
    expectSuccess(runs, mesh.axes);
    for (const char *output : {"d", "y"})
      EXPECT_EQ(readFile(dir.path(std::string(output) + "mn.npy")),
                readFile(dir.path(std::string(output) + "1.npy")))
          << mesh.axes << ": " << output;
    EXPECT_EQ(nccl.sends, 3 * 2u) << mesh.axes;
    EXPECT_EQ(nccl.recvs, 3 * 2u) << mesh.axes;
    EXPECT_EQ(nccl.broadcasts, 2 * 2 * ranks) << mesh.axes;
    EXPECT_EQ(cuda.liveAllocations, 0) << mesh.axes;
  }
}

namespace {
/// Three training steps from seed 3 of `whole` on one fake GPU, then of
/// `spmd` on two ranks with a fake GPU each: both succeed and write the
/// same checkpoint. The fakes' states, reset before the two ranks ran,
/// are the caller's to inspect.
struct TwoGpuTraining {
  FakeCudaState &cuda;
  FakeNcclState &nccl;
};
TwoGpuTraining expectTwoGpusTrainAsOne(const std::string &whole, const std::string &spmd,
                                       const char *what) {
  TempDir dir;
  auto args = [&](const std::string &tag) {
    return std::vector<std::string>{"train", "--device", "cuda", "--random-inputs",
                                    "--seed", "3", "--save", dir.path(tag + ".ckpt")};
  };
  fakeCuda();
  std::vector<RunResult> one = runOnFakes(1, args("one"), whole, spmd);
  EXPECT_EQ(one[0].status, 0) << one[0].err;
  FakeCudaState &cuda = fakeCuda();
  cuda.deviceCount = 2;
  FakeNcclState &nccl = fakeNccl();
  std::vector<RunResult> two = runOnFakes(2, args("two"), whole, spmd);
  expectSuccess(two, what);
  std::string checkpoint = readFile(dir.path("two.ckpt"));
  EXPECT_FALSE(checkpoint.empty()) << what;
  EXPECT_EQ(checkpoint, readFile(dir.path("one.ckpt"))) << what;
  return {cuda, nccl};
}
} // namespace

TEST(CudaSpmd, DataParallelTrainingKeepsTheParamsOnEachGpu) {
  // A training step of one param w: next.w = w + the sum of x's rows, the
  // rows split over a = 2 (each rank's block, then an all-reduce), the
  // update on the device. Two ranks write the one-rank checkpoint.
  auto training = [](const std::string &mesh, std::vector<TestBuffer> buffers,
                     std::vector<std::string> rest, unsigned update) {
    rest.push_back("optimizer sgd 3 lr=0.1");
    rest.push_back("update " + std::to_string(update) + " 1");
    return withGpuImage(makePlan(mesh, buffers, rest));
  };
  std::string add = "launch k_add fake_add 1 1 1 32 1 1 b:0 b:1 b:2 i32:8";
  std::string whole = training(
      "",
      {{"x", "input", "2,8", "", ""}, {"w", "param", "8", "normal 1", ""},
       {"g", "temp", "8", "", ""}, {"next.w", "output", "8", "", ""}},
      {"kernel k_sum 2", "kernel k_add 3",
       "launch k_sum fake_sum 1 1 1 32 1 1 b:0 b:1 i64:8 i64:2", add,
       "step k_sum 0 2", "step k_add 1 2 3"},
      3);
  std::string spmd = training(
      "a=2",
      {{"x", "input", "1,8", "", "a,-"}, {"w", "param", "8", "normal 1", ""},
       {"g", "temp", "8", "", ""}, {"gs", "temp", "8", "", ""},
       {"next.w", "output", "8", "", ""}},
      {"kernel k_id 2", "kernel k_add 3", scaleLaunch("k_id", "1", 8), add,
       "step k_id 0 2", "collective all-reduce a - 2 3", "step k_add 1 3 4"},
      4);
  auto [cuda, nccl] = expectTwoGpusTrainAsOne(whole, spmd, "a=2 training");
  EXPECT_EQ(nccl.allReduces, 2u * 3u); // each rank, each step
  // Each rank: x's block and w once, then the block alone; the update on
  // its device each step; w back once, for the checkpoint.
  EXPECT_EQ(cuda.bytesToDevice, 2u * (32u + 32u) + 2u * 2u * 32u);
  EXPECT_EQ(cuda.bytesOnDevice, 2u * 3u * 32u);
  EXPECT_EQ(cuda.bytesToHost, 2u * 32u);
  EXPECT_EQ(cuda.liveAllocations, 0);
}

TEST(CudaSpmd, AGradientBucketIsOneGroupOfAllReduces) {
  // Two params w and v, each next = param + the sum of x's rows; on a = 2
  // the two gradients' sums are one bucket: `collective all-reduce` of two
  // pairs, which NCCL runs as one group of two all-reduces. Two ranks
  // write the one-rank checkpoint.
  auto training = [](const std::string &mesh, std::vector<TestBuffer> buffers,
                     std::vector<std::string> rest, unsigned updates) {
    rest.push_back("optimizer sgd 3 lr=0.1");
    rest.push_back("update " + std::to_string(updates) + " 1");
    rest.push_back("update " + std::to_string(updates + 1) + " 2");
    return withGpuImage(makePlan(mesh, buffers, rest));
  };
  auto add = [](const char *kernel) {
    return std::string("launch ") + kernel + " fake_add 1 1 1 32 1 1 b:0 b:1 b:2 i32:8";
  };
  std::string whole = training(
      "",
      {{"x", "input", "2,8", "", ""}, {"w", "param", "8", "normal 1", ""},
       {"v", "param", "8", "normal 1", ""}, {"g", "temp", "8", "", ""},
       {"h", "temp", "8", "", ""}, {"next.w", "output", "8", "", ""},
       {"next.v", "output", "8", "", ""}},
      {"kernel k_sum 2", "kernel k_add 3",
       "launch k_sum fake_sum 1 1 1 32 1 1 b:0 b:1 i64:8 i64:2", add("k_add"),
       "step k_sum 0 3", "step k_sum 0 4", "step k_add 1 3 5", "step k_add 2 4 6"},
      5);
  std::string spmd = training(
      "a=2",
      {{"x", "input", "1,8", "", "a,-"}, {"w", "param", "8", "normal 1", ""},
       {"v", "param", "8", "normal 1", ""}, {"g", "temp", "8", "", ""},
       {"h", "temp", "8", "", ""}, {"gs", "temp", "8", "", ""},
       {"hs", "temp", "8", "", ""}, {"next.w", "output", "8", "", ""},
       {"next.v", "output", "8", "", ""}},
      {"kernel k_id 2", "kernel k_add 3", scaleLaunch("k_id", "1", 8), add("k_add"),
       "step k_id 0 3", "step k_id 0 4", "collective all-reduce a - 3 5 4 6",
       "step k_add 1 5 7", "step k_add 2 6 8"},
      7);
  auto [cuda, nccl] = expectTwoGpusTrainAsOne(whole, spmd, "a=2 bucket");
  // Each rank, each step: one group of the two pairs' all-reduces.
  EXPECT_EQ(nccl.allReduces, 2u * 3u * 2u);
  EXPECT_EQ(nccl.groupedAllReduces, 2u * 3u * 2u);
  EXPECT_EQ(cuda.liveAllocations, 0);
}

namespace {
/// A two-stage training step in 2 microbatches of one row x: stage 0
/// computes a = x + w0, stage 1 y = a + w1, g1 = y and ga = g1 / 2 (sent
/// back), stage 0 g0 = 2 ga; the gradients' means s1, s0 (accumulates in
/// the backward sections) give next.w1 = w1 + s1 and next.w0 = w0 + s0.
/// Unpipelined (`pipelined` false), the same steps in program order.
std::string pipelinedTraining(bool pipelined) {
  std::vector<std::string> lines = {"loom-plan 1", "model m", "device cpu"};
  if (pipelined) {
    lines.push_back("mesh g pp=2");
    lines.push_back("pipeline pp 2 1f1b");
  }
  lines.push_back("arena 768");
  lines.push_back("gpu-image sm_90 ptx 9");
  struct Buffer {
    const char *name, *role, *shape, *rest;
    int held; // the stage that holds a param or update, or -1
  };
  const Buffer buffers[] = {
      {"x", "input", "1,8", "", -1},          {"w0", "param", "8", " normal 1", 0},
      {"w1", "param", "8", " normal 1", 1},  {"a", "temp", "8", "", -1},
      {"y", "temp", "8", "", -1},            {"g1", "temp", "8", "", -1},
      {"ga", "temp", "8", "", -1},           {"g0", "temp", "8", "", -1},
      {"s1", "temp", "8", "", -1},           {"s0", "temp", "8", "", -1},
      {"next.w0", "output", "8", "", 0},     {"next.w1", "output", "8", "", 1}};
  for (int id = 0; id < 12; ++id) {
    const Buffer &b = buffers[id];
    lines.push_back("buffer " + std::to_string(id) + " " + b.name + " " + b.role +
                    " f32 " + b.shape + " " + std::to_string(64 * id) + b.rest);
    if (pipelined && b.held >= 0)
      lines.push_back("held " + std::to_string(id) + " " + std::to_string(b.held));
  }
  for (const char *kernel : {"k_add 3", "k_id 2", "k_half 2", "k_dbl 2"})
    lines.push_back(std::string("kernel ") + kernel);
  lines.push_back("launch k_add fake_add 1 1 1 32 1 1 b:0 b:1 b:2 i32:8");
  lines.push_back(scaleLaunch("k_id", "1", 8));
  lines.push_back(scaleLaunch("k_half", "0.5", 8));
  lines.push_back(scaleLaunch("k_dbl", "2", 8));
  const char *const steps[] = {"section forward 0", "step k_add 0 1 3",
                         "section forward 1", "step k_add 3 2 4",
                         "section backward 1", "step k_id 4 5",
                         "step k_half 5 6", "accumulate 5 8",
                         "section backward 0", "step k_dbl 6 7",
                         "accumulate 7 9", "section update 0",
                         "step k_add 1 9 10", "section update 1",
                         "step k_add 2 8 11"};
  appendSteps(lines, steps, pipelined);
  if (pipelined) {
    lines.push_back("carry forward 0 3");
    lines.push_back("carry backward 1 6");
  }
  lines.push_back("optimizer sgd 3 lr=0.1 microbatches=2");
  lines.push_back("update 10 1");
  lines.push_back("update 11 2");
  return sealLines(lines);
}
} // namespace

TEST(CudaSpmd, PipelinedTrainingUpdatesEachStagesParamsOnItsGpu) {
  // Three steps on one GPU (the microbatches one after the other), then
  // on two ranks of pp = 2: each stage's accumulates are the runtime's
  // kernel on its GPU, a and ga go between the GPUs by NCCL, and each
  // rank updates its stage's param on its device. Both write the same
  // checkpoint.
  auto [cuda, nccl] = expectTwoGpusTrainAsOne(pipelinedTraining(false),
                                              pipelinedTraining(true), "pp=2 training");
  // Per step, one message each way per microbatch.
  EXPECT_EQ(nccl.sends, 3u * 2u * 2u);
  EXPECT_EQ(nccl.recvs, 3u * 2u * 2u);
  // The params go up once, before the first step: each rank uploads its
  // arena's two params and x once, x again at the start of steps 2 and 3,
  // 32 bytes each time; and the microbatch's row of x before each section
  // that reads it: stage 0's forward, once per microbatch (3 steps of 2).
  EXPECT_EQ(cuda.bytesToDevice, (2u * (3u + 2u) + 3u * 2u) * 32u);
  EXPECT_EQ(cuda.liveAllocations, 0);
  EXPECT_EQ(nccl.liveComms, 0);
}

#endif // LOOM_FAKE_GPUS
