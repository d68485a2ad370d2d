//===- Version.h - Loom's version, shared by loomc and the runtime -*- C++ -*-===//
//
// One number for the compiler, the runtime and the executables they make,
// printed by `loomc --version` and `MODEL --version` with the plan format
// (plan/Plan.h, kPlanVersion), which the runtime checks on its own.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_VERSION_H
#define LOOM_RUNTIME_VERSION_H

namespace loom {
/// Raise it with a release; the plan format has its own number.
constexpr const char *kLoomVersion = "0.1.0";
} // namespace loom

#endif // LOOM_RUNTIME_VERSION_H
