//===- Main.cpp - main() of the executables loomc links -------------------===//
//
// The kernels and the plan come from the glue object loomc generates next to
// the kernels' object code.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/Driver.h"
#include "loom/runtime/KernelABI.h"

int main(int argc, char **argv) {
  return loom::runtime::runMain(argc, argv, loom_kernels, loom_plan);
}
