//===- DriverFiles.cpp - A run's inputs, params and outputs ---------------===//
//
// Driver's members that read and write files (RunDriver.h): the checks
// before any work (every input file's header, the paths written at the
// end), the params (initialized, loaded or resumed), the inputs and each
// microbatch's rows (--data's windows included), the outputs.
//
//===----------------------------------------------------------------------===//

#include "exec/RunDriver.h"

using namespace loom::runtime;

namespace loom::runtime::detail {

bool Driver::checkInputs(const Plan &plan) {
  // What the run writes at its end (or after its last step), checked
  // before its first: a checkpoint whose directory is missing must not
  // cost the whole training run. (Other ranks' traces go beside rank 0's.)
  for (const std::string &path : {options.save, options.saveWeights, options.trace})
    if (!path.empty() && !checkWritable(path, error))
      return fail(error);
  for (const auto &[id, path] : outputFiles)
    if (!checkWritable(path, error))
      return fail("output '" + whole.buffers[id].name + "': " + error);
  if (options.generate) {
    if (!generator.start(plan, options.prompt,
                         Sampling{options.temperature, options.topK, options.topP},
                         options.seed, error))
      return fail(error);
    // Every row of the batch (of every microbatch) computes the same
    // window; one row's logits are read.
    uint64_t rows = generator.batchRows() *
                    (plan.forwardMicrobatches() ? plan.optimizer.microbatches : 1);
    if (rows > 1)
      warn("generate runs all " + std::to_string(rows) +
           " rows of the batch for one row's logits: build the forward with a batch of "
           "one (loomc --dim B=1, B the script's batch dim) for about " +
           std::to_string(rows) + " times less work");
    // Allowed (a quick check of a build), but its text is noise.
    if (options.weights.empty())
      warn("generate without --weights runs the params' initializers (seed " +
           std::to_string(options.seed) + "): the text is random; pass a trained "
           "model's checkpoint or weights with --weights");
  }
  if (!options.data.empty()) {
    const PlanBuffer *tokens, *labels;
    if (!loadTokenData(options.data, data, error) ||
        !findBatchInputs(plan, data, tokens, labels, error))
      return fail(error);
    data.shuffled = options.shuffle;
    data.seed = options.seed;
    if (options.evaluate)
      evaluation.batches = options.batches ? options.batches
                                           : batchesIn(data, *tokens, plan.optimizer.microbatches);
  }
  if (!options.evalData.empty()) {
    const PlanBuffer *tokens, *labels;
    if (!loadTokenData(options.evalData, heldOut, error) ||
        !findBatchInputs(plan, heldOut, tokens, labels, error))
      return fail("--eval-data: " + error);
    evaluation.batches = options.evalBatches
                             ? options.evalBatches
                             : batchesIn(heldOut, *tokens, plan.optimizer.microbatches);
  }
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Input)
      continue;
    // The optimizer's step scalars are the runtime's to compute: a file
    // for one was never opened.
    if (isStepScalar(plan, buffer)) {
      if (inputFiles.count(buffer.id))
        return fail("input '" + buffer.name + "' is a step scalar the runtime computes "
                    "from the train section: drop --input " + buffer.name + "=...");
      continue;
    }
    // An --input file for what --data or generate fills would be ignored.
    if (fromData(buffer)) {
      if (inputFiles.count(buffer.id))
        return fail("input '" + buffer.name + "' comes from " +
                    (options.generate ? "the text generate extends"
                                      : "--data") +
                    ": drop --input " + buffer.name + "=...");
      continue;
    }
    auto file = inputFiles.find(buffer.id);
    if (file == inputFiles.end()) {
      if (options.randomInputs || options.generate)
        continue;
      return fail("input '" + buffer.name + "' (" + dtypeName(buffer.dtype) +
                  " " + formatShape(buffer.shape) +
                  ") is not given: pass --input " + buffer.name +
                  "=FILE.npy, or --random-inputs");
    }
    // A microbatched input's file holds the whole batch.
    PlanBuffer whole = buffer;
    if (plan.isMicrobatched(buffer) &&
        !wholeBatchOf(buffer, plan.optimizer.microbatches, whole))
      return fail("input '" + buffer.name + "' is too large");
    if (!checkNpy(file->second, "input '" + buffer.name + "'", buffer.dtype,
                  whole.shape, error))
      return fail(error);
  }
  return true;
}

bool Driver::prepareParams(const Plan &plan, char *arena) {
  if (!options.resume.empty()) {
    uint64_t given = options.seed;
    if (!loadCheckpoint(plan, arena, options.resume, train, options.seed, error))
      return fail(error);
    // The run continues the checkpoint's draws; another --seed had been
    // ignored without a word.
    if (options.seedGiven && given != options.seed)
      warn("--seed " + std::to_string(given) + " has no effect: a resumed run keeps " +
           options.resume + "'s seed, " + std::to_string(options.seed));
    data.seed = options.seed; // --shuffle draws from the run's seed
    if (train.step >= numSteps())
      return fail(options.resume + " is at step " + std::to_string(train.step) +
                  ": a run of " + std::to_string(numSteps()) +
                  " steps has nothing left to do (raise --steps)");
  } else if (options.weights.empty()) {
    initializeParams(plan, arena, options.seed);
  } else {
    std::vector<std::string> warnings;
    if (!loadWeights(plan, arena, options.weights, warnings, error))
      return fail(error);
    for (const std::string &warning : warnings)
      warn(warning);
  }
  // (Through PATH.tmp, as a checkpoint: weights may be saved over the
  // --weights they came from, and a write that failed there, a full disk,
  // had left the only copy torn.)
  if (!options.saveWeights.empty() &&
      !saveWeights(plan, arena, options.saveWeights, error))
    return fail(error);
  return true;
}

bool Driver::loadInputs(const Plan &plan, char *arena) {
  // Inputs are live from the start: they share arena bytes only with
  // buffers written after their last use, never with params or other
  // inputs, so reading them before the run is safe in any order.
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Input || isStepScalar(plan, buffer) ||
        fromData(buffer))
      continue;
    bool microbatched = plan.isMicrobatched(buffer);
    auto cached = inputBytes.find(buffer.id);
    if (cached != inputBytes.end()) {
      if (!microbatched)
        std::memcpy(arena + buffer.offset, cached->second.data(), cached->second.size());
      continue;
    }
    PlanBuffer whole = buffer;
    char *target = arena + buffer.offset;
    // A microbatched input: the whole batch, once, off the arena
    // (placeMicrobatch copies each microbatch's rows in).
    if (microbatched) {
      wholeBatchOf(buffer, plan.optimizer.microbatches, whole); // checkInputs
      std::vector<char> &rows = inputBytes[buffer.id];
      rows.resize(whole.bytes);
      target = rows.data();
    }
    auto file = inputFiles.find(buffer.id);
    if (file == inputFiles.end() && options.generate && !options.randomInputs) {
      std::memset(target, 0, whole.bytes); // generate: inputs not given are zeros
    } else if (file == inputFiles.end()) {
      fillRandomInput(whole, options.seed, target);
    } else {
      std::string what = "input '" + buffer.name + "'";
      uint64_t overflows = 0;
      if (!readNpy(file->second, what, whole.dtype, whole.shape, target, error,
                   &overflows) ||
          !checkIndexBound(whole, target, what + " (" + file->second + ")", error))
        return fail(error);
      // Rounding to 16 bits is what the file asks for; a value past the
      // range becoming inf is not, and had been silent.
      if (overflows)
        warn(what + " (" + file->second + "): " + overflowMessage(overflows, whole.dtype));
    }
    if (numSteps() > 1 && !microbatched)
      inputBytes[buffer.id].assign(target, target + whole.bytes);
  }
  return true;
}

bool Driver::finishOutputs(const Plan &plan, char *arena) {
  for (const PlanBuffer &planned : plan.buffers) {
    if (planned.role != BufferRole::Output)
      continue;
    // A forward in microbatches reports the whole batch's outputs.
    const char *data = arena + planned.offset;
    PlanBuffer buffer = planned;
    if (plan.forwardMicrobatches()) {
      data = assembled.data(planned);
      buffer = assembled.whole(planned);
    }
    auto file = outputFiles.find(buffer.id);
    // The new params and optimizer state went back into them.
    if (options.train && file == outputFiles.end() && isUpdateOutput(plan, buffer))
      continue;
    // Routing counts are a table on request (written to a file as well,
    // when one is given), not a summary line.
    if (isMoeStats(buffer) && options.moeStats)
      printMoeStats(out, buffer, data);
    if (file == outputFiles.end()) {
      if (!isMoeStats(buffer))
        printSummary(out, buffer, data);
      continue;
    }
    if (!writeNpy(file->second, buffer.dtype, buffer.shape, data, error))
      return fail("output '" + buffer.name + "': " + error);
  }
  return true;
}

void Driver::placeMicrobatch(const Plan &plan, char *arena, uint64_t step,
                             uint64_t microbatch, const TokenData *tokens) {
  for (const auto &[id, rows] : inputBytes) {
    const PlanBuffer &buffer = plan.buffers[id];
    if (!plan.isMicrobatched(buffer))
      continue;
    std::memcpy(arena + buffer.offset, rows.data() + microbatch * buffer.bytes,
                buffer.bytes);
  }
  // checkInputs checked both inputs and every id of the data, once.
  if (!tokens && !options.data.empty())
    tokens = &data;
  if (tokens)
    fillBatch(*tokens, *plan.findBuffer("tokens"), *plan.findBuffer("labels"),
              arena, step - 1, plan.optimizer.microbatches, microbatch);
}

} // namespace loom::runtime::detail
