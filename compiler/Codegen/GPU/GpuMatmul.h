//===- GpuMatmul.h - A matmul-like op as the GPU matmul builders see it ---===//

#ifndef LOOM_CODEGEN_GPU_GPUMATMUL_H
#define LOOM_CODEGEN_GPU_GPUMATMUL_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::loom {

/// The loops and operands of a bufferized matmul-like op (isMatmulLike), and
/// how a kernel addresses its operands: both the SIMT and the tensor-core
/// builders run one block per output tile and one batch index per block z.
struct GpuMatmul {
  explicit GpuMatmul(linalg::GenericOp op);

  /// Loop bounds (batch..., m, n, k), the batch count and the sizes.
  SmallVector<int64_t> bounds;
  unsigned batch;
  int64_t m, n, k, batches;
  /// A, B and the accumulator C, and their indexing maps.
  Value a, b, c;
  SmallVector<AffineMap> maps;

  /// Sets the batch indices from the flattened block index z (row-major).
  void setBatchFromBlock(OpBuilder &builder, Location loc, Value blockZ);
  /// The indices of operand `which` (0: A, 1: B, 2: C) at loop values
  /// (m, n, k) of the current batch.
  SmallVector<Value> indices(OpBuilder &builder, Location loc, unsigned which,
                             Value mIndex, Value nIndex, Value kIndex) const;

private:
  SmallVector<Value> batchIndex;
};

} // namespace mlir::loom

#endif // LOOM_CODEGEN_GPU_GPUMATMUL_H
