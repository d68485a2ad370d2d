//===- TensorMapParams.cpp - Kernels take their tensor maps as pointers ---===//
//
// The runtime passes a TMA tensor map as the device address of the
// CUtensorMap it encoded (the plan's `tmap:` argument); in the kernel that
// is what `convert-nvgpu-to-nvvm` lowers an `!nvgpu.tensormap.descriptor`
// to. Making the parameter an `!llvm.ptr` with a cast at the entry lets the
// function signature lower, and the cast cancels against the lowering's.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMTENSORMAPPARAMS
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomTensorMapParams
    : public loom::impl::LoomTensorMapParamsBase<LoomTensorMapParams> {
  void runOnOperation() override {
    auto pointer = LLVM::LLVMPointerType::get(&getContext());
    for (auto kernel : getOperation().getOps<gpu::GPUFuncOp>()) {
      if (kernel.isExternal())
        continue;
      Block &entry = kernel.getBody().front();
      OpBuilder b = OpBuilder::atBlockBegin(&entry);
      SmallVector<Type> inputs(kernel.getArgumentTypes());
      for (BlockArgument arg : entry.getArguments()) {
        if (!isa<nvgpu::TensorMapDescriptorType>(arg.getType()))
          continue;
        Type descriptor = arg.getType();
        arg.setType(pointer);
        inputs[arg.getArgNumber()] = pointer;
        auto cast = UnrealizedConversionCastOp::create(b, arg.getLoc(),
                                                       descriptor, arg);
        arg.replaceAllUsesExcept(cast.getResult(0), cast);
      }
      kernel.setFunctionType(
          FunctionType::get(&getContext(), inputs, kernel.getResultTypes()));
    }
  }
};
} // namespace
