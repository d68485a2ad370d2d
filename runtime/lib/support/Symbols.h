//===- Symbols.h - Functions of a dlopen()ed library ------------*- C++ -*-===//
//
// The CUDA driver and NCCL are loaded at run time, so that executables start
// on machines without them; both look their functions up the same way.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_LIB_SUPPORT_SYMBOLS_H
#define LOOM_RUNTIME_LIB_SUPPORT_SYMBOLS_H

#include <dlfcn.h>

#include <string>

namespace loom::runtime {

/// Looks up `name`, else `fallback`; false if neither is there.
template <typename Fn>
bool resolve(void *library, Fn &fn, const char *name,
             const char *fallback = nullptr) {
  void *symbol = dlsym(library, name);
  if (!symbol && fallback)
    symbol = dlsym(library, fallback);
  fn = reinterpret_cast<Fn>(symbol);
  return symbol != nullptr;
}

/// Looks up the functions a library must have, each name written once,
/// remembering the first that is missing.
struct RequiredSymbols {
  void *library;
  /// The first required function not found (by the last name tried), or
  /// null.
  const char *missing = nullptr;

  template <typename Fn>
  void require(Fn &fn, const char *name, const char *fallback = nullptr) {
    if (!resolve(library, fn, name, fallback) && !missing)
      missing = fallback ? fallback : name;
  }
};

/// The error for a CUDA driver (`library`, its path) without `function`:
/// an older driver than the runtime needs. `why` adds what needs it.
inline std::string missingDriverFunction(const std::string &library,
                                         const std::string &function,
                                         const std::string &why = "") {
  return "the CUDA driver " + library + " has no function " + function +
         " (is it too old?" + (why.empty() ? "" : " " + why) + ")";
}

} // namespace loom::runtime

#endif // LOOM_RUNTIME_LIB_SUPPORT_SYMBOLS_H
