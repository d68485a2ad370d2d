//===- Checkpoint.h - Saving and resuming a training run --------*- C++ -*-===//
//
// A checkpoint is a safetensors file like --save-weights writes: every
// param of the training plan, whole (the f32 master weights and the
// optimizer state), and in its `__metadata__` the rest of the run's state
// as strings: "loom.checkpoint" (the format's version, "1"), "optimizer",
// "step", "applied", "loss_scale", "clean_steps" and "seed". The data
// position is the step (docs/runtime.md, "--data"), so resuming from it
// continues the run bit for bit. Whole tensors make it independent of the
// mesh: a run may resume on another number of ranks.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_CHECKPOINT_H
#define LOOM_RUNTIME_EXEC_CHECKPOINT_H

#include "loom/runtime/exec/Training.h"
#include "loom/runtime/plan/Plan.h"

#include <cstdint>
#include <string>

namespace loom::runtime {

/// Writes the checkpoint of `plan`'s params in `arena` (at their offsets),
/// `state` and `seed` to `path`, atomically (a temporary file, fsync,
/// rename).
bool saveCheckpoint(const Plan &plan, const char *arena, const std::string &path,
                    const TrainState &state, uint64_t seed, std::string &error);

/// Reads the checkpoint `path` into `arena`, `state` and `seed`. It must be
/// a checkpoint of `plan`'s model and optimizer holding exactly its params,
/// each of its dtype and shape; otherwise an error names what differs.
bool loadCheckpoint(const Plan &plan, char *arena, const std::string &path,
                    TrainState &state, uint64_t &seed, std::string &error);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_CHECKPOINT_H
