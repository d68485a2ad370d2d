//===- Main.cpp - main() of the executables loomc links -------------------===//
//
// The kernels, the plan and the GPU image come from the glue object loomc
// generates next to the kernels' object code.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/Driver.h"
#include "loom/runtime/KernelABI.h"

int main(int argc, char **argv) {
  loom::runtime::Executable executable;
  executable.kernels = loom_kernels;
  executable.plan = loom_plan;
  executable.gpuImage = loom_gpu_image;
  executable.gpuImageSize = loom_gpu_image_size;
  return loom::runtime::runMain(argc, argv, executable);
}
