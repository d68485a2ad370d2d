//===- Nccl.h - A multi-rank run's collectives on GPUs, with NCCL -*- C++ -*-//
//
// With --device cuda, each rank of a partitioned plan runs its collective
// steps on its device arena with NCCL, in plan order on the CUDA executor's
// stream. NCCL (libnccl.so.2) is loaded with dlopen when such a run starts,
// never linked, so executables start without it. Each mesh-axis group of
// the plan (Layout.h's meshGroup, the groups of the CPU path) gets one NCCL
// communicator: member 0 makes its unique id, the run's Communicator (MPI)
// broadcasts it over the group, and every member joins with
// ncclCommInitRank at its index in the group.
//
// A watchdog thread (watch), the way PyTorch's NCCL watchdog works, ends a
// rank whose GPU collectives cannot finish: it polls every communicator's
// asynchronous error (ncclCommGetAsyncError) and the time since the last
// collective was queued while the host waits for the GPU; on an error, or
// past --collective-timeout, it aborts every communicator (ncclCommAbort,
// which frees the GPU from NCCL kernels waiting for a dead peer) and ends
// the process with status 1 and a message naming the rank. Under mpirun
// that ends the job.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_NCCL_H
#define LOOM_RUNTIME_COMM_NCCL_H

#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/exec/Cuda.h"
#include "loom/runtime/plan/Plan.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace loom::runtime {

/// The collectives of one rank of a partitioned plan on its GPU. Usage:
/// load (no CUDA call yet), then CudaExecutor::setRank and open (which
/// calls prepare), then shareIds and connect; CudaExecutor::run calls run
/// for each collective step. Every rank makes each of these calls: a caller
/// whose rank may fail alone agrees with the others between them (the
/// later ones are collective).
class NcclCollectives : public CudaCollectives {
public:
  NcclCollectives();
  ~NcclCollectives() override;
  NcclCollectives(const NcclCollectives &) = delete;
  NcclCollectives &operator=(const NcclCollectives &) = delete;

  /// Loads NCCL from `ncclLibrary` (dlopen), finds its functions and checks
  /// its version (2.10 or later, for bf16). `plan` is the partitioned plan
  /// and `comm` this rank's world, which carries the NCCL ids; both must
  /// outlive this. `driverLibrary` is the CUDA driver the executor loads,
  /// whose copy functions prepare takes. False with "multi-rank runs on
  /// cuda need NCCL (LIBRARY): ..." when NCCL cannot be used.
  bool load(const Plan &plan, Communicator &comm, const char *ncclLibrary,
            const char *driverLibrary, std::string &error);
  /// After load: NCCL's version, "2.28.9".
  std::string version() const;

  /// Finds the driver's copy functions and allocates the device scratch
  /// memory of the collectives that rearrange blocks (no other rank
  /// involved).
  bool prepare(uint64_t arena, std::string &error) override;
  /// For every group the plan uses, in the order the steps first use it:
  /// member 0 makes its NCCL id and broadcasts it over the group through
  /// the Communicator. Runs every group's broadcast even after a failure.
  bool shareIds(std::string &error);
  /// With the ids shared, makes each group's NCCL communicator
  /// (ncclCommInitRank at this rank's index in the group), in the same
  /// order: communicators are made before the run, not at the first step
  /// that uses them, so that a failure is agreed on before any work.
  bool connect(std::string &error);
  /// Queues collective step `step` on the default stream.
  bool run(size_t step, std::string &error) override;
  void drained() override;
  /// After connect: starts the watchdog. `seconds` limits how long the
  /// collectives queued may keep the host waiting (0: no limit; the
  /// asynchronous errors are still watched); `program` and `rank` name the
  /// process in its message on `err`.
  void watch(double seconds, const std::string &program, unsigned rank, std::FILE *err);

  // A pipelined plan's messages between its stages (CudaPipelineDevice):
  // on the communicator of the pipeline axis's group, which connect made
  // with the others, on the default stream, ordered with the launches.

  /// `bytes` at device address `data` to (or from) world rank `peer`, a
  /// member of this rank's pipeline group.
  bool send(unsigned peer, uint64_t data, uint64_t bytes, std::string &error);
  bool recv(unsigned peer, uint64_t data, uint64_t bytes, std::string &error);
  /// In place, from the pipeline group's member `root`.
  bool broadcast(unsigned root, uint64_t data, uint64_t bytes, std::string &error);
  /// Device to device.
  bool copy(uint64_t to, uint64_t from, uint64_t bytes, std::string &error);
  /// Device memory that lives as long as this.
  bool allocate(uint64_t bytes, uint64_t &address, std::string &error);

private:
  struct State;
  std::unique_ptr<State> state;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMM_NCCL_H
