//===- CpuTarget.cpp - The CPU an executable's kernels were compiled for --===//

#include "loom/runtime/exec/CpuTarget.h"

#include <sstream>

using namespace loom::runtime;

static const char *const kKnownFeatures[] = {"avx2",     "fma",      "avx512f",   "avx512bw",
                                             "avx512dq", "avx512vl", "avx512bf16"};

static bool isKnownFeature(const std::string &name) {
  for (const char *known : kKnownFeatures)
    if (name == known)
      return true;
  return false;
}

bool loom::runtime::parseCpuTarget(const std::string &text, CpuTargetInfo &info,
                                   std::string &error) {
  std::istringstream in(text);
  std::string word;
  info = CpuTargetInfo();
  if (!(in >> info.cpu)) {
    error = "empty CPU target record";
    return false;
  }
  while (in >> word) {
    size_t eq = word.find('=');
    std::string key = word.substr(0, eq), value = eq == std::string::npos ? "" : word.substr(eq + 1);
    if (key == "f32") {
      info.f32Path = value;
    } else if (key == "bf16") {
      info.bf16Path = value;
    } else if (key == "needs") {
      std::istringstream list(value);
      std::string feature;
      while (std::getline(list, feature, ','))
        if (!feature.empty()) {
          if (!isKnownFeature(feature)) {
            error = "unknown CPU feature '" + feature + "' in the CPU target record";
            return false;
          }
          info.needs.push_back(feature);
        }
    } else {
      error = "bad CPU target field '" + word + "' (expected f32=, bf16= or needs=)";
      return false;
    }
  }
  return true;
}

bool loom::runtime::hostHasCpuFeature(const std::string &feature) {
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports takes string literals only.
  if (feature == "avx2")
    return __builtin_cpu_supports("avx2");
  if (feature == "fma")
    return __builtin_cpu_supports("fma");
  if (feature == "avx512f")
    return __builtin_cpu_supports("avx512f");
  if (feature == "avx512bw")
    return __builtin_cpu_supports("avx512bw");
  if (feature == "avx512dq")
    return __builtin_cpu_supports("avx512dq");
  if (feature == "avx512vl")
    return __builtin_cpu_supports("avx512vl");
  if (feature == "avx512bf16")
    return __builtin_cpu_supports("avx512bf16");
#endif
  return false;
}

std::vector<std::string>
loom::runtime::missingCpuFeatures(const CpuTargetInfo &info,
                                  const std::function<bool(const std::string &)> &has) {
  std::vector<std::string> missing;
  for (const std::string &feature : info.needs)
    if (!has(feature))
      missing.push_back(feature);
  return missing;
}

std::string loom::runtime::cpuMismatchMessage(const CpuTargetInfo &info,
                                              const std::vector<std::string> &missing) {
  if (missing.empty())
    return "";
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i)
    list += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
  return "this executable's kernels were compiled for CPU '" + info.cpu + "' and use " + list +
         ", which this CPU does not have (compile it with loomc --cpu native on the machine "
         "that runs it, or name an older CPU: --cpu x86-64-v3)";
}
