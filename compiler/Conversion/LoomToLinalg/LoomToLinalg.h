//===- LoomToLinalg.h - Patterns lowering loom ops to linalg --------------===//

#ifndef LOOM_CONVERSION_LOOMTOLINALG_H
#define LOOM_CONVERSION_LOOMTOLINALG_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::loom {

/// Elementwise ops, casts and constants.
void populateElementwiseToLinalgPatterns(RewritePatternSet &patterns);
/// loom.dropout: its counter-based mask, or the identity without keys.
void populateDropoutToLinalgPatterns(RewritePatternSet &patterns);
/// Matmul.
void populateContractionToLinalgPatterns(RewritePatternSet &patterns);
/// Softmax, layernorm, rmsnorm (and their gradient), sum/mean/max,
/// cross_entropy (and its gradient), mse. With `normRowBlockBytes`, a
/// norm's gradient runs in blocks of rows of about that many bytes.
void populateReductionsToLinalgPatterns(RewritePatternSet &patterns,
                                        int64_t normRowBlockBytes = 0);
/// Attention and its gradient, in blocks of queries and keys (not in
/// populateLoomToLinalgPatterns: they run after the elementwise fusion).
void populateAttentionToLinalgPatterns(RewritePatternSet &patterns, bool bf16Operands = false);
/// Embedding, arange, transpose, reshape, split, concat, causal_mask.
void populateDataMovementToLinalgPatterns(RewritePatternSet &patterns);

/// broadcast, activation_grad, causal_mask_grad, embedding_grad (the
/// cross_entropy_grad is with the losses, in the reductions).
void populateGradientsToLinalgPatterns(RewritePatternSet &patterns);

/// The routed pieces of an MoE block (loom-expand-moe): moe_route,
/// moe_gate and its gradient, moe_dispatch, moe_combine, moe_slot_dot,
/// moe_stats; and those of expert parallelism (below).
void populateMoeToLinalgPatterns(RewritePatternSet &patterns);

/// The per-rank pieces of all-to-all expert parallelism (loom-partition):
/// moe_counts, moe_offsets, moe_exchange_map.
void populateMoeExchangeToLinalgPatterns(RewritePatternSet &patterns);

/// All of the above.
void populateLoomToLinalgPatterns(RewritePatternSet &patterns, int64_t normRowBlockBytes = 0);

} // namespace mlir::loom

#endif // LOOM_CONVERSION_LOOMTOLINALG_H
