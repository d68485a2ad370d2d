//===- CudaPipeline.cpp - A pipeline rank's stages on its GPU ------------===//

#include "loom/runtime/exec/CudaPipeline.h"
#include "loom/runtime/exec/Training.h"

#include <cstdint>

using namespace loom::runtime;

namespace {
/// Device addresses travel through the runner as char pointers it never
/// reads.
char *asPointer(uint64_t address) {
  return reinterpret_cast<char *>(static_cast<uintptr_t>(address));
}
uint64_t asAddress(const char *pointer) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer));
}
} // namespace

char *CudaPipelineDevice::buffer(unsigned id) {
  return asPointer(cuda.address(plan.buffers[id]));
}

bool CudaPipelineDevice::allocate(uint64_t bytes, char *&memory,
                                  std::string &error) {
  uint64_t address = 0;
  if (!nccl.allocate(bytes, address, error))
    return false;
  memory = asPointer(address);
  return true;
}

bool CudaPipelineDevice::copy(char *to, const char *from, uint64_t bytes,
                              std::string &error) {
  return nccl.copy(asAddress(to), asAddress(from), bytes, error);
}

bool CudaPipelineDevice::upload(char *to, const char *data, uint64_t bytes,
                                std::string &error) {
  return cuda.copyToDeviceAt(asAddress(to), data, bytes, error);
}

bool CudaPipelineDevice::runStep(size_t index, uint64_t microbatch, TraceRecorder *,
                                 std::string &error) {
  return cuda.queueStep(index, microbatch, error);
}

bool CudaPipelineDevice::send(unsigned peer, const char *data, uint64_t bytes,
                              std::string &error) {
  return nccl.send(peer, asAddress(data), bytes, error);
}

bool CudaPipelineDevice::recv(unsigned peer, char *data, uint64_t bytes,
                              std::string &error) {
  return nccl.recv(peer, asAddress(data), bytes, error);
}

bool CudaPipelineDevice::broadcast(const CommGroup &, unsigned root, char *data,
                                   uint64_t bytes, std::string &error) {
  return nccl.broadcast(root, asAddress(data), bytes, error);
}

bool CudaPipelineDevice::begin(std::string &error) {
  // Its queued launches would need each microbatch's key uploaded in
  // stream order, which this runtime does not do yet: said, not a wrong
  // mask.
  if (dropoutMicrobatchKey(plan)) {
    error = "dropout in a pipelined run on the GPU is not supported yet "
            "(run it with --device cpu, or without pipeline stages)";
    return false;
  }
  // In training, the params (and the optimizer state) go up once: later
  // steps update them on the device (CudaExecutor::applyUpdates).
  return cuda.uploadInputs(host.arena(), /*inputsOnly=*/false, error);
}

bool CudaPipelineDevice::end(std::string &error) {
  return cuda.finish(host.arena(), error);
}
