//===- Symbols.h - Functions of a dlopen()ed library ------------*- C++ -*-===//
//
// The CUDA driver and NCCL are loaded at run time, so that executables start
// on machines without them; both look their functions up the same way.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_LIB_SYMBOLS_H
#define LOOM_RUNTIME_LIB_SYMBOLS_H

#include <dlfcn.h>

#include <initializer_list>

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

/// A function a library must have: whether resolve() found it, its name.
struct RequiredSymbol {
  bool found;
  const char *name;
};

/// The name of the first required function that is missing, or null.
inline const char *firstMissing(std::initializer_list<RequiredSymbol> symbols) {
  for (const RequiredSymbol &symbol : symbols)
    if (!symbol.found)
      return symbol.name;
  return nullptr;
}

} // namespace loom::runtime

#endif // LOOM_RUNTIME_LIB_SYMBOLS_H
