//===- Driver.cpp - The main program of compiled executables --------------===//
//
// Everything that can be checked is checked before the arena is allocated:
// the plans, the kernel table, the command line and the input files' headers.
//
// A multi-rank run keeps the files whole: rank 0 alone reads and writes
// them, holding the whole params, inputs and outputs in a staging arena laid
// out after the unpartitioned plan, and the ranks exchange blocks through
// the Communicator. Every phase in which some rank may fail alone ends with
// an agreement (an all-gather of one byte), so that all ranks stop together
// with status 1 instead of waiting for one that gave up.
//
//===----------------------------------------------------------------------===//

#include "exec/RunDriver.h"

#include <csignal>

using namespace loom::runtime;

namespace loom::runtime::detail {

std::string programName(int argc, char **argv) {
  const char *path = argc > 0 && argv[0] ? argv[0] : "loom-model";
  const char *slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/// Rewrites a "plan:LINE: ..." error of the partitioned plan as
/// "spmd-plan:LINE: ...".
std::string inSpmdPlan(const std::string &error) {
  return error.compare(0, 5, "plan:") == 0 ? "spmd-" + error : error;
}

bool Driver::parsePlans() {
  std::vector<const LoomKernel *> bound;
  if (!parsePlan(executable.plan ? executable.plan : "", whole, error) ||
      !bindKernels(whole, executable.kernels, bound, error))
    return fail(error);
  if (whole.mesh.present)
    return fail("plan:" + std::to_string(whole.mesh.line) +
                ": the unpartitioned plan has a 'mesh' record");
  if (!executable.spmdPlan || !*executable.spmdPlan)
    return true;
  if (!parsePlan(executable.spmdPlan, spmd, error) ||
      !bindKernels(spmd, executable.kernels, bound, error) ||
      !checkPartitionedPlan(whole, spmd, error))
    return fail(inSpmdPlan(error));
  return true;
}

bool Driver::selectPlan() {
  const Plan *plan = &whole;
  if (numRanks > 1) {
    if (!spmd.mesh.present)
      return fail("this run has " + std::to_string(numRanks) +
                  " ranks, but this executable is not partitioned: run it "
                  "on 1 rank");
    if (numRanks != spmd.mesh.numRanks)
      return fail("this run has " + std::to_string(numRanks) +
                  " ranks, but this executable runs on 1 rank or on " +
                  std::to_string(spmd.mesh.numRanks) + " (mesh '" +
                  spmd.mesh.name + "' " + formatMeshAxes(spmd.mesh) + ")");
    plan = &spmd;
    multiRank = true;
    world = meshGroup(spmd.mesh, rank, allAxes(spmd.mesh));
    executor.setCommunicator(comm);
  }
  executor.setCheckNumerics(options.checkNumerics);
  if (!executor.bind(*plan, executable.kernels, error))
    return fail(multiRank ? inSpmdPlan(error) : error);
  return true;
}

bool Driver::checkDevice() {
  std::string device =
      options.device.empty() ? deviceName(whole.device) : options.device;
  if (device == "cpu" && whole.device != Device::CPU)
    return fail("this executable was built for cuda; its kernels cannot run "
                "with --device cpu");
  if (options.checkKernels && device != "cuda")
    return fail("--check-kernels compares the GPU's kernels with the CPU's: "
                "it needs --device cuda");
  if (options.checkKernels && multiRank)
    return fail("--check-kernels runs the unpartitioned plan: run it on 1 "
                "rank");
  if (options.checkNumerics && device == "cuda")
    return fail("--check-numerics looks at the CPU's kernels: run with "
                "--device cpu");
  if (device != "cuda")
    return true;
  // The GPU kernels are the gpu-image's; the CPU kernel table stays bound
  // (and checked) either way. Several ranks run the partitioned plan's
  // launches, with the same image.
  const Plan &plan = multiRank ? spmd : whole;
  std::string planName = multiRank ? "spmd-plan:" : "plan:";
  if (!plan.gpuImage.present)
    return fail("this executable was built without GPU kernels");
  if (plan.gpuImage.bytes != executable.gpuImageSize || !executable.gpuImage)
    return fail(planName + std::to_string(plan.gpuImage.line) +
                ": the gpu-image record says " +
                std::to_string(plan.gpuImage.bytes) +
                " bytes, but this executable carries a GPU image of " +
                std::to_string(executable.gpuImageSize) + " bytes");
  if (!cudaSupported())
    return fail("this runtime was built without CUDA support");
  onCuda = true;
  return true;
}

/// The names of the buffers of `role` a user may name, for error messages
/// (not the step scalars, which the runtime computes).
static std::string namesOf(const Plan &plan, BufferRole role) {
  std::string names;
  for (const PlanBuffer &buffer : plan.buffers)
    if (buffer.role == role && !isStepScalar(plan, buffer))
      names += (names.empty() ? "" : ", ") + buffer.name;
  return names.empty() ? "none" : names;
}

bool Driver::collectFiles(const NamedFiles &given, BufferRole role,
                          std::map<unsigned, std::string> &files) {
  const char *kind = roleName(role);
  for (const auto &[name, path] : given) {
    const PlanBuffer *buffer = whole.findBuffer(name);
    if (!buffer || buffer->role != role)
      return fail(std::string("model '") + whole.model + "' has no " + kind +
                  " named '" + name + "' (its " + kind +
                  "s: " + namesOf(whole, role) + ")");
    if (!files.emplace(buffer->id, path).second)
      return fail(std::string(kind) + " '" + name + "' is given twice");
  }
  return true;
}

bool Driver::execute(TraceRecorder *trace) {
  if (!onCuda) {
    // The CPU kernels (launch records do not apply) and the collectives.
    if (!executor.run(trace, error))
      return fail(multiRank ? inSpmdPlan(error) : error);
    return checkedNumerics();
  }
  // The params and inputs are in the host arena, as for the CPU; the
  // outputs come back to their offsets in it.
  if (!cuda.run(executor.arena(), trace, error))
    return fail(multiRank ? inSpmdPlan(error) : error);
  return true;
}

bool Driver::runForwardMicrobatches(const Plan &plan, TraceRecorder *trace,
                                    const std::function<bool(uint64_t)> &place) {
  uint64_t count = plan.optimizer.microbatches;
  assembled.reset(whole, count);
  auto take = [&](uint64_t microbatch) {
    if (!multiRank) {
      assembled.take(whole, microbatch, executor.arena());
      return true;
    }
    if (!agree(collect(BufferRole::Output)))
      return false;
    if (rank == 0)
      assembled.take(staging, microbatch, stagingArena.data());
    return true;
  };
  if (plan.pipeline.present) {
    // The schedule pipelines every microbatch; then each one's outputs
    // come to every rank of the pipeline, one microbatch at a time.
    if (!pipeline.run(place, trace, error))
      return fail(inSpmdPlan(error));
    if (!checkedNumerics())
      return false;
    for (uint64_t microbatch = 0; microbatch < count; ++microbatch)
      if (!(pipeline.putOutputs(microbatch, error) || fail(inSpmdPlan(error))) ||
          !take(microbatch))
        return false;
    return true;
  }
  for (uint64_t microbatch = 0; microbatch < count; ++microbatch)
    if (!place(microbatch) || !execute(trace) || !take(microbatch))
      return false;
  return true;
}

bool Driver::runPlanOnce(const Plan &plan, TraceRecorder *trace,
                         const std::function<bool(uint64_t)> &place) {
  if (trace)
    trace->beginRun();
  if (plan.forwardMicrobatches())
    return runForwardMicrobatches(plan, trace, place);
  if (plan.pipeline.present) {
    if (!pipeline.run(place, trace, error))
      return fail(inSpmdPlan(error));
    return checkedNumerics();
  }
  size_t perMicrobatch = plan.microbatchSteps();
  if (!perMicrobatch)
    return place(0) && execute(trace);
  uint64_t count = plan.optimizer.microbatches;
  if (onCuda) {
    // The microbatches' steps queued on the device, the accumulates as the
    // runtime's kernel; the outputs come back once, at the end.
    char *arena = executor.arena();
    for (uint64_t microbatch = 0; microbatch < count; ++microbatch)
      if (!place(microbatch) ||
          !(cuda.runSteps(arena, 0, perMicrobatch, microbatch, error) ||
            fail(multiRank ? inSpmdPlan(error) : error)))
        return false;
    if (!cuda.runSteps(arena, perMicrobatch, plan.steps.size(), count - 1, error) ||
        !cuda.finish(arena, error))
      return fail(multiRank ? inSpmdPlan(error) : error);
    return true;
  }
  for (uint64_t microbatch = 0; microbatch < count; ++microbatch) {
    if (!place(microbatch))
      return false;
    if (!executor.runSteps(0, perMicrobatch, microbatch, trace, error))
      return fail(multiRank ? inSpmdPlan(error) : error);
  }
  if (!executor.runSteps(perMicrobatch, plan.steps.size(), count - 1, trace, error))
    return fail(multiRank ? inSpmdPlan(error) : error);
  return checkedNumerics();
}

bool Driver::checkedNumerics() {
  std::string failure = executor.takeNumericsFailure();
  if (failure.empty())
    return true;
  // The plan's step is not the run's: say which training step met it.
  if (options.train)
    failure = "in training step " + std::to_string(train.step + 1) + ", " + failure;
  uniform = false; // this rank's values
  return fail(failure);
}

bool Driver::checkAgainstCpu() {
  KernelCheckResult result;
  if (!checkKernels(whole, executor, cuda, out, result, error, options.checkDump))
    return fail(error);
  if (result.failed)
    return fail("check-kernels: " + std::to_string(result.failed) + " of " +
                std::to_string(result.steps) +
                " kernel steps differ from the CPU beyond tolerance (the "
                "first: step " +
                std::to_string(result.firstFailed) + ", kernel '" +
                result.firstKernel + "')");
  return true;
}

bool Driver::runSingle() {
  if (!checkInputs(whole))
    return false;
  // The driver, the device, the image and the device arena before any work
  // on the host.
  if (onCuda && !cuda.open(whole, executable.gpuImage, executable.gpuImageSize,
                           executable.cudaDriver, error))
    return fail(error);
  keepTrainingOnDevice(whole);

  if (!executor.allocate(error))
    return fail(error);
  if (!prepareParams(whole, executor.arena()) ||
      !loadInputs(whole, executor.arena()))
    return false;
  // A forward in microbatches is checked on its first.
  if (options.checkKernels) {
    placeMicrobatch(whole, executor.arena(), 1, 0);
    return checkAgainstCpu();
  }
  TraceRecorder trace;
  if (!openLog())
    return false;
  resumedAt = train.step;
  stepEnd = std::chrono::steady_clock::now();
  if (options.generate)
    std::fputs(options.prompt.c_str(), out);
  // `step != 0`: a run to step 2^64 - 1 ends there (its counter had
  // wrapped to 0 and trained on forever).
  for (uint64_t step = resumedAt + 1, steps = numSteps(); step != 0 && step <= steps; ++step) {
    // A run may reuse the inputs' bytes once they are read: read them again.
    if (step > resumedAt + 1 && !loadInputs(whole, executor.arena()))
      return false;
    keepParams(whole, step);
    fillStepScalars(whole, executor.arena(), train, options.seed);
    if (options.generate)
      generator.place(whole, executor.arena());
    auto place = [&](uint64_t microbatch) {
      placeMicrobatch(whole, executor.arena(), step, microbatch);
      return true;
    };
    if (!runPlanOnce(whole, options.trace.empty() ? nullptr : &trace, place) ||
        (options.train && !finishStep(whole, step)))
      return false;
    // An interrupt during the last step stops nothing: the run is done,
    // and ends as it would have (there would be nothing to resume).
    bool stopping = options.train && step != numSteps() && stopRequested(step);
    if (options.train && evaluatesAfter(step) && step != numSteps() && !stopping &&
        !evaluateHeldOut(whole, whole, executor.arena(), step))
      return false;
    if (options.generate && !printNextByte(whole, executor.arena()))
      return false;
    if (options.evaluate)
      addEvalLoss(whole, executor.arena(), step);
    if (options.train && (savesAfter(step) || (stopping && !options.save.empty())) &&
        (!paramsToHost() || !saveCheckpointOf(whole, executor.arena())))
      return false;
    if (stopping)
      return stoppedAfter(step);
  }
  if (options.generate)
    std::fputc('\n', out);
  else if (options.evaluate)
    printEvalSummary();
  else if (!finishOutputs(whole, executor.arena()))
    return false;
  if (options.train && evaluatesAfter(numSteps()) &&
      !evaluateHeldOut(whole, whole, executor.arena(), numSteps()))
    return false;
  if (!options.trace.empty() && !trace.write(options.trace, error))
    return fail(error);
  return true;
}

bool Driver::agree(bool ok) {
  char mine = ok ? 1 : 0;
  std::vector<char> all(numRanks, 0);
  if (!comm->allGather(world, &mine, 1, all.data(), error))
    return fail(error);
  for (char each : all)
    if (!each)
      return false; // the failing rank has reported
  return true;
}

bool Driver::agreeOrReport(bool ok, const CommGroup &group) {
  // Each rank's verdict and its message's hash.
  struct Verdict {
    uint64_t hash;
    char ok;
  } mine{ok ? 0 : fnv1a64(error), static_cast<char>(ok ? 1 : 0)};
  std::vector<char> all(numRanks * sizeof(Verdict), 0);
  if (!comm->allGather(group, &mine, sizeof(Verdict), all.data(), error))
    return fail(error);
  bool allOk = true, alike = true;
  for (unsigned r = 0; r < numRanks; ++r) {
    Verdict each;
    std::memcpy(&each, all.data() + r * sizeof(Verdict), sizeof(Verdict));
    allOk &= each.ok != 0;
    alike &= !each.ok && each.hash == mine.hash;
  }
  if (allOk)
    return true;
  bool wasUniform = uniform;
  uniform = alike;
  if (!ok)
    fail(error);
  uniform = wasUniform;
  return false;
}

bool Driver::openCudaRanks() {
  // Each phase ends with an agreement: the NCCL ids go through collective
  // calls that a rank which failed before would never make.
  if (!agreeOrReport(loadCudaRanks()) ||
      !agree(nccl.shareIds(error) || fail(inSpmdPlan(error))) ||
      !agree(nccl.connect(error) || fail(inSpmdPlan(error))))
    return false;
  // From here a rank may wait on its GPU for collectives of peers that
  // died or hang: the NCCL watchdog ends it.
  nccl.watch(options.collectiveTimeout, program, rank, err);
  return true;
}

bool Driver::loadCudaRanks() {
  // NCCL first (a missing library is the likeliest failure), then the
  // device: local rank % device count, one GPU per rank of a node.
  // (The caller reports a failure: once, when every rank's is the same.)
  unsigned localRank = 0;
  if (!comm->localRank(localRank, error) ||
      !nccl.load(spmd, *comm, executable.ncclLibrary, executable.cudaDriver,
                 error))
    return false;
  cuda.setRank(localRank, &nccl);
  if (!cuda.open(spmd, executable.gpuImage, executable.gpuImageSize,
                 executable.cudaDriver, error)) {
    error = inSpmdPlan(error);
    return false;
  }
  return true;
}

bool Driver::allocateRanks() {
  if (!executor.allocate(error))
    return fail(inSpmdPlan(error));
  if (spmd.pipeline.present) {
    if (onCuda)
      pipelineDevice = std::make_unique<CudaPipelineDevice>(spmd, cuda, nccl, executor);
    else
      pipelineDevice = std::make_unique<CpuPipelineDevice>(executor, *executor.communicator());
    // A gradient program (loomc --gradients: a backward, no optimizer)
    // runs its schedule as a training step does: the forward-only chain
    // would leave its gradients unwritten.
    bool backward = spmd.hasBackward();
    // A training plan run without `train` still runs its step on the
    // whole batch: every microbatch (one rank's run does).
    if (!pipeline.prepare(spmd, *pipelineDevice, *executor.communicator(),
                          options.train || backward || spmd.forwardMicrobatches()
                              ? spmd.optimizer.microbatches
                              : 1,
                          options.train || backward, options.schedule, error)) {
      uniform = pipeline.failedOnEveryRank();
      return fail(inSpmdPlan(error));
    }
  }
  uint64_t transferBytes = 0;
  auto atLeast = [&](uint64_t bytes) {
    transferBytes = bytes > transferBytes ? bytes : transferBytes;
  };
  if (rank != 0) {
    // The inputs and params arrive whole.
    for (const PlanBuffer &buffer : spmd.buffers)
      if (buffer.role == BufferRole::Input || buffer.role == BufferRole::Param)
        atLeast(buffer.globalBytes);
    if (!transfer.allocate(transferBytes, error))
      return fail(error);
    return true;
  }
  // Rank 0: every input, param and output whole, 64-byte aligned like the
  // arena's buffers, and every rank's block of a sharded output.
  staging = whole;
  uint64_t offset = 0;
  for (PlanBuffer &buffer : staging.buffers) {
    if (buffer.role == BufferRole::Temp)
      continue;
    buffer.offset = offset;
    uint64_t padded = alignedBytes(buffer.bytes);
    if (padded < buffer.bytes || offset + padded < offset)
      return fail("the whole inputs, params and outputs are too large");
    offset += padded;
  }
  staging.arenaBytes = offset;
  // Checkpoints gather the params as the end gathers the outputs.
  for (const PlanBuffer &buffer : spmd.buffers) {
    bool gathered = buffer.role == BufferRole::Output ||
                    (buffer.role == BufferRole::Param && !options.save.empty());
    if (!gathered || (!buffer.isSharded() && buffer.held.empty()))
      continue;
    if (buffer.bytes > UINT64_MAX / numRanks)
      return fail("output '" + buffer.name + "' is too large to gather");
    atLeast(numRanks * buffer.bytes);
  }
  if (!stagingArena.allocate(staging.arenaBytes, error) ||
      !transfer.allocate(transferBytes, error))
    return fail(error);
  return true;
}

bool Driver::distribute(BufferRole role) {
  for (const PlanBuffer &buffer : spmd.buffers) {
    if (buffer.role != role)
      continue;
    // Whole on every rank, which keeps its block.
    char *data = rank == 0 ? stagingArena.data() +
                                 staging.findBuffer(buffer.name)->offset
                           : transfer.data();
    if (!comm->broadcast(world, 0, data, buffer.globalBytes, error))
      return fail(error);
    // A rank that does not hold it uses its bytes for other buffers.
    if (holdsBuffer(spmd, buffer, rank))
      extractShard(spmd.mesh, buffer, rank, data, executor.buffer(buffer.id));
  }
  return true;
}

bool Driver::collect(BufferRole role) {
  for (const PlanBuffer &buffer : spmd.buffers) {
    if (buffer.role != role)
      continue;
    char *target = rank == 0 ? stagingArena.data() +
                                   staging.findBuffer(buffer.name)->offset
                             : nullptr;
    // Replicated blocks come from the first rank that holds them: rank 0,
    // or for a pipelined plan's stage-placed buffer, its first stage's.
    unsigned replica = holderOfBlock(spmd, buffer, 0);
    if (!buffer.isSharded() && replica == 0) {
      if (rank == 0)
        std::memcpy(target, executor.buffer(buffer.id), buffer.bytes);
      continue;
    }
    // The ranks that do not hold it send bytes of their own buffers,
    // which assembleShards passes over.
    if (!comm->gather(world, 0, executor.buffer(buffer.id), buffer.bytes,
                      rank == 0 ? transfer.data() : nullptr, error))
      return fail(error);
    if (rank == 0)
      assembleShards(spmd.mesh, buffer, transfer.data(), target, replica);
  }
  return true;
}

std::string Driver::tracePath() const { return rankTracePath(options.trace, rank); }

bool Driver::runRanks() {
  // Rank 0 reads every file; the others wait for its verdict.
  if (!agree(rank != 0 || checkInputs(whole)))
    return false;
  uniform = false;
  // Each rank writes its own trace at the end: checked before the start.
  if (!agree(rank == 0 || options.trace.empty() || checkWritable(tracePath(), error) ||
             fail(error)))
    return false;
  // The driver, NCCL, the device, the image, the device arena and the NCCL
  // communicators before any work on the host.
  if ((onCuda && !openCudaRanks()) || !agree(allocateRanks()))
    return false;
  keepTrainingOnDevice(spmd);
  if (!agree(rank != 0 || prepareParams(staging, stagingArena.data())) ||
      !agree(openLog()) || !agree(distribute(BufferRole::Param)))
    return false;

  // A resumed run's state is rank 0's (it read the checkpoint).
  if (!options.resume.empty() &&
      !agree(comm->broadcast(world, 0, &train, sizeof(train), error) || fail(error)))
    return false;
  // evaluate, train --eval-data: rank 0 counted the held-out batches.
  if ((options.evaluate || !options.evalData.empty()) &&
      !agree(comm->broadcast(world, 0, &evaluation.batches, sizeof(evaluation.batches), error) ||
             fail(error)))
    return false;
  resumedAt = train.step;
  injectFault();
  TraceRecorder trace;
  trace.setProcess(rank);
  stepEnd = std::chrono::steady_clock::now();
  if (options.generate && rank == 0)
    std::fputs(options.prompt.c_str(), out);
  // `step != 0`: a run to step 2^64 - 1 ends there (its counter had
  // wrapped to 0 and trained on forever).
  for (uint64_t step = resumedAt + 1, steps = numSteps(); step != 0 && step <= steps; ++step) {
    // Rank 0 reads the inputs (again: a run may reuse their bytes) and
    // computes the step's scalars; every rank gets its blocks.
    if (!agree(rank != 0 || loadInputs(staging, stagingArena.data())))
      return false;
    keepParams(spmd, step);
    if (rank == 0)
      fillStepScalars(staging, stagingArena.data(), train, options.seed);
    if (rank == 0 && options.generate)
      generator.place(staging, stagingArena.data());
    // Each microbatch's rows (or the step's batch) go out to the ranks.
    auto place = [&](uint64_t microbatch) {
      if (rank == 0)
        placeMicrobatch(staging, stagingArena.data(), step, microbatch);
      return agree(distribute(BufferRole::Input));
    };
    if (!agree(runPlanOnce(spmd, options.trace.empty() ? nullptr : &trace, place)) ||
        !agree(!options.train || finishStep(spmd, step)))
      return false;
    // Every rank stops after the same step, if any was interrupted.
    bool stopping = false; // (not after the last step: as on one rank)
    if (options.train && step != numSteps() && !anyRank(stopRequested(step), stopping))
      return false;
    if (options.train && evaluatesAfter(step) && step != numSteps() && !stopping &&
        !evaluateHeldOut(spmd, staging, stagingArena.data(), step))
      return false;
    if (options.generate) {
      if ((!whole.forwardMicrobatches() && !agree(collect(BufferRole::Output))) ||
          !agree(rank != 0 || printNextByte(staging, stagingArena.data())))
        return false;
    }
    // A forward in microbatches gathered its outputs already.
    if (options.evaluate) {
      if (!whole.forwardMicrobatches() && !agree(collect(BufferRole::Output)))
        return false;
      if (rank == 0)
        addEvalLoss(staging, stagingArena.data(), step);
    }
    if (options.train && (savesAfter(step) || (stopping && !options.save.empty())) &&
        (!agree(syncPipelinedParams()) || !agree(paramsToHost()) ||
         !agree(collect(BufferRole::Param)) ||
         !agree(rank != 0 || saveCheckpointOf(staging, stagingArena.data()))))
      return false;
    if (stopping) {
      uniform = true; // one message, rank 0's
      return stoppedAfter(step);
    }
  }
  if (options.generate || options.evaluate) {
    if (rank == 0 && options.generate)
      std::fputc('\n', out);
    if (rank == 0 && options.evaluate)
      printEvalSummary();
    return agree(options.trace.empty() || trace.write(tracePath(), error) ||
                 fail(error));
  }
  // A forward in microbatches gathered each microbatch's outputs already.
  if (!agree(syncPipelinedParams()) ||
      (!spmd.forwardMicrobatches() && !agree(collect(BufferRole::Output))) ||
      !agree(rank != 0 || finishOutputs(staging, stagingArena.data())))
    return false;
  if (options.train && evaluatesAfter(numSteps()) &&
      !evaluateHeldOut(spmd, staging, stagingArena.data(), numSteps()))
    return false;
  return agree(options.trace.empty() || trace.write(tracePath(), error) ||
               fail(error));
}

bool Driver::allGatherText(const std::string &mine, std::vector<std::string> &all) {
  uint64_t length = mine.size();
  std::vector<uint64_t> lengths(numRanks, 0);
  if (!comm->allGather(everyone, &length, sizeof(length), lengths.data(), error))
    return false;
  uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = mine;
  padded.resize(longest, '\0');
  std::string gathered(longest * numRanks, '\0');
  if (!comm->allGather(everyone, padded.data(), longest, gathered.data(), error))
    return false;
  all.clear();
  for (unsigned r = 0; r < numRanks; ++r)
    all.push_back(gathered.substr(r * longest, lengths[r]));
  return true;
}

bool Driver::agreeOnStartUp(bool ok) {
  error = deferred;
  if (!agreeOrReport(ok, everyone))
    return false;
  // The build: loomc's hash of the plans and the kernels' code (two builds
  // of one plan may differ in a kernel: gelu for relu), else the plans'.
  std::string build = executable.buildId && *executable.buildId
                          ? executable.buildId
                          : "plans " + std::to_string(fnv1a64(executable.plan ? executable.plan : "") ^
                                                      fnv1a64(executable.spmdPlan ? executable.spmdPlan : ""));
  std::vector<std::pair<std::string, std::string>> shared = rankSharedOptions(options);
  std::string mine = build + "\n";
  for (const auto &[option, value] : shared)
    mine += value + "\n";
  std::vector<std::string> all;
  if (!allGatherText(mine, all))
    return fail(error);
  unsigned other = 1;
  while (other < numRanks && all[other] == all[0])
    ++other;
  if (other == numRanks)
    return true;
  // Rank 0 says what the first rank unlike it differs in.
  auto lines = [](const std::string &text) {
    std::vector<std::string> split;
    for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
      split.push_back(text.substr(at, end - at));
    return split;
  };
  std::vector<std::string> theirs = lines(all[other]), ours = lines(all[0]);
  std::string r = "rank " + std::to_string(other);
  if (theirs.empty() || ours.empty() || theirs[0] != ours[0])
    return fail(r + " runs another build of the model than rank 0 (build " +
                (theirs.empty() ? "?" : theirs[0]) + ", rank 0's " +
                (ours.empty() ? "?" : ours[0]) +
                "): every rank must run the same executable (copy one build to every node)");
  std::string differences;
  auto shown = [](const std::string &value) {
    return value.empty() ? std::string("not given") : value;
  };
  for (size_t i = 0; i < shared.size() && i + 1 < theirs.size() && i + 1 < ours.size(); ++i)
    if (theirs[i + 1] != ours[i + 1])
      differences += (differences.empty() ? "" : "; ") + shared[i].first + ": " + r + " " +
                     shown(theirs[i + 1]) + ", rank 0 " + shown(ours[i + 1]);
  return fail("the ranks were given different options (" + differences +
              "): every rank of a run takes the same command and options, but for "
              "the files rank 0 alone reads and writes");
}

bool Driver::run() {
  // Several ranks end their start-up together: a rank that failed alone
  // had left the others waiting in the run's first exchange, its message
  // unprinted (while failures are every rank's, rank 0 alone speaks).
  bool several = comm && numRanks > 1;
  deferFailures = several;
  bool done = false;
  bool ok = startUp(done);
  deferFailures = false;
  if ((several && !agreeOnStartUp(ok)) || !ok)
    return false;
  if (done)
    return true;
  InterruptScope handlers(options.train);
  return multiRank ? runRanks() : runSingle();
}

bool Driver::startUp(bool &done) {
  if (!parseOptions(argc, argv, options, error) ||
      !checkRankFiles(options, numRanks, error))
    return fail(error);
  if (options.help) {
    if (rank == 0)
      printUsage(out, program.c_str());
    return done = true;
  }
  if (options.version) {
    if (rank == 0)
      std::fprintf(out, "%s: Loom %s runtime, plan format %u\n", program.c_str(),
                   loom::kLoomVersion, kPlanVersion);
    return done = true;
  }
  // A collective that waits too long for the others ends the run: another
  // rank died, failed alone or hangs.
  if (comm && numRanks > 1 && options.collectiveTimeout > 0) {
    timedComm = std::make_unique<TimedCommunicator>(*comm, options.collectiveTimeout,
                                                    program, err);
    comm = timedComm.get();
  }
  if (!parsePlans() || !selectPlan() || !checkDevice())
    return false;
  // The CPU kernels use the vector extensions of the CPU they were
  // compiled for: refuse to run them on one without (an illegal
  // instruction, otherwise, somewhere in the first kernel).
  CpuTargetInfo cpuTarget;
  if (executable.cpuTarget && *executable.cpuTarget &&
      !parseCpuTarget(executable.cpuTarget, cpuTarget, error))
    return fail("loom_cpu_target: " + error);
  std::string cpuMismatch =
      cpuMismatchMessage(cpuTarget, missingCpuFeatures(cpuTarget, hostHasCpuFeature));
  if (options.info) {
    if (rank == 0) {
      printPlanInfo(out, whole);
      if (!cpuTarget.cpu.empty())
        std::fprintf(out, "cpu      %s kernels; matmul f32: %s, bf16: %s%s%s\n",
                     cpuTarget.cpu.c_str(), cpuTarget.f32Path.c_str(),
                     cpuTarget.bf16Path.c_str(), cpuMismatch.empty() ? "" : "; cannot run here: ",
                     cpuMismatch.c_str());
      if (spmd.mesh.present) {
        printPartitionedInfo(out, spmd);
        printPipelineInfo(out, spmd, options.schedule);
      }
    }
    return done = true;
  }
  if (!cpuMismatch.empty() && (!onCuda || options.checkKernels))
    return fail(cpuMismatch);
  bool amxKernels = std::find(cpuTarget.needs.begin(), cpuTarget.needs.end(), "amx-tile") !=
                    cpuTarget.needs.end();
  if (amxKernels && (!onCuda || options.checkKernels) && !enableAmxTiles(error))
    return fail(error);
  if (options.train && whole.optimizer.kind.empty())
    return fail("this executable does not train: build it with loomc --train "
                "(from a script with a train section)");
  if (!options.schedule.empty() && !(multiRank && spmd.pipeline.present) &&
      rank == 0)
    warn("--schedule has no effect: this run is not pipelined (a pipelined "
         "executable pipelines on its mesh's ranks, under mpirun)");
  if (options.moeStats && rank == 0 &&
      std::none_of(whole.buffers.begin(), whole.buffers.end(), isMoeStats))
    warn("--moe-stats has no effect: this model has no MoE block");
  if (options.train && options.checkKernels)
    return fail("--check-kernels checks one run; drop it to train");
  if (options.generate && !whole.optimizer.kind.empty())
    return fail("generate runs a model's forward, and this executable is a "
                "training step: build the script without --train, and give it "
                "the trained params with --weights CKPT");
  if (options.evaluate && !whole.optimizer.kind.empty())
    return fail("evaluate runs a model's forward, and this executable is a "
                "training step: build the script without --train, and give it "
                "the trained params with --weights CKPT");
  if (options.evaluate && !whole.findScalarOutput("loss"))
    return fail("evaluate needs a forward with a scalar f32 output 'loss' (a "
                "script with a train section, built without --train)");
  train = initialTrainState(whole.optimizer);
  return collectFiles(options.inputs, BufferRole::Input, inputFiles) &&
         collectFiles(options.outputs, BufferRole::Output, outputFiles);
}

} // namespace loom::runtime::detail

using loom::runtime::detail::Driver;
using loom::runtime::detail::programName;

int loom::runtime::runMain(int argc, char **argv, const Executable &executable,
                           std::FILE *out, std::FILE *err) {
  // A write past the file size limit (ulimit -f) fails with EFBIG and is
  // reported, its temporary removed; SIGXFSZ's default killed the run
  // and left a torn file.
  std::signal(SIGXFSZ, SIG_IGN);
  // A closed pipe (`./train ... | head`) makes the writes to it fail with
  // EPIPE: the run goes on (a training run still saves its checkpoint) and
  // ends with "cannot write the standard output", status 1. SIGPIPE's
  // default had killed it silently with status 141, checkpoint unwritten.
  std::signal(SIGPIPE, SIG_IGN);
  Communicator *comm = executable.communicator;
  std::unique_ptr<Communicator> mpi; // MPI_Finalize when it goes
  if (!comm) {
    // MPI only under a launcher that says there is more than one rank.
    LauncherInfo launcher = detectLauncher();
    if (launcher.present && launcher.size != 1) {
      std::string error;
      if (!openMpi(&argc, &argv, mpi, error)) {
        if (!mpiSupported())
          error += launcher.size > 1
                       ? "; it cannot run on " + std::to_string(launcher.size) +
                             " ranks (run it without mpirun)"
                       : std::string("; it cannot run under an MPI launcher");
        // Every rank fails alike; one message is enough.
        if (launcher.rank <= 0)
          std::fprintf(err, "%s: error: %s\n", programName(argc, argv).c_str(),
                       error.c_str());
        return 1;
      }
      comm = mpi.get();
    }
  }
  bool ok = Driver(argc, argv, executable, comm, out, err).run();
  // What went to a full disk or a closed pipe (`> /dev/full`) is lost: a
  // run whose summaries could not be written has not succeeded.
  if ((std::fflush(out) != 0 || std::ferror(out)) && ok) {
    std::fprintf(err, "%s: error: cannot write the standard output: %s\n",
                 programName(argc, argv).c_str(), std::strerror(errno ? errno : EIO));
    ok = false;
  }
  return ok ? 0 : 1;
}

int loom::runtime::runMain(int argc, char **argv, const LoomKernel *kernels,
                           const char *planText, std::FILE *out,
                           std::FILE *err) {
  Executable executable;
  executable.kernels = kernels;
  executable.plan = planText;
  return runMain(argc, argv, executable, out, err);
}
