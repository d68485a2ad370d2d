//===- AST.h - Syntax tree of a Loom script ------------------------------===//
//
// The tree mirrors the source: dimensions are still expressions, loops are
// not unrolled and layers not instantiated. MLIRGen elaborates it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_FRONTEND_AST_H
#define LOOM_FRONTEND_AST_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom {

using llvm::SMLoc;

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind { Number, Name, Unary, Binary, Call, List };
  Expr(Kind kind, SMLoc loc) : kind(kind), loc(loc) {}
  virtual ~Expr() = default;
  Kind getKind() const { return kind; }
  SMLoc getLoc() const { return loc; }

private:
  Kind kind;
  SMLoc loc;
};
using ExprPtr = std::unique_ptr<Expr>;

/// `512`, `0.02`, `1e-5`.
struct NumberExpr : Expr {
  NumberExpr(SMLoc loc, double value, bool isInteger)
      : Expr(Kind::Number, loc), value(value), isInteger(isInteger) {}
  double value;
  bool isInteger;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Number; }
};

/// A value, dimension, dtype or mesh axis name.
struct NameExpr : Expr {
  NameExpr(SMLoc loc, std::string name)
      : Expr(Kind::Name, loc), name(std::move(name)) {}
  std::string name;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }
};

/// `-x`.
struct UnaryExpr : Expr {
  UnaryExpr(SMLoc loc, char op, ExprPtr operand)
      : Expr(Kind::Unary, loc), op(op), operand(std::move(operand)) {}
  char op;
  ExprPtr operand;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Unary; }
};

/// `a + b`, `a - b`, `a * b`, `a / b`, `a @ b`; the location is the operator's.
struct BinaryExpr : Expr {
  BinaryExpr(SMLoc loc, char op, ExprPtr lhs, ExprPtr rhs)
      : Expr(Kind::Binary, loc), op(op), lhs(std::move(lhs)),
        rhs(std::move(rhs)) {}
  char op;
  ExprPtr lhs, rhs;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }
};

/// `name = value` inside a call's parentheses.
struct KeywordArg {
  std::string name;
  SMLoc loc;
  ExprPtr value;
};

/// `f(a, b, axis = -1)`: a builtin, a layer or an MoE block.
struct CallExpr : Expr {
  CallExpr(SMLoc loc, std::string callee) : Expr(Kind::Call, loc), callee(std::move(callee)) {}
  std::string callee;
  std::vector<ExprPtr> args;
  std::vector<KeywordArg> kwargs;
  /// `recompute block(h)`: the layer instance's activations are recomputed
  /// in the backward instead of kept.
  bool recompute = false;
  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }
};

/// `[0, 2, 1, 3]`: shapes and permutations passed to builtins.
struct ListExpr : Expr {
  ListExpr(SMLoc loc) : Expr(Kind::List, loc) {}
  std::vector<ExprPtr> elements;
  static bool classof(const Expr *e) { return e->getKind() == Kind::List; }
};

//===----------------------------------------------------------------------===//
// Declarations of tensors
//===----------------------------------------------------------------------===//

struct Name {
  std::string text;
  SMLoc loc;
};

/// `bf16[B, 512]`; without a dtype the policy's compute type applies.
struct TypeSpec {
  SMLoc loc;
  std::optional<Name> dtype;
  std::vector<ExprPtr> dims;
};

/// One entry of a shard spec: `_` (empty), `tp`, or `(dp, tp)`.
struct ShardDim {
  SMLoc loc;
  std::vector<Name> axes;
};

/// `shard [dp, _]`.
struct ShardSpec {
  SMLoc loc;
  std::vector<ShardDim> dims;
};

/// `init normal(0.02)`.
struct InitSpec {
  Name kind;
  std::vector<ExprPtr> args;
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Block = std::vector<StmtPtr>;

/// `key = value` or `key value` entries of a train section.
struct TrainEntry {
  Name key;
  ExprPtr value;
};

struct Stmt {
  enum class Kind {
    Dim, Input, Param, Let, Assign, Output, Return, For, Stage, Pipeline, Train
  };
  Stmt(Kind kind, SMLoc loc) : kind(kind), loc(loc) {}
  Kind kind;
  SMLoc loc;

  std::vector<Name> names;            // Dim/Input/Param/Output/Assign: one; Let: 1+; For: loop var; Pipeline: axis
  std::optional<TypeSpec> type;       // Input, Param
  std::optional<ShardSpec> shard;     // Input, Param, Let
  std::optional<InitSpec> init;       // Param
  ExprPtr value;                      // Dim, Let, Assign, Output, Return, Stage (number), For (low)
  ExprPtr upper;                      // For (high, exclusive)
  Block body;                         // For, Stage
  std::vector<TrainEntry> entries;    // Train
};

//===----------------------------------------------------------------------===//
// Top-level declarations
//===----------------------------------------------------------------------===//

struct MeshAxis {
  Name name;
  ExprPtr size;
};

struct MeshDecl {
  SMLoc loc;
  Name name;
  std::vector<MeshAxis> axes;
};

struct PrecisionDecl {
  SMLoc loc;
  Name compute;
  std::optional<Name> accumulate;
};

/// `layer name(args) { ... }` and `moe name(arg) options { ... }`.
struct FunctionDecl {
  SMLoc loc;
  bool isMoe = false;
  Name name;
  std::vector<Name> args;
  std::vector<KeywordArg> options; // MoE: experts, top_k, capacity, axis
  Block body;
};

struct ModelDecl {
  SMLoc loc;
  Name name;
  Block body;
};

/// A whole script.
struct Module {
  std::vector<MeshDecl> meshes;
  std::vector<PrecisionDecl> precisions;
  Block globals; // file-level `dim` statements
  std::vector<FunctionDecl> functions;
  std::vector<ModelDecl> models;
};

/// The shortest decimal text that reads back as exactly `value` ("0.02").
std::string formatNumber(double value);

/// Prints the tree (`loomc --emit=ast`), with `line:col` of each node.
void dumpAST(const Module &module, const llvm::SourceMgr &sourceMgr,
             llvm::raw_ostream &os);

} // namespace loom

#endif // LOOM_FRONTEND_AST_H
