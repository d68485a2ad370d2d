//===- FakeNccl.h - NCCL without GPUs, for tests ----------------*- C++ -*-===//
//
// libLoomFakeNccl.so exports the NCCL functions the runtime dlsym()s, for
// ranks that are threads of one process (the tests' LocalWorld) on the fake
// CUDA driver, whose device pointers are host pointers. ncclCommInitRank
// meets the other members of a communicator at a rendezvous keyed by the
// unique id; each collective meets them again and copies and sums straight
// between their buffers, when called (the stream must be the default one).
// Sums go in member order: f32 and f64 in their type, bf16 rounded after
// every addition (as NCCL adds 16-bit types), integers wrapping around;
// f16 sums are not implemented. ncclSend and ncclRecv work inside
// ncclGroupStart/ncclGroupEnd only, pairwise as NCCL's do: a send leaves a
// copy for its peer, whose receive takes them in order. A member that waits more than 20 s for
// the others fails with ncclSystemError rather than hanging the test.
// ncclCommAbort frees a communicator and ends a call of its clique that
// waits (hangCall); ncclCommGetAsyncError reports the configured result.
// Tests configure it and read what it saw through loomFakeNccl(); no nccl.h
// here.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_FAKENCCL_H
#define LOOM_TEST_UNIT_RUNTIME_FAKENCCL_H

/// The fake's configuration and what it saw; reset() restores the defaults
/// (between runs, never while a rank runs).
struct FakeNcclState {
  // Configuration.
  int version = 22809; // ncclGetVersion's code: 2.28.9
  /// Makes the call of this name (e.g. "ncclCommInitRank") return
  /// failResult.
  const char *failCall = nullptr;
  int failResult = 0;
  /// What ncclCommGetAsyncError reports for every communicator (an
  /// ncclResult_t: 0 none, 7 in progress).
  int asyncError = 0;
  /// Makes the call of this name wait, as for a peer that never comes,
  /// until its communicator is aborted (then ncclSystemError), or 20 s.
  const char *hangCall = nullptr;

  // What happened.
  int uniqueIds = 0; // ncclGetUniqueId calls
  int commsMade = 0; // ncclCommInitRank calls that succeeded
  int liveComms = 0; // made minus destroyed or aborted
  int aborts = 0;    // ncclCommAbort calls
  int largestComm = 0;
  unsigned allReduces = 0, allGathers = 0, reduceScatters = 0, broadcasts = 0;
  unsigned sends = 0, recvs = 0, groups = 0;
  /// All-reduces called inside ncclGroupStart/End (a gradient bucket's);
  /// the fake runs them at once, as their order on every rank is the same.
  unsigned groupedAllReduces = 0;
  /// The datatype of the last all-reduce or reduce-scatter (nccl.h's value).
  int lastSumType = -1;

  void reset() { *this = FakeNcclState(); }
};

/// The fake's state (the same object for every caller in a process).
extern "C" FakeNcclState *loomFakeNccl();

#endif // LOOM_TEST_UNIT_RUNTIME_FAKENCCL_H
