//===- ParserTest.cpp - Syntax trees and syntax errors -------------------===//

#include "Frontend/Parser.h"

#include <gtest/gtest.h>

using namespace loom;

namespace {
struct Parsed {
  std::unique_ptr<Module> module;
  std::vector<std::string> errors;
};

Parsed parse(llvm::StringRef text) {
  Parsed out;
  auto onError = [&](llvm::SMLoc, const llvm::Twine &message) {
    out.errors.push_back(message.str());
  };
  out.module = Parser(text, onError).parseModule();
  return out;
}
} // namespace

TEST(Parser, MatmulBindsTighterThanAdd) {
  Parsed out = parse("model m {\n  output y = a + b @ c\n}\n");
  ASSERT_TRUE(out.module) << out.errors.front();
  const Stmt &output = *out.module->models[0].body[0];
  auto *add = llvm::dyn_cast<BinaryExpr>(output.value.get());
  ASSERT_TRUE(add);
  EXPECT_EQ(add->op, '+');
  auto *matmul = llvm::dyn_cast<BinaryExpr>(add->rhs.get());
  ASSERT_TRUE(matmul);
  EXPECT_EQ(matmul->op, '@');
}

TEST(Parser, DeclarationsCarryShardingAndInit) {
  Parsed out = parse("mesh g[dp = 2, tp = 4]\nmodel m {\n"
                     "  param w : bf16[8, 16] shard [(dp, tp), _] init uniform(-1, 1)\n"
                     "  output y = w\n}\n");
  ASSERT_TRUE(out.module);
  ASSERT_EQ(out.module->meshes.size(), 1u);
  EXPECT_EQ(out.module->meshes[0].axes.size(), 2u);
  const Stmt &param = *out.module->models[0].body[0];
  ASSERT_TRUE(param.shard && param.init && param.type);
  EXPECT_EQ(param.shard->dims[0].axes.size(), 2u);
  EXPECT_TRUE(param.shard->dims[1].axes.empty());
  EXPECT_EQ(param.init->kind.text, "uniform");
  EXPECT_EQ(param.type->dtype->text, "bf16");
}

TEST(Parser, ReportsSeveralErrorsAndRecovers) {
  Parsed out = parse("model m {\n  let = 3\n  output y = a +\n  let b c\n}\n");
  EXPECT_FALSE(out.module);
  EXPECT_EQ(out.errors.size(), 3u);
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  std::string text = "model m {\n  output y = " + std::string(100000, '(') + "\n}\n";
  Parsed out = parse(text);
  EXPECT_FALSE(out.module);
  ASSERT_FALSE(out.errors.empty());
  EXPECT_EQ(out.errors.front(), "expression nested too deeply");
}

TEST(Parser, KeywordArgumentsFollowPositionalOnes) {
  Parsed out = parse("model m {\n  output y = softmax(axis = 1, x)\n}\n");
  EXPECT_FALSE(out.module);
  ASSERT_EQ(out.errors.size(), 1u);
  EXPECT_EQ(out.errors[0], "positional argument after a keyword argument");
}
