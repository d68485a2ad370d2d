//===- Passes.h - Loom's transformations on the loom dialect --------------===//

#ifndef LOOM_TRANSFORMS_PASSES_H
#define LOOM_TRANSFORMS_PASSES_H

#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/Pass.h"

#include <algorithm>
#include <cstdint>

namespace mlir::loom {

/// The bytes of a gradient bucket of `megabytes` MiB (loom-bucket-gradients'
/// and loom-optimizer-step's bucket-mb), at most 2^62: past it a bucket
/// holds every gradient (the cast of 2^43 MiB and up had overflowed into
/// one all-reduce per gradient, the opposite).
inline int64_t gradientBucketBytes(double megabytes) {
  return static_cast<int64_t>(std::min(megabytes * 1024 * 1024, 0x1p62));
}

#define GEN_PASS_DECL
#include "Loom/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Loom/Transforms/Passes.h.inc"

} // namespace mlir::loom

#endif // LOOM_TRANSFORMS_PASSES_H
