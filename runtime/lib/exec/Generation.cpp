//===- Generation.cpp - Extending a text with a causal language model -----===//

#include "loom/runtime/exec/Generation.h"

#include "loom/runtime/support/DType.h"
#include "loom/runtime/support/Shape.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace loom::runtime;

/// What `plan` has under `name`, for an error: "model 'm' has 'tokens' f32
/// [2, 4]", or "model 'm' has no input 'tokens'".
static std::string hasWhat(const Plan &plan, const PlanBuffer *buffer,
                           const char *role, const char *name) {
  return "model '" + plan.model + "' has " +
         (buffer ? "'" + std::string(name) + "' " + dtypeName(buffer->dtype) + " " +
                       formatShape(buffer->shape)
                 : "no " + std::string(role) + " '" + name + "'");
}

bool TextGenerator::start(const Plan &plan, const std::string &prompt,
                          const Sampling &samplingIn, uint64_t seed, std::string &error) {
  const PlanBuffer *tokens = plan.findBuffer("tokens");
  const PlanBuffer *logits = plan.findBuffer("logits");
  if (!tokens || tokens->role != BufferRole::Input || isFloatDType(tokens->dtype) ||
      tokens->shape.size() != 2) {
    error = "generate needs a model with an integer input 'tokens' [B, T] (" +
            hasWhat(plan, tokens, "input", "tokens") + ")";
    return false;
  }
  rows = tokens->shape[0];
  length = tokens->shape[1];
  if (!logits || logits->role != BufferRole::Output || !isFloatDType(logits->dtype) ||
      logits->shape.size() != 3 || logits->shape[0] != tokens->shape[0] ||
      logits->shape[1] != tokens->shape[1]) {
    error = "generate needs a float output 'logits' [" + std::to_string(rows) + ", " +
            std::to_string(length) + ", V] beside the input 'tokens' (" +
            hasWhat(plan, logits, "output", "logits") + ")";
    return false;
  }
  vocabulary = logits->shape[2];
  tokensType = tokens->dtype;
  logitsType = logits->dtype;
  // The ids the model takes: its embedding's rows (the bound), else V.
  uint64_t ids = tokens->bound > 0 ? static_cast<uint64_t>(tokens->bound) : vocabulary;
  if (ids > 256) {
    error = "generate extends a text of bytes, but input 'tokens' takes ids up to " +
            std::to_string(ids - 1) + " (a byte-level model has at most 256)";
    return false;
  }
  // A byte the model cannot read back is never chosen.
  choices = std::min(ids, vocabulary);
  bytes.clear();
  for (size_t i = 0; i < prompt.size(); ++i) {
    auto byte = static_cast<unsigned char>(prompt[i]);
    if (byte >= ids) {
      error = "--prompt: byte " + std::to_string(i) + " is " + std::to_string(byte) +
              ", outside the vocabulary of input 'tokens' (ids 0 to " +
              std::to_string(ids - 1) + ")";
      return false;
    }
    bytes.push_back(byte);
  }
  sampling = samplingIn;
  rng = Xoshiro256(seed);
  return true;
}

uint64_t TextGenerator::windowLength() const {
  // An empty text starts from byte 0 alone.
  return std::max<uint64_t>(1, std::min<uint64_t>(bytes.size(), length));
}

uint64_t TextGenerator::windowStart() const {
  return bytes.size() > length ? bytes.size() - length : 0;
}

void TextGenerator::place(const Plan &plan, char *arena) const {
  const PlanBuffer *tokens = plan.findBuffer("tokens");
  char *base = arena + tokens->offset;
  std::memset(base, 0, tokens->bytes);
  uint64_t start = windowStart(), n = std::min<uint64_t>(bytes.size(), length);
  for (uint64_t row = 0; row < rows; ++row)
    for (uint64_t i = 0; i < n; ++i)
      storeElement(tokensType, base, row * length + i,
                   static_cast<double>(bytes[start + i]));
}

bool TextGenerator::advance(const char *base, int64_t &next, std::string &error) {
  uint64_t first = (windowLength() - 1) * vocabulary; // row 0
  std::vector<double> scores(choices);
  for (uint64_t v = 0; v < choices; ++v)
    scores[v] = loadElement(logitsType, base, first + v);
  // The most likely byte (the lowest on a tie, NaN never), or a sample of
  // softmax(scores / T) by its cumulative sum.
  int64_t best = 0;
  for (uint64_t v = 1; v < choices; ++v)
    if (scores[v] > scores[best] || std::isnan(scores[best]))
      best = static_cast<int64_t>(v);
  // No byte has a chance when the best is NaN or -inf (all -inf had been
  // read as byte 0, and sampling warned of an infinite top logit).
  if (std::isnan(scores[best]) || scores[best] == -INFINITY) {
    error = "the logits for byte " + std::to_string(bytes.size()) + " are all " +
            (std::isnan(scores[best]) ? "NaN" : "-inf (or NaN): no byte has a chance") +
            " (--check-numerics names the first step that wrote one)";
    return false;
  }
  next = best;
  bool someNan = std::any_of(scores.begin(), scores.end(), [](double s) { return std::isnan(s); });
  if (!warned && (someNan || (sampling.temperature > 0 && !std::isfinite(scores[best])))) {
    warned = true;
    warning = "the logits for byte " + std::to_string(bytes.size()) + " include " +
              (someNan ? std::string("NaN, never chosen")
                       : std::string("+inf, chosen without sampling")) +
              " (--check-numerics names the first step that wrote one)";
  }
  if (sampling.temperature > 0 && std::isfinite(scores[best])) {
    double top = scores[best], total = 0;
    for (double &s : scores) {
      s = std::isnan(s) ? 0 : std::exp((s - top) / sampling.temperature);
      total += s;
    }
    // Top-k, then the nucleus: the candidates from the most likely down
    // (the lower id first on a tie); the rest get weight 0.
    if (sampling.topK > 0 || sampling.topP < 1) {
      std::vector<uint64_t> order(choices);
      for (uint64_t v = 0; v < choices; ++v)
        order[v] = v;
      // (A total order, the lower id first on a tie: std::sort serves where
      // stable_sort's buffer is deprecated; the weights hold no NaN.)
      std::sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
        return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
      });
      uint64_t kept = sampling.topK > 0 ? std::min(sampling.topK, choices) : choices;
      // The nucleus of the top k, renormalized (as Hugging Face's warpers).
      double topMass = 0, mass = 0;
      for (uint64_t i = 0; i < kept; ++i)
        topMass += scores[order[i]];
      for (uint64_t i = 0; i < kept && sampling.topP < 1; ++i) {
        if (mass >= sampling.topP * topMass) {
          kept = i;
          break;
        }
        mass += scores[order[i]];
      }
      total = 0;
      for (uint64_t i = 0; i < choices; ++i) {
        if (i >= kept)
          scores[order[i]] = 0;
        total += scores[order[i]];
      }
    }
    double u = rng.uniform() * total;
    for (uint64_t v = 0; v < choices; ++v) {
      u -= scores[v];
      if (u < 0) {
        next = static_cast<int64_t>(v);
        break;
      }
    }
  }
  bytes.push_back(next);
  return true;
}
