//===- Options.h - The command line of compiled executables -----*- C++ -*-===//

#ifndef LOOM_RUNTIME_SUPPORT_OPTIONS_H
#define LOOM_RUNTIME_SUPPORT_OPTIONS_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace loom::runtime {

/// NAME=FILE pairs of --input and --output, in command-line order.
using NamedFiles = std::vector<std::pair<std::string, std::string>>;

/// The parsed command line of a compiled executable.
struct RunOptions {
  std::string device; // "cpu" or "cuda"; empty: the plan's device
  uint64_t seed = 0;
  bool seedGiven = false; // --seed was on the command line
  std::string weights;     // --weights FILE.safetensors
  std::string saveWeights; // --save-weights FILE.safetensors
  NamedFiles inputs;
  NamedFiles outputs;
  bool randomInputs = false;
  std::string trace; // --trace FILE.json
  bool checkKernels = false;
  /// --check-dump DIR: with --check-kernels, each failing step's inputs and
  /// both devices' outputs as .npy files under DIR (exec/KernelCheck.h).
  std::string checkDump;
  bool checkNumerics = false; // --check-numerics
  bool moeStats = false;      // --moe-stats
  /// train --schedule: a pipelined plan's schedule instead of the one it
  /// was compiled with (the stages' programs do not depend on it).
  std::string schedule;
  /// --collective-timeout: seconds a collective may wait (0: no limit).
  double collectiveTimeout = 600;
  /// --repeat N: run an inference N times (its outputs are the last run's).
  uint64_t repeat = 1;
  bool info = false;
  bool help = false;
  bool version = false; // --version
  /// `./model train`: run the training plan's steps.
  bool train = false;
  uint64_t steps = 0;  // --steps N; 0: the plan's
  std::string log;     // --log FILE.jsonl
  std::string data;    // --data FILE: the token stream
  bool shuffle = false; // --shuffle: --data's windows at random offsets
  std::string save;    // --save CKPT
  std::string resume;  // --resume CKPT
  uint64_t saveEvery = 0; // --save-every K; 0: after the last step only
  /// train --eval-data FILE: the held-out loss after every --eval-every K
  /// steps (0: after the last only), over --eval-batches N (0: as many
  /// batches as FILE holds once).
  std::string evalData;
  uint64_t evalEvery = 0;
  uint64_t evalBatches = 0;
  /// `./model generate`: extend --prompt by --tokens bytes, one forward
  /// run of the plan each (exec/Generation.h).
  bool generate = false;
  std::string prompt;     // --prompt TEXT
  uint64_t tokens = 100;  // --tokens N
  double temperature = 0; // --temperature T; 0: the most likely byte
  uint64_t topK = 0;      // --top-k K; 0: every byte
  double topP = 1;        // --top-p P; 1: every byte
  /// `./model evaluate`: the mean loss of a forward over --batches
  /// batches of the --data token stream.
  bool evaluate = false;
  uint64_t batches = 0; // --batches N; 0: as many as --data holds once
};

/// Parses argv[1..argc). Options take their value as the next argument or
/// after '='. False with a message on an unknown option, a missing or bad
/// value, a repeated single-valued option, or --check-kernels with --trace
/// or --output (the driver checks that it has --device cuda).
bool parseOptions(int argc, char **argv, RunOptions &options,
                  std::string &error);

/// Where rank `rank` of a multi-rank run writes its --trace `trace`:
/// rank 0 the path itself, rank R T.rankR.json beside it.
std::string rankTracePath(const std::string &trace, unsigned rank);

/// With `ranks` ranks: whether the other ranks' traces (rankTracePath)
/// are files of the run's besides (parseOptions checked the rest). False
/// with a message otherwise.
bool checkRankFiles(const RunOptions &options, unsigned ranks, std::string &error);

/// What every rank of a multi-rank run must be given alike, as (option,
/// value) pairs in a fixed order: the command and the options that decide
/// which steps, collectives and exchanges a rank takes part in (a rank told
/// `--steps 3` where the others have 2 waits for a fourth step's sums).
/// Not the files rank 0 alone reads or writes (--input, --weights, --data,
/// --log ...), --seed, nor the sampling settings: rank 0's count. An
/// option whose argument matters on rank 0 alone (--save FILE) is "given"
/// or "".
std::vector<std::pair<std::string, std::string>> rankSharedOptions(const RunOptions &options);

/// Prints the --help text for `program`.
void printUsage(std::FILE *out, const char *program);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_OPTIONS_H
