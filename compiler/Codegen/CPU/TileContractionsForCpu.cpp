//===- TileContractionsForCpu.cpp - Vectorized register tiles for matmuls -===//

#include "Codegen/Common/MatmulLike.h"
#include "Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/TransformOps/DialectExtension.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/TransformOps/MemRefTransformOps.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/Transforms/TransformInterpreterUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/TransformOps/VectorTransformOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMTILECONTRACTIONSFORCPU
#include "Codegen/CPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// The register tile: 4 rows x 16 columns of f32 accumulators, two AVX2 or
/// one AVX-512 vector per row: per k, one broadcast FMA per row.
static constexpr int64_t kRegisterRows = 4, kRegisterCols = 16;

/// The largest candidate that divides `size`, or 0.
static int64_t largestDivisor(int64_t size, ArrayRef<int64_t> candidates) {
  for (int64_t c : candidates)
    if (size % c == 0)
      return c;
  return 0;
}

/// Cache tile sizes over (batch..., m, n, k), or nothing when the op's
/// shape does not allow whole register tiles.
static std::optional<SmallVector<int64_t>> cacheTiles(linalg::GenericOp op) {
  if (!loom::isMatmulLike(op))
    return std::nullopt;
  SmallVector<int64_t> bounds = op.getStaticLoopRanges();
  size_t batch = bounds.size() - 3;
  int64_t m = largestDivisor(bounds[batch], {64, 32, 16, 8, 4});
  int64_t n = largestDivisor(bounds[batch + 1], {64, 32, 16});
  int64_t k = largestDivisor(bounds[batch + 2], {64, 32, 16, 8, 4, 2, 1});
  if (!m || !n)
    return std::nullopt;
  SmallVector<int64_t> tiles(batch, 1);
  tiles.append({m, n, k});
  return tiles;
}

/// A matmul whose B is K-contiguous ([..., N, K]: `q @ transpose(k)`, the
/// transpose folded into its indexing map) would read B's 16 columns with
/// 16 strided loads each k step in the register tile's broadcast-FMA form
/// (measured 16x slower at 512^3): copy B once into an N-contiguous
/// temporary for the matmul, the copy the transpose kernel used to make.
static void copyKContiguousB(linalg::GenericOp op) {
  unsigned n = op.getNumLoops() - 2, k = n + 1;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned rank = maps[1].getNumResults();
  auto inner = dyn_cast<AffineDimExpr>(maps[1].getResult(rank - 1));
  auto outer = dyn_cast<AffineDimExpr>(maps[1].getResult(rank - 2));
  if (!inner || !outer || inner.getPosition() != k || outer.getPosition() != n)
    return;
  OpOperand *bOperand = op.getDpsInputOperand(1);
  auto type = cast<MemRefType>(bOperand->get().getType());
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 2], shape[rank - 1]);
  SmallVector<int64_t> permutation = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(permutation[rank - 2], permutation[rank - 1]);
  OpBuilder builder(op);
  Location loc = op.getLoc();
  Value copy = memref::AllocOp::create(
      builder, loc, MemRefType::get(shape, type.getElementType()));
  linalg::TransposeOp::create(builder, loc, bOperand->get(), copy, permutation);
  bOperand->set(copy);
  SmallVector<AffineExpr> exprs(maps[1].getResults());
  std::swap(exprs[rank - 2], exprs[rank - 1]);
  maps[1] = AffineMap::get(maps[1].getNumDims(), 0, exprs, op.getContext());
  op.setIndexingMapsAttr(builder.getAffineMapArrayAttr(maps));
  builder.setInsertionPointAfter(op);
  memref::DeallocOp::create(builder, loc, copy);
}

static std::string sizes(ArrayRef<int64_t> values) {
  std::string text = "[";
  for (auto [i, v] : llvm::enumerate(values))
    text += (i ? ", " : "") + std::to_string(v);
  return text + "]";
}

namespace {
struct LoomTileContractionsForCpu
    : public loom::impl::LoomTileContractionsForCpuBase<LoomTileContractionsForCpu> {
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<transform::TransformDialect, vector::VectorDialect,
                    linalg::LinalgDialect, scf::SCFDialect>();
    linalg::registerTransformDialectExtension(registry);
    vector::registerTransformDialectExtension(registry);
    memref::registerTransformDialectExtension(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Tag each op with its own configuration, then build one schedule.
    std::string body;
    llvm::raw_string_ostream os(body);
    unsigned count = 0;
    module.walk([&](linalg::GenericOp op) {
      std::optional<SmallVector<int64_t>> tiles = cacheTiles(op);
      if (!tiles)
        return;
      copyKContiguousB(op);
      unsigned id = count++;
      op->setAttr("loom.cpu_tile", IntegerAttr::get(IntegerType::get(op.getContext(), 64), id));
      SmallVector<int64_t> registers(tiles->size() - 3, 1);
      registers.append({kRegisterRows, kRegisterCols, 1});
      size_t loops = tiles->size();
      std::string handles = "!transform.any_op";
      for (size_t i = 0; i < loops; ++i)
        handles += ", !transform.any_op";
      os << "    %op" << id << " = transform.structured.match attributes{loom.cpu_tile = "
         << id << " : i64} in %root : (!transform.any_op) -> !transform.any_op\n"
         << "    %c" << id << ", %cl" << id << ":" << loops
         << " = transform.structured.tile_using_for %op" << id << " tile_sizes "
         << sizes(*tiles) << " : (!transform.any_op) -> (" << handles << ")\n"
         << "    %r" << id << ", %rl" << id << ":" << loops
         << " = transform.structured.tile_using_for %c" << id << " tile_sizes "
         << sizes(registers) << " : (!transform.any_op) -> (" << handles << ")\n"
         << "    transform.structured.vectorize %r" << id << " : !transform.any_op\n";
    });
    if (count == 0)
      return;
    std::string schedule =
        "module attributes {transform.with_named_sequence} {\n"
        "  transform.named_sequence @__transform_main(%root: !transform.any_op "
        "{transform.readonly}) {\n" +
        body +
        R"(    %funcs = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {
      transform.apply_patterns.memref.fold_memref_alias_ops
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %funcs : !transform.any_op
    %hoisted = transform.structured.hoist_redundant_vector_transfers %funcs : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %hoisted {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_outerproduct
    } : !transform.any_op
    transform.apply_patterns to %hoisted {
      transform.apply_patterns.vector.transfer_to_scf max_transfer_rank = 1 full_unroll = true
    } : !transform.any_op
    // Widen (extf) before broadcasting: 4 + 16 conversions per k step, not
    // 2 x 64 (what the vectorized body of a bf16 matmul starts with).
    transform.apply_patterns to %hoisted {
      transform.apply_patterns.vector.sink_ops
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }
}
)";
    OwningOpRef<ModuleOp> transforms =
        parseSourceString<ModuleOp>(schedule, module.getContext());
    if (!transforms) {
      module.emitError("internal error: the CPU tiling schedule does not parse");
      return signalPassFailure();
    }
    Operation *entry = transforms->lookupSymbol("__transform_main");
    if (failed(transform::applyTransformNamedSequence(
            module, entry, *transforms, transform::TransformOptions())))
      return signalPassFailure();
    module.walk([](linalg::GenericOp op) { op->removeAttr("loom.cpu_tile"); });
    // The matmul body allowed contraction (fastmath<contract>), but the
    // vectorized reduction's add lost the flag: restore it on the register
    // tiles' multiply-add pairs so that LLVM emits FMAs. Only the tiled
    // matmuls are vector code at this point.
    auto contract = arith::FastMathFlags::contract;
    module.walk([&](arith::AddFOp add) {
      if (!isa<VectorType>(add.getType()))
        return;
      for (Value operand : add->getOperands()) {
        if (auto cast = operand.getDefiningOp<vector::ShapeCastOp>())
          operand = cast.getSource();
        auto mul = operand.getDefiningOp<arith::MulFOp>();
        if (!mul || !arith::bitEnumContainsAll(mul.getFastmath(), contract))
          continue;
        add.setFastmath(add.getFastmath() | contract);
      }
    });
  }
};
} // namespace
