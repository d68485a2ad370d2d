//===- DriverTest.cpp - The command line of compiled executables ----------===//

#include "TestUtil.h"

#include "loom/runtime/io/Npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace loom::runtime;
using loom::test::readFile;
using loom::test::runDriver;
using loom::test::RunResult;
using loom::test::sealLines;
using loom::test::TempDir;

namespace {
constexpr int kN = loom::test::kFakeElements;

const LoomKernel kKernels[] = {{"add", 3, loom::test::fakeAddF32},
                               {"copy", 2, loom::test::fakeCopyF32},
                               {nullptr, 0, nullptr}};

/// out = x + y + w, with a temp in x's bytes and out in y's.
std::string plan(const char *wInit = "normal 1", const char *device = "cpu") {
  return sealLines(
      {"loom-plan 1", "model adder", std::string("device ") + device,
       "arena 256", "buffer 0 x input f32 8 0", "buffer 1 y input f32 8 64",
       std::string("buffer 2 w param f32 8 128 ") + wInit,
       "buffer 3 t temp f32 8 192", "buffer 4 s temp f32 8 0",
       "buffer 5 out output f32 8 64", "kernel add 3", "kernel copy 2",
       "step add 0 1 3", "step add 3 2 4", "step copy 4 5"});
}

std::vector<float> readF32(const std::string &path, Shape shape = {kN}) {
  std::vector<float> values(kN);
  std::string error;
  EXPECT_TRUE(readNpy(path, "output", DType::F32, shape, values.data(), error))
      << error;
  return values;
}

void writeF32(const std::string &path, const std::vector<float> &values) {
  std::string error;
  EXPECT_TRUE(writeNpy(path, DType::F32, {static_cast<int64_t>(values.size())},
                       values.data(), error))
      << error;
}
} // namespace

TEST(Driver, HelpAndInfo) {
  RunResult help = runDriver({"--help"}, kKernels, plan());
  EXPECT_EQ(help.status, 0);
  EXPECT_EQ(help.out.find("usage: model [options]\n"), 0u);
  EXPECT_NE(help.out.find("--random-inputs"), std::string::npos);
  EXPECT_EQ(help.err, "");

  RunResult info = runDriver({"--info"}, kKernels, plan("ones"));
  EXPECT_EQ(info.status, 0) << info.err;
  EXPECT_EQ(info.out, "model    adder\n"
                      "device   cpu\n"
                      "arena    256 bytes (0.00 MiB, peak of the memory plan)\n"
                      "buffers  6\n"
                      "  id name role   dtype shape offset bytes init\n"
                      "   0 x    input  f32   [8]        0    32\n"
                      "   1 y    input  f32   [8]       64    32\n"
                      "   2 w    param  f32   [8]      128    32 ones\n"
                      "   3 t    temp   f32   [8]      192    32\n"
                      "   4 s    temp   f32   [8]        0    32\n"
                      "   5 out  output f32   [8]       64    32\n"
                      "kernels  2\n"
                      "  add (3 buffers)\n"
                      "  copy (2 buffers)\n"
                      "steps    3\n");
}

TEST(Driver, RunsWithInputFilesAndWritesOutputs) {
  TempDir dir;
  std::vector<float> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 100.0f;
  }
  writeF32(dir.path("x.npy"), x);
  writeF32(dir.path("y.npy"), y);
  RunResult run = runDriver({"--input", "x=" + dir.path("x.npy"),
                             "--input=y=" + dir.path("y.npy"), "--output",
                             "out=" + dir.path("out.npy"), "--trace",
                             dir.path("trace.json")},
                            kKernels, plan("constant 0.5"));
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, ""); // every output went to a file
  EXPECT_EQ(run.err, "");
  std::vector<float> out = readF32(dir.path("out.npy"));
  for (int i = 0; i < kN; ++i)
    EXPECT_EQ(out[i], static_cast<float>(i) + 100.5f);
  std::string trace = readFile(dir.path("trace.json"));
  EXPECT_EQ(trace.find("{\"traceEvents\":["), 0u);
  size_t events = 0;
  for (size_t at = trace.find("\"ph\":\"X\""); at != std::string::npos;
       at = trace.find("\"ph\":\"X\"", at + 1))
    ++events;
  EXPECT_EQ(events, 3u);
}

TEST(Driver, SummarizesOutputsNotWrittenToFiles) {
  RunResult run =
      runDriver({"--random-inputs", "--seed", "5"}, kKernels, plan("ones"));
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.find("out: f32 [8] mean "), 0u) << run.out;
  EXPECT_NE(run.out.find(" min "), std::string::npos);
  EXPECT_NE(run.out.find(" max "), std::string::npos);
  EXPECT_NE(run.out.find(" first ["), std::string::npos);
  EXPECT_NE(run.out.find(", ...]\n"), std::string::npos);
  // Deterministic given the seed, different for another one.
  EXPECT_EQ(
      runDriver({"--random-inputs", "--seed", "5"}, kKernels, plan("ones")).out,
      run.out);
  EXPECT_NE(
      runDriver({"--random-inputs", "--seed=6"}, kKernels, plan("ones")).out,
      run.out);
}

TEST(Driver, WritesDevicesTwiceAndSavesOverItsWeights) {
  TempDir dir;
  std::string weights = dir.path("w.safetensors");
  RunResult save = runDriver({"--save-weights", weights, "--random-inputs"},
                             kKernels, plan());
  ASSERT_EQ(save.status, 0) << save.err;
  // A checkpoint may be read and written again; /dev/null taken twice.
  RunResult again = runDriver({"--weights", weights, "--save-weights", weights,
                               "--random-inputs", "--output", "out=/dev/null",
                               "--trace", "/dev/null"},
                              kKernels, plan());
  EXPECT_EQ(again.status, 0) << again.err;
}

TEST(Driver, SavesAndLoadsWeights) {
  TempDir dir;
  std::string weights = dir.path("w.safetensors");
  writeF32(dir.path("x.npy"), std::vector<float>(kN, 1.0f));
  writeF32(dir.path("y.npy"), std::vector<float>(kN, 2.0f));
  std::vector<std::string> inputs = {"--input", "x=" + dir.path("x.npy"),
                                     "--input", "y=" + dir.path("y.npy")};
  auto runWith = [&](std::vector<std::string> extra, const std::string &out) {
    extra.insert(extra.end(), inputs.begin(), inputs.end());
    extra.push_back("--output");
    extra.push_back("out=" + out);
    RunResult run = runDriver(extra, kKernels, plan());
    EXPECT_EQ(run.status, 0) << run.err;
    return readF32(out);
  };
  std::vector<float> seeded =
      runWith({"--seed", "3", "--save-weights", weights}, dir.path("a.npy"));
  std::vector<float> loaded =
      runWith({"--seed", "4", "--weights", weights}, dir.path("b.npy"));
  std::vector<float> other = runWith({"--seed", "4"}, dir.path("c.npy"));
  EXPECT_EQ(seeded, loaded);
  EXPECT_NE(seeded, other);
}

TEST(Driver, WarnsAboutExtraWeights) {
  TempDir dir;
  // Save the weights of a model with an extra param, load into ours.
  std::string bigger = sealLines({"loom-plan 1", "model adder", "device cpu",
                                  "arena 256", "buffer 0 w param f32 8 0 ones",
                                  "buffer 1 extra param f32 2 64 ones"});
  std::string weights = dir.path("w.safetensors");
  RunResult save = runDriver({"--save-weights", weights}, kKernels, bigger);
  ASSERT_EQ(save.status, 0) << save.err;
  RunResult load =
      runDriver({"--weights", weights, "--random-inputs"}, kKernels, plan());
  EXPECT_EQ(load.status, 0) << load.err;
  EXPECT_EQ(load.err, "model: warning: " + weights +
                          ": ignoring tensor 'extra', which is not a param "
                          "of model 'adder'\n");
}

TEST(Driver, ReportsUsageErrors) {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  std::string missing = dir.path("missing.npy");
  std::vector<float> wrong(3, 0.0f);
  writeF32(dir.path("wrong.npy"), wrong);
  const Case cases[] = {
      {{},
       "input 'x' (f32 [8]) is not given: pass --input x=FILE.npy, or "
       "--random-inputs"},
      {{"--input", "y=" + missing},
       "input 'x' (f32 [8]) is not given: pass --input x=FILE.npy, or "
       "--random-inputs"},
      {{"--input", "x=" + missing, "--random-inputs"},
       "input 'x': cannot open " + missing + ": No such file or directory"},
      {{"--input", "x=" + dir.path("wrong.npy"), "--random-inputs"},
       "input 'x': file " + dir.path("wrong.npy") +
           " has shape [3], expected [8]"},
      {{"--input", "q=a.npy"},
       "model 'adder' has no input named 'q' (its inputs: x, y)"},
      {{"--input", "w=a.npy"},
       "model 'adder' has no input named 'w' (its inputs: x, y)"},
      {{"--input", "x=a.npy", "--input", "x=b.npy"},
       "input 'x' is given twice"},
      {{"--output", "nope=o.npy", "--random-inputs"},
       "model 'adder' has no output named 'nope' (its outputs: out)"},
      {{"--input", "x"}, "option '--input' expects NAME=FILE.npy, got 'x'"},
      {{"--input", "=x.npy"},
       "option '--input' expects NAME=FILE.npy, got '=x.npy'"},
      {{"--output"}, "option '--output' needs a value"},
      {{"--seed", "-1"},
       "bad seed '-1' (expected an integer from 0 to 2^64-1)"},
      {{"--seed", "18446744073709551616"},
       "bad seed '18446744073709551616' (expected an integer from 0 to "
       "2^64-1)"},
      {{"--seed", "1", "--seed", "2"}, "option '--seed' given twice"},
      {{"--repeat", "0"},
       "bad --repeat '0' (expected a positive integer, at most 1000000)"},
      {{"--repeat", "1000001"},
       "bad --repeat '1000001' (expected a positive integer, at most 1000000)"},
      {{"--repeat", "2", "--repeat", "3"}, "option '--repeat' given twice"},
      {{"--weights", "a", "--weights", "b"}, "option '--weights' given twice"},
      {{"--device", "tpu"}, "unknown device 'tpu' (expected cpu or cuda)"},
      {{"--device", "cuda"}, "this executable was built without GPU kernels"},
      {{"--device", "cuda", "--info"},
       "this executable was built without GPU kernels"},
      {{"--bogus"}, "unknown option '--bogus' (see --help)"},
      {{"--info=yes"}, "option '--info' takes no value"},
      {{"stray"}, "unexpected argument 'stray' (see --help)"},
      {{"--random-inputs", "generate"},
       "unexpected argument 'generate' (a command comes first: generate [options])"},
      {{"--weights", missing, "--random-inputs"},
       "cannot open " + missing + ": No such file or directory"},
      {{"--random-inputs", "--output", "out=" + dir.path("no/dir/o.npy")},
       "output 'out': cannot write " + dir.path("no/dir/o.npy") +
           ": No such file or directory"},
      // No file is both read and written, or written twice (--output onto
      // --input, or one weights file, replaced what it read silently); the
      // same path spelled otherwise is the same file.
      {{"--input", "x=" + dir.path("wrong.npy"), "--random-inputs",
        "--output", "out=" + dir.path("./wrong.npy")},
       "--output out=" + dir.path("./wrong.npy") +
           " would overwrite --input x=" + dir.path("wrong.npy") +
           ": write to another file"},
      {{"--random-inputs", "--output", "out=w.st", "--save-weights", "w.st"},
       "--save-weights w.st and --output out=w.st write the same file"},
      {{"--random-inputs", "--trace", "t.json", "--output", "out=./t.json"},
       "--trace t.json and --output out=./t.json write the same file"},
      // A checkpoint is written to PATH.tmp first, and renamed: that file
      // was replaced and then deleted (a --data corpus.tmp beside --save
      // corpus, a log).
      {{"train", "--log", "ck.tmp", "--save", "ck"},
       "--log ck.tmp and --save ck (through ck.tmp) write the same file"},
      {{"--random-inputs", "--input", "x=" + dir.path("in.tmp"), "--save-weights",
        dir.path("in")},
       "--save-weights " + dir.path("in") + " (through " + dir.path("in.tmp") +
           ") would overwrite --input x=" + dir.path("in.tmp") + ": write to another file"},
      // --save-weights over the checkpoint --resume reads left weights
      // where the checkpoint was (--save over it continues it).
      {{"train", "--resume", "r.st", "--save-weights", "r.st"},
       "--save-weights r.st would overwrite --resume r.st, a training checkpoint, with "
       "weights alone (its optimizer state and step gone): write to another file"},

  };
  for (const Case &c : cases) {
    RunResult run = runDriver(c.args, kKernels, plan());
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err, "model: error: " + c.error + "\n");
  }
}

TEST(Driver, ValidatesThePlanAndKernelsFirst) {
  std::string corrupted = plan();
  corrupted[corrupted.find("adder")] = 'A';
  RunResult run = runDriver({"--info"}, kKernels, corrupted);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err.find("model: error: plan:16: checksum mismatch"), 0u)
      << run.err;

  const LoomKernel noCopy[] = {{"add", 3, loom::test::fakeAddF32}, {nullptr, 0, nullptr}};
  run = runDriver({"--random-inputs"}, noCopy, plan());
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, "model: error: plan:12: kernel 'copy' is not provided "
                     "by this executable\n");

  run = runDriver({}, kKernels, "");
  EXPECT_EQ(run.err,
            "model: error: plan:1: empty plan (expected 'loom-plan 1')\n");

  // A plan for cuda runs on cuda by default, which needs a gpu-image.
  for (const char *args : {"--random-inputs", "--info"}) {
    run = runDriver({args}, kKernels, plan("ones", "cuda"));
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err,
              "model: error: this executable was built without GPU kernels\n");
  }
  run = runDriver({"--device", "cpu"}, kKernels, plan("ones", "cuda"));
  EXPECT_EQ(run.err, "model: error: this executable was built for cuda; its "
                     "kernels cannot run with --device cpu\n");
}

TEST(Driver, ChecksTheCpuTargetRecord) {
  Executable executable;
  executable.kernels = kKernels;
  // What the kernels were compiled for is on the --info page.
  executable.cpuTarget = "x86-64 f32=sse bf16=sse needs=";
  RunResult run = runDriver({"--info"}, executable, plan());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("cpu      x86-64 kernels; matmul f32: sse, bf16: sse\n"),
            std::string::npos)
      << run.out;
  run = runDriver({"--random-inputs"}, executable, plan());
  EXPECT_EQ(run.status, 0) << run.err;

  // A record the runtime cannot read stops the run before any kernel.
  executable.cpuTarget = "znver5 needs=avx2,sse9";
  run = runDriver({"--random-inputs"}, executable, plan());
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, "model: error: loom_cpu_target: unknown CPU feature 'sse9' in "
                     "the CPU target record\n");
}
