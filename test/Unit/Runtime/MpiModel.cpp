//===- MpiModel.cpp - The test MLP as an executable, for mpirun -----------===//
//
// usage: LoomMpiModel VARIANT [options]   runs the MLP of SpmdModel.h with
//                                          partitioned plan VARIANT (0-2)
//        LoomMpiModel write-exact W X      writes exact weights and input
//
// The runtime's runMain does what a compiled executable's main() does:
// under mpirun it finds the launcher, initializes MPI and runs the
// partitioned plan as its rank (mpi-model.sh drives it).
//
//===----------------------------------------------------------------------===//

#include "SpmdModel.h"

#include "loom/runtime/exec/Driver.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc == 4 && std::strcmp(argv[1], "write-exact") == 0) {
    std::string error;
    if (loom::test::writeExactMlpFiles(argv[2], argv[3], error))
      return 0;
    std::fprintf(stderr, "LoomMpiModel: %s\n", error.c_str());
    return 1;
  }
  std::vector<loom::test::SpmdVariant> variants = loom::test::spmdMlpVariants();
  int variant = argc > 1 ? std::atoi(argv[1]) : -1;
  if (variant < 0 || variant >= static_cast<int>(variants.size())) {
    std::fprintf(stderr, "usage: LoomMpiModel 0|1|2 [options], or "
                         "LoomMpiModel write-exact WEIGHTS INPUT\n");
    return 2;
  }
  std::string whole = loom::test::wholeMlpPlan();
  loom::runtime::Executable executable;
  executable.kernels = loom::test::kSpmdKernels;
  executable.plan = whole.c_str();
  executable.spmdPlan = variants[variant].plan.c_str();
  // argv without the variant.
  std::vector<char *> args = {argv[0]};
  args.insert(args.end(), argv + 2, argv + argc);
  args.push_back(nullptr);
  return loom::runtime::runMain(argc - 1, args.data(), executable);
}
