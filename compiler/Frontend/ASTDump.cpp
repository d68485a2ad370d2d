//===- ASTDump.cpp - Prints the syntax tree for `loomc --emit=ast` -------===//

#include "Frontend/AST.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace loom;

namespace {
/// Prints one node per line, indented by depth, tagged with `@line:col`.
class ASTPrinter {
public:
  ASTPrinter(const llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os)
      : sourceMgr(sourceMgr), os(os) {}

  void print(const Module &module);

private:
  void line(SMLoc loc, const llvm::Twine &text) {
    auto [row, col] = sourceMgr.getLineAndColumn(loc);
    os.indent(indent * 2) << text << " @" << row << ":" << col << "\n";
  }
  void printBlock(const Block &block);
  void printStmt(const Stmt &stmt);
  void printExpr(const Expr &expr);
  std::string typeText(const TypeSpec &type);
  std::string shardText(const ShardSpec &spec);
  std::string inline_(const Expr &expr);

  const llvm::SourceMgr &sourceMgr;
  llvm::raw_ostream &os;
  int indent = 0;
};
} // namespace

std::string loom::formatNumber(double value) {
  if (std::isnan(value)) // whatever its sign bit ("-nan" from printf)
    return "nan";
  // Integral values print as integers: 100000, not 1e+05.
  if (value == std::trunc(value) && std::abs(value) < 1e15)
    return std::to_string((int64_t)value);
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

/// An integer literal's digits. The dump comes before elaboration rejects
/// literals above 2^40, so the value may exceed int64 (1e20 written out):
/// print the double's integer value, never a cast of it.
static std::string formatInteger(double value) {
  char text[400];
  std::snprintf(text, sizeof(text), "%.0f", value);
  return text;
}

/// A compact one-line rendering for dimensions and arguments.
std::string ASTPrinter::inline_(const Expr &expr) {
  if (auto *number = llvm::dyn_cast<NumberExpr>(&expr))
    return number->isInteger ? formatInteger(number->value)
                             : formatNumber(number->value);
  if (auto *name = llvm::dyn_cast<NameExpr>(&expr))
    return name->name;
  if (auto *unary = llvm::dyn_cast<UnaryExpr>(&expr))
    return "(-" + inline_(*unary->operand) + ")";
  if (auto *binary = llvm::dyn_cast<BinaryExpr>(&expr))
    return "(" + inline_(*binary->lhs) + " " + binary->op + " " +
           inline_(*binary->rhs) + ")";
  std::string text;
  auto join = [&](const std::vector<ExprPtr> &items) {
    for (size_t i = 0; i < items.size(); ++i)
      text += (i ? ", " : "") + inline_(*items[i]);
  };
  if (auto *list = llvm::dyn_cast<ListExpr>(&expr)) {
    text = "[";
    join(list->elements);
    return text + "]";
  }
  auto &call = llvm::cast<CallExpr>(expr);
  text = call.callee + "(";
  join(call.args);
  for (size_t i = 0; i < call.kwargs.size(); ++i)
    text += ((i || !call.args.empty()) ? ", " : "") + call.kwargs[i].name +
            "=" + inline_(*call.kwargs[i].value);
  return text + ")";
}

std::string ASTPrinter::typeText(const TypeSpec &type) {
  std::string text = type.dtype ? type.dtype->text : "<policy>";
  text += "[";
  for (size_t i = 0; i < type.dims.size(); ++i)
    text += (i ? ", " : "") + inline_(*type.dims[i]);
  return text + "]";
}

std::string ASTPrinter::shardText(const ShardSpec &spec) {
  std::string text = " shard [";
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    text += i ? ", " : "";
    const auto &axes = spec.dims[i].axes;
    if (axes.empty())
      text += "_";
    for (size_t a = 0; a < axes.size(); ++a)
      text += (a ? ", " : (axes.size() > 1 ? "(" : "")) + axes[a].text;
    if (axes.size() > 1)
      text += ")";
  }
  return text + "]";
}

void ASTPrinter::printExpr(const Expr &expr) {
  ++indent;
  if (auto *binary = llvm::dyn_cast<BinaryExpr>(&expr)) {
    line(expr.getLoc(), std::string("Binary '") + binary->op + "'");
    printExpr(*binary->lhs);
    printExpr(*binary->rhs);
  } else if (auto *unary = llvm::dyn_cast<UnaryExpr>(&expr)) {
    line(expr.getLoc(), "Negate");
    printExpr(*unary->operand);
  } else if (auto *call = llvm::dyn_cast<CallExpr>(&expr)) {
    line(expr.getLoc(), (call->recompute ? "Call (recompute) " : "Call ") + call->callee);
    for (const ExprPtr &arg : call->args)
      printExpr(*arg);
    ++indent;
    for (const KeywordArg &kwarg : call->kwargs)
      line(kwarg.loc, "Keyword " + kwarg.name + " = " + inline_(*kwarg.value));
    --indent;
  } else if (llvm::isa<NameExpr>(expr)) {
    line(expr.getLoc(), "Name " + inline_(expr));
  } else if (llvm::isa<NumberExpr>(expr)) {
    line(expr.getLoc(), "Number " + inline_(expr));
  } else {
    line(expr.getLoc(), "List " + inline_(expr));
  }
  --indent;
}

void ASTPrinter::printBlock(const Block &block) {
  ++indent;
  for (const StmtPtr &stmt : block)
    printStmt(*stmt);
  --indent;
}

static const char *stmtName(Stmt::Kind kind) {
  switch (kind) {
  case Stmt::Kind::Dim: return "Dim";
  case Stmt::Kind::Input: return "Input";
  case Stmt::Kind::Param: return "Param";
  case Stmt::Kind::Let: return "Let";
  case Stmt::Kind::Assign: return "Assign";
  case Stmt::Kind::Output: return "Output";
  case Stmt::Kind::Return: return "Return";
  case Stmt::Kind::For: return "For";
  case Stmt::Kind::Stage: return "Stage";
  case Stmt::Kind::Pipeline: return "Pipeline";
  case Stmt::Kind::Train: return "Train";
  }
  return "?";
}

void ASTPrinter::printStmt(const Stmt &stmt) {
  std::string text = stmtName(stmt.kind);
  for (size_t i = 0; i < stmt.names.size(); ++i)
    text += (i ? ", " : " ") + stmt.names[i].text;
  if (stmt.type)
    text += " : " + typeText(*stmt.type);
  if (stmt.shard)
    text += shardText(*stmt.shard);
  if (stmt.init) {
    text += " init " + stmt.init->kind.text;
    for (size_t i = 0; i < stmt.init->args.size(); ++i)
      text += (i ? ", " : "(") + inline_(*stmt.init->args[i]);
    if (!stmt.init->args.empty())
      text += ")";
  }
  if (stmt.kind == Stmt::Kind::For)
    text += " in " + inline_(*stmt.value) + ".." + inline_(*stmt.upper);
  if (stmt.kind == Stmt::Kind::Stage)
    text += " " + inline_(*stmt.value);
  line(stmt.loc, text);
  if (stmt.value && stmt.kind != Stmt::Kind::For &&
      stmt.kind != Stmt::Kind::Stage)
    printExpr(*stmt.value);
  ++indent;
  for (const TrainEntry &entry : stmt.entries)
    line(entry.key.loc, "Setting " + entry.key.text + " = " + inline_(*entry.value));
  --indent;
  printBlock(stmt.body);
}

void ASTPrinter::print(const Module &module) {
  for (const MeshDecl &mesh : module.meshes) {
    std::string text = "Mesh " + mesh.name.text + " [";
    for (size_t i = 0; i < mesh.axes.size(); ++i)
      text += (i ? ", " : "") + mesh.axes[i].name.text + " = " +
              inline_(*mesh.axes[i].size);
    line(mesh.loc, text + "]");
  }
  for (const PrecisionDecl &precision : module.precisions)
    line(precision.loc, "Precision " + precision.compute.text + " accumulate " +
                            (precision.accumulate ? precision.accumulate->text
                                                  : std::string("<default>")));
  for (const StmtPtr &dim : module.globals)
    printStmt(*dim);
  for (const FunctionDecl &fn : module.functions) {
    std::string text = (fn.isMoe ? "Moe " : "Layer ") + fn.name.text + "(";
    for (size_t i = 0; i < fn.args.size(); ++i)
      text += (i ? ", " : "") + fn.args[i].text;
    text += ")";
    for (const KeywordArg &option : fn.options)
      text += " " + option.name + "=" + inline_(*option.value);
    line(fn.loc, text);
    printBlock(fn.body);
  }
  for (const ModelDecl &model : module.models) {
    line(model.loc, "Model " + model.name.text);
    printBlock(model.body);
  }
}

void loom::dumpAST(const Module &module, const llvm::SourceMgr &sourceMgr,
                   llvm::raw_ostream &os) {
  ASTPrinter(sourceMgr, os).print(module);
}
