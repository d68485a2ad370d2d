//===- Pipeline.h - Loom's compilation stages as pass pipelines -----------===//

#ifndef LOOM_PIPELINE_PIPELINE_H
#define LOOM_PIPELINE_PIPELINE_H

#include "mlir/Pass/PassManager.h"

namespace loom {

/// loom -> kernels: the single-rank program (stages inlined, shardings
/// dropped) as a model function calling one outlined function per kernel.
void buildKernelsPipeline(mlir::OpPassManager &pm);

/// kernels -> linalg: every kernel on linalg/tensor/arith/math, with
/// elementwise producers fused into their consumers.
void buildLinalgPipeline(mlir::OpPassManager &pm);

/// linalg -> buffers: kernels on memrefs, results turned into
/// out-parameters and temporaries into trailing scratch arguments, so a
/// kernel's arguments are (inputs, outputs, scratch), all plan buffers.
void buildBufferizePipeline(mlir::OpPassManager &pm);

/// buffers -> llvm (CPU): loops and the LLVM dialect with bare-pointer
/// kernel signatures (one `ptr` per buffer, see docs/plan-format.md).
void buildCpuLoweringPipeline(mlir::OpPassManager &pm);

/// Registers the dialects every stage needs.
void registerLoomCompilerDialects(mlir::DialectRegistry &registry);

} // namespace loom

#endif // LOOM_PIPELINE_PIPELINE_H
