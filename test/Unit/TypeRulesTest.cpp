//===- TypeRulesTest.cpp - Shape and dtype rules shared by Sema and ops ---===//

#include "Loom/IR/TypeRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::loom;

TEST(TypeRules, BroadcastAlignsTrailingDimensions) {
  auto shape = broadcastShapes({8, 1, 16}, {4, 16}, nullptr);
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (SmallVector<int64_t>{8, 4, 16}));
  EXPECT_TRUE(failed(broadcastShapes({8, 3}, {4}, nullptr)));
}

TEST(TypeRules, MatmulShapes) {
  EXPECT_EQ(*matmulShape({2, 16, 64}, {64, 32}, nullptr),
            (SmallVector<int64_t>{2, 16, 32}));
  EXPECT_EQ(*matmulShape({2, 4, 16, 8}, {2, 4, 8, 16}, nullptr),
            (SmallVector<int64_t>{2, 4, 16, 16}));
  EXPECT_TRUE(failed(matmulShape({16, 64}, {32, 8}, nullptr)));
  EXPECT_TRUE(failed(matmulShape({64}, {64, 8}, nullptr)));
}

TEST(TypeRules, TransposeNeedsAPermutation) {
  EXPECT_EQ(*transposeShape({2, 3, 4}, {2, 0, 1}, nullptr),
            (SmallVector<int64_t>{4, 2, 3}));
  EXPECT_TRUE(failed(transposeShape({2, 3, 4}, {0, 0, 1}, nullptr)));
  EXPECT_TRUE(failed(transposeShape({2, 3}, {0, 1, 2}, nullptr)));
}

TEST(TypeRules, PromotionWidensToF32Only) {
  MLIRContext context;
  Builder b(&context);
  EXPECT_EQ(*promoteElementTypes(b.getBF16Type(), b.getF32Type(), nullptr),
            b.getF32Type());
  EXPECT_TRUE(failed(promoteElementTypes(b.getBF16Type(), b.getF16Type(), nullptr)));
  EXPECT_TRUE(failed(promoteElementTypes(b.getI32Type(), b.getF32Type(), nullptr)));
}

TEST(TypeRules, ReduceAndConcat) {
  EXPECT_EQ(*reduceShape({4, 8, 16}, 1, false, nullptr),
            (SmallVector<int64_t>{4, 16}));
  EXPECT_EQ(*reduceShape({4, 8, 16}, 1, true, nullptr),
            (SmallVector<int64_t>{4, 1, 16}));
  SmallVector<ArrayRef<int64_t>> shapes;
  SmallVector<int64_t> a{4, 8}, c{4, 2};
  shapes.push_back(a);
  shapes.push_back(c);
  EXPECT_EQ(*concatShape(shapes, 1, nullptr), (SmallVector<int64_t>{4, 10}));
  EXPECT_TRUE(failed(concatShape(shapes, 0, nullptr)));
}
