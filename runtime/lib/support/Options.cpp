//===- Options.cpp - The command line of compiled executables -------------===//

#include "loom/runtime/support/Options.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/plan/Schedule.h"
#include "loom/runtime/io/Safetensors.h"
#include "loom/runtime/support/Hash.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

using namespace loom::runtime;

/// A decimal number in [low, high] written whole (digits, one point, an
/// exponent: not strtod's hex, inf, nan or leading spaces, which --seed
/// and --steps refuse too), into `value`.
static bool parseNumberIn(std::string_view text, double low, double high,
                          double &value) {
  if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string_view::npos)
    return false;
  std::string copy(text);
  char *end = nullptr;
  double parsed = copy.empty() ? -1 : std::strtod(copy.c_str(), &end);
  if (!end || *end || !(parsed >= low && parsed <= high))
    return false;
  value = parsed;
  return true;
}

/// Whether two paths name one regular file (or one that does not exist
/// yet): the same file where both exist, else the same path once resolved.
/// Devices (/dev/null) are never "the same": writing one twice is fine.
static bool sameFile(const std::string &a, const std::string &b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto isDevice = [&](const std::string &path) {
    fs::file_status status = fs::status(path, ec);
    return fs::exists(status) && !fs::is_regular_file(status);
  };
  if (isDevice(a) || isDevice(b))
    return false;
  if (fs::equivalent(a, b, ec))
    return true;
  // Neither exists (or not both): the paths resolved as far as they exist,
  // the rest lexically ("./t.json" is "t.json").
  auto resolved = [](const std::string &path) {
    // Absolute first: weakly_canonical leaves a relative path whose first
    // element does not exist relative ("t.json" against "./t.json").
    std::error_code error;
    fs::path absolute = fs::absolute(path, error).lexically_normal();
    fs::path canonical = fs::weakly_canonical(absolute, error);
    return error ? absolute : canonical;
  };
  return resolved(a) == resolved(b);
}

/// No file a run writes is one it reads or another it writes: `--log`
/// onto `--data` replaced the training text with the log, `--output
/// y=w.st --save-weights w.st` one file with the other. A checkpoint may
/// be resumed from and saved to the same file (read whole before any step).
std::string loom::runtime::rankTracePath(const std::string &trace, unsigned rank) {
  if (rank == 0)
    return trace;
  std::string suffix = ".rank" + std::to_string(rank);
  if (trace.size() > 5 && trace.compare(trace.size() - 5, 5, ".json") == 0)
    return trace.substr(0, trace.size() - 5) + suffix + ".json";
  return trace + suffix;
}

/// Whether `path` is a training checkpoint (a .safetensors file whose
/// metadata names its checkpoint format); an unreadable file is not (its
/// loading reports why).
static bool isCheckpoint(const std::string &path) {
  SafetensorsHeader header;
  std::string error;
  return readSafetensorsHeader(path, header, error) &&
         header.metadataValue(kCheckpointVersionKey);
}

/// No file is both read and written, or written twice, by the run (with
/// `ranks` ranks: their traces too). A checkpoint may be read and written
/// again (--resume or --weights with --save), and weights by
/// --save-weights, but --save-weights over a checkpoint would turn it into
/// weights. A checkpoint is written to PATH.tmp first, which must be none
/// of the run's files either.
static bool checkFilesDistinct(const RunOptions &options, unsigned ranks,
                               std::string &error) {
  struct File {
    std::string what, path; // what: the option as the message names it
    bool checkpoint;        // --resume, --weights, --save, --save-weights
  };
  std::vector<File> reads, writes;
  auto add = [](std::vector<File> &files, const std::string &what,
                const std::string &path, bool checkpoint = false) {
    if (!path.empty())
      files.push_back({what, path, checkpoint});
  };
  auto option = [](const char *name, const std::string &path) {
    return std::string(name) + " " + path;
  };
  add(reads, option("--data", options.data), options.data);
  add(reads, option("--eval-data", options.evalData), options.evalData);
  add(reads, option("--weights", options.weights), options.weights, true);
  add(reads, option("--resume", options.resume), options.resume, true);
  for (const auto &[name, path] : options.inputs)
    add(reads, "--input " + name + "=" + path, path);
  add(writes, option("--log", options.log), options.log);
  add(writes, option("--save", options.save), options.save, true);
  add(writes, option("--save-weights", options.saveWeights), options.saveWeights, true);
  add(writes, option("--trace", options.trace), options.trace);
  for (unsigned rank = 1; rank < ranks && !options.trace.empty(); ++rank) {
    std::string path = rankTracePath(options.trace, rank);
    add(writes, "--trace's rank " + std::to_string(rank) + " file " + path, path);
  }
  for (const auto &[name, path] : options.outputs)
    add(writes, "--output " + name + "=" + path, path);
  for (const auto &[name, path] : {std::pair{"--save", &options.save},
                                   std::pair{"--save-weights", &options.saveWeights}})
    if (!path->empty())
      add(writes, option(name, *path) + " (through " + *path + ".tmp)", *path + ".tmp");
  for (const auto &[name, path] : options.outputs)
    add(writes, "--output " + name + "=" + path + " (through " + path + ".tmp)",
        path + ".tmp");
  for (size_t i = 0; i < writes.size(); ++i) {
    for (const File &read : reads) {
      // --save-weights over --resume's checkpoint, or over one given as
      // --weights, would leave weights where it was (its optimizer state
      // and step gone); --save over either continues it, and weights may
      // be saved over themselves.
      bool savesWeights = writes[i].what.rfind("--save-weights ", 0) == 0;
      bool dropsCheckpoint =
          savesWeights && (read.what.rfind("--resume ", 0) == 0 ||
                           (read.what.rfind("--weights ", 0) == 0 && isCheckpoint(read.path)));
      bool sameCheckpoint = writes[i].checkpoint && read.checkpoint && !dropsCheckpoint;
      if (!sameCheckpoint && sameFile(writes[i].path, read.path)) {
        error = writes[i].what + " would overwrite " + read.what +
                (dropsCheckpoint ? ", a training checkpoint, with weights alone "
                                   "(its optimizer state and step gone)"
                                 : "") +
                ": write to another file";
        return false;
      }
    }
    for (size_t j = 0; j < i; ++j)
      if (sameFile(writes[i].path, writes[j].path)) {
        error = writes[j].what + " and " + writes[i].what + " write the same file";
        return false;
      }
  }
  return true;
}

bool loom::runtime::checkRankFiles(const RunOptions &options, unsigned ranks,
                                   std::string &error) {
  return ranks < 2 || options.trace.empty() || checkFilesDistinct(options, ranks, error);
}

std::vector<std::pair<std::string, std::string>>
loom::runtime::rankSharedOptions(const RunOptions &options) {
  auto given = [](bool set) { return std::string(set ? "given" : ""); };
  // 0 is the default (not given) of the counts below but --repeat's.
  auto count = [](uint64_t n) { return n ? std::to_string(n) : std::string(); };
  const char *command = options.train      ? "train"
                        : options.generate ? "generate"
                        : options.evaluate ? "evaluate"
                                           : "none";
  return {{"the command", command},
          {"--help", given(options.help)},
          {"--version", given(options.version)},
          {"--info", given(options.info)},
          {"--device", options.device},
          {"--steps", count(options.steps)},
          {"--repeat", std::to_string(options.repeat)},
          {"--tokens", std::to_string(options.tokens)},
          {"--save", given(!options.save.empty())},
          {"--save-every", count(options.saveEvery)},
          {"--resume", given(!options.resume.empty())},
          {"--eval-data", given(!options.evalData.empty())},
          {"--eval-every", count(options.evalEvery)},
          {"--schedule", options.schedule},
          {"--check-kernels", given(options.checkKernels)},
          {"--check-numerics", given(options.checkNumerics)},
          {"--moe-stats", given(options.moeStats)}};
}

void loom::runtime::printUsage(std::FILE *out, const char *program) {
  std::fprintf(out, "usage: %s [options]\n", program);
  // One string per line keeps the columns readable here as well.
  static const char *const kLines[] = {
      "",
      "Runs the model compiled into this executable once: initializes or",
      "loads the params, reads the inputs, runs every kernel of the plan",
      "and writes or summarizes the outputs.",
      "",
      "options:",
      "  --device cpu|cuda       device to run on (default: the plan's,",
      "                          cpu); cuda needs GPU kernels (loomc",
      "                          --gpu) and a CUDA driver",
      "  --seed N                seed of the param initializers and of",
      "                          --random-inputs (default 0)",
      "  --weights FILE          load every param from a .safetensors file",
      "                          instead of initializing them",
      "  --save-weights FILE     write the params to a .safetensors file",
      "                          (after initialization or loading)",
      "  --input NAME=FILE.npy   read input NAME from a .npy file",
      "                          (repeatable)",
      "  --random-inputs         fill inputs not given with --input: float",
      "                          inputs normal (std 1), integers 0 or 1",
      "  --output NAME=FILE.npy  write output NAME to a .npy file",
      "                          (repeatable); outputs not written to a",
      "                          file are summarized on stdout",
      "  --trace FILE.json       write a Chrome trace, one event per step",
      "                          (per GPU launch with --device cuda)",
      "  --check-kernels         with --device cuda: run every kernel on",
      "                          the CPU and on the GPU from the same",
      "                          inputs and compare each step's results",
      "                          (a table; exit status 1 if one differs)",
      "  --check-dump DIR        with --check-kernels: write each failing",
      "                          step's inputs and both devices' outputs",
      "                          to DIR/step-N-KERNEL/ as .npy files",
      "  --collective-timeout S  on several ranks, end the run (status 1)",
      "                          when one collective waits more than S",
      "                          seconds for the others (default 600; 0:",
      "                          no limit)",
      "  --check-numerics        after every kernel step, look for NaN and",
      "                          Inf in what it wrote; name the first",
      "                          step (and its script line) that wrote",
      "                          one (exit status 1)",
      "  --repeat N              run the model N times on the same",
      "                          inputs (the outputs are the last run's;",
      "                          with --trace, every run's steps: timing)",
      "  --moe-stats             print, per MoE block and expert, the",
      "                          choices routed to it and dropped (of the",
      "                          last run of the model)",
      "  --info                  print the plan (buffers, kernels, steps)",
      "                          and exit",
      "  --help                  print this help and exit",
      "  --version               print Loom's version and the plan",
      "                          format, and exit",
      "",
      "usage: MODEL train [--steps N] [--data FILE [--shuffle]] [--log FILE.jsonl]",
      "                   [--save CKPT] [--save-every K] [--resume CKPT]",
      "                   [--schedule KIND] [--eval-data FILE [--eval-every K]",
      "                   [--eval-batches N]] [options]",
      "",
      "Trains an executable built with loomc --train: runs its optimizer",
      "step N times (default: the train section's steps) on the inputs",
      "given, copying the new params and optimizer state back after each,",
      "and prints the loss of every step.",
      "  --steps N               the number of steps",
      "  --log FILE.jsonl        one JSON object per step: step, loss, lr,",
      "                          grad_norm, loss_scale, skipped, tokens_per_s",
      "  --data FILE             the inputs tokens and labels [B, T] of each",
      "                          step from a token stream: a 1-D .npy of",
      "                          integer ids, or any file read as bytes",
      "  --shuffle               each row of --data at a random offset",
      "                          (from --seed, the step and the row), not",
      "                          the next window in order",
      "  --save CKPT             write a checkpoint (safetensors: the f32",
      "                          params, the optimizer state, the step, the",
      "                          loss scale, the seed) after the last step",
      "  --save-every K          and after every K steps (to CKPT, replaced",
      "                          atomically)",
      "  --resume CKPT           continue the run a checkpoint stopped, bit",
      "                          for bit, up to --steps (or the script's)",
      "  --schedule KIND         a pipelined executable's schedule (gpipe,",
      "                          1f1b, interleaved, zero_bubble) instead of",
      "                          the one it was built with",
      "  --eval-data FILE        the held-out loss on this token stream",
      "                          after the last step (each batch runs the",
      "                          step's program, its update discarded)",
      "  --eval-every K          and after every K steps",
      "  --eval-batches N        its batches (default: as many as FILE",
      "                          holds without wrapping)",
      "",
      "usage: MODEL generate [--prompt TEXT] [--tokens N]",
      "                      [--temperature T [--top-k K] [--top-p P]] [options]",
      "",
      "Extends a text with a causal language model (an input tokens",
      "[B, T] of byte ids, an output logits [B, T, V]): each new byte",
      "is one run of the model on the last T bytes, printed as it comes.",
      "Load trained params with --weights (a train --save checkpoint",
      "will do). Other inputs not given are zeros.",
      "  --prompt TEXT           the text to extend (default: empty)",
      "  --tokens N              the bytes to add (default 100)",
      "  --temperature T         sample from softmax(logits / T), seeded",
      "                          by --seed (default 0: the most likely)",
      "  --top-k K               sample among the K most likely bytes",
      "  --top-p P               and among the fewest most likely whose",
      "                          probability reaches P (the nucleus)",
      "",
      "usage: MODEL evaluate --data FILE [--batches N] [options]",
      "",
      "The mean loss of a forward with inputs tokens and labels [B, T]",
      "and a scalar output loss (a script with a train section, built",
      "without --train) over consecutive windows of a token stream, as",
      "train --data reads it; load the params with --weights CKPT.",
      "  --data FILE             the held-out tokens: a 1-D .npy of ids,",
      "                          or any file read as bytes",
      "  --batches N             the batches to evaluate (default: as",
      "                          many as FILE holds without wrapping)",
      "",
      "bf16 tensors are read from and written to .npy files as float32.",
      "",
      "A partitioned executable (see --info) also runs on its mesh's ranks",
      "under an MPI launcher (mpirun -np N MODEL ...); rank 0 reads and",
      "writes every file, whole, as one rank does. With --device cuda",
      "each rank takes GPU (its index on its node) % (GPUs visible), and",
      "the collectives go through NCCL (libnccl.so.2).",
  };
  for (const char *line : kLines)
    std::fprintf(out, "%s\n", line);
}


bool loom::runtime::parseOptions(int argc, char **argv, RunOptions &options,
                                 std::string &error) {
  options = RunOptions();
  bool seenDevice = false, seenSeed = false, seenTimeout = false, seenSchedule = false;
  int first = 1;
  bool seenPrompt = false, seenTemperature = false, seenTopP = false;
  if (argc > 1 && std::string_view(argv[1]) == "train") {
    options.train = true;
    first = 2;
  } else if (argc > 1 && std::string_view(argv[1]) == "generate") {
    options.generate = true;
    first = 2;
  } else if (argc > 1 && std::string_view(argv[1]) == "evaluate") {
    options.evaluate = true;
    first = 2;
  }
  // The options that count something: a positive integer each, the ones
  // that repeat a run (a byte, a batch) at most 10^6.
  struct Count {
    std::string_view name;
    uint64_t *target;
    uint64_t most;
    bool seen = false;
  };
  Count counts[] = {{"--steps", &options.steps, UINT64_MAX},
                    {"--save-every", &options.saveEvery, UINT64_MAX},
                    {"--eval-every", &options.evalEvery, UINT64_MAX},
                    {"--eval-batches", &options.evalBatches, 1000000},
                    {"--top-k", &options.topK, UINT64_MAX},
                    {"--repeat", &options.repeat, 1000000},
                    {"--tokens", &options.tokens, 1000000},
                    {"--batches", &options.batches, 1000000}};
  auto countNamed = [&](std::string_view name) -> Count * {
    for (Count &count : counts)
      if (count.name == name)
        return &count;
    return nullptr;
  };
  for (int i = first; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      bool command = arg == "train" || arg == "generate" || arg == "evaluate";
      error = "unexpected argument '" + std::string(arg) + "' (" +
              (command ? "a command comes first: " + std::string(arg) + " [options]"
                       : std::string("see --help")) +
              ")";
      return false;
    }
    std::string_view name = arg;
    std::string_view value;
    bool hasValue = false;
    size_t equals = arg.find('=');
    if (arg.substr(0, 2) == "--" && equals != std::string_view::npos) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
      hasValue = true;
    }
    // Flags first: they take no value.
    bool *flag = name == "--help" || name == "-h" ? &options.help
                 : name == "--info"               ? &options.info
                 : name == "--version"            ? &options.version
                 : name == "--random-inputs"      ? &options.randomInputs
                 : name == "--check-kernels"      ? &options.checkKernels
                 : name == "--check-numerics"     ? &options.checkNumerics
                 : name == "--moe-stats"          ? &options.moeStats
                 : name == "--shuffle"            ? &options.shuffle
                                                  : nullptr;
    if (flag) {
      if (hasValue) {
        error = "option '" + std::string(name) + "' takes no value";
        return false;
      }
      *flag = true;
      continue;
    }
    bool known = name == "--device" || name == "--seed" ||
                 name == "--weights" || name == "--save-weights" ||
                 name == "--input" || name == "--output" || name == "--trace" ||
                 name == "--steps" || name == "--log" || name == "--data" ||
                 name == "--save" || name == "--resume" ||
                 name == "--save-every" || name == "--collective-timeout" ||
                 name == "--schedule" || name == "--repeat" ||
                 name == "--prompt" || name == "--tokens" ||
                 name == "--temperature" || name == "--check-dump" ||
                 name == "--top-k" || name == "--top-p" ||
                 name == "--batches" || name == "--eval-data" ||
                 name == "--eval-every" || name == "--eval-batches";
    if (!known) {
      error = "unknown option '" + std::string(name) + "' (see --help)";
      return false;
    }
    if (!hasValue) {
      if (i + 1 >= argc) {
        error = "option '" + std::string(name) + "' needs a value";
        return false;
      }
      value = argv[++i];
    }
    auto once = [&](bool &seen) {
      if (seen) {
        error = "option '" + std::string(name) + "' given twice";
        return false;
      }
      seen = true;
      return true;
    };
    bool trainOnly = name == "--steps" || name == "--log" ||
                     name == "--data" || name == "--save" ||
                     name == "--resume" || name == "--save-every" ||
                     name == "--schedule" || name == "--eval-data" ||
                     name == "--eval-every" || name == "--eval-batches";
    // evaluate reads a token stream as train does; nothing else of train's.
    if (options.evaluate && (name == "--batches" || name == "--data")) {
      trainOnly = false;
    } else if (name == "--data" && !options.train) {
      error = "option '--data' belongs to the train and evaluate commands "
              "(MODEL train --data ..., MODEL evaluate --data ...)";
      return false;
    } else if (name == "--batches" || (options.evaluate && (trainOnly ||
                                                          name == "--repeat" ||
                                                          name == "--output"))) {
      error = name == "--batches"
                  ? "option '--batches' belongs to the evaluate command (MODEL evaluate --batches ...)"
                  : "option '" + std::string(name) + "' does not apply to the evaluate command";
      return false;
    }
    if (trainOnly && !options.train) {
      error = "option '" + std::string(name) +
              "' belongs to the train command (MODEL train " +
              std::string(name) + " ...)";
      return false;
    }
    bool generateOnly = name == "--prompt" || name == "--tokens" ||
                        name == "--temperature" || name == "--top-k" ||
                        name == "--top-p";
    if (generateOnly != options.generate &&
        (generateOnly || trainOnly || name == "--repeat" || name == "--output")) {
      error = generateOnly ? "option '" + std::string(name) +
                                 "' belongs to the generate command (MODEL generate " +
                                 std::string(name) + " ...)"
                           : "option '" + std::string(name) +
                                 "' does not apply to the generate command";
      return false;
    }
    if (name == "--repeat" && options.train) {
      error = "--repeat runs an inference several times; a training run "
              "takes --steps";
      return false;
    }
    if (name == "--prompt") {
      if (!once(seenPrompt))
        return false;
      options.prompt = std::string(value);
    } else if (Count *count = countNamed(name)) {
      if (!once(count->seen))
        return false;
      bool parsed = parseUnsigned(value, *count->target);
      if (!parsed || *count->target == 0 || *count->target > count->most) {
        error = (name == "--steps" ? "bad number of steps '"
                                   : "bad " + std::string(name) + " '") +
                std::string(value) + "' (expected a positive integer" +
                // (A number past 64 bits says so too.)
                (count->most < UINT64_MAX ||
                         (!parsed && !value.empty() &&
                          value.find_first_not_of("0123456789") == std::string_view::npos)
                     ? ", at most " + (count->most == UINT64_MAX
                                           ? std::string("2^64-1")
                                           : std::to_string(count->most))
                     : "") +
                ")";
        return false;
      }
    } else if (name == "--top-p") {
      if (!once(seenTopP))
        return false;
      if (!parseNumberIn(value, 0, 1, options.topP) || options.topP == 0) {
        error = "bad --top-p '" + std::string(value) + "' (expected a probability, 0 < P <= 1)";
        return false;
      }
    } else if (name == "--temperature") {
      if (!once(seenTemperature))
        return false;
      if (!parseNumberIn(value, 0, 1e6, options.temperature)) {
        error = "bad --temperature '" + std::string(value) +
                "' (expected a number from 0 to 1e6; 0: the most likely byte)";
        return false;
      }
    } else if (name == "--schedule") {
      if (!once(seenSchedule))
        return false;
      ScheduleKind kind;
      if (!parseScheduleKind(value, kind)) {
        error = "unknown schedule '" + std::string(value) +
                "' (expected gpipe, 1f1b, interleaved or zero_bubble)";
        return false;
      }
      options.schedule = std::string(value);
    } else if (name == "--collective-timeout") {
      if (!once(seenTimeout))
        return false;
      if (!parseNumberIn(value, 0, 1e7, options.collectiveTimeout)) {
        error = "bad --collective-timeout '" + std::string(value) +
                "' (expected seconds, from 0 to 10000000; 0: no limit)";
        return false;
      }
    } else if (name == "--device") {
      if (!once(seenDevice))
        return false;
      if (value != "cpu" && value != "cuda") {
        error = "unknown device '" + std::string(value) +
                "' (expected cpu or cuda)";
        return false;
      }
      options.device = std::string(value);
    } else if (name == "--seed") {
      if (!once(seenSeed))
        return false;
      options.seedGiven = true;
      if (!parseUnsigned(value, options.seed)) {
        error = "bad seed '" + std::string(value) +
                "' (expected an integer from 0 to 2^64-1)";
        return false;
      }
    } else if (name == "--input" || name == "--output") {
      size_t split = value.find('=');
      if (split == std::string_view::npos || split == 0 ||
          split + 1 == value.size()) {
        error = "option '" + std::string(name) +
                "' expects NAME=FILE.npy, got '" + std::string(value) + "'";
        return false;
      }
      auto &list = name == "--input" ? options.inputs : options.outputs;
      list.emplace_back(std::string(value.substr(0, split)),
                        std::string(value.substr(split + 1)));
    } else {
      std::string &target = name == "--weights"        ? options.weights
                            : name == "--save-weights" ? options.saveWeights
                            : name == "--log"          ? options.log
                            : name == "--data"         ? options.data
                            : name == "--save"         ? options.save
                            : name == "--resume"       ? options.resume
                            : name == "--check-dump"   ? options.checkDump
                            : name == "--eval-data"    ? options.evalData
                                                       : options.trace;
      if (!target.empty()) {
        error = "option '" + std::string(name) + "' given twice";
        return false;
      }
      if (value.empty()) {
        error = "option '" + std::string(name) + "' needs a file name";
        return false;
      }
      target = std::string(value);
    }
  }
  if ((options.evalEvery || options.evalBatches) && options.evalData.empty()) {
    error = std::string(options.evalEvery ? "--eval-every" : "--eval-batches") +
            " needs --eval-data FILE (the held-out token stream)";
    return false;
  }
  if (options.shuffle && (!options.train || options.data.empty())) {
    error = "--shuffle draws train --data's windows at random: it needs "
            "train and --data FILE";
    return false;
  }
  if (options.saveEvery && options.save.empty()) {
    error = "--save-every needs --save CKPT (where to write)";
    return false;
  }
  if (!options.resume.empty() && !options.weights.empty()) {
    error = "--resume and --weights both give the params: pass one";
    return false;
  }
  // The check runs the kernels one at a time on both devices: its times
  // are not a run's, and its outputs would be the CPU's.
  if (options.checkKernels && !options.trace.empty()) {
    error = "--check-kernels cannot be combined with --trace (run them "
            "separately)";
    return false;
  }
  if ((options.generate || options.evaluate) && options.checkKernels) {
    error = std::string("--check-kernels checks one run; run it without ") +
            (options.generate ? "generate" : "evaluate");
    return false;
  }
  if ((options.topK || options.topP < 1) && options.temperature == 0) {
    error = std::string(options.topK ? "--top-k" : "--top-p") +
            " narrows a sample: give --temperature T > 0 (0 takes the most likely byte)";
    return false;
  }
  if (options.evaluate && options.data.empty()) {
    error = "evaluate needs --data FILE (the held-out token stream)";
    return false;
  }
  if (!options.checkDump.empty() && !options.checkKernels) {
    error = "--check-dump writes what --check-kernels finds: add --check-kernels";
    return false;
  }
  if (options.checkKernels && !options.outputs.empty()) {
    error = "--check-kernels writes no outputs; run without it for --output";
    return false;
  }
  return checkFilesDistinct(options, 1, error);
}
