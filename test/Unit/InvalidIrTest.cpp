//===- InvalidIrTest.cpp - A pass's invalid IR is an internal error naming it -===//

#include "Driver/InvalidIr.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

/// Moves each function's addition above the constant it adds: a value used
/// before it is defined, which the verifier refuses.
struct BreakDominance
    : PassWrapper<BreakDominance, OperationPass<func::FuncOp>> {
  StringRef getArgument() const final { return "test-break-dominance"; }
  void runOnOperation() override {
    getOperation().walk([](arith::AddIOp add) {
      add->moveBefore(add.getLhs().getDefiningOp());
    });
  }
};

/// Refuses the IR with an error of its own, as a pass does a script it
/// cannot compile.
struct RefuseAddition : PassWrapper<RefuseAddition, OperationPass<ModuleOp>> {
  StringRef getArgument() const final { return "test-refuse-addition"; }
  void runOnOperation() override {
    getOperation().walk([&](arith::AddIOp add) {
      add.emitError("cannot compile this addition");
      signalPassFailure();
    });
  }
};

constexpr const char *kModule = R"mlir(
func.func @f() -> i32 {
  %one = arith.constant 1 : i32 loc("model.loom":2:3)
  %two = arith.addi %one, %one : i32 loc("model.loom":3:5)
  return %two : i32
}
)mlir";

struct Said {
  std::string message;
  std::string location;
};

/// Runs `add`'s passes on kModule and returns the errors said.
std::vector<Said> run(void (*add)(PassManager &), LogicalResult &result) {
  MLIRContext context;
  context.loadDialect<func::FuncDialect, arith::ArithDialect>();
  std::vector<Said> said;
  // Registered first, so it hears what the watch says after the run.
  ScopedDiagnosticHandler listen(&context, [&](Diagnostic &diag) {
    std::string location;
    llvm::raw_string_ostream os(location);
    os << diag.getLocation();
    said.push_back({diag.str(), location});
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  EXPECT_TRUE(module);
  PassManager pm(&context);
  add(pm);
  loom::InvalidIrAfterPass watch(pm);
  result = pm.run(*module);
  EXPECT_TRUE(said.empty()) << "errors are held until flush()";
  watch.flush();
  return said;
}

TEST(InvalidIrTest, VerifierFailureNamesThePass) {
  LogicalResult result = success();
  std::vector<Said> said = run(
      [](PassManager &pm) { pm.addNestedPass<func::FuncOp>(std::make_unique<BreakDominance>()); },
      result);
  EXPECT_TRUE(failed(result));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].message.rfind("internal error: the IR after test-break-dominance is "
                                  "invalid (a compiler bug, not the script's): ",
                                  0),
            0u)
      << said[0].message;
  EXPECT_NE(said[0].message.find("does not dominate this use"), std::string::npos)
      << said[0].message;
  EXPECT_EQ(said[0].location, "loc(\"model.loom\":3:5)");
}

TEST(InvalidIrTest, PassErrorIsUnchanged) {
  LogicalResult result = success();
  std::vector<Said> said = run(
      [](PassManager &pm) { pm.addPass(std::make_unique<RefuseAddition>()); }, result);
  EXPECT_TRUE(failed(result));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].message, "cannot compile this addition");
  EXPECT_EQ(said[0].location, "loc(\"model.loom\":3:5)");
}

TEST(InvalidIrTest, ValidIrSaysNothing) {
  LogicalResult result = failure();
  std::vector<Said> said = run([](PassManager &) {}, result);
  EXPECT_TRUE(succeeded(result));
  EXPECT_TRUE(said.empty());
}

} // namespace
