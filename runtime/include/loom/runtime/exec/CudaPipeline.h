//===- CudaPipeline.h - A pipeline rank's stages on its GPU ------*- C++ -*-===//
//
// The PipelineRunner's device for --device cuda: the buffers are the CUDA
// executor's device arena, steps are queued on its default stream, the
// values in flight live in device memory, and the stages' messages are
// ncclSend / ncclRecv over the pipeline axis's NCCL communicator, all on
// that one stream, so the host never waits between steps. The host arena
// still receives the inputs and params (the driver's staging) and the
// outputs at the end of a run; in training the params stay on the device
// between steps.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_CUDAPIPELINE_H
#define LOOM_RUNTIME_EXEC_CUDAPIPELINE_H

#include "loom/runtime/comm/Nccl.h"
#include "loom/runtime/exec/Cuda.h"
#include "loom/runtime/exec/PipelineRunner.h"

namespace loom::runtime {

class CudaPipelineDevice : public PipelineDevice {
public:
  /// `cuda` open and `nccl` connected for `plan`; `host` is the rank's host
  /// executor, whose arena stages the inputs, params and outputs.
  CudaPipelineDevice(const Plan &plan, CudaExecutor &cuda, NcclCollectives &nccl,
                     Executor &host)
      : plan(plan), cuda(cuda), nccl(nccl), host(host) {}

  char *buffer(unsigned id) override;
  const char *hostBuffer(unsigned id) override { return host.buffer(id); }
  bool allocate(uint64_t bytes, char *&memory, std::string &error) override;
  bool copy(char *to, const char *from, uint64_t bytes,
            std::string &error) override;
  bool upload(char *to, const char *data, uint64_t bytes,
              std::string &error) override;
  /// Kernels, collectives and accumulates (the runtime's kernel, which
  /// keeps the microbatches' mean in the device arena) of any microbatch.
  /// Traces record no GPU events here.
  bool runStep(size_t index, uint64_t microbatch, TraceRecorder *trace,
               std::string &error) override;
  bool send(unsigned peer, const char *data, uint64_t bytes,
            std::string &error) override;
  bool recv(unsigned peer, char *data, uint64_t bytes,
            std::string &error) override;
  /// Over the pipeline axis (the runner's only broadcast group).
  bool broadcast(const CommGroup &group, unsigned root, char *data,
                 uint64_t bytes, std::string &error) override;
  /// The params and inputs to the device (in training the params only
  /// before the first step); at the end, the outputs back.
  bool begin(std::string &error) override;
  bool end(std::string &error) override;

private:
  const Plan &plan;
  CudaExecutor &cuda;
  NcclCollectives &nccl;
  Executor &host;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_CUDAPIPELINE_H
