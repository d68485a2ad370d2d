//===- SpmdModel.h - A small partitioned model for runtime tests -*- C++
//-*-===//
//
// A two-layer MLP, y = (x w1) w2, as a hand-written unpartitioned plan and
// three partitioned ones, with hand-written matmul kernels: the model of
// SpmdDriverTest (in-process ranks) and of MpiModel (ranks under mpirun).
// No GoogleTest here, so that the MPI test programs can use it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_SPMDMODEL_H
#define LOOM_TEST_UNIT_RUNTIME_SPMDMODEL_H

#include "loom/runtime/plan/KernelABI.h"

#include <string>
#include <vector>

namespace loom::test {

/// The kernels of every plan below.
extern const LoomKernel kSpmdKernels[];

/// A buffer of a test plan (all f32).
struct TestBuffer {
  std::string name, role, shape, init, shard;
};

/// A plan named "mlp" with `buffers` one after the other in the arena, then
/// `rest` (kernel, step and collective records); `mesh` ("dp=2 tp=2") may
/// be empty.
std::string makePlan(const std::string &mesh,
                     const std::vector<TestBuffer> &buffers,
                     const std::vector<std::string> &rest);

/// The unpartitioned MLP: x [4, 8], w1 and w2 [8, 8]; outputs y = (x w1) w2,
/// hid = x w1 and y2 = y.
std::string wholeMlpPlan();

/// The partitioned MLP: w1 split by columns and w2 by rows as `split` says
/// ("tp", "a+b"), so that p = h w2 is a partial sum over `axes`: y =
/// all-reduce(p), y2 = all-gather of reduce-scatter(p), hid = all-gather(h).
/// `rows` splits x and the outputs by rows (a data-parallel axis), or "" for
/// none; each rank's x is [m, 8] and its w1 [8, k].
std::string spmdMlpPlan(const std::string &mesh, const std::string &axes,
                        const std::string &split, const std::string &rows,
                        int m, int k);

/// The partitioned plans the tests run, with their rank counts.
struct SpmdVariant {
  const char *name;
  unsigned ranks;
  std::string plan;
};
std::vector<SpmdVariant> spmdMlpVariants();

/// Small integers as the MLP's params (a .safetensors file) and input x
/// (.npy): every sum is exact in f32, whatever its order, so partitioned
/// and whole runs agree bitwise. False with a message on a write error.
bool writeExactMlpFiles(const std::string &weightsPath,
                        const std::string &inputPath, std::string &error);

} // namespace loom::test

#endif // LOOM_TEST_UNIT_RUNTIME_SPMDMODEL_H
