//===- TestUtil.h - Temp files and plan helpers for tests -------*- C++ -*-===//

#ifndef LOOM_TEST_UNIT_RUNTIME_TESTUTIL_H
#define LOOM_TEST_UNIT_RUNTIME_TESTUTIL_H

#include "loom/runtime/exec/Driver.h"
#include "loom/runtime/plan/KernelABI.h"
#include "loom/runtime/support/Shape.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom::test {

/// A fresh directory, removed with everything in it when this goes away.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  /// `name` inside the directory.
  std::string path(const std::string &name) const { return root + "/" + name; }

private:
  std::string root;
};

void writeFile(const std::string &path, const std::string &bytes);

/// The number of elements of `shape`.
uint64_t product(const runtime::Shape &shape);
/// Row-major linear index of `position` in `shape`.
uint64_t linear(const runtime::Shape &shape, const std::vector<uint64_t> &position);
/// Advances an odometer over `shape`; false after the last position.
bool next(const runtime::Shape &shape, std::vector<uint64_t> &position);
/// The bytes of `path`; a test failure where it cannot be read.
std::string readFile(const std::string &path);

/// The example plan of docs/plan-format.md (the one-rank mlp), without its
/// `end` record.
std::vector<std::string> examplePlanLines();

/// Joins `lines` with '\n' (each line terminated) and appends the `end`
/// record with the right checksum.
std::string sealLines(const std::vector<std::string> &lines);
/// The error parsePlan gives for the sealed `lines` (a failure when it
/// parses them).
std::string planErrorOf(const std::vector<std::string> &lines);

/// What runMain printed and returned.
struct RunResult {
  int status = -1;
  std::string out;
  std::string err;
};

/// When set, the runs below write to the process's stdout and stderr
/// instead of capturing them (their RunResult has no text): a death test's
/// parent reads what a run that ends the process printed.
extern bool passThroughOutput;

/// Calls runMain with argv = {"model", args...}, capturing its output.
RunResult runDriver(const std::vector<std::string> &args,
                    const LoomKernel *kernels, const std::string &plan);

/// Calls runMain with argv = {"model", args...} and `executable` (whose
/// `plan` is ignored: `plan` is used instead), capturing its output.
RunResult runDriver(const std::vector<std::string> &args,
                    loom::runtime::Executable executable,
                    const std::string &plan);

/// Calls runMain with argv = {"model", args...}, `executable` with `plan`
/// and `spmdPlan`, on `ranks` in-process ranks (threads of one
/// loom::runtime::LocalWorld; none for 1 rank), capturing each rank's
/// output. Result r is rank r's.
std::vector<RunResult> runDriverRanks(unsigned ranks,
                                      const std::vector<std::string> &args,
                                      loom::runtime::Executable executable,
                                      const std::string &plan,
                                      const std::string &spmdPlan);

/// As runDriverRanks, rank r given argsOf(r) and its executable's build
/// id buildIdOf(r) (ranks that disagree).
std::vector<RunResult>
runDriverRanksEach(unsigned ranks,
                   const std::function<std::vector<std::string>(unsigned)> &argsOf,
                   const std::function<const char *(unsigned)> &buildIdOf,
                   loom::runtime::Executable executable, const std::string &plan,
                   const std::string &spmdPlan);

/// Elements in the fake kernels' buffers.
constexpr int kFakeElements = 8;
/// Fake kernels over f32[kFakeElements] buffers: out = a + b, and out = in.
void fakeAddF32(void **args);
void fakeCopyF32(void **args);

} // namespace loom::test

#endif // LOOM_TEST_UNIT_RUNTIME_TESTUTIL_H
