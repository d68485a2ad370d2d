//===- Training.cpp - What ./model train adds to a run --------------------===//

#include "loom/runtime/exec/Training.h"

#include "loom/runtime/exec/Executor.h"

#include <cmath>
#include <cstring>

using namespace loom::runtime;

bool loom::runtime::isStepScalar(const Plan &plan, const PlanBuffer &buffer) {
  return !plan.optimizer.kind.empty() && buffer.role == BufferRole::Input &&
         buffer.name.compare(0, 4, "opt.") == 0 && buffer.shape.empty() &&
         buffer.dtype == DType::F32;
}

double loom::runtime::learningRate(const PlanOptimizer &optimizer, uint64_t) {
  return optimizer.get("lr", 0.0);
}

void loom::runtime::fillStepScalars(const Plan &plan, char *arena,
                                    uint64_t step) {
  const PlanOptimizer &optimizer = plan.optimizer;
  double lr = learningRate(optimizer, step);
  double t = static_cast<double>(step);
  double beta1 = optimizer.get("beta1", 0.9), beta2 = optimizer.get("beta2", 0.999);
  for (const PlanBuffer &buffer : plan.buffers) {
    if (!isStepScalar(plan, buffer))
      continue;
    double value = 0;
    if (buffer.name == "opt.lr")
      value = lr;
    else if (buffer.name == "opt.step_size")
      value = lr / (1.0 - std::pow(beta1, t));
    else if (buffer.name == "opt.bc2_sqrt")
      value = std::sqrt(1.0 - std::pow(beta2, t));
    else if (buffer.name == "opt.decay")
      value = 1.0 - lr * optimizer.get("weight_decay", 0.0);
    float stored = static_cast<float>(value);
    std::memcpy(arena + buffer.offset, &stored, sizeof(stored));
  }
}

void loom::runtime::applyUpdates(const Plan &plan, const Executor &executor) {
  for (const PlanUpdate &update : plan.updates)
    std::memcpy(executor.buffer(update.param), executor.buffer(update.output),
                plan.buffers[update.param].bytes);
}

bool loom::runtime::isUpdateOutput(const Plan &plan, const PlanBuffer &buffer) {
  for (const PlanUpdate &update : plan.updates)
    if (update.output == buffer.id)
      return true;
  return false;
}

bool loom::runtime::readLoss(const Plan &plan, const Executor &executor,
                             double &loss) {
  const PlanBuffer *buffer = plan.findBuffer("loss");
  if (!buffer || buffer->role != BufferRole::Output || !buffer->shape.empty() ||
      buffer->dtype != DType::F32)
    return false;
  float value;
  std::memcpy(&value, executor.buffer(buffer->id), sizeof(value));
  loss = value;
  return true;
}
