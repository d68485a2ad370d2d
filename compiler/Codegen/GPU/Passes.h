//===- Passes.h - Codegen for the GPU: launches and tensor cores ----------===//

#ifndef LOOM_CODEGEN_GPU_PASSES_H
#define LOOM_CODEGEN_GPU_PASSES_H

#include "Loom/IR/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::loom {

#define GEN_PASS_DECL
#include "Codegen/GPU/Passes.h.inc"

/// Moves the views, constants and index arithmetic a launch reads into its
/// body, so that only whole buffers are passed to the kernel.
void sinkViewsIntoLaunch(gpu::LaunchOp launch);

#define GEN_PASS_REGISTRATION
#include "Codegen/GPU/Passes.h.inc"

} // namespace mlir::loom

#endif // LOOM_CODEGEN_GPU_PASSES_H
