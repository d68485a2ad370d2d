//===- Hash.h - FNV-1a for checksums and seeds ------------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_SUPPORT_HASH_H
#define LOOM_RUNTIME_SUPPORT_HASH_H

#include <cstdint>
#include <cstdio>
#include <string>
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

/// lowbias32 (C. Wellons' 32-bit integer mix, full avalanche): the hash a
/// dropout mask chains over its keys and positions (loomc's
/// DropoutToLinalg computes the same in the kernels).
inline uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
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

/// A 64-bit hash as checkpoints state it: 16 lower-case hex digits.
inline std::string hashText(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

/// A checkpoint's metadata key holding its format, and the format written:
/// 2 adds "checksum"; format 1 (without it) still loads.
inline constexpr const char *kCheckpointVersionKey = "loom.checkpoint";
inline constexpr const char *kCheckpointVersion = "2";

/// False, with the error, where a checkpoint's format is not one this
/// runtime reads (train --resume and --weights alike).
inline bool checkpointFormatKnown(const std::string &path, const std::string &version,
                                  std::string &error) {
  if (version == kCheckpointVersion || version == "1")
    return true;
  error = path + ": checkpoint format '" + version + "', but this runtime reads format " +
          kCheckpointVersion + " (and 1)";
  return false;
}

/// False, with the error, where a checkpoint's tensors hash to `actual`
/// rather than the `stated` checksum (train --resume and --weights alike).
inline bool checkpointHashMatches(const std::string &path, const std::string &actual,
                                  const std::string &stated, std::string &error) {
  if (actual == stated)
    return true;
  error = path + " is corrupted: its tensors hash to " + actual +
          ", but the checkpoint says " + stated;
  return false;
}

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_HASH_H
