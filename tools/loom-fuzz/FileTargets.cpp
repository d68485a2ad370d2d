//===- FileTargets.cpp - The runtime's readers on one untrusted file ------===//

#include "FileTargets.h"

#include "loom/runtime/io/Npy.h"
#include "loom/runtime/io/Safetensors.h"
#include "loom/runtime/plan/Plan.h"

#include <cstdio>
#include <vector>

using namespace loom::runtime;

bool loom::fuzz::parseFileTarget(std::string_view name, FileTarget &target) {
  if (name == "plan")
    target = FileTarget::Plan;
  else if (name == "safetensors")
    target = FileTarget::Safetensors;
  else if (name == "npy")
    target = FileTarget::Npy;
  else
    return false;
  return true;
}

static bool writeFile(const std::string &path, std::string_view bytes) {
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  return std::fclose(file) == 0 && ok;
}

/// The .npy reader as an executable's input: checked against a declared
/// dtype and shape (the header's own when it parses, so that the data
/// path is reached too), then read.
static bool readAsInput(const std::string &path, std::string_view bytes, std::string &error) {
  NpyHeader header;
  DType dtype = DType::F32;
  Shape shape{8, 4, 16};
  if (parseNpyHeader(bytes, header, error)) {
    uint64_t elements = 1;
    for (int64_t d : header.shape)
      elements = d > 0 && elements <= (uint64_t(1) << 24) / uint64_t(d) ? elements * d : 0;
    // Large or empty shapes are checked, not allocated.
    if (elements > 0 && elements <= (uint64_t(1) << 24)) {
      shape = header.shape;
      dtype = header.descr == "<i4"   ? DType::I32
              : header.descr == "<i8" ? DType::I64
              : header.descr == "<f2" ? DType::F16
                                      : DType::F32;
    }
  }
  uint64_t elements = 1;
  for (int64_t d : shape)
    elements *= d;
  if (!checkNpy(path, "input 'x'", dtype, shape, error))
    return false;
  std::vector<char> data(elements * dtypeSize(dtype));
  return readNpy(path, "input 'x'", dtype, shape, data.data(), error);
}

bool loom::fuzz::runFileTarget(FileTarget target, std::string_view bytes,
                               const std::string &path, std::string_view planText,
                               std::string &error) {
  switch (target) {
  case FileTarget::Plan: {
    Plan plan;
    return parsePlan(bytes, plan, error);
  }
  case FileTarget::Safetensors: {
    if (!writeFile(path, bytes)) {
      error = "cannot write " + path;
      return false;
    }
    SafetensorsHeader header;
    if (!readSafetensorsHeader(path, header, error))
      return false;
    if (planText.empty())
      return true;
    Plan plan;
    if (!parsePlan(planText, plan, error))
      return false;
    std::vector<char> arena(plan.arenaBytes);
    std::vector<std::string> warnings;
    return loadWeights(plan, arena.data(), path, warnings, error);
  }
  case FileTarget::Npy:
    if (!writeFile(path, bytes)) {
      error = "cannot write " + path;
      return false;
    }
    return readAsInput(path, bytes, error);
  }
  return false;
}
