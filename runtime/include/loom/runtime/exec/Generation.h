//===- Generation.h - Extending a text with a causal language model -*- C++ -*-===//
//
// `./model generate` runs a model's forward plan once per new byte: its
// input `tokens` ([B, T] byte ids) holds the last T bytes of the text at
// positions 0..n-1 of every row, and the next byte comes from its output
// `logits` ([B, T, V]) at row 0, position n-1: the most likely one, or a
// sample of softmax(logits / temperature). Positions after n-1 hold zeros,
// which a causal model's position n-1 does not see. The plan is the whole
// (one-rank) one: on several ranks rank 0 places the window and reads the
// gathered logits.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_GENERATION_H
#define LOOM_RUNTIME_EXEC_GENERATION_H

#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/support/Random.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::runtime {

/// How the next byte is chosen: the most likely (temperature 0), or a
/// sample of softmax(logits / temperature) over the `topK` most likely
/// bytes (0: all) and, of those, the fewest most likely whose probability
/// reaches `topP` (1: all; the nucleus of Holtzman et al. 2020).
struct Sampling {
  double temperature = 0;
  uint64_t topK = 0;
  double topP = 1;
};

class TextGenerator {
public:
  /// Checks that `plan` (the whole model's) has the input `tokens`
  /// (integer, [B, T]) and the output `logits` (float, [B, T, V]), and
  /// that every byte of `prompt` is one of the ids `tokens` takes.
  bool start(const Plan &plan, const std::string &prompt, const Sampling &sampling,
             uint64_t seed, std::string &error);

  /// Writes the window (the text's last T bytes) into every row of
  /// `plan`'s tokens buffer in `arena`, zeros after it. `plan` has the
  /// buffers start checked, maybe at other offsets (a staging plan).
  void place(const Plan &plan, char *arena) const;
  /// Reads the logits of the window's last position from `logits` (the
  /// model's whole [B, T, V] output), picks the next byte (`next`) and
  /// appends it to the text; false when they are all NaN.
  bool advance(const char *logits, int64_t &next, std::string &error);
  /// Once per text, after the advance that met them: that some logits were
  /// NaN (never chosen) or the top one infinite (sampling then picks it).
  std::string takeWarning() { return std::exchange(warning, {}); }

  const std::vector<int64_t> &text() const { return bytes; }
  /// The rows of the model's batch (B of tokens [B, T]), after start.
  uint64_t batchRows() const { return rows; }

private:
  std::string warning;
  bool warned = false;
  DType tokensType = DType::I32, logitsType = DType::F32;
  uint64_t rows = 0, length = 0, vocabulary = 0, choices = 0;
  Sampling sampling;
  Xoshiro256 rng{0};
  std::vector<int64_t> bytes;
  /// Where the window starts in `bytes` and how long it is.
  uint64_t windowStart() const;
  uint64_t windowLength() const;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_GENERATION_H
