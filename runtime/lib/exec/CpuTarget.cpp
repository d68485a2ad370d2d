//===- CpuTarget.cpp - The CPU an executable's kernels were compiled for --===//

#include "loom/runtime/exec/CpuTarget.h"

#include <cerrno>
#include <cstring>
#include <sstream>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

using namespace loom::runtime;

static bool isKnownFeature(const std::string &name) {
#define LOOM_CPU_FEATURE(feature, unasked)                                      \
  if (name == feature)                                                         \
    return true;
#include "loom/runtime/exec/CpuFeatures.def"
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
  // __builtin_cpu_supports takes literals only: one test per name.
#define LOOM_CPU_FEATURE(name, unasked)                                        \
  if (feature == name)                                                         \
    return __builtin_cpu_supports(name);
#include "loom/runtime/exec/CpuFeatures.def"
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

bool loom::runtime::enableAmxTiles(std::string &error) {
#if defined(__linux__) && defined(__x86_64__)
  // Linux keeps the 8 KiB of tile data out of a thread's saved state until
  // the process asks for it (Documentation/arch/x86/xstate.rst): the first
  // tile instruction without this permission dies of SIGILL.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0)
    return true;
  error = std::string("the kernels run on AMX tiles, and Linux refused this process their "
                      "state (arch_prctl ARCH_REQ_XCOMP_PERM: ") +
          std::strerror(errno) + "; Linux 5.16 or later is needed)";
  return false;
#else
  error = "the kernels run on AMX tiles, which need Linux on x86-64";
  return false;
#endif
}
