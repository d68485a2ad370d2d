//===- loom-fuzz.cpp - Mutation fuzzing of the front end, bounded for CI ---===//
//
// Mutates seed scripts (byte edits, token insertions from the language's
// vocabulary, line swaps and splices) and runs the whole front end on each
// mutant in-process. A crash, hang or internal error fails the run; the
// input that caused it is written to --crash-file first.
//
//===----------------------------------------------------------------------===//

#include "FrontEndRunner.h"
#include "Pipeline/Pipeline.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <random>

using namespace llvm;

static cl::list<std::string> seedFiles(cl::Positional, cl::OneOrMore,
                                       cl::desc("<seed.loom>..."));
static cl::opt<unsigned> iterations("iterations", cl::init(2000),
                                    cl::desc("Mutants to run"));
static cl::opt<unsigned> seed("seed", cl::init(1),
                              cl::desc("Random seed (runs are reproducible)"));
static cl::opt<bool> lower(
    "lower", cl::init(false),
    cl::desc("Also run every CPU stage down to LLVM, and the GPU stages down "
             "to NVVM, on accepted mutants"));
static cl::opt<std::string> crashFile(
    "crash-file", cl::init("loom-fuzz-crash.loom"),
    cl::desc("Where the input of a crash or internal error is written"));

/// The mutant being run, for the crash handler.
static std::string current;

static void saveCurrent(void *) {
  std::error_code ec;
  raw_fd_ostream os(crashFile, ec);
  if (!ec)
    os << current;
  errs() << "loom-fuzz: crashing input written to " << crashFile << "\n";
}

/// Tokens that steer mutants into deeper parts of the front end.
static const char *const kVocabulary[] = {
    "mesh", "precision", "accumulate", "dim", "model", "layer", "moe",
    "input", "param", "let", "output", "return", "for", "in", "stage",
    "pipeline", "shard", "init", "train", "loss", "optimizer", "schedule",
    "microbatches", "loss_scale", "experts", "top_k", "capacity", "axis",
    "f32", "f16", "bf16", "i32", "_", "dp", "tp", "pp", "ep", "x", "h",
    "@", "+", "-", "*", "/", "=", ",", ":", "..", "(", ")", "[", "]", "{",
    "}", "\n", " ", "0", "1", "-1", "3", "7", "64", "0.5", "1e30",
    "99999999999999999999", "9223372036854775807", "gelu(", "softmax(",
    "reshape(", "transpose(", "split(", "concat(", "embedding(", "arange(",
    "layernorm(", "rmsnorm(", "sum(", "cast(", "causal_mask(", "cross_entropy(",
    "mse(", "sin(", "cos(", "silu(", "sigmoid(",
    "axis = -1", "keepdim = 1", "normal(0.02)", "zeros", "static(8)",
    "dynamic", "1f1b", "[0, 2, 1, 3]", "[-1]",
};

static std::string mutate(std::string text, std::mt19937 &rng) {
  auto pick = [&](size_t n) { return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng) : 0; };
  unsigned edits = 1 + pick(6);
  for (unsigned i = 0; i < edits; ++i) {
    size_t pos = pick(text.size() + 1);
    switch (pick(7)) {
    case 0: // delete a range
      text.erase(pos, 1 + pick(16));
      break;
    case 1: // insert a vocabulary token
      text.insert(pos, kVocabulary[pick(std::size(kVocabulary))]);
      break;
    case 2: // flip a byte
      if (!text.empty())
        text[pick(text.size())] = (char)pick(256);
      break;
    case 3: { // duplicate a range
      std::string piece = text.substr(pos, 1 + pick(64));
      text.insert(pick(text.size() + 1), piece);
      break;
    }
    case 4: { // swap two lines
      size_t a = text.find('\n', pos), b = text.find('\n', pick(text.size() + 1));
      if (a != std::string::npos && b != std::string::npos && a != b) {
        size_t ae = text.find('\n', a + 1), be = text.find('\n', b + 1);
        if (ae != std::string::npos && be != std::string::npos && ae < b)
          text = text.substr(0, a) + text.substr(b, be - b) +
                 text.substr(ae, b - ae) + text.substr(a, ae - a) + text.substr(be);
      }
      break;
    }
    case 5: // replace a digit run with a vocabulary number
      if (size_t d = text.find_first_of("0123456789", pos); d != std::string::npos)
        text.replace(d, 1, kVocabulary[56 + pick(9)]);
      break;
    default: // truncate
      text.resize(pos);
      break;
    }
  }
  return text;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "loom-fuzz: mutation fuzzing of the Loom front end\n");
  std::vector<std::string> seeds;
  for (const std::string &path : seedFiles) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
    if (!file) {
      errs() << "loom-fuzz: error: cannot read '" << path << "'\n";
      return 1;
    }
    seeds.push_back((*file)->getBuffer().str());
  }
  sys::AddSignalHandler(saveCurrent, nullptr);

  std::mt19937 rng(seed);
  mlir::DialectRegistry registry;
  loom::registerLoomCompilerDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  unsigned counts[3] = {0, 0, 0};
  for (unsigned i = 0; i < iterations; ++i) {
    // Every tenth run is a splice of two seeds, the rest mutate one.
    std::string base = seeds[rng() % seeds.size()];
    if (i % 10 == 9) {
      const std::string &other = seeds[rng() % seeds.size()];
      base = base.substr(0, rng() % (base.size() + 1)) +
             other.substr(rng() % (other.size() + 1));
    }
    current = mutate(base, rng);
    loom::FrontEndOutcome outcome = loom::runFrontEnd(context, current, lower);
    ++counts[(int)outcome];
    if (outcome == loom::FrontEndOutcome::InternalError) {
      saveCurrent(nullptr);
      errs() << "loom-fuzz: internal error on mutant " << i << "\n";
      return 1;
    }
  }
  outs() << "loom-fuzz: " << iterations << " mutants, "
         << counts[(int)loom::FrontEndOutcome::Accepted] << " accepted, "
         << counts[(int)loom::FrontEndOutcome::Rejected]
         << " rejected with diagnostics, 0 crashes\n";
  return 0;
}
