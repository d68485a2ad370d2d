//===- Arena.cpp - The one aligned block every buffer lives in ------------===//

#include "loom/runtime/exec/Executor.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace loom::runtime;

Arena::~Arena() { std::free(block); }

bool Arena::allocate(uint64_t size, std::string &error) {
  std::free(block);
  block = nullptr;
  base = nullptr;
  bytes = 0;
  // An empty plan still gets a valid pointer; 64 spare bytes for alignment.
  uint64_t request = (size < 64 ? 64 : size);
  if (request > SIZE_MAX - 64) {
    error = "cannot allocate the arena of " + std::to_string(size) + " bytes";
    return false;
  }
  // calloc rather than aligned_alloc + memset: the zeroes come for free from
  // fresh pages, so a large arena costs nothing until kernels touch it. Zero
  // fill keeps runs reproducible even if a kernel reads bytes no step wrote.
  block = std::calloc(static_cast<size_t>(request) + 64, 1);
  if (!block) {
    char mib[32];
    std::snprintf(mib, sizeof(mib), "%.2f",
                  static_cast<double>(size) / 1048576.0);
    error = "cannot allocate the arena of " + std::to_string(size) +
            " bytes (" + mib + " MiB): out of memory";
    return false;
  }
  uintptr_t address = reinterpret_cast<uintptr_t>(block);
  base = static_cast<char *>(block) + (64 - address % 64) % 64;
  bytes = size;
  return true;
}
