//===- Random.h - The runtime's reproducible random numbers -----*- C++ -*-===//
//
// Fixed, documented algorithms (runtime/README.md) so that another
// implementation can reproduce initial weights bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SUPPORT_RANDOM_H
#define LOOM_RUNTIME_SUPPORT_RANDOM_H

#include <cstdint>
#include <string_view>

namespace loom::runtime {

/// SplitMix64 (Steele, Lea, Flood 2014): seeds the main generator.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t state) : state(state) {}
  uint64_t next();

private:
  uint64_t state;
};

/// xoshiro256** (Blackman, Vigna 2018), its state filled by four SplitMix64
/// outputs of the seed.
class Xoshiro256 {
public:
  explicit Xoshiro256(uint64_t seed);
  uint64_t next();
  /// A double in [0, 1): the top 53 bits of next() times 2^-53.
  double uniform();

private:
  uint64_t s[4];
};

/// Standard normal samples by the Box-Muller transform: each pair of
/// uniforms (u1, u2) gives r*cos(2*pi*u2) then r*sin(2*pi*u2), with
/// r = sqrt(-2 ln(1 - u1)).
class NormalSampler {
public:
  double next(Xoshiro256 &rng);

private:
  double spare = 0;
  bool hasSpare = false;
};

/// The seed of the stream for the tensor `name` under the run seed `seed`:
/// seed XOR (FNV-1a-32(name) * 0x9E3779B97F4A7C15 mod 2^64). Each tensor
/// has its own stream, so values do not depend on declaration order.
uint64_t tensorStreamSeed(uint64_t seed, std::string_view name);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_RANDOM_H
