//===- Training.h - What ./model train adds to a run ------------*- C++ -*-===//
//
// A training plan (loomc --train) is one optimizer step: it reads the
// params, the optimizer state and the per-step scalars `opt.*`, and writes
// their new values as outputs that `update` records copy back. The driver
// runs it once per step; these are the pieces between two runs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_TRAINING_H
#define LOOM_RUNTIME_EXEC_TRAINING_H

#include "loom/runtime/plan/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

class Executor;

/// Whether `buffer` is a per-step scalar input the runtime computes
/// (`opt.lr`, `opt.step_size`, `opt.bc2_sqrt`, `opt.decay`,
/// `opt.loss_scale`) rather than one the user gives.
bool isStepScalar(const Plan &plan, const PlanBuffer &buffer);

/// What changes from step to step besides the params and the optimizer
/// state (a checkpoint holds it too).
struct TrainState {
  /// Steps run: the position of the data and of the lr schedule.
  uint64_t step = 0;
  /// Optimizer steps taken (Adam's t): a step skipped for inf/nan
  /// gradients under loss scaling does not count, as in torch.
  uint64_t applied = 0;
  /// The loss scale (1 without loss scaling).
  double lossScale = 1;
  /// Dynamic scaling: clean steps since the scale last changed
  /// (GradScaler's growth tracker).
  uint64_t cleanSteps = 0;
};

/// The state before the first step: the initial loss scale.
TrainState initialTrainState(const PlanOptimizer &optimizer);

/// The learning rate of step `step` (counted from 1). `constant`: lr.
/// `warmup_cosine` over S = the train section's steps, W = warmup:
/// lr s / W for s <= W, then min_lr + (lr - min_lr) (1 + cos(pi p)) / 2
/// with p = (s - W) / (S - W), held at min_lr after S; `warmup_linear`
/// the same with min_lr + (lr - min_lr) (1 - p) after the warmup.
double learningRate(const PlanOptimizer &optimizer, uint64_t step);

/// Writes the scalars of the step after `state` into `plan`'s buffers at
/// their offsets in `arena`, as torch.optim computes them (in double,
/// then rounded to f32), with s = state.step + 1 and t = state.applied + 1:
/// opt.lr = lr(s), opt.step_size = lr(s) / (1 - beta1^t),
/// opt.bc2_sqrt = sqrt(1 - beta2^t), opt.decay = 1 - lr(s) weight_decay,
/// opt.loss_scale = the loss scale over the microbatches (the seed of each
/// microbatch's backward), and the dropout masks' key of the run's `seed`
/// and the step, opt.dropout_seed (dropoutSeedBits, its f32's bits).
void fillStepScalars(const Plan &plan, char *arena, const TrainState &state,
                     uint64_t seed);

/// The dropout masks' key of step `step` (1 for the first, so that no key
/// of seed 0 is lowbias32's fixed point 0) of a run of `seed`:
/// lowbias32(lowbias32(seed's low 32 bits ^ its high 32) + step's low 32
/// bits), in u32 arithmetic (docs/language.md, dropout).
uint32_t dropoutSeedBits(uint64_t seed, uint64_t step);

/// The buffer of the dropout masks' other key, the microbatch
/// (opt.dropout_microbatch), or null for a plan without dropout.
const PlanBuffer *dropoutMicrobatchKey(const Plan &plan);

/// Writes the microbatch a run of steps computes into `key` in `arena`, or
/// -1 for a held-out loss, where the dropouts keep everything; nothing
/// without a key.
void fillDropoutMicrobatch(const PlanBuffer *key, char *arena, double microbatch);

/// Clean steps in a row after which dynamic loss scaling doubles the scale
/// (torch.cuda.amp.GradScaler's growth_interval).
constexpr uint64_t kScaleGrowthInterval = 2000;

/// Advances `state` past a step whose gradients had global norm
/// `gradNorm`; returns whether its update applies. Under loss scaling an
/// inf or nan norm skips the update and (dynamic) halves the scale; 2000
/// clean steps in a row double it (torch.cuda.amp.GradScaler's defaults).
bool advanceTrainState(const PlanOptimizer &optimizer, TrainState &state,
                       double gradNorm);

/// Copies every update's output into its param, in `executor`'s arena, of
/// the updates rank `rank` holds (holdsBuffer). An update at its param's
/// offset was done in place by its kernel: nothing to copy.
void applyUpdates(const Plan &plan, const Executor &executor, unsigned rank);

/// The params (and optimizer state) a run of the plan changes: those whose
/// update its kernels do in place, that rank `rank` holds. A run without
/// `train` keeps them: it saves their bytes before its first run of the
/// plan (saveInPlaceParams) and puts them back before every later one.
std::vector<char> saveInPlaceParams(const Plan &plan, const Executor &executor,
                                    unsigned rank);
void restoreInPlaceParams(const Plan &plan, const Executor &executor, unsigned rank,
                          const std::vector<char> &saved);

/// Whether `buffer` is the source of an update (not printed after training).
bool isUpdateOutput(const Plan &plan, const PlanBuffer &buffer);

/// Token ids kept as the file stores them (bytes, or a .npy's 1, 2, 4 or
/// 8-byte integers), read one at a time: a 3 GB byte file as int64 took 24
/// GB and was killed without a word.
class TokenIds {
public:
  size_t size() const { return count; }
  int64_t operator[](size_t i) const;
  void clear() { adopt(std::string(), 0, 0, 8, true); }
  /// Appends `id` (a stream built in memory holds 8-byte ids).
  void push_back(int64_t id);
  void assign(size_t n, int64_t id);
  /// Takes `bytes`, whose `n` ids of `width` bytes (little-endian, signed
  /// or not) start at `offset`.
  void adopt(std::string bytes, size_t offset, size_t n, unsigned width,
             bool isSigned);

private:
  std::string raw;
  size_t offset = 0, count = 0;
  unsigned width = 8;
  bool isSigned = true;
};

/// The token stream of --data: a 1-D .npy array of integer ids, or any
/// other file read as bytes (ids 0..255).
struct TokenData {
  std::string path;
  TokenIds tokens;
  /// train --shuffle: each row's window at a random offset drawn from the
  /// seed, the step and the row (windowStart), not the next one in order.
  bool shuffled = false;
  uint64_t seed = 0;
};

/// Where row `row` (of the step's whole batch, microbatches included) of
/// step `step` (from 0) starts in a stream of `span` offsets: in order,
/// (step rows + row) T mod span; shuffled, splitmix64(splitmix64(seed) +
/// step rows + row) mod span, nanoGPT's sampling with a generator that
/// any language can repeat (test/Numerics/gpt_train_torch.py does).
uint64_t windowStart(const TokenData &data, uint64_t step, uint64_t rows,
                     uint64_t row, uint64_t cols, uint64_t span);

/// Reads `path` into `data`; a malformed .npy or a negative id is an error
/// naming the file (and the first bad position).
bool loadTokenData(const std::string &path, TokenData &data, std::string &error);

/// The inputs --data fills, `tokens` and `labels` (integers of one shape
/// [B, T]), or an error saying what the plan has instead.
bool findBatchInputs(const Plan &plan, const TokenData &data,
                     const PlanBuffer *&tokens, const PlanBuffer *&labels,
                     std::string &error);

/// Fills `tokens` and `labels` at their offsets in `arena` for step `step`
/// (counted from 0): row b takes the T + 1 ids starting at windowStart
/// (in order: ((step B + b) T) mod (N - T - 1)); the tokens are the first
/// T, the labels the last T. With m `microbatches` the buffers hold rows
/// [mb B/m, (mb + 1) B/m) of the step's B for microbatch `microbatch`.
void fillBatch(const TokenData &data, const PlanBuffer &tokens,
               const PlanBuffer &labels, char *arena, uint64_t step,
               uint64_t microbatches = 1, uint64_t microbatch = 0);

/// How many steps of fillBatch take windows of `data` that do not wrap
/// around (at least 1): evaluate's batches by default.
uint64_t batchesIn(const TokenData &data, const PlanBuffer &tokens,
                   uint64_t microbatches = 1);

/// `buffer`, a microbatch of a batch input (Plan::isMicrobatched), as the
/// whole batch its file holds: dim 0 and the sizes times `microbatches`.
/// False if the sizes overflow.
bool wholeBatchOf(const PlanBuffer &buffer, uint64_t microbatches,
                  PlanBuffer &whole);

/// The rank-0 f32 output `name` of the last run (`loss`, `grad_norm`);
/// false if the plan has none.
bool readScalarOutput(const Plan &plan, const Executor &executor,
                      std::string_view name, double &value);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_TRAINING_H
