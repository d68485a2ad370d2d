//===- CudaTest.cpp - --device cuda without a GPU -------------------------===//
//
// No GPU here or in CI. What runs everywhere: the architecture rules, the
// checks made before the driver is loaded, the missing-driver error, and
// that --device cpu ignores launch records. Where cuda.h was found, the
// whole CUDA executor also runs against a fake driver (FakeCudaDriver.h):
// host memory, host "kernels", errors on request.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "loom/runtime/exec/Cuda.h"
#include "loom/runtime/io/Npy.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#ifdef LOOM_FAKE_CUDA_DRIVER
#include "FakeCudaDriver.h"
#endif

using namespace loom::runtime;
using loom::test::readFile;
using loom::test::runDriver;
using loom::test::RunResult;
using loom::test::sealLines;
using loom::test::TempDir;
using loom::test::writeFile;

namespace {
constexpr int kN = loom::test::kFakeElements;

// The CPU kernels, computing what the fake driver's functions compute.
void addTwiceF32(void **args) {
  loom::test::fakeAddF32(args);
  float *out = static_cast<float *>(args[2]);
  for (int i = 0; i < kN; ++i)
    out[i] *= 2.0f;
}
void dims(void **args) {
  const float values[6] = {3, 2, 1, 32, 4, 2};
  std::memcpy(args[0], values, sizeof(values)); // 6 of its 8 elements
}
/// out[0] = in[0] + ... + in[7] (fake_sum's n = 1, parts = 8).
void sumF32(void **args) {
  const float *in = static_cast<const float *>(args[0]);
  float sum = 0;
  for (int i = 0; i < kN; ++i)
    sum += in[i];
  *static_cast<float *>(args[1]) = sum;
}
const LoomKernel kKernels[] = {{"add", 3, loom::test::fakeAddF32},
                               {"addw", 3, addTwiceF32},
                               {"dims", 1, dims},
                               {"sum", 2, sumF32},
                               {nullptr, 0, nullptr}};

const char kImage[] = "FAKE PTX\n"; // 9 bytes: what the fake driver loads

/// t = x + y; out = (t + w) * 2 (out in y's bytes); dims = the grid and
/// block of the last launch, its last two elements never written.
std::vector<std::string>
gpuPlanLines(const std::string &image = "gpu-image sm_90 ptx 9") {
  return {"loom-plan 1",
          "model scaled",
          "device cpu",
          "arena 320",
          image,
          "buffer 0 x input f32 8 0",
          "buffer 1 y input f32 8 64",
          "buffer 2 w param f32 8 128 normal 1",
          "buffer 3 t temp f32 8 192",
          "buffer 4 out output f32 8 64",
          "buffer 5 d output f32 8 256",
          "kernel add 3",
          "kernel addw 3",
          "kernel dims 1",
          "launch add fake_add 1 1 1 8 1 1 b:0 b:1 b:2 i32:8",
          "launch addw fake_add 1 1 1 8 1 1 b:0 b:1 b:2 i32:8",
          "launch addw fake_scale 2 1 1 4 1 1 b:2 b:2 f32:2 i64:8",
          "launch dims fake_dims 3 2 1 32 4 2 b:0",
          "step add 0 1 3",
          "step addw 3 2 4",
          "step dims 5"};
}

Executable gpuExecutable(const char *driver = "libcuda.so.1") {
  Executable executable;
  executable.kernels = kKernels;
  executable.gpuImage = reinterpret_cast<const unsigned char *>(kImage);
  executable.gpuImageSize = 9;
  executable.cudaDriver = driver;
  return executable;
}

std::vector<float> readF32(const std::string &path) {
  std::vector<float> values(kN);
  std::string error;
  EXPECT_TRUE(readNpy(path, "output", DType::F32, {kN}, values.data(), error))
      << error;
  return values;
}

std::string errorLine(const std::string &message) {
  return "model: error: " + message + "\n";
}
} // namespace

TEST(Cuda, ImagesRunOnCompatibleDevices) {
  auto image = [](const char *arch, GpuImageFormat format) {
    PlanGpuImage image;
    image.present = true;
    image.archName = arch;
    EXPECT_TRUE(parseGpuArch(arch, image.arch)) << arch;
    image.format = format;
    image.bytes = 1;
    return image;
  };
  const GpuImageFormat cubin = GpuImageFormat::Cubin;
  const GpuImageFormat ptx = GpuImageFormat::PTX;
  struct Case {
    const char *arch;
    GpuImageFormat format;
    unsigned major, minor;
    bool runs;
  };
  const Case cases[] = {
      // sm_90a: exactly 9.0, as cubin or PTX.
      {"sm_90a", cubin, 9, 0, true},
      {"sm_90a", cubin, 10, 0, false},
      {"sm_90a", cubin, 8, 9, false},
      {"sm_90a", ptx, 9, 0, true},
      {"sm_90a", ptx, 10, 0, false},
      // A cubin runs on later minor versions of its major version only.
      {"sm_80", cubin, 8, 0, true},
      {"sm_80", cubin, 8, 6, true},
      {"sm_86", cubin, 8, 0, false},
      {"sm_80", cubin, 9, 0, false},
      // PTX is compiled by the driver for any later device.
      {"sm_80", ptx, 8, 0, true},
      {"sm_80", ptx, 12, 0, true},
      {"sm_86", ptx, 8, 0, false},
      {"sm_90", ptx, 8, 9, false},
      // Family images: the same major version, minor at least theirs.
      {"sm_100f", cubin, 10, 3, true},
      {"sm_103f", cubin, 10, 0, false},
      {"sm_100f", ptx, 12, 0, false},
  };
  for (const Case &c : cases)
    EXPECT_EQ(gpuImageRunsOn(image(c.arch, c.format), c.major, c.minor), c.runs)
        << c.arch << " " << gpuImageFormatName(c.format) << " on " << c.major
        << "." << c.minor;
  EXPECT_EQ(gpuImageRequirement(image("sm_90a", cubin)),
            "compute capability 9.0 only");
  EXPECT_EQ(gpuImageRequirement(image("sm_86", cubin)),
            "compute capability 8.6 or a later 8.x");
  EXPECT_EQ(gpuImageRequirement(image("sm_100f", ptx)),
            "compute capability 10.0 or a later 10.x");
  EXPECT_EQ(gpuImageRequirement(image("sm_80", ptx)),
            "compute capability 8.0 or later");
}

TEST(Cuda, DeviceCpuIgnoresLaunches) {
  // Launches of functions no image has, and no image bytes at all: the CPU
  // executor never looks at them.
  std::vector<std::string> lines = gpuPlanLines();
  lines[14] = "launch add no_such_function 1 1 1 1 1 1 b:0 f32:nan";
  std::string plan = sealLines(lines);
  Executable executable = gpuExecutable("/nonexistent/libcuda.so.1");
  executable.gpuImage = nullptr;
  executable.gpuImageSize = 0;
  TempDir dir;
  for (const std::vector<std::string> &device :
       {std::vector<std::string>{}, std::vector<std::string>{"--device=cpu"}}) {
    std::vector<std::string> args = {"--random-inputs", "--output",
                                     "out=" + dir.path("out.npy"), "--output",
                                     "d=" + dir.path("d.npy")};
    args.insert(args.end(), device.begin(), device.end());
    RunResult run = runDriver(args, executable, plan);
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.err, "");
    std::vector<float> d = readF32(dir.path("d.npy"));
    EXPECT_EQ(d, (std::vector<float>{3, 2, 1, 32, 4, 2, 0, 0}));
  }
}

TEST(Cuda, InfoShowsTheGpuImage) {
  RunResult info =
      runDriver({"--info"}, gpuExecutable(), sealLines(gpuPlanLines()));
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_NE(info.out.find("arena    320 bytes (0.00 MiB, peak of the memory "
                          "plan)\ngpu      sm_90 ptx, 9 bytes (run with "
                          "--device cuda)\nbuffers  6\n"),
            std::string::npos)
      << info.out;
  EXPECT_NE(info.out.find("kernels  3\n"
                          "  add (3 buffers, 1 GPU launch)\n"
                          "  addw (3 buffers, 2 GPU launches)\n"
                          "  dims (1 buffers, 1 GPU launch)\n"
                          "launches 4\n"
                          "steps    3\n"),
            std::string::npos)
      << info.out;
}

TEST(Cuda, NeedsAGpuImageOfTheStatedSize) {
  std::vector<std::string> lines = gpuPlanLines();
  lines.erase(lines.begin() + 14, lines.begin() + 18); // the launches
  lines.erase(lines.begin() + 4);                      // the gpu-image
  for (const char *extra : {"--random-inputs", "--info"}) {
    RunResult run = runDriver({"--device", "cuda", extra}, gpuExecutable(),
                              sealLines(lines));
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err,
              errorLine("this executable was built without GPU kernels"));
  }
  // The plan and the executable's image disagree.
  Executable executable = gpuExecutable();
  executable.gpuImageSize = 0;
  RunResult run = runDriver({"--device", "cuda", "--random-inputs"}, executable,
                            sealLines(gpuPlanLines()));
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err,
            errorLine("plan:5: the gpu-image record says 9 bytes, but this "
                      "executable carries a GPU image of 0 bytes"));
  executable.gpuImageSize = 10;
  run = runDriver({"--device", "cuda", "--random-inputs"}, executable,
                  sealLines(gpuPlanLines()));
  EXPECT_EQ(run.err,
            errorLine("plan:5: the gpu-image record says 9 bytes, but this "
                      "executable carries a GPU image of 10 bytes"));
}

TEST(Cuda, ReportsAMissingDriver) {
  std::string plan = sealLines(gpuPlanLines());
  std::vector<std::string> args = {"--device", "cuda", "--random-inputs"};
  if (!cudaSupported()) {
    RunResult run = runDriver(args, gpuExecutable(), plan);
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err,
              errorLine("this runtime was built without CUDA support"));
    return;
  }
  RunResult run =
      runDriver(args, gpuExecutable("/nonexistent/libcuda.so.1"), plan);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, errorLine("no CUDA driver (/nonexistent/libcuda.so.1) "
                               "found; run with --device cpu"));

  // The real driver: absent here and in CI, but a machine with one may run
  // these tests (the fake image then fails to load, or the device differs).
  run = runDriver(args, gpuExecutable(), plan);
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err, errorLine("no CUDA driver (libcuda.so.1) found; run "
                                 "with --device cpu"));
  } else {
    EXPECT_TRUE(run.status == 0 || run.err.find("model: error: ") == 0)
        << run.err;
  }

  // A library without the driver's functions.
  run = runDriver(args, gpuExecutable("libm.so.6"), plan);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, errorLine("the CUDA driver libm.so.6 has no function "
                               "cuGetErrorName (is it too old?)"));
}

TEST(Cuda, RefusesPartitionedPlans) {
  // Collectives between GPUs go through NCCL (CudaSpmdTest): without them
  // the executor refuses a plan with a mesh before loading any driver.
  std::vector<std::string> lines = gpuPlanLines();
  lines.insert(lines.begin() + 3, "mesh g tp=2");
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  CudaExecutor executor;
  EXPECT_FALSE(executor.open(plan,
                             reinterpret_cast<const unsigned char *>(kImage), 9,
                             "/nonexistent/libcuda.so.1", error));
  EXPECT_EQ(error, cudaSupported()
                       ? "a partitioned plan runs on cuda only with "
                         "collectives on the device (NCCL)"
                       : "this runtime was built without CUDA support");
}

TEST(Cuda, CheckKernelsNeedsCudaAndNoTraceOrOutputs) {
  std::string plan = sealLines(gpuPlanLines());
  struct Case {
    std::vector<std::string> args;
    const char *error;
  };
  const Case cases[] = {
      {{"--check-kernels", "--random-inputs"},
       "--check-kernels compares the GPU's kernels with the CPU's: it needs "
       "--device cuda"},
      {{"--device", "cpu", "--check-kernels", "--info"},
       "--check-kernels compares the GPU's kernels with the CPU's: it needs "
       "--device cuda"},
      {{"--device", "cuda", "--check-kernels", "--random-inputs", "--trace",
        "t.json"},
       "--check-kernels cannot be combined with --trace (run them "
       "separately)"},
      {{"--device", "cuda", "--random-inputs", "--output", "out=o.npy",
        "--check-kernels"},
       "--check-kernels writes no outputs; run without it for --output"},
      {{"--check-kernels=yes"}, "option '--check-kernels' takes no value"},
      {{"--device", "cuda", "--random-inputs", "--check-dump", "dump"},
       "--check-dump writes what --check-kernels finds: add --check-kernels"},
  };
  for (const Case &c : cases) {
    RunResult run =
        runDriver(c.args, gpuExecutable("/nonexistent/libcuda.so.1"), plan);
    EXPECT_EQ(run.status, 1) << c.error;
    EXPECT_EQ(run.err, errorLine(c.error));
    EXPECT_EQ(run.out, "");
  }
}

#ifdef LOOM_FAKE_CUDA_DRIVER

namespace {
/// The fake driver's state, reset; the runtime dlopen()s the same library.
FakeCudaState &fakeCuda() {
  void *library = dlopen(LOOM_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(library, nullptr) << dlerror();
  auto get = reinterpret_cast<FakeCudaState *(*)()>(
      library ? dlsym(library, "loomFakeCuda") : nullptr);
  static FakeCudaState fallback;
  FakeCudaState &state = get ? *get() : fallback;
  state.reset();
  return state;
}

/// Runs `plan` with --device cuda on the fake driver; `args` are added.
RunResult runOnFake(const std::vector<std::string> &args,
                    const std::string &plan) {
  std::vector<std::string> all = {"--device", "cuda"};
  all.insert(all.end(), args.begin(), args.end());
  return runDriver(all, gpuExecutable(LOOM_FAKE_CUDA_DRIVER), plan);
}

/// Everything the executor took from the fake driver was given back.
void expectReleased(const FakeCudaState &fake) {
  EXPECT_EQ(fake.liveAllocations, 0);
  EXPECT_EQ(fake.loadedModules, 0);
  EXPECT_EQ(fake.retainedContexts, 0);
  EXPECT_EQ(fake.liveEvents, 0);
}
} // namespace

TEST(Cuda, RunsOnTheFakeDriverLikeOnTheCpu) {
  TempDir dir;
  std::string plan = sealLines(gpuPlanLines());
  auto outputs = [&](const std::string &tag) {
    return std::vector<std::string>{"--random-inputs",
                                    "--seed",
                                    "7",
                                    "--output",
                                    "out=" + dir.path(tag + "out.npy"),
                                    "--output",
                                    "d=" + dir.path(tag + "d.npy")};
  };
  RunResult cpu = runDriver(outputs("cpu"), gpuExecutable(), plan);
  ASSERT_EQ(cpu.status, 0) << cpu.err;

  FakeCudaState &fake = fakeCuda();
  RunResult gpu = runOnFake(outputs("gpu"), plan);
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  EXPECT_EQ(gpu.err, "");
  EXPECT_EQ(readFile(dir.path("gpuout.npy")), readFile(dir.path("cpuout.npy")));
  // Also the two elements of d no kernel writes: the device arena is zeroed.
  EXPECT_EQ(readF32(dir.path("gpud.npy")),
            (std::vector<float>{3, 2, 1, 32, 4, 2, 0, 0}));

  EXPECT_TRUE(fake.initialized);
  EXPECT_EQ(fake.imageBytes, 9u);
  EXPECT_EQ(fake.lastAllocation, 320u);
  EXPECT_EQ(fake.bytesToDevice, 96u); // x, y and w
  EXPECT_EQ(fake.bytesToHost, 64u);   // out and d
  ASSERT_EQ(fake.numLaunches, 4u);
  EXPECT_STREQ(fake.launches[0].function, "fake_add");
  EXPECT_STREQ(fake.launches[2].function, "fake_scale");
  EXPECT_EQ(fake.launches[2].grid[0], 2u);
  EXPECT_EQ(fake.launches[2].block[0], 4u);
  EXPECT_STREQ(fake.launches[3].function, "fake_dims");
  EXPECT_EQ(fake.launches[3].block[2], 2u);
  expectReleased(fake);

  // Summaries on stdout, as on the CPU.
  fakeCuda();
  RunResult summary = runOnFake({"--random-inputs"}, plan);
  EXPECT_EQ(summary.status, 0) << summary.err;
  EXPECT_EQ(summary.out, runDriver({"--random-inputs"}, kKernels, plan).out);

  // A driver that cannot check parameters launches all the same.
  fakeCuda().paramInfo = false;
  EXPECT_EQ(runOnFake({"--random-inputs"}, plan).status, 0);
}

TEST(Cuda, TracesEveryLaunch) {
  TempDir dir;
  FakeCudaState &fake = fakeCuda();
  RunResult run =
      runOnFake({"--random-inputs", "--trace", dir.path("trace.json")},
                sealLines(gpuPlanLines()));
  ASSERT_EQ(run.status, 0) << run.err;
  std::string trace = readFile(dir.path("trace.json"));
  size_t events = 0;
  for (size_t at = trace.find("\"ph\":\"X\""); at != std::string::npos;
       at = trace.find("\"ph\":\"X\"", at + 1))
    ++events;
  EXPECT_EQ(events, 4u) << trace;
  EXPECT_NE(trace.find("{\"name\":\"fake_scale\",\"cat\":\"cuda\",\"ph\":"
                       "\"X\",\"ts\":"),
            std::string::npos)
      << trace;
  // The step's bytes on each of its launches: t and w read, out written.
  std::string addw = "\"args\":{\"step\":1,\"kernel\":\"addw\","
                     "\"bytes_read\":64,\"bytes_written\":32}}";
  size_t first = trace.find(addw);
  EXPECT_NE(first, std::string::npos) << trace;
  EXPECT_NE(trace.rfind(addw), first) << trace;
  EXPECT_NE(trace.find("\"args\":{\"step\":2,\"kernel\":\"dims\","
                       "\"bytes_read\":0,\"bytes_written\":32}}"),
            std::string::npos)
      << trace;
  expectReleased(fake);
}

namespace {
/// A training step on the fake driver's functions: next.w = x + w and
/// next.m = w + m, each copied into its param after the step (sgd's
/// records; what the kernels compute does not matter here, only where the
/// values live).
std::vector<std::string> trainingPlanLines() {
  return {"loom-plan 1",
          "model trained",
          "device cpu",
          "arena 320",
          "gpu-image sm_90 ptx 9",
          "buffer 0 x input f32 8 0",
          "buffer 1 w param f32 8 64 normal 1",
          "buffer 2 opt.m.w param f32 8 128 normal 1",
          "buffer 3 next.w output f32 8 192",
          "buffer 4 next.opt.m.w output f32 8 256",
          "kernel add 3",
          "launch add fake_add 1 1 1 8 1 1 b:0 b:1 b:2 i32:8",
          "step add 0 1 3",
          "step add 1 2 4",
          "optimizer sgd 3 lr=0.1",
          "update 3 1",
          "update 4 2"};
}

/// `./model train` of `plan` for its steps from seed 7, on the fake GPU
/// with `cuda`, saving the checkpoint TAG.ckpt in `dir`.
RunResult trainOnFake(TempDir &dir, const std::string &plan, const std::string &tag,
                      bool cuda, const std::vector<std::string> &more = {}) {
  std::vector<std::string> args = {"train", "--random-inputs", "--seed", "7",
                                   "--save", dir.path(tag + ".ckpt")};
  if (cuda)
    args.insert(args.begin() + 1, {"--device", "cuda"});
  args.insert(args.end(), more.begin(), more.end());
  return runDriver(args, gpuExecutable(LOOM_FAKE_CUDA_DRIVER), plan);
}
} // namespace

TEST(Cuda, TrainsWithTheParamsOnTheDevice) {
  TempDir dir;
  std::string plan = sealLines(trainingPlanLines());
  auto train = [&](const std::string &tag, bool cuda,
                   std::vector<std::string> more = {}) {
    return trainOnFake(dir, plan, tag, cuda, more);
  };
  RunResult cpu = train("cpu", false);
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  FakeCudaState &fake = fakeCuda();
  RunResult gpu = train("gpu", true);
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  // The same progress (and checkpoint line, but for the file's name).
  EXPECT_EQ(gpu.out.substr(0, gpu.out.find("checkpoint")),
            cpu.out.substr(0, cpu.out.find("checkpoint")));
  // Three steps, the params updated each time: the same checkpoint.
  EXPECT_EQ(readFile(dir.path("gpu.ckpt")), readFile(dir.path("cpu.ckpt")));
  EXPECT_EQ(fake.numLaunches, 6u);
  // x, w and m once, then x alone for steps 2 and 3; the updates on the
  // device (w and m, 64 bytes a step); nothing back but the params for the
  // checkpoint (the update outputs stay on the device).
  EXPECT_EQ(fake.bytesToDevice, 96u + 2 * 32u);
  EXPECT_EQ(fake.bytesOnDevice, 3 * 64u);
  EXPECT_EQ(fake.bytesToHost, 64u);
  expectReleased(fake);

  // An update output asked for comes back (the step's last value).
  RunResult cpuOut = train("cpu2", false, {"--output", "next.w=" + dir.path("cpu.npy")});
  ASSERT_EQ(cpuOut.status, 0) << cpuOut.err;
  fakeCuda();
  RunResult gpuOut = train("gpu2", true, {"--output", "next.w=" + dir.path("gpu.npy")});
  ASSERT_EQ(gpuOut.status, 0) << gpuOut.err;
  EXPECT_EQ(readFile(dir.path("gpu.npy")), readFile(dir.path("cpu.npy")));
  EXPECT_EQ(readFile(dir.path("gpu2.ckpt")), readFile(dir.path("cpu2.ckpt")));

  // --check-kernels checks one run of the step, not a training run.
  fakeCuda();
  RunResult checked = train("gpu4", true, {"--check-kernels"});
  EXPECT_EQ(checked.status, 1);
  EXPECT_EQ(checked.err, errorLine("--check-kernels checks one run; drop it to train"));

  // A failing device copy is reported with the param.
  FakeCudaState &failing = fakeCuda();
  failing.failCall = "cuMemcpyDtoD_v2";
  failing.failResult = 1; // CUDA_ERROR_INVALID_VALUE
  RunResult failed = train("gpu3", true);
  EXPECT_EQ(failed.status, 1);
  EXPECT_NE(failed.err.find("updating param 'w' on the device: cuMemcpyDtoD failed"),
            std::string::npos)
      << failed.err;
}

TEST(Cuda, EvaluatesHeldOutDataWithoutUpdating) {
  // trainingPlanLines with the inputs --data fills and a loss, the sum of
  // w: train --eval-data runs the whole step on the held-out batches (on
  // the device the update outputs stay there, unapplied), so the losses
  // after each step are the same on both devices, and the checkpoint is
  // the run's without held-out data.
  std::vector<std::string> lines = trainingPlanLines();
  lines[3] = "arena 512";
  lines.insert(lines.begin() + 10, {"buffer 5 tokens input i32 2,4 320",
                                    "buffer 6 labels input i32 2,4 384",
                                    "buffer 7 loss output f32 scalar 448"});
  lines.insert(lines.begin() + 14, "kernel sum 2");
  lines.insert(lines.begin() + 16, "launch sum fake_sum 1 1 1 1 1 1 b:0 b:1 i64:1 i64:8");
  lines.insert(lines.begin() + 19, "step sum 1 7");
  std::string plan = sealLines(lines);
  TempDir dir;
  writeFile(dir.path("held.txt"), std::string(200, 'a'));
  std::vector<std::string> eval = {"--eval-data", dir.path("held.txt"), "--eval-every", "1",
                                   "--eval-batches", "2"};
  RunResult plain = trainOnFake(dir, plan, "plain", false);
  ASSERT_EQ(plain.status, 0) << plain.err;
  RunResult cpu = trainOnFake(dir, plan, "cpu", false, eval);
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  FakeCudaState &fake = fakeCuda();
  RunResult gpu = trainOnFake(dir, plan, "gpu", true, eval);
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  expectReleased(fake);
  // The held-out losses (the sums of w after steps 1, 2 and 3), each line.
  auto evalLines = [](const std::string &out) {
    std::string lines;
    for (size_t at = out.find("eval after"); at != std::string::npos;
         at = out.find("eval after", at + 1))
      lines += out.substr(at, out.find('\n', at) - at + 1);
    return lines;
  };
  EXPECT_NE(cpu.out.find("eval after step 3: loss "), std::string::npos) << cpu.out;
  EXPECT_EQ(evalLines(gpu.out), evalLines(cpu.out));
  EXPECT_EQ(readFile(dir.path("cpu.ckpt")), readFile(dir.path("plain.ckpt")));
  EXPECT_EQ(readFile(dir.path("gpu.ckpt")), readFile(dir.path("plain.ckpt")));
}

TEST(Cuda, ReportsDevicesThatCannotRunTheImage) {
  std::string plan = sealLines(gpuPlanLines());
  FakeCudaState &fake = fakeCuda();
  fake.deviceCount = 0;
  RunResult run = runOnFake({"--random-inputs"}, plan);
  EXPECT_EQ(run.err, errorLine("no CUDA device found; run with --device cpu"));

  fakeCuda();
  fake.failCall = "cuInit";
  fake.failResult = 100; // CUDA_ERROR_NO_DEVICE
  run = runOnFake({"--random-inputs"}, plan);
  EXPECT_EQ(run.err, errorLine("no CUDA device found; run with --device cpu"));

  fakeCuda();
  fake.failCall = "cuInit";
  fake.failResult = 34; // CUDA_ERROR_STUB_LIBRARY
  run = runOnFake({"--random-inputs"}, plan);
  EXPECT_EQ(run.err,
            errorLine("initializing the CUDA driver " LOOM_FAKE_CUDA_DRIVER
                      ": cuInit failed: CUDA_ERROR_STUB_LIBRARY (CUDA driver "
                      "is a stub library)"));

  fakeCuda();
  fake.major = 8;
  fake.minor = 9;
  run = runOnFake({"--random-inputs"}, plan);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err,
            errorLine("plan:5: the GPU image (ptx for sm_90) runs on compute "
                      "capability 9.0 or later, but device 0 (Fake GPU) has "
                      "compute capability 8.9; recompile with loomc "
                      "--gpu-arch=sm_89, or run with --device cpu"));

  fakeCuda();
  fake.major = 10;
  run = runOnFake({"--random-inputs"},
                  sealLines(gpuPlanLines("gpu-image sm_90a cubin 9")));
  EXPECT_EQ(run.err,
            errorLine("plan:5: the GPU image (cubin for sm_90a) runs on "
                      "compute capability 9.0 only, but device 0 (Fake GPU) "
                      "has compute capability 10.0; recompile with loomc "
                      "--gpu-arch=sm_100, or run with --device cpu"));
  expectReleased(fake);

  // --info needs no driver.
  fakeCuda();
  EXPECT_EQ(runOnFake({"--info"}, plan).status, 0);
  EXPECT_FALSE(fake.initialized);
}

TEST(Cuda, ReportsImagesFunctionsAndArguments) {
  FakeCudaState &fake = fakeCuda();
  Executable executable = gpuExecutable(LOOM_FAKE_CUDA_DRIVER);
  const char notFake[] = "NOT FAKE!";
  executable.gpuImage = reinterpret_cast<const unsigned char *>(notFake);
  RunResult run = runDriver({"--device", "cuda", "--random-inputs"}, executable,
                            sealLines(gpuPlanLines()));
  EXPECT_EQ(run.err,
            errorLine("plan:5: loading the GPU image (ptx for sm_90, 9 bytes) "
                      "on Fake GPU: cuModuleLoadDataEx failed: "
                      "CUDA_ERROR_INVALID_IMAGE (device kernel image is "
                      "invalid)\nfake: the image does not start with FAKE"));
  expectReleased(fake);

  struct Case {
    size_t index;
    const char *line;
    const char *error;
  };
  const Case cases[] = {
      {15, "launch addw fake_sub 1 1 1 8 1 1 b:0 b:1 b:2 i32:8",
       "plan:16: the GPU image has no function 'fake_sub'"},
      {15, "launch addw fake_add 1 1 1 8 1 1 b:0 b:1 b:2",
       "plan:16: the launch passes 3 arguments to 'fake_add', which takes 4 "
       "parameters"},
      {15, "launch addw fake_add 1 1 1 8 1 1 b:0 b:1 b:2 i32:8 i32:8",
       "plan:16: the launch passes 5 arguments to 'fake_add', which takes 4 "
       "parameters"},
      {15, "launch addw fake_add 1 1 1 8 1 1 b:0 b:1 b:2 i64:8",
       "plan:16: launch argument 3 ('i64:8', 8 bytes) does not match "
       "parameter 3 of 'fake_add' (4 bytes)"},
      {16, "launch addw fake_scale 1 1 1 8 1 1 b:2 f32:2 f32:2 i64:8",
       "plan:17: launch argument 1 ('f32:2', 4 bytes) does not match "
       "parameter 1 of 'fake_scale' (8 bytes)"},
  };
  for (const Case &c : cases) {
    fakeCuda();
    std::vector<std::string> lines = gpuPlanLines();
    lines[c.index] = c.line;
    run = runOnFake({"--random-inputs"}, sealLines(lines));
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err, errorLine(c.error)) << c.line;
    EXPECT_EQ(fake.numLaunches, 0u); // found before anything ran
    expectReleased(fake);
  }
}

TEST(Cuda, LaunchesWithDynamicSharedMemory) {
  // fake_add takes up to 96 KiB (one opt-in, to the most of its two
  // launches); fake_scale's 1 KiB needs none.
  std::vector<std::string> lines = gpuPlanLines();
  lines[14] += " shared:65536";
  lines[15] += " shared:98304";
  lines[16] += " shared:1024";
  std::string plan = sealLines(lines);
  TempDir dir;
  RunResult cpu = runDriver(
      {"--random-inputs", "--output", "out=" + dir.path("cpu.npy")},
      gpuExecutable(), plan);
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  FakeCudaState &fake = fakeCuda();
  RunResult run = runOnFake(
      {"--random-inputs", "--output", "out=" + dir.path("gpu.npy")}, plan);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(readFile(dir.path("gpu.npy")), readFile(dir.path("cpu.npy")));
  EXPECT_EQ(fake.sharedOptIns, 1u);
  EXPECT_EQ(fake.maxDynamicShared[0], 98304); // fake_add
  EXPECT_EQ(fake.maxDynamicShared[1], 0);     // fake_scale
  ASSERT_EQ(fake.numLaunches, 4u);
  EXPECT_EQ(fake.launches[0].sharedBytes, 65536u);
  EXPECT_EQ(fake.launches[1].sharedBytes, 98304u);
  EXPECT_EQ(fake.launches[2].sharedBytes, 1024u);
  EXPECT_EQ(fake.launches[3].sharedBytes, 0u);
  expectReleased(fake);

  // --check-kernels launches the same way.
  fakeCuda();
  run = runOnFake({"--check-kernels", "--random-inputs"}, plan);
  EXPECT_EQ(run.status, 0) << run.err << run.out;
  EXPECT_EQ(fake.sharedOptIns, 1u);
  ASSERT_EQ(fake.numLaunches, 4u);
  EXPECT_EQ(fake.launches[1].sharedBytes, 98304u);
  expectReleased(fake);

  // 48 KiB needs no opt-in.
  lines = gpuPlanLines();
  lines[15] += " shared:49152";
  fakeCuda();
  run = runOnFake({"--random-inputs"}, sealLines(lines));
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(fake.sharedOptIns, 0u);
  EXPECT_EQ(fake.launches[1].sharedBytes, 49152u);
}

TEST(Cuda, ReportsDynamicSharedMemoryBeyondTheDevice) {
  std::vector<std::string> lines = gpuPlanLines();
  lines[15] += " shared:102400";
  std::string plan = sealLines(lines);
  // An sm_86's limit: 99 KiB.
  FakeCudaState &fake = fakeCuda();
  fake.sharedOptIn = 101376;
  RunResult run = runOnFake({"--random-inputs"}, plan);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err,
            errorLine("plan:16: the launch of 'fake_add' uses 102400 bytes of "
                      "dynamic shared memory, but Fake GPU allows at most "
                      "101376 per block (49152 without opting in)"));
  EXPECT_EQ(fake.numLaunches, 0u);
  EXPECT_EQ(fake.sharedOptIns, 0u);
  expectReleased(fake);

  // Within the limit, but the driver refuses the opt-in.
  fakeCuda();
  fake.failCall = "cuFuncSetAttribute";
  fake.failResult = 1;
  run = runOnFake({"--random-inputs"}, plan);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err,
            errorLine("plan:16: allowing 'fake_add' 102400 bytes of dynamic "
                      "shared memory: cuFuncSetAttribute failed: "
                      "CUDA_ERROR_INVALID_VALUE (invalid argument)"));
  EXPECT_EQ(fake.numLaunches, 0u);
  expectReleased(fake);
}

TEST(Cuda, ReportsFailingCalls) {
  std::string plan = sealLines(gpuPlanLines());
  struct Case {
    const char *call;
    int result;
    const char *error;
  };
  const Case cases[] = {
      {"cuDevicePrimaryCtxRetain", 2,
       "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_OUT_OF_MEMORY (out of "
       "memory)"},
      {"cuMemAlloc_v2", 2,
       "cannot allocate the device arena of 320 bytes (0.00 MiB) on Fake "
       "GPU: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"},
      {"cuMemsetD8_v2", 1,
       "clearing the device arena: cuMemsetD8 failed: "
       "CUDA_ERROR_INVALID_VALUE (invalid argument)"},
      {"cuMemcpyHtoD_v2", 1,
       "copying input 'x' to the device: cuMemcpyHtoD failed: "
       "CUDA_ERROR_INVALID_VALUE (invalid argument)"},
      {"cuLaunchKernel", 719,
       "plan:15: launching 'fake_add' (step 0, kernel 'add'): cuLaunchKernel "
       "failed: CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure)"},
      {"cuCtxSynchronize", 700,
       "running the GPU kernels: cuCtxSynchronize failed: "
       "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
       "encountered) (with CUDA_LAUNCH_BLOCKING=1 the failing launch is "
       "reported)"},
      {"cuMemcpyDtoH_v2", 1,
       "copying output 'out' from the device: cuMemcpyDtoH failed: "
       "CUDA_ERROR_INVALID_VALUE (invalid argument)"},
      {"cuEventCreate", 999, "cuEventCreate failed: CUDA error 999"},
  };
  TempDir dir;
  for (const Case &c : cases) {
    FakeCudaState &fake = fakeCuda();
    fake.failCall = c.call;
    fake.failResult = c.result;
    RunResult run =
        runOnFake({"--random-inputs", "--trace", dir.path("trace.json")}, plan);
    EXPECT_EQ(run.status, 1) << c.call;
    EXPECT_EQ(run.err, errorLine(c.error)) << c.call;
    EXPECT_EQ(run.out, "") << c.call; // no outputs after a failure
    expectReleased(fake);
  }
}

TEST(Cuda, ChecksEveryKernelAgainstTheCpu) {
  FakeCudaState &fake = fakeCuda();
  RunResult run =
      runOnFake({"--check-kernels", "--random-inputs", "--seed", "3"},
                sealLines(gpuPlanLines()));
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.err, "");
  // The fake functions compute what the CPU kernels do, in the same order.
  EXPECT_EQ(run.out,
            "check-kernels: 3 kernel steps of model 'scaled' on Fake GPU "
            "(compute capability 9.0) and on the CPU, each from the CPU's "
            "inputs\n"
            "tolerance: f32 1e-05 x (|cpu| + rms), f16 and bf16 2 ulp(|cpu|) "
            "+ 1 ulp(rms), rms of the output on the CPU; attention outputs "
            "also 2 ulp(terms), terms = the CPU kernel on |values|; integers, "
            "NaN and infinities exact\n"
            "step  kernel  outputs    elements  max abs err   max ulp        "
            "over  result\n"
            "   0  add           1           8            0         0         "
            "  0  PASS\n"
            "   1  addw          1           8            0         0         "
            "  0  PASS\n"
            "   2  dims          1           8            0         0         "
            "  0  PASS\n"
            "check-kernels: 3 kernel steps, 3 PASS, 0 FAIL\n");
  EXPECT_EQ(fake.numLaunches, 4u);
  // x and y, w at the start; before each step what it reads and writes
  // (not the param): x y t | t out | d. Back: t, out, d.
  EXPECT_EQ(fake.bytesToDevice, 96u + 96u + 64u + 32u);
  EXPECT_EQ(fake.bytesToHost, 96u);
  expectReleased(fake);
}

TEST(Cuda, CheckKernelsNamesTheFailingStep) {
  // Step 0's GPU function computes t = 2 x instead of x + y. Step 1 reads t
  // from the CPU, so it still passes: each kernel is judged on its own.
  std::vector<std::string> lines = gpuPlanLines();
  lines[14] = "launch add fake_scale 1 1 1 8 1 1 b:0 b:2 f32:2 i64:8";
  FakeCudaState &fake = fakeCuda();
  RunResult run =
      runOnFake({"--check-kernels", "--random-inputs"}, sealLines(lines));
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err,
            errorLine("check-kernels: 1 of 3 kernel steps differ from the CPU "
                      "beyond tolerance (the first: step 0, kernel 'add')"));
  EXPECT_NE(run.out.find("\n   0  add           1           8  "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  FAIL\n      t f32 [8]: "), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(" over 1e-05 x (|cpu| + rms "), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("; worst ["), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\n   1  addw          1           8            0 "
                         "        0           0  PASS\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("check-kernels: 3 kernel steps, 2 PASS, 1 FAIL\n"),
            std::string::npos)
      << run.out;
  expectReleased(fake);
}

TEST(Cuda, CheckKernelsAppliesTheTolerance) {
  // addw's GPU result scaled by 1 + e: within f32's 1e-5 (|cpu| + rms) for
  // e = 1e-6, beyond it for e = 1e-4.
  auto check = [](const char *e) {
    std::vector<std::string> lines = gpuPlanLines();
    lines.insert(lines.begin() + 17,
                 std::string("launch addw fake_perturb 1 1 1 8 1 1 b:2 f32:") +
                     e + " i64:8");
    fakeCuda();
    return runOnFake({"--check-kernels", "--random-inputs"}, sealLines(lines));
  };
  RunResult close = check("1e-6");
  EXPECT_EQ(close.status, 0) << close.err << close.out;
  EXPECT_EQ(close.out.find("   1  addw          1           8            0 "),
            std::string::npos)
      << close.out; // a difference, within the tolerance
  RunResult far = check("1e-4");
  EXPECT_EQ(far.status, 1);
  EXPECT_EQ(far.err,
            errorLine("check-kernels: 1 of 3 kernel steps differ from the CPU "
                      "beyond tolerance (the first: step 1, kernel 'addw')"));
  EXPECT_NE(far.out.find("      out f32 [8]: "), std::string::npos) << far.out;
}

TEST(Cuda, CheckKernelsScalesByTheTerms) {
  // t = x + y cancels (x = 1000 + i, y = 0.5 - x): t = 0.5, while its terms
  // are 2000-odd in size. With `terms add 1` the check adds 1e-5 of the
  // CPU kernel's result on |y| (x + |y|, about 2000) to f32's tolerance:
  // t off by 1e-3 x 0.5 passes with it and fails without; off by 0.1 x 0.5
  // fails either way, the rule naming the terms.
  TempDir dir;
  std::vector<float> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = 1000.0f + i;
    y[i] = 0.5f - x[i];
  }
  std::string error;
  ASSERT_TRUE(writeNpy(dir.path("x.npy"), DType::F32, {kN}, x.data(), error)) << error;
  ASSERT_TRUE(writeNpy(dir.path("y.npy"), DType::F32, {kN}, y.data(), error)) << error;
  auto check = [&](const char *e, bool terms) {
    std::vector<std::string> lines = gpuPlanLines();
    lines.insert(lines.begin() + 15,
                 std::string("launch add fake_perturb 1 1 1 8 1 1 b:2 f32:") + e +
                     " i64:8");
    if (terms)
      lines.insert(lines.begin() + 12, "terms add 1");
    fakeCuda();
    return runOnFake({"--check-kernels", "--input", "x=" + dir.path("x.npy"),
                      "--input", "y=" + dir.path("y.npy")},
                     sealLines(lines));
  };
  RunResult with = check("1e-3", true);
  EXPECT_EQ(with.status, 0) << with.err << with.out;
  EXPECT_NE(with.out.find("   0  add           1           8  "), std::string::npos)
      << with.out;
  EXPECT_NE(with.out.find("check-kernels: 3 kernel steps, 3 PASS, 0 FAIL\n"),
            std::string::npos)
      << with.out;
  RunResult without = check("1e-3", false);
  EXPECT_EQ(without.status, 1) << without.out;
  EXPECT_NE(without.out.find("      t f32 [8]: 8 of 8 over 1e-05 x (|cpu| + rms 0.5); "),
            std::string::npos)
      << without.out;
  RunResult far = check("0.1", true);
  EXPECT_EQ(far.status, 1) << far.out;
  EXPECT_NE(far.out.find("      t f32 [8]: 8 of 8 over 1e-05 x (|cpu| + rms 0.5 + terms); "),
            std::string::npos)
      << far.out;
  // The CPU's input and output were restored after the terms' run: the
  // next step (addw, from the CPU's t) passes.
  EXPECT_NE(far.out.find("   1  addw          1           8            0 "),
            std::string::npos)
      << far.out;
}

TEST(Cuda, CheckDumpWritesTheFailingSteps) {
  // Step 0 (t = x + y, with a `terms` record) 10% off on the GPU: its
  // buffers before the step, t on both devices and t's terms (x + |y|) go
  // to DIR/step-0-add/; steps 1 and 2 pass and write nothing.
  TempDir dir;
  std::vector<float> x(kN), y(kN), sum(kN), off(kN), terms(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = 1.0f + i;
    y[i] = -0.25f * i;
    sum[i] = x[i] + y[i];
    off[i] = sum[i] * (1 + 0.1f);
    terms[i] = x[i] + std::fabs(y[i]);
  }
  std::string error;
  ASSERT_TRUE(writeNpy(dir.path("x.npy"), DType::F32, {kN}, x.data(), error)) << error;
  ASSERT_TRUE(writeNpy(dir.path("y.npy"), DType::F32, {kN}, y.data(), error)) << error;
  std::vector<std::string> lines = gpuPlanLines();
  lines.insert(lines.begin() + 15, "launch add fake_perturb 1 1 1 8 1 1 b:2 f32:0.1 i64:8");
  lines.insert(lines.begin() + 12, "terms add 1");
  fakeCuda();
  std::string dump = dir.path("dump");
  RunResult run = runOnFake({"--check-kernels", "--check-dump", dump, "--input",
                             "x=" + dir.path("x.npy"), "--input", "y=" + dir.path("y.npy")},
                            sealLines(lines));
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("\n      dumped to " + dump + "/step-0-add\n   1  addw"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("dumped to " + dump + "/step-1"), std::string::npos) << run.out;
  std::string step = dump + "/step-0-add/";
  EXPECT_EQ(readF32(step + "00-x.npy"), x);
  EXPECT_EQ(readF32(step + "01-y.npy"), y);
  EXPECT_EQ(readF32(step + "02-t.npy"), std::vector<float>(kN, 0.0f)); // before
  EXPECT_EQ(readF32(step + "02-t.cpu.npy"), sum);
  EXPECT_EQ(readF32(step + "02-t.cuda.npy"), off);
  EXPECT_EQ(readF32(step + "02-t.terms.npy"), terms);
  EXPECT_FALSE(std::filesystem::exists(step + "00-x.cpu.npy")); // an input has one file
  EXPECT_FALSE(std::filesystem::exists(dump + "/step-1-addw/00-t.npy"));

  // A dump that cannot be written ends the check with the reason.
  fakeCuda();
  writeNpy(dir.path("file"), DType::F32, {kN}, x.data(), error);
  RunResult blocked = runOnFake({"--check-kernels", "--check-dump", dir.path("file"),
                                 "--input", "x=" + dir.path("x.npy"), "--input",
                                 "y=" + dir.path("y.npy")},
                                sealLines(lines));
  EXPECT_EQ(blocked.status, 1);
  EXPECT_EQ(blocked.err, errorLine("cannot create directory " + dir.path("file") +
                                   "/step-0-add: Not a directory"));
}

namespace {
// The CPU kernels of tensorMapPlanLines(): what fake_tma computes with
// their maps. tile: the 4x4 box at row 1 of an 8x8 matrix; edge: the 4x2
// box at column 4 of a tensor of 2 columns, zero beyond them.
void tileCpu(void **args) {
  const float *in = static_cast<const float *>(args[0]);
  float *out = static_cast<float *>(args[1]);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c)
      out[4 * r + c] = in[8 * (1 + r) + c];
}
void edgeCpu(void **args) {
  const float *in = static_cast<const float *>(args[0]);
  float *out = static_cast<float *>(args[1]);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c)
      out[4 * r + c] = c < 2 ? in[8 * r + 4 + c] : 0.0f;
}
const LoomKernel kTensorMapKernels[] = {
    {"tile", 2, tileCpu}, {"edge", 2, edgeCpu}, {nullptr, 0, nullptr}};

/// Tensor maps: kernel `tile` runs in two steps (on a, then on b), so its
/// one map is encoded for each; `edge` reads past its tensor's columns.
std::vector<std::string> tensorMapPlanLines() {
  return {"loom-plan 1",
          "model tiled",
          "device cpu",
          "arena 704",
          "gpu-image sm_90a ptx 9",
          "buffer 0 a input f32 8,8 0",
          "buffer 1 t output f32 4,4 256",
          "buffer 2 b input f32 8,8 320",
          "buffer 3 v output f32 4,4 576",
          "buffer 4 u output f32 2,4 640",
          "kernel tile 2",
          "kernel edge 2",
          "launch tile fake_tma 1 1 1 128 1 1 tmap:0:32:f32:8x7:32:4x4:32 b:1",
          "launch edge fake_tma 1 1 1 128 1 1 tmap:0:16:f32:2x8:32:4x2:0 b:1",
          "step tile 0 1",
          "step tile 2 3",
          "step edge 0 4"};
}

Executable tensorMapExecutable(const char *driver) {
  Executable executable = gpuExecutable(driver);
  executable.kernels = kTensorMapKernels;
  return executable;
}

std::vector<float> readOutput(const std::string &path, const Shape &shape) {
  std::vector<float> values(static_cast<size_t>(shape[0] * shape[1]));
  std::string error;
  EXPECT_TRUE(readNpy(path, "output", DType::F32, shape, values.data(), error))
      << error;
  return values;
}
} // namespace

TEST(Cuda, EncodesTensorMapsAndPassesTheirAddresses) {
  std::string plan = sealLines(tensorMapPlanLines());
  TempDir dir;
  auto outputs = [&](const std::string &tag) {
    std::vector<std::string> args = {"--random-inputs", "--seed", "5"};
    for (const char *name : {"t", "v", "u"})
      args.insert(args.end(), {"--output", std::string(name) + "=" +
                                               dir.path(tag + name + ".npy")});
    return args;
  };
  RunResult cpu = runDriver(outputs("cpu"), tensorMapExecutable("none"), plan);
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  FakeCudaState &fake = fakeCuda();
  std::vector<std::string> args = {"--device", "cuda"};
  for (const std::string &arg : outputs("gpu"))
    args.push_back(arg);
  RunResult gpu =
      runDriver(args, tensorMapExecutable(LOOM_FAKE_CUDA_DRIVER), plan);
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  // The tiles the maps address, out-of-bounds elements zero.
  for (const char *name : {"t", "v", "u"})
    EXPECT_EQ(readFile(dir.path(std::string("gpu") + name + ".npy")),
              readFile(dir.path(std::string("cpu") + name + ".npy")))
        << name;
  std::vector<float> u = readOutput(dir.path("gpuu.npy"), {2, 4});
  EXPECT_EQ(u[2], 0.0f);
  EXPECT_EQ(u[7], 0.0f);
  EXPECT_NE(u[0], 0.0f);

  // One map per step, in one block after the arena, in step order.
  EXPECT_EQ(fake.tensorMapsEncoded, 3u);
  EXPECT_EQ(fake.lastAllocation, 3u * 128u);
  ASSERT_EQ(fake.numLaunches, 3u);
  uint64_t maps = fake.launches[0].params[0];
  EXPECT_EQ(maps % 64, 0u);
  EXPECT_EQ(fake.launches[1].params[0], maps + 128);
  EXPECT_EQ(fake.launches[2].params[0], maps + 256);
  uint64_t arena = fake.launches[0].params[1] - 256;  // b:1 is t
  EXPECT_EQ(fake.launches[1].params[1], arena + 576); // v
  EXPECT_EQ(fake.launches[2].params[1], arena + 640); // u
  // What each launch's kernel read through its pointer.
  const uint64_t addresses[] = {arena + 32, arena + 320 + 32, arena + 16};
  for (unsigned i = 0; i < 3; ++i) {
    const FakeTensorMap &map = fake.launches[i].tensorMap;
    EXPECT_EQ(map.magic, FakeTensorMap::kMagic) << i;
    EXPECT_EQ(map.globalAddress, addresses[i]) << i;
    EXPECT_EQ(map.dataType, 7u) << i; // CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    EXPECT_EQ(map.rank, 2u) << i;
    EXPECT_EQ(map.globalStrides[0], 32u) << i;
    EXPECT_EQ(map.elementStrides[0], 1u) << i;
    EXPECT_EQ(map.elementStrides[1], 1u) << i;
    EXPECT_EQ(map.interleave, 0u) << i;  // CU_TENSOR_MAP_INTERLEAVE_NONE
    EXPECT_EQ(map.l2Promotion, 2u) << i; // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
    EXPECT_EQ(map.oobFill, 0u) << i;     // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
  }
  const FakeTensorMap &tile = fake.launches[1].tensorMap;
  EXPECT_EQ(tile.globalDim[0], 8u);
  EXPECT_EQ(tile.globalDim[1], 7u);
  EXPECT_EQ(tile.boxDim[0], 4u);
  EXPECT_EQ(tile.boxDim[1], 4u);
  EXPECT_EQ(tile.swizzle, 1u); // CU_TENSOR_MAP_SWIZZLE_32B
  const FakeTensorMap &edge = fake.launches[2].tensorMap;
  EXPECT_EQ(edge.globalDim[0], 2u);
  EXPECT_EQ(edge.globalDim[1], 8u);
  EXPECT_EQ(edge.boxDim[0], 4u);
  EXPECT_EQ(edge.boxDim[1], 2u);
  EXPECT_EQ(edge.swizzle, 0u); // CU_TENSOR_MAP_SWIZZLE_NONE
  expectReleased(fake);

  // --check-kernels runs step by step with the same maps.
  fakeCuda();
  RunResult check =
      runDriver({"--device", "cuda", "--check-kernels", "--random-inputs"},
                tensorMapExecutable(LOOM_FAKE_CUDA_DRIVER), plan);
  EXPECT_EQ(check.status, 0) << check.err << check.out;
  EXPECT_NE(check.out.find("3 kernel steps, 3 PASS, 0 FAIL"), std::string::npos)
      << check.out;
  EXPECT_EQ(fake.launches[1].params[0], fake.launches[0].params[0] + 128);
  expectReleased(fake);
}

TEST(Cuda, ReportsTensorMapsTheDriverCannotMake) {
  std::string plan = sealLines(tensorMapPlanLines());
  const std::string where =
      "plan:13: encoding the tensor map of launch argument 0 "
      "('tmap:0:32:f32:8x7:32:4x4:32') of 'fake_tma' on buffer 'a' (step 0): ";
  FakeCudaState &fake = fakeCuda();
  fake.failCall = "cuTensorMapEncodeTiled";
  fake.failResult = 1;
  RunResult run = runDriver({"--device", "cuda", "--random-inputs"},
                            tensorMapExecutable(LOOM_FAKE_CUDA_DRIVER), plan);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, errorLine(where + "cuTensorMapEncodeTiled failed: "
                                       "CUDA_ERROR_INVALID_VALUE (invalid "
                                       "argument)"));
  EXPECT_EQ(fake.numLaunches, 0u);
  expectReleased(fake);

  // A driver before CUDA 12 has no tensor maps: plans with them fail to
  // open, others run.
  run = runDriver({"--device", "cuda", "--random-inputs"},
                  tensorMapExecutable(LOOM_FAKE_CUDA_DRIVER_OLD), plan);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err,
            errorLine(where + "the CUDA driver " LOOM_FAKE_CUDA_DRIVER_OLD
                              " has no function cuTensorMapEncodeTiled (is it "
                              "too old? tensor maps need CUDA 12 or later)"));
  run = runDriver({"--device", "cuda", "--random-inputs"},
                  gpuExecutable(LOOM_FAKE_CUDA_DRIVER_OLD),
                  sealLines(gpuPlanLines()));
  EXPECT_EQ(run.status, 0) << run.err;
}

#endif // LOOM_FAKE_CUDA_DRIVER

#ifdef LOOM_FAKE_CUDA_DRIVER

namespace {
/// A training step in 2 microbatches: g = x + w per microbatch, gm their
/// mean (an accumulate step), next.w = w + gm.
std::vector<std::string> microbatchedPlanLines() {
  return {"loom-plan 1",
          "model micro",
          "device cpu",
          "arena 384",
          "gpu-image sm_90 ptx 9",
          "buffer 0 x input f32 8 0",
          "buffer 1 w param f32 8 64 normal 1",
          "buffer 2 g temp f32 8 128",
          "buffer 3 gm temp f32 8 192",
          "buffer 4 next.w output f32 8 256",
          "kernel add 3",
          "launch add fake_add 1 1 1 8 1 1 b:0 b:1 b:2 i32:8",
          "step add 0 1 2",
          "accumulate 2 3",
          "step add 1 3 4",
          "optimizer sgd 3 lr=0.1 microbatches=2",
          "update 4 1"};
}
} // namespace

TEST(Cuda, TrainsInMicrobatchesWithTheAccumulatesOnTheDevice) {
  TempDir dir;
  std::string plan = sealLines(microbatchedPlanLines());
  auto train = [&](const std::string &tag, bool cuda) {
    return trainOnFake(dir, plan, tag, cuda);
  };
  RunResult cpu = train("cpu", false);
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  FakeCudaState &fake = fakeCuda();
  RunResult gpu = train("gpu", true);
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  EXPECT_EQ(gpu.out.substr(0, gpu.out.find("checkpoint")),
            cpu.out.substr(0, cpu.out.find("checkpoint")));
  // Three steps of the mean of two microbatches' x + w: the CPU's params.
  EXPECT_EQ(readFile(dir.path("gpu.ckpt")), readFile(dir.path("cpu.ckpt")));
  // Per step: x + w and the accumulate per microbatch, then the update.
  ASSERT_EQ(fake.numLaunches, 3 * 5u);
  const char *expected[] = {"fake_add", "loom_accumulate", "fake_add",
                            "loom_accumulate", "fake_add"};
  for (unsigned i = 0; i < 5; ++i)
    EXPECT_STREQ(fake.launches[i].function, expected[i]) << i;
  // The accumulate's mode: 2 microbatches (<< 2), the first copies (1),
  // the last divides (2); 8 elements.
  EXPECT_EQ(fake.launches[1].params[3], (2u << 2) | 1u);
  EXPECT_EQ(fake.launches[3].params[3], (2u << 2) | 2u);
  EXPECT_EQ(fake.launches[1].params[2], 8u);
  // x per microbatch (the first with w, once), the update on the device.
  EXPECT_EQ(fake.bytesToDevice, 64u + 5 * 32u);
  expectReleased(fake);

  // The accumulate's launch failing names the step, the buffers and the
  // microbatch.
  FakeCudaState &failing = fakeCuda();
  failing.failFunction = "loom_accumulate";
  failing.failResult = 1; // CUDA_ERROR_INVALID_VALUE
  RunResult failed = train("gpu2", true);
  EXPECT_EQ(failed.status, 1);
  EXPECT_NE(failed.err.find("accumulating 'g' into 'gm' (step 1, microbatch 0): "
                            "cuLaunchKernel failed"),
            std::string::npos)
      << failed.err;
}

#endif // LOOM_FAKE_CUDA_DRIVER
