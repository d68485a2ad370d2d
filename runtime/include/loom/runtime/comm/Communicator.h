//===- Communicator.h - Moving bytes between the ranks of a run -*- C++ -*-===//
//
// A multi-rank (SPMD) run moves data between ranks through a Communicator:
// a few byte-level primitives over groups of ranks, on which Collective.h
// builds the plan's collectives. Two implementations: MPI (Mpi.cpp, when
// CMake found MPI) between processes, and LocalWorld, N ranks as threads of
// one process, which the unit tests use to run multi-rank plans without
// mpirun.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_COMMUNICATOR_H
#define LOOM_RUNTIME_COMM_COMMUNICATOR_H

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loom::runtime {

/// A group of ranks that take part in a primitive together. Groups with the
/// same `axes` partition the world (Layout.h's meshGroup makes them: the
/// ranks that share their mesh coordinates on every other axis); `color`
/// tells those groups apart. Every member passes an equal group, except for
/// `index`.
struct CommGroup {
  /// Mesh axis indices, in group order; the communicator caches one
  /// sub-communicator per distinct list.
  std::vector<unsigned> axes;
  /// World ranks, in group order (member i is ranks[i]).
  std::vector<unsigned> ranks;
  /// This rank's position in `ranks`.
  unsigned index = 0;
  /// The same for every member, different for the other groups of `axes`.
  unsigned color = 0;

  unsigned size() const { return static_cast<unsigned>(ranks.size()); }
};

/// All `size` ranks in rank order, as rank `rank` sees them, for the
/// exchanges before a plan's mesh is known (its axes are none of a mesh's).
inline CommGroup worldGroup(unsigned rank, unsigned size) {
  CommGroup group;
  group.axes = {~0u};
  for (unsigned r = 0; r < size; ++r)
    group.ranks.push_back(r);
  group.index = rank;
  return group;
}

/// Byte-level primitives over groups of ranks. Each is collective: every
/// member of `group` calls it, with the same sizes, before any returns
/// (groups of different colors run independently). False with a message if
/// the transport fails; MPI's default error handler aborts every rank
/// instead, so that no rank waits forever for one that gave up.
class Communicator {
public:
  virtual ~Communicator();

  /// This process's rank in the world, and the number of ranks.
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;
  /// This rank's index among the ranks on its node, counted from 0 in rank
  /// order (a multi-rank GPU run takes device localRank % device count).
  /// Collective over the world: every rank calls it.
  virtual bool localRank(unsigned &local, std::string &error) = 0;

  /// Member j's `bytes` bytes at `data` land at `gathered` + j * bytes on
  /// every member (`gathered` holds group.size() * bytes).
  virtual bool allGather(const CommGroup &group, const void *data,
                         uint64_t bytes, void *gathered,
                         std::string &error) = 0;
  /// Like allGather, but only member `root` receives (`gathered` may be null
  /// on the others).
  virtual bool gather(const CommGroup &group, unsigned root, const void *data,
                      uint64_t bytes, void *gathered, std::string &error) = 0;
  /// Member `root`'s `bytes` bytes at `data` replace every other member's.
  virtual bool broadcast(const CommGroup &group, unsigned root, void *data,
                         uint64_t bytes, std::string &error) = 0;
  /// `send` holds group.size() blocks of `blockBytes`: block j goes to member
  /// j, and `recv`'s block j comes from member j.
  virtual bool allToAll(const CommGroup &group, const void *send, void *recv,
                        uint64_t blockBytes, std::string &error) = 0;

  /// Makes whatever `group` needs (MPI: its sub-communicator, whose making
  /// is collective over the world) now, while every rank is here: a
  /// pipelined rank reaches its first collective of a group while others
  /// wait for a message. Collective over the world.
  virtual bool prepareGroup(const CommGroup &group, std::string &error) {
    (void)group;
    (void)error;
    return true;
  }

  /// Point to point (pipeline stages), not collective: `bytes` bytes at
  /// `data` go to world rank `peer`. A send does not wait for its receive
  /// (the bytes are copied first), which the pipeline schedules' deadlock
  /// proof assumes; messages between two ranks arrive in the order sent.
  virtual bool send(unsigned peer, const void *data, uint64_t bytes,
                    std::string &error) = 0;
  /// Waits for the next message from world rank `peer`, which must hold
  /// `bytes` bytes, into `data`.
  virtual bool recv(unsigned peer, void *data, uint64_t bytes,
                    std::string &error) = 0;
  /// Waits until every send so far has left this rank's buffers (MPI) and
  /// frees them; a pipelined step calls it at its end.
  virtual bool flushSends(std::string &error) {
    (void)error;
    return true;
  }
};

/// N ranks in one process: each rank is a thread holding communicator(r).
/// The primitives meet at a rendezvous per group (by axes and color) and
/// copy straight between the members' buffers. A member that waits longer
/// than `timeoutSeconds` for the others fails with a message rather than
/// hanging (a test whose ranks disagree then reports instead of blocking).
class LocalWorld {
public:
  explicit LocalWorld(unsigned size, double timeoutSeconds = 60);
  ~LocalWorld();
  LocalWorld(const LocalWorld &) = delete;
  LocalWorld &operator=(const LocalWorld &) = delete;

  unsigned size() const;
  /// The communicator of `rank` (owned by the world).
  Communicator &communicator(unsigned rank);

  struct State;

private:
  std::unique_ptr<State> state;
};

/// Runs `body(rank, communicator)` on `size` threads of one LocalWorld and
/// waits for all of them.
void runLocalRanks(unsigned size,
                   const std::function<void(unsigned, Communicator &)> &body,
                   double timeoutSeconds = 60);

/// What the environment says about an MPI launcher (mpirun, srun, ...):
/// Open MPI sets OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK, MPICH's
/// Hydra PMI_SIZE and PMI_RANK, PMIx launchers PMIX_RANK.
struct LauncherInfo {
  bool present = false; // any of OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK
  long size = -1;       // -1 where the environment does not say
  long rank = -1;
};
/// Reads the variables through `getenv` (tests pass a fake one).
LauncherInfo
detectLauncher(const std::function<const char *(const char *)> &getenv);
/// detectLauncher with the process environment.
LauncherInfo detectLauncher();

/// Whether this runtime was built with MPI.
bool mpiSupported();

/// Initializes MPI (MPI_Init) and returns the world communicator; call it
/// only under a launcher (detectLauncher), since MPI_Init elsewhere makes a
/// singleton world with implementation-specific side effects. Destroying
/// the communicator frees its sub-communicators and calls MPI_Finalize.
/// Transfers above `chunkBytes` go in pieces (MPI counts in ints; tests
/// pass a small size to exercise the pieces).
/// Without MPI: false with "this runtime was built without MPI".
bool openMpi(int *argc, char ***argv, std::unique_ptr<Communicator> &world,
             std::string &error, uint64_t chunkBytes = uint64_t(1) << 30);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMM_COMMUNICATOR_H
