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
/// (`opt.lr`, `opt.step_size`, `opt.bc2_sqrt`, `opt.decay`) rather than
/// one the user gives.
bool isStepScalar(const Plan &plan, const PlanBuffer &buffer);

/// The learning rate of step `step` (counted from 1): the optimizer's `lr`
/// (a constant schedule).
double learningRate(const PlanOptimizer &optimizer, uint64_t step);

/// Writes the per-step scalars of step `step` into `plan`'s buffers at
/// their offsets in `arena`, as torch.optim computes them (in double,
/// then rounded to f32): opt.lr = lr, opt.step_size = lr / (1 - beta1^t),
/// opt.bc2_sqrt = sqrt(1 - beta2^t), opt.decay = 1 - lr weight_decay.
void fillStepScalars(const Plan &plan, char *arena, uint64_t step);

/// Copies every update's output into its param, in `executor`'s arena.
void applyUpdates(const Plan &plan, const Executor &executor);

/// Whether `buffer` is the source of an update (not printed after training).
bool isUpdateOutput(const Plan &plan, const PlanBuffer &buffer);

/// The token stream of --data: a 1-D .npy array of integer ids, or any
/// other file read as bytes (ids 0..255).
struct TokenData {
  std::string path;
  std::vector<int64_t> tokens;
};

/// Reads `path` into `data`; a malformed .npy or a negative id is an error
/// naming the file (and the first bad position).
bool loadTokenData(const std::string &path, TokenData &data, std::string &error);

/// The inputs --data fills, `tokens` and `labels` (integers of one shape
/// [B, T]), or an error saying what the plan has instead.
bool findBatchInputs(const Plan &plan, const TokenData &data,
                     const PlanBuffer *&tokens, const PlanBuffer *&labels,
                     std::string &error);

/// Fills `tokens` and `labels` at their offsets in `arena` for step `step`
/// (counted from 0): row b takes the T + 1 ids starting at
/// ((step B + b) T) mod (N - T - 1); the tokens are the first T, the
/// labels the last T.
void fillBatch(const TokenData &data, const PlanBuffer &tokens,
               const PlanBuffer &labels, char *arena, uint64_t step);

/// The f32 loss of the last run (the output `loss`); false if the plan
/// has none.
bool readLoss(const Plan &plan, const Executor &executor, double &loss);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_TRAINING_H
