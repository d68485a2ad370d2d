//===- Main.cpp - main() of the executables loomc links -------------------===//
//
// The kernels, the plans and the GPU image come from the glue object loomc
// generates next to the kernels' object code.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/exec/Driver.h"
#include "loom/runtime/plan/KernelABI.h"

// Weak: a glue object from a loomc that predates partitioned plans does not
// define it; its address is then null and the executable runs on one rank.
#pragma weak loom_spmd_plan
#pragma weak loom_cpu_target
#pragma weak loom_build_id

int main(int argc, char **argv) {
  loom::runtime::Executable executable;
  executable.kernels = loom_kernels;
  executable.plan = loom_plan;
  executable.spmdPlan = loom_spmd_plan;
  executable.cpuTarget = loom_cpu_target;
  executable.buildId = loom_build_id;
  executable.gpuImage = loom_gpu_image;
  executable.gpuImageSize = loom_gpu_image_size;
  return loom::runtime::runMain(argc, argv, executable);
}
