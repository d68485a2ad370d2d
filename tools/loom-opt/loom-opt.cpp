//===- loom-opt.cpp - Runs single Loom and upstream passes (for lit tests) -===//

#include "Codegen/CPU/Passes.h"
#include "Codegen/Common/Passes.h"
#include "Codegen/GPU/Passes.h"
#include "Conversion/Passes.h"
#include "Loom/Transforms/Passes.h"
#include "Pipeline/Pipeline.h"

#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  // The dialects and interfaces loomc's stages use, so that any stage's
  // output can be fed back in.
  mlir::DialectRegistry registry;
  loom::registerLoomCompilerDialects(registry);
  mlir::registerTransformsPasses();
  mlir::shard::registerShardPasses();
  mlir::loom::registerLoomPasses();
  mlir::loom::registerLoomConversionPasses();
  mlir::loom::registerLoomCodegenCommonPasses();
  mlir::loom::registerLoomCodegenCPUPasses();
  mlir::loom::registerLoomCodegenGPUPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom modular optimizer\n", registry));
}
