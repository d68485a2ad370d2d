//===- Hash.h - FNV-1a for checksums and seeds ------------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_SUPPORT_HASH_H
#define LOOM_RUNTIME_SUPPORT_HASH_H

#include <cstdint>
#include <string_view>

namespace loom::runtime {

/// The 32-bit FNV-1a hash (offset basis 2166136261, prime 16777619) of
/// `bytes`. The plan's `end` checksum and the initializers' per-tensor seeds
/// both use it.
inline uint32_t fnv1a32(std::string_view bytes) {
  uint32_t hash = 2166136261u;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619u;
  }
  return hash;
}

/// The 64-bit FNV-1a hash of `bytes`, continuing from `hash` (so that
/// several pieces hash as their concatenation): the checkpoints' checksum.
inline uint64_t fnv1a64(std::string_view bytes,
                        uint64_t hash = 14695981039346656037ull) {
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_HASH_H
