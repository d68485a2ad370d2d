//===- Random.cpp - The runtime's reproducible random numbers -------------===//

#include "loom/runtime/support/Random.h"

#include "loom/runtime/support/Hash.h"

#include <cmath>

using namespace loom::runtime;

uint64_t SplitMix64::next() {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Xoshiro256::Xoshiro256(uint64_t seed) {
  // SplitMix64 never yields four zeros in a row, the one state xoshiro
  // cannot leave.
  SplitMix64 seeder(seed);
  for (uint64_t &word : s)
    word = seeder.next();
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Xoshiro256::next() {
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double Xoshiro256::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double NormalSampler::next(Xoshiro256 &rng) {
  if (hasSpare) {
    hasSpare = false;
    return spare;
  }
  // 1 - u1 lies in (0, 1], so the logarithm is finite.
  double u1 = rng.uniform();
  double u2 = rng.uniform();
  double radius = std::sqrt(-2.0 * std::log(1.0 - u1));
  double angle = 2.0 * 3.14159265358979323846 * u2;
  spare = radius * std::sin(angle);
  hasSpare = true;
  return radius * std::cos(angle);
}

uint64_t loom::runtime::tensorStreamSeed(uint64_t seed, std::string_view name) {
  // Multiplying by an odd constant spreads the 32-bit name hash over all 64
  // bits, so nearby seeds and names do not collide.
  return seed ^ (static_cast<uint64_t>(fnv1a32(name)) * 0x9e3779b97f4a7c15ull);
}
