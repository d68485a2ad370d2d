//===- loom-fuzz-files.cpp - Mutation fuzzing of the runtime's readers ----===//
//
// Mutates seed files (byte flips, deletions, duplications, insertions of
// tokens the formats use and of numbers at their limits, splices of two
// seeds) and runs one reader of the runtime on each (FileTargets.h): the
// plan parser (most plan mutants resealed with a right checksum, so that
// they reach the records), the safetensors reader (header, then the params of a plan),
// or the .npy reader. The mutant being run is always on disk at
// --crash-file, so a crash leaves it there; a clean run removes it. Built
// with AddressSanitizer and UBSan where the compiler has them, so an
// out-of-bounds read is a crash too.
//
//===----------------------------------------------------------------------===//

#include "FileTargets.h"

#include "loom/runtime/plan/Plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

using namespace loom::fuzz;

namespace {
struct Options {
  FileTarget target = FileTarget::Plan;
  unsigned iterations = 2000, seed = 1;
  std::string crashFile = "loom-fuzz-files-crash", plan;
  std::vector<std::string> seeds;
};
} // namespace

static bool readFile(const std::string &path, std::string &text) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  text.assign(std::istreambuf_iterator<char>(in), {});
  return true;
}

static int usage(const char *message) {
  std::cerr << "loom-fuzz-files: " << message
            << "\nusage: loom-fuzz-files --target plan|safetensors|npy [--plan P]"
               " [--iterations N] [--seed S] [--crash-file F] SEED...\n";
  return 2;
}

/// Tokens of the plan format, the safetensors JSON header and the .npy
/// header dict, and numbers at the limits of the readers' integers.
static const char *const kTokens[] = {
    "\n", " ", "\"", "{", "}", "[", "]", ",", ":", "'", "(", ")", "=", "-",
    "0", "1", "-1", "7", "255", "4096", "65535", "4294967295", "4294967296",
    "9223372036854775807", "9223372036854775808", "18446744073709551615",
    "99999999999999999999999", "1e308", "nan", "F32", "F16", "BF16", "I32",
    "I64", "U8", "dtype", "shape", "data_offsets", "__metadata__", "descr",
    "fortran_order", "True", "False", "<f4", "<i4", "<i8", ">f4", "|u1",
    "buffer", "step", "kernel", "collective", "mesh", "axis", "param",
    "input", "output", "arena", "end", "version", "section", "all-reduce",
    "all-to-all", "send", "recv", "forward", "backward", "f32", "bf16", "i32",
};

/// The bytes of `file` a reader parses before its data: the length field
/// and JSON header of a safetensors file, the header of a .npy file.
/// Mutations mostly land there.
static size_t headerBytes(FileTarget target, const std::string &file) {
  if (target == FileTarget::Safetensors && file.size() >= 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = n << 8 | static_cast<unsigned char>(file[i]);
    return static_cast<size_t>(std::min<uint64_t>(file.size(), 8 + n));
  }
  if (target == FileTarget::Npy)
    return std::min<size_t>(file.size(), 128);
  return file.size();
}

static std::string mutate(std::string bytes, const std::vector<std::string> &seeds,
                          FileTarget target, std::mt19937 &rng) {
  auto pick = [&](size_t n) {
    return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng) : 0;
  };
  size_t header = headerBytes(target, bytes);
  unsigned edits = 1 + pick(4);
  for (unsigned i = 0; i < edits; ++i) {
    size_t pos = pick(4) ? pick(std::min(header, bytes.size()) + 1) : pick(bytes.size() + 1);
    switch (pick(7)) {
    case 0: // delete a range
      bytes.erase(pos, 1 + pick(32));
      break;
    case 1: // insert a token
      bytes.insert(pos, kTokens[pick(std::size(kTokens))]);
      break;
    case 2: // flip a byte
      if (!bytes.empty())
        bytes[pick(bytes.size())] = static_cast<char>(pick(256));
      break;
    case 3: // duplicate a range
      bytes.insert(pos, bytes.substr(pick(bytes.size() + 1), 1 + pick(64)));
      break;
    case 4: // truncate
      bytes.resize(pos);
      break;
    case 5: { // a digit run changed into another number
      size_t at = bytes.find_first_of("0123456789", pos);
      if (at != std::string::npos) {
        size_t end = bytes.find_first_not_of("0123456789", at);
        bytes.replace(at, (end == std::string::npos ? bytes.size() : end) - at,
                      kTokens[14 + pick(14)]);
      }
      break;
    }
    case 6: { // splice another seed's tail
      const std::string &other = seeds[pick(seeds.size())];
      bytes = bytes.substr(0, pos) + other.substr(pick(other.size() + 1));
      break;
    }
    }
  }
  return bytes;
}

/// A plan mutant with its `end` checksum made right again (most of the
/// time), so that mutants get past the integrity check to the records.
static std::string reseal(const std::string &mutant, std::mt19937 &rng) {
  if (rng() % 8 == 0)
    return mutant;
  size_t end = mutant.rfind("\nend");
  std::string body = end == std::string::npos ? mutant : mutant.substr(0, end + 1);
  return loom::runtime::sealPlan(body);
}

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--target") {
      const char *v = value();
      if (!v || !parseFileTarget(v, o.target))
        return usage("--target takes plan, safetensors or npy");
    } else if (arg == "--plan") {
      const char *v = value();
      if (!v)
        return usage("--plan takes a file");
      o.plan = v;
    } else if (arg == "--iterations" || arg == "--seed") {
      const char *v = value();
      char *end = nullptr;
      unsigned long n = v ? std::strtoul(v, &end, 10) : 0;
      if (!v || *end || n > 100000000)
        return usage("--iterations and --seed take a number");
      (arg == "--seed" ? o.seed : o.iterations) = static_cast<unsigned>(n);
    } else if (arg == "--crash-file") {
      const char *v = value();
      if (!v)
        return usage("--crash-file takes a path");
      o.crashFile = v;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage(("unknown option " + arg).c_str());
    } else {
      o.seeds.push_back(arg);
    }
  }
  if (o.seeds.empty())
    return usage("no seed files");
  std::vector<std::string> seeds;
  for (const std::string &path : o.seeds) {
    std::string text;
    if (!readFile(path, text)) {
      std::cerr << "loom-fuzz-files: cannot read seed " << path << "\n";
      return 2;
    }
    seeds.push_back(std::move(text));
  }
  std::string planText;
  if (!o.plan.empty() && !readFile(o.plan, planText)) {
    std::cerr << "loom-fuzz-files: cannot read plan " << o.plan << "\n";
    return 2;
  }
  // Every seed must be accepted: a fuzz run from rejected seeds proves
  // little.
  std::string error;
  for (size_t i = 0; i < seeds.size(); ++i)
    if (!runFileTarget(o.target, seeds[i], o.crashFile, planText, error)) {
      std::cerr << "loom-fuzz-files: seed " << o.seeds[i] << " is rejected: " << error << "\n";
      return 1;
    }

  std::mt19937 rng(o.seed);
  unsigned accepted = 0;
  for (unsigned i = 0; i < o.iterations; ++i) {
    std::string mutant = mutate(seeds[i % seeds.size()], seeds, o.target, rng);
    if (o.target == FileTarget::Plan)
      mutant = reseal(mutant, rng);
    // On disk before it runs: a crash leaves the input behind.
    if (o.target == FileTarget::Plan) {
      std::ofstream out(o.crashFile, std::ios::binary);
      out << mutant;
    }
    error.clear();
    if (runFileTarget(o.target, mutant, o.crashFile, planText, error))
      ++accepted;
    else if (error.empty()) {
      std::cerr << "loom-fuzz-files: a mutant was rejected without a message "
                   "(input left at " << o.crashFile << ")\n";
      return 1;
    }
  }
  std::remove(o.crashFile.c_str());
  std::cout << "loom-fuzz-files: " << o.iterations << " mutants of "
            << seeds.size() << " seeds, " << accepted << " accepted, "
            << o.iterations - accepted << " rejected with a message, 0 crashes\n";
  return 0;
}
