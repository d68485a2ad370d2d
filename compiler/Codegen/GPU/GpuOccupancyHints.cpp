//===- GpuOccupancyHints.cpp - Resident blocks ptxas should allow for -----===//
//
// The tensor-core pipeline sizes its dynamic shared memory for a number of
// resident blocks per SM; ptxas, not told, may give one block all the
// registers it likes (160 for a 128 x 128 tile with K step 64) and leave
// room for one block only. `nvvm.minctasm` (PTX `.minnctapersm`) makes it
// fit the blocks the shared memory allows. A kernel that rebalances
// registers between warpgroups (`setmaxnreg`) is built for one block an SM
// and gets 1 whatever its shared memory: with more, ptxas would cap its
// registers below what setmaxnreg.inc asks, and the consumers would wait
// for registers forever.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMGPUOCCUPANCYHINTS
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomGpuOccupancyHints
    : public loom::impl::LoomGpuOccupancyHintsBase<LoomGpuOccupancyHints> {
  using Base::Base;
  void runOnOperation() override {
    getOperation().walk([&](gpu::LaunchFuncOp launch) {
      Value size = launch.getDynamicSharedMemorySize();
      std::optional<int64_t> bytes = size ? getConstantIntValue(size) : std::nullopt;
      if (!bytes || *bytes <= 0)
        return;
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          launch, launch.getKernel());
      if (!kernel)
        return;
      int64_t blocks = std::max<int64_t>(1, sharedPerSM / (*bytes + reservedSharedPerBlock));
      if (kernel.walk([](NVVM::SetMaxRegisterOp) { return WalkResult::interrupt(); })
              .wasInterrupted())
        blocks = 1;
      // A kernel launched with several sizes keeps the smallest count.
      StringRef name = NVVM::NVVMDialect::getMinctasmAttrName();
      if (auto known = kernel->getAttrOfType<IntegerAttr>(name))
        blocks = std::min(blocks, known.getInt());
      kernel->setAttr(name, Builder(&getContext()).getI32IntegerAttr(blocks));
    });
  }
};
} // namespace
