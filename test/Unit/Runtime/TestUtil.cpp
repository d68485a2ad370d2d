//===- TestUtil.cpp - Temporary files and plan helpers for runtime tests --===//

#include "TestUtil.h"

#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/exec/Driver.h"
#include "loom/runtime/plan/Plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace loom::test;

TempDir::TempDir() {
  std::string pattern = testing::TempDir() + "loom-runtime-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  const char *made = mkdtemp(buffer.data());
  EXPECT_NE(made, nullptr) << "cannot create " << pattern;
  root = made ? made : pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
}

void loom::test::writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(file.good()) << "cannot write " << path;
}

std::string loom::test::readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  // A file a run should have written: comparing two missing ones as two
  // empty strings had passed.
  if (!file) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::string loom::test::sealLines(const std::vector<std::string> &lines) {
  std::string body;
  for (const std::string &line : lines)
    body += line + "\n";
  return loom::runtime::sealPlan(body);
}

std::string loom::test::planErrorOf(const std::vector<std::string> &lines) {
  loom::runtime::Plan plan;
  std::string error;
  EXPECT_FALSE(loom::runtime::parsePlan(sealLines(lines), plan, error));
  return error;
}

/// The whole contents of a tmpfile().
static std::string drain(std::FILE *file) {
  std::string text;
  std::rewind(file);
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0)
    text.append(chunk, n);
  std::fclose(file);
  return text;
}

RunResult loom::test::runDriver(const std::vector<std::string> &args,
                                const LoomKernel *kernels,
                                const std::string &plan) {
  loom::runtime::Executable executable;
  executable.kernels = kernels;
  return runDriver(args, executable, plan);
}

/// runMain with argv = {"model", args...} and `executable` as given.
bool loom::test::passThroughOutput = false;

static RunResult invoke(const std::vector<std::string> &args,
                        const loom::runtime::Executable &executable) {
  std::vector<std::string> storage = {"model"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char *> argv;
  for (std::string &arg : storage)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  RunResult result;
  if (loom::test::passThroughOutput) {
    result.status = loom::runtime::runMain(static_cast<int>(storage.size()), argv.data(),
                                           executable, stdout, stderr);
    return result;
  }
  std::FILE *out = std::tmpfile();
  std::FILE *err = std::tmpfile();
  if (!out || !err) {
    ADD_FAILURE() << "tmpfile failed";
    return result;
  }
  result.status = loom::runtime::runMain(static_cast<int>(storage.size()),
                                         argv.data(), executable, out, err);
  result.out = drain(out);
  result.err = drain(err);
  return result;
}

RunResult loom::test::runDriver(const std::vector<std::string> &args,
                                loom::runtime::Executable executable,
                                const std::string &plan) {
  executable.plan = plan.c_str();
  return invoke(args, executable);
}

std::vector<RunResult>
loom::test::runDriverRanks(unsigned ranks, const std::vector<std::string> &args,
                           loom::runtime::Executable executable,
                           const std::string &plan,
                           const std::string &spmdPlan) {
  if (ranks == 1) {
    executable.plan = plan.c_str();
    executable.spmdPlan = spmdPlan.c_str();
    return {invoke(args, executable)};
  }
  return runDriverRanksEach(
      ranks, [&](unsigned) { return args; },
      [&](unsigned) { return executable.buildId; }, executable, plan, spmdPlan);
}

std::vector<loom::test::RunResult> loom::test::runDriverRanksEach(
    unsigned ranks, const std::function<std::vector<std::string>(unsigned)> &argsOf,
    const std::function<const char *(unsigned)> &buildIdOf,
    loom::runtime::Executable executable, const std::string &plan,
    const std::string &spmdPlan) {
  executable.plan = plan.c_str();
  executable.spmdPlan = spmdPlan.c_str();
  std::vector<RunResult> results(ranks);
  // A short timeout: ranks that disagree fail the test instead of hanging.
  loom::runtime::runLocalRanks(
      ranks,
      [&](unsigned rank, loom::runtime::Communicator &comm) {
        loom::runtime::Executable mine = executable;
        mine.communicator = &comm;
        mine.buildId = buildIdOf(rank);
        results[rank] = invoke(argsOf(rank), mine);
      },
      20);
  return results;
}

void loom::test::fakeAddF32(void **args) {
  const float *a = static_cast<const float *>(args[0]);
  const float *b = static_cast<const float *>(args[1]);
  float *out = static_cast<float *>(args[2]);
  for (int i = 0; i < kFakeElements; ++i)
    out[i] = a[i] + b[i];
}

void loom::test::fakeCopyF32(void **args) {
  std::memcpy(args[1], args[0], kFakeElements * sizeof(float));
}

uint64_t loom::test::product(const runtime::Shape &shape) {
  uint64_t count = 1;
  for (int64_t dim : shape)
    count *= static_cast<uint64_t>(dim);
  return count;
}

uint64_t loom::test::linear(const runtime::Shape &shape,
                            const std::vector<uint64_t> &position) {
  uint64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    index = index * static_cast<uint64_t>(shape[d]) + position[d];
  return index;
}

bool loom::test::next(const runtime::Shape &shape,
                        std::vector<uint64_t> &position) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (++position[d] < static_cast<uint64_t>(shape[d]))
      return true;
    position[d] = 0;
  }
  return false;
}

std::vector<std::string> loom::test::examplePlanLines() {
  return {
      "loom-plan 1",
      "model mlp",
      "device cpu",
      "arena 4792320",
      "buffer 0 x input bf16 64,512 0",
      "buffer 1 w1 param bf16 512,2048 65536 normal 0.02",
      "buffer 2 b1 param f32 2048 2162688 zeros",
      "buffer 3 w2 param bf16 2048,512 2170880 normal 0.02",
      "buffer 4 t4 temp f32 64,2048 4268032",
      "buffer 5 y output bf16 64,512 0",
      "kernel k0 4",
      "kernel k1 3",
      "step k0 0 1 2 4",
      "step k1 4 3 5",
  };
}
