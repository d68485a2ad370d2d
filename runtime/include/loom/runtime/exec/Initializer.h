//===- Initializer.h - Param initializers, random inputs --------*- C++ -*-===//

#ifndef LOOM_RUNTIME_EXEC_INITIALIZER_H
#define LOOM_RUNTIME_EXEC_INITIALIZER_H

#include "loom/runtime/plan/Plan.h"

#include <cstdint>
#include <string>

namespace loom::runtime {

/// Fills `data` (`count` elements of `dtype`) as `init` says, drawing from
/// the stream of (`seed`, `name`); the values are those of runtime/README.md.
void initializeTensor(const Initializer &init, DType dtype, uint64_t count,
                      uint64_t seed, std::string_view name, void *data);

/// Initializes every param of `plan` in `arena`.
void initializeParams(const Plan &plan, char *arena, uint64_t seed);

/// Fills `data` for the input `buffer` as --random-inputs does: float types
/// normal with std 1, integer types uniform in {0, 1}.
void fillRandomInput(const PlanBuffer &buffer, uint64_t seed, void *data);

/// Checks the values of the integer input `buffer` in `data` against its
/// bound: false, with an error naming `what`, the index and the value of
/// the first outside [0, bound).
bool checkIndexBound(const PlanBuffer &buffer, const void *data,
                     const std::string &what, std::string &error);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_INITIALIZER_H
