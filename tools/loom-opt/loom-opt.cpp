//===- loom-opt.cpp - Runs single Loom and upstream passes (for lit tests) -===//

#include "Conversion/Passes.h"
#include "Loom/IR/LoomDialect.h"
#include "Loom/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::loom::LoomDialect, mlir::func::FuncDialect,
                  mlir::shard::ShardDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::linalg::LinalgDialect,
                  mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect, mlir::gpu::GPUDialect,
                  mlir::bufferization::BufferizationDialect>();
  mlir::registerTransformsPasses();
  mlir::shard::registerShardPasses();
  mlir::loom::registerLoomPasses();
  mlir::loom::registerLoomConversionPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom modular optimizer\n", registry));
}
