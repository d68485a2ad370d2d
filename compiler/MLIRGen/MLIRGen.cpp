//===- MLIRGen.cpp - Elaborates declarations, statements, expressions ----===//

#include "MLIRGen/MLIRGen.h"
#include "MLIRGen/Elaborator.h"
#include "MLIRGen/BatchRows.h"

#include "loom/runtime/plan/Plan.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

using namespace loom;
using namespace mlir;
using namespace mlir::loom;
using llvm::StringRef;

Elaborator::Elaborator(MLIRContext &context, const llvm::SourceMgr &sourceMgr)
    : context(context), sourceMgr(sourceMgr), builder(&context) {
  context.loadDialect<LoomDialect, func::FuncDialect,
                      shard::ShardDialect>();
}

namespace loom {
mlir::Location toLocation(MLIRContext &context,
                                const llvm::SourceMgr &sourceMgr, SMLoc where) {
  unsigned buffer = sourceMgr.FindBufferContainingLoc(where);
  if (!buffer)
    return UnknownLoc::get(&context);
  auto [line, col] = sourceMgr.getLineAndColumn(where, buffer);
  StringRef file = sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier();
  return FileLineColLoc::get(&context, file, line, col);
}
} // namespace loom

mlir::Location Elaborator::loc(SMLoc where) {
  return toLocation(context, sourceMgr, where);
}

InFlightDiagnostic Elaborator::error(SMLoc where) {
  ++errorCount;
  InFlightDiagnostic diag = emitError(loc(where));
  // An error in a layer's body depends on the call's arguments: say which
  // call (innermost first; a few of a deep chain).
  constexpr size_t kNotedCalls = 4;
  size_t noted = 0;
  for (auto [site, fn] : llvm::reverse(callSites)) {
    if (noted++ == kNotedCalls) {
      diag.attachNote(loc(callSites.front().first))
          << "and " << callSites.size() - kNotedCalls << " more enclosing call"
          << (callSites.size() - kNotedCalls == 1 ? "" : "s")
          << ", the outermost here";
      break;
    }
    diag.attachNote(loc(site)) << "in this call of " << (fn->isMoe ? "MoE block '" : "layer '")
                               << fn->name.text << "'";
  }
  return diag;
}

namespace loom {
std::optional<int64_t> normalizeAxis(Elaborator &e, int64_t axis,
                                           int64_t rank, SMLoc where) {
  int64_t normalized = axis < 0 ? axis + rank : axis;
  if (failed(checkAxis(normalized, rank, nullptr))) {
    e.error(where) << "axis " << axis << " is out of range for a tensor of rank "
                   << rank;
    return std::nullopt;
  }
  return normalized;
}
} // namespace loom

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

std::optional<Type> Elaborator::resolveDtype(const Name &name) {
  Type type = llvm::StringSwitch<Type>(name.text)
                  .Case("f32", builder.getF32Type())
                  .Case("f16", builder.getF16Type())
                  .Case("bf16", builder.getBF16Type())
                  .Case("i32", builder.getI32Type())
                  .Case("i64", builder.getI64Type())
                  .Default(Type());
  if (!type) {
    error(name.loc) << "unknown dtype '" << name.text
                    << "' (expected f32, f16, bf16, i32 or i64)";
    return std::nullopt;
  }
  return type;
}

/// Integers in scripts (sizes, axes, counts) stay within 2^40, far above
/// any real size and far below int64 overflow in products of two.
static constexpr int64_t kMaxInteger = int64_t(1) << 40;

std::optional<int64_t> Elaborator::evalInt(const Expr &expr, Scope &scope) {
  if (auto *number = llvm::dyn_cast<NumberExpr>(&expr)) {
    if (!number->isInteger) {
      error(expr.getLoc()) << "expected an integer";
      return std::nullopt;
    }
    if (std::abs(number->value) > kMaxInteger) {
      error(expr.getLoc()) << "integer is too large (at most 2^40)";
      return std::nullopt;
    }
    return (int64_t)number->value;
  }
  if (auto *name = llvm::dyn_cast<NameExpr>(&expr)) {
    for (Scope *s = &scope; s; s = s->parent)
      if (auto it = s->ints.find(name->name); it != s->ints.end())
        return it->second;
    error(expr.getLoc()) << "unknown dimension '" << name->name << "'";
    return std::nullopt;
  }
  if (auto *unary = llvm::dyn_cast<UnaryExpr>(&expr)) {
    std::optional<int64_t> v = evalInt(*unary->operand, scope);
    return v ? std::optional<int64_t>(-*v) : std::nullopt;
  }
  if (auto *binary = llvm::dyn_cast<BinaryExpr>(&expr)) {
    std::optional<int64_t> l = evalInt(*binary->lhs, scope);
    std::optional<int64_t> r = evalInt(*binary->rhs, scope);
    if (!l || !r)
      return std::nullopt;
    int64_t result = 0;
    switch (binary->op) {
    case '+': result = *l + *r; break;
    case '-': result = *l - *r; break;
    case '*':
      if (__builtin_mul_overflow(*l, *r, &result)) {
        error(expr.getLoc()) << "integer overflow";
        return std::nullopt;
      }
      break;
    case '/':
      if (*r == 0) {
        error(expr.getLoc()) << "division by zero";
        return std::nullopt;
      }
      if (*l % *r != 0) {
        error(expr.getLoc()) << *l << " is not divisible by " << *r;
        return std::nullopt;
      }
      result = *l / *r;
      break;
    default:
      error(expr.getLoc()) << "'" << binary->op
                           << "' is not an integer operation";
      return std::nullopt;
    }
    if (std::abs(result) > kMaxInteger) {
      error(expr.getLoc()) << "integer overflow";
      return std::nullopt;
    }
    return result;
  }
  error(expr.getLoc()) << "expected an integer";
  return std::nullopt;
}

std::optional<double> Elaborator::evalNumber(const Expr &expr, Scope &scope) {
  if (auto *unary = llvm::dyn_cast<UnaryExpr>(&expr)) {
    std::optional<double> v = evalNumber(*unary->operand, scope);
    return v ? std::optional<double>(-*v) : std::nullopt;
  }
  // An initializer's, an eps's or a learning rate's inf or NaN (1e999,
  // 1e999 - 1e999) would train on nonsense without a word.
  auto finite = [&](double number) -> std::optional<double> {
    if (std::isfinite(number))
      return number;
    error(expr.getLoc()) << formatNumber(number) << " is not a finite number";
    return std::nullopt;
  };
  if (auto *number = llvm::dyn_cast<NumberExpr>(&expr))
    return finite(number->value);
  Operand value = emitExpr(expr, scope);
  if (value.kind == Operand::Kind::Number)
    return finite(value.number);
  if (!value.isPoison())
    error(expr.getLoc()) << "expected a number";
  return std::nullopt;
}

Value Elaborator::requireFloat(Value value, SMLoc where, StringRef what) {
  if (!value)
    return value;
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  if (isa<FloatType>(element))
    return value;
  error(where) << "dtype conflict: " << what << " needs a float tensor, got "
               << value.getType()
               << " (integer tensors only index embeddings and labels)";
  return Value();
}

/// Whether `number` rounds to infinity in `type` (to nearest even): 65519
/// is f16's 65504, 65520 its inf.
static bool roundsToInfinity(double number, FloatType type) {
  APFloat value(number);
  bool lost;
  value.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return value.isInfinity();
}

/// Whether a nonzero `number` rounds to 0 in `type` (to nearest even).
static bool roundsToZero(double number, FloatType type) {
  APFloat value(number);
  bool lost;
  value.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return value.isZero() && number != 0;
}

/// A float type's least positive value, as "5.96e-08".
static std::string leastValue(FloatType type) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g",
                APFloat::getSmallest(type.getFloatSemantics()).convertToDouble());
  return text;
}

bool Elaborator::fitsF32(double number, SMLoc where, StringRef what) {
  if (roundsToInfinity(number, builder.getF32Type())) {
    error(where) << what << " " << formatNumber(number) << " is out of range for f32";
    return false;
  }
  if (static_cast<float>(number) == 0 && number != 0) {
    error(where) << what << " " << formatNumber(number)
                 << " rounds to 0 in f32, where it is used";
    return false;
  }
  return true;
}

Value Elaborator::scalarLike(double number, Value like, SMLoc where) {
  Type element = cast<RankedTensorType>(like.getType()).getElementType();
  // A literal that overflows the tensor's dtype would silently become inf.
  auto floatType = cast<FloatType>(element);
  if (!std::isfinite(number)) {
    error(where) << formatNumber(number) << " is not a finite number";
    return Value();
  }
  if (roundsToInfinity(number, floatType)) {
    error(where) << formatNumber(number) << " is out of range for " << element;
    return Value();
  }
  // And one that underflows would silently become 0 (`h * 1e-8` in f16 is
  // zeros, `inf * 1e-8` NaN).
  if (roundsToZero(number, floatType)) {
    InFlightDiagnostic diag = error(where);
    diag << formatNumber(number) << " rounds to 0 in " << element << " (its least value is "
         << leastValue(floatType);
    if (!element.isF32())
      diag << "; cast the tensor to f32 first";
    diag << ")";
    return Value();
  }
  return ConstantOp::create(builder, loc(where),
                                  RankedTensorType::get({}, element),
                                  builder.getF64FloatAttr(number));
}

Value Elaborator::castTo(Value value, Type element, SMLoc where) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == element)
    return value;
  return CastOp::create(builder, loc(where), type.clone(element), value);
}

Value Elaborator::emitTensor(const Expr &expr, Scope &scope, StringRef what) {
  Operand value = emitExpr(expr, scope);
  switch (value.kind) {
  case Operand::Kind::Tensor:
    return value.tensor;
  case Operand::Kind::Poison:
    return Value();
  case Operand::Kind::Number:
    error(expr.getLoc()) << "expected a tensor for " << what
                         << ", got a number";
    return Value();
  case Operand::Kind::Tuple:
    error(expr.getLoc()) << "expected one tensor for " << what << ", got "
                         << value.tuple.size() << " values";
    return Value();
  }
  return Value();
}

Operand Elaborator::emitExpr(const Expr &expr, Scope &scope) {
  switch (expr.getKind()) {
  case Expr::Kind::Number: {
    auto &number = llvm::cast<NumberExpr>(expr);
    return Operand::ofNumber(number.value, number.isInteger);
  }
  case Expr::Kind::Name: {
    auto &name = llvm::cast<NameExpr>(expr);
    if (auto it = scope.values.find(name.name); it != scope.values.end())
      return Operand::ofTensor(it->second);
    // Dimensions and loop variables are numbers in tensor expressions.
    for (Scope *s = &scope; s; s = s->parent)
      if (auto it = s->ints.find(name.name); it != s->ints.end())
        return Operand::ofNumber(it->second, true);
    // A layer's name is not a value (`let h = block` for `block(h)`).
    if (auto fn = functions.find(name.name); fn != functions.end()) {
      error(expr.getLoc()) << "'" << name.name << "' is "
                           << (fn->second->isMoe ? "an MoE block" : "a layer")
                           << ", not a value: call it, " << name.name << "(...)";
      return Operand::poison();
    }
    error(expr.getLoc()) << "unknown name '" << name.name << "'";
    return Operand::poison();
  }
  case Expr::Kind::Unary: {
    auto &unary = llvm::cast<UnaryExpr>(expr);
    Operand operand = emitExpr(*unary.operand, scope);
    if (operand.kind == Operand::Kind::Number)
      return Operand::ofNumber(-operand.number, operand.isInteger);
    if (operand.kind == Operand::Kind::Tuple)
      error(expr.getLoc()) << "cannot negate " << operand.tuple.size()
                           << " values";
    if (operand.kind != Operand::Kind::Tensor)
      return Operand::poison();
    Value input = requireFloat(operand.tensor, expr.getLoc(), "negation");
    if (!input)
      return Operand::poison();
    return Operand::ofTensor(
        NegOp::create(builder, loc(expr.getLoc()), input));
  }
  case Expr::Kind::Binary:
    return emitBinary(llvm::cast<BinaryExpr>(expr), scope);
  case Expr::Kind::Call:
    return emitCall(llvm::cast<CallExpr>(expr), scope);
  case Expr::Kind::List:
    error(expr.getLoc()) << "a list is only valid as an argument of reshape, "
                            "transpose or broadcast";
    return Operand::poison();
  }
  return Operand::poison();
}

Operand Elaborator::emitBinary(const BinaryExpr &expr, Scope &scope) {
  Operand lhs = emitExpr(*expr.lhs, scope);
  Operand rhs = emitExpr(*expr.rhs, scope);
  if (lhs.isPoison() || rhs.isPoison())
    return Operand::poison();
  for (const Operand *side : {&lhs, &rhs})
    if (side->kind == Operand::Kind::Tuple) {
      error(expr.getLoc()) << "cannot apply '" << expr.op << "' to "
                           << side->tuple.size() << " values";
      return Operand::poison();
    }
  SMLoc where = expr.getLoc();
  if (expr.op == '@') {
    if (lhs.kind != Operand::Kind::Tensor || rhs.kind != Operand::Kind::Tensor) {
      error(where) << "matmul needs two tensors";
      return Operand::poison();
    }
    return emitMatmul(lhs.tensor, rhs.tensor, where);
  }
  Arithmetic op = expr.op == '+'   ? Arithmetic::Add
                  : expr.op == '-' ? Arithmetic::Sub
                  : expr.op == '*' ? Arithmetic::Mul
                                   : Arithmetic::Div;
  return emitArithmetic(op, lhs, rhs, where);
}

Operand Elaborator::emitArithmetic(Arithmetic op, const Operand &lhs,
                                   const Operand &rhs, SMLoc where) {
  // Numbers fold; a number next to a tensor takes the tensor's dtype.
  if (lhs.kind == Operand::Kind::Number && rhs.kind == Operand::Kind::Number) {
    double l = lhs.number, r = rhs.number;
    bool integer = lhs.isInteger && rhs.isInteger;
    switch (op) {
    case Arithmetic::Add: return Operand::ofNumber(l + r, integer);
    case Arithmetic::Sub: return Operand::ofNumber(l - r, integer);
    case Arithmetic::Mul: return Operand::ofNumber(l * r, integer);
    // IEEE 754-2019's, as the tensors': of -0 and +0 the maximum is +0
    // and the minimum -0 in either order (std::max returns its first).
    case Arithmetic::Maximum:
      return Operand::ofNumber(l == r ? (std::signbit(l) ? r : l) : std::max(l, r), integer);
    case Arithmetic::Minimum:
      return Operand::ofNumber(l == r ? (std::signbit(l) ? l : r) : std::min(l, r), integer);
    case Arithmetic::Div:
      if (r == 0) {
        error(where) << "division by zero";
        return Operand::poison();
      }
      return Operand::ofNumber(l / r, integer && std::fmod(l, r) == 0);
    }
  }
  StringRef what = op == Arithmetic::Maximum   ? "maximum"
                   : op == Arithmetic::Minimum ? "minimum"
                                               : "arithmetic";
  Value l = lhs.tensor, r = rhs.tensor;
  if (l && !(l = requireFloat(l, where, what)))
    return Operand::poison();
  if (r && !(r = requireFloat(r, where, what)))
    return Operand::poison();
  if (!l && !(l = scalarLike(lhs.number, r, where)))
    return Operand::poison();
  if (!r && !(r = scalarLike(rhs.number, l, where)))
    return Operand::poison();
  auto lType = cast<RankedTensorType>(l.getType());
  auto rType = cast<RankedTensorType>(r.getType());
  FailureOr<Type> element = promoteElementTypes(
      lType.getElementType(), rType.getElementType(), errorAt(where));
  if (mlir::failed(element))
    return Operand::poison();
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(lType.getShape(), rType.getShape(), errorAt(where));
  if (mlir::failed(shape) || !checkSize(*shape, where))
    return Operand::poison();
  auto resultType = RankedTensorType::get(*shape, *element);
  mlir::Location at = loc(where);
  switch (op) {
  case Arithmetic::Add: return Operand::ofTensor(AddOp::create(builder, at, resultType, l, r));
  case Arithmetic::Sub: return Operand::ofTensor(SubOp::create(builder, at, resultType, l, r));
  case Arithmetic::Mul: return Operand::ofTensor(MulOp::create(builder, at, resultType, l, r));
  case Arithmetic::Maximum:
    return Operand::ofTensor(MaximumOp::create(builder, at, resultType, l, r));
  case Arithmetic::Minimum:
    return Operand::ofTensor(MinimumOp::create(builder, at, resultType, l, r));
  case Arithmetic::Div: break;
  }
  return Operand::ofTensor(DivOp::create(builder, at, resultType, l, r));
}

Operand Elaborator::emitMatmul(Value lhs, Value rhs, SMLoc where) {
  if (!(lhs = requireFloat(lhs, where, "matmul")) ||
      !(rhs = requireFloat(rhs, where, "matmul")))
    return Operand::poison();
  auto lType = cast<RankedTensorType>(lhs.getType());
  auto rType = cast<RankedTensorType>(rhs.getType());
  FailureOr<SmallVector<int64_t>> shape =
      matmulShape(lType.getShape(), rType.getShape(), errorAt(where));
  if (mlir::failed(shape) || !checkSize(*shape, where))
    return Operand::poison();
  // Mixed operands: the f32 side is rounded to the 16-bit type, so the
  // product runs at the narrow precision the script asked for.
  Type l = lType.getElementType(), r = rType.getElementType();
  if (l != r) {
    if (!l.isF32() && !r.isF32()) {
      error(where) << "dtype conflict: matmul of " << l << " and " << r
                   << "; cast one operand explicitly";
      return Operand::poison();
    }
    Type narrow = l.isF32() ? r : l;
    lhs = castTo(lhs, narrow, where);
    rhs = castTo(rhs, narrow, where);
    l = narrow;
  }
  // The policy's accumulation type applies to operands of the compute type;
  // anything else (an explicit f16 tensor under a bf16 policy) uses f32,
  // which holds every 16-bit product exactly.
  Type accumulate =
      accumulateType == l || accumulateType.isF32() ? accumulateType
                                                    : builder.getF32Type();
  // Under `precision tf32`, every f32 matmul (declared f32 tensors too:
  // the policy is about how matmuls multiply, not about storage).
  TypeAttr multiply = tf32Matmuls && l.isF32()
                          ? TypeAttr::get(builder.getTF32Type())
                          : TypeAttr();
  return Operand::ofTensor(MatmulOp::create(
      builder, loc(where), RankedTensorType::get(*shape, l), lhs, rhs,
      TypeAttr::get(accumulate), multiply));
}

//===----------------------------------------------------------------------===//
// Tensor declarations and shardings
//===----------------------------------------------------------------------===//

bool Elaborator::checkSize(ArrayRef<int64_t> shape, SMLoc where) {
  if (checkedElementCount(shape))
    return true;
  error(where) << "tensor of shape " << formatShape(shape)
               << " is too large (at most 2^48 elements)";
  return false;
}

std::optional<SmallVector<int64_t>> Elaborator::evalShape(const TypeSpec &type,
                                                          Scope &scope) {
  SmallVector<int64_t> shape;
  bool ok = true;
  for (const ExprPtr &dim : type.dims) {
    std::optional<int64_t> size = evalInt(*dim, scope);
    if (size && *size < 1) {
      error(dim->getLoc()) << "dimension must be positive, got " << *size;
      size.reset();
    }
    ok &= size.has_value();
    shape.push_back(size.value_or(1));
  }
  if (!ok || !checkSize(shape, type.loc))
    return std::nullopt;
  return shape;
}

Value Elaborator::annotateSharding(Value value, const ShardSpec &spec,
                                   Scope &scope, int64_t dimOffset) {
  if (!meshName) {
    error(spec.loc) << "shard spec without a mesh; declare one with "
                       "'mesh NAME[axis = size, ...]'";
    return Value();
  }
  auto type = cast<RankedTensorType>(value.getType());
  if ((int64_t)spec.dims.size() != type.getRank()) {
    error(spec.loc) << "rank mismatch: shard spec has " << spec.dims.size()
                    << " entries for a tensor of rank " << type.getRank();
    return Value();
  }
  SmallVector<shard::GridAxesAttr> splitAxes;
  llvm::StringMap<SMLoc> used;
  bool ok = true;
  for (auto [dim, entry] : llvm::enumerate(spec.dims)) {
    SmallVector<int16_t> axes;
    int64_t ways = 1;
    for (const Name &axis : entry.axes) {
      auto it = llvm::find_if(meshAxes, [&](const MeshAxisInfo &info) {
        return info.name == axis.text;
      });
      if (it == meshAxes.end()) {
        error(axis.loc) << "unknown mesh axis '" << axis.text << "'";
        ok = false;
        continue;
      }
      if (!used.try_emplace(axis.text, axis.loc).second) {
        error(axis.loc) << "mesh axis '" << axis.text
                        << "' is used twice in one shard spec";
        ok = false;
        continue;
      }
      axes.push_back(it - meshAxes.begin());
      // No overflow: the mesh's axes multiply to at most kMaxMeshRanks
      // (an axis past it was refused and counts as 1).
      ways *= it->size;
      if (model)
        model->splitAxes.emplace_back(axis.text, axis.loc, false);
    }
    if (ok && type.getDimSize(dim) % ways != 0) {
      error(entry.loc) << "dimension " << (int64_t)dim - dimOffset << " of size "
                       << type.getDimSize(dim) << " is not divisible by "
                       << ways << ", the number of shards of "
                       << (entry.axes.size() == 1 ? "mesh axis '" + entry.axes[0].text + "'"
                                                  : std::string("its mesh axes"))
                       << (perMicrobatch ? " (in one microbatch's rows: fewer "
                                           "microbatches leave more)"
                                         : "");
      ok = false;
    }
    splitAxes.push_back(builder.getDenseI16ArrayAttr(axes));
  }
  if (!ok)
    return Value();
  mlir::Location at = loc(spec.loc);
  Value sharding = shard::ShardingOp::create(builder, at, *meshName, splitAxes);
  return shard::ShardOp::create(builder, at, value, sharding, false);
}

Value Elaborator::addArgument(RankedTensorType type, SMLoc where,
                              ArrayRef<NamedAttribute> attrs) {
  model->argAttrs.push_back(builder.getDictionaryAttr(attrs));
  return model->func.getBody().front().addArgument(type, loc(where));
}

/// Whether `name` is a dim or loop variable seen from `scope`.
static bool isIntName(Scope &scope, StringRef name) {
  for (Scope *s = &scope; s; s = s->parent)
    if (s->ints.count(name))
      return true;
  return false;
}

void Elaborator::bind(Scope &scope, const Name &name, Value value, bool isNew,
                      bool isArgument) {
  // A tensor named like a dim or loop variable would silently win in
  // expressions and lose in shapes (`for k in 1..3 { h = h * k }` after
  // `let k = x` multiplied by x).
  if (isNew && !isArgument && isIntName(scope, name.text))
    error(name.loc) << "'" << name.text
                    << "' is already a dimension or loop variable";
  if (isNew) {
    auto [it, inserted] = scope.definedAt.try_emplace(name.text, name.loc);
    if (!inserted) {
      InFlightDiagnostic diag = error(name.loc);
      diag << "'" << name.text << "' is already defined";
      diag.attachNote(loc(it->second)) << "previous definition is here";
    }
  } else if (!scope.values.count(name.text)) {
    error(name.loc) << "unknown name '" << name.text
                    << "'; bind new names with 'let'";
  }
  scope.values[name.text] = value;
}

void Elaborator::emitTensorDecl(const Stmt &stmt, Scope &scope, BodyKind body) {
  const Name &name = stmt.names.front();
  bool isInput = stmt.kind == Stmt::Kind::Input;
  if (isInput && body != BodyKind::Model) {
    error(stmt.loc) << "inputs are declared in the model, not in a layer or "
                       "expert";
    return;
  }
  std::optional<Type> element = computeType;
  if (stmt.type->dtype)
    element = resolveDtype(*stmt.type->dtype);
  std::optional<SmallVector<int64_t>> shape = evalShape(*stmt.type, scope);
  if (!element || !shape) {
    bind(scope, name, Value(), true);
    return;
  }
  if (!isInput && !isa<FloatType>(*element)) {
    error(stmt.type->dtype->loc) << "parameters must be floating point";
    bind(scope, name, Value(), true);
    return;
  }
  std::string fullName = paramPrefix + name.text;
  if (auto [it, inserted] =
          model->externalNames.try_emplace(fullName, name.loc);
      !inserted) {
    error(name.loc) << "'" << fullName << "' is already declared";
    return;
  }

  SmallVector<NamedAttribute> attrs{builder.getNamedAttr(
      isInput ? attr::kInput : attr::kParam, builder.getStringAttr(fullName))};
  if (!isInput) {
    // The default initializer keeps unit variance for a fan-in of 1.
    InitKind kind = InitKind::normal;
    SmallVector<double> args{0.02};
    if (stmt.init) {
      std::optional<InitKind> parsed = symbolizeInitKind(stmt.init->kind.text);
      if (!parsed) {
        error(stmt.init->kind.loc) << "unknown initializer '" << stmt.init->kind.text
                                   << "' (expected zeros, ones, constant, normal "
                                      "or uniform)";
        bind(scope, name, Value(), true);
        return;
      }
      kind = *parsed;
      args.clear();
      for (const ExprPtr &arg : stmt.init->args)
        if (std::optional<double> v = evalNumber(*arg, scope))
          args.push_back(*v);
      if (args.size() != stmt.init->args.size()) {
        bind(scope, name, Value(), true);
        return;
      }
    }
    auto init = InitAttr::getChecked(
        [&] { return error(stmt.init ? stmt.init->kind.loc : stmt.loc); },
        &context, kind,
        args.empty() ? DenseF64ArrayAttr() : builder.getDenseF64ArrayAttr(args));
    if (!init) {
      bind(scope, name, Value(), true);
      return;
    }
    // A constant or a uniform bound past the param's dtype would initialize
    // it to inf (constant(70000) in f16), as a literal in an expression
    // would, which scalarLike refuses.
    if (auto floatType = dyn_cast<FloatType>(*element);
        floatType && (kind == InitKind::constant || kind == InitKind::uniform)) {
      double largest =
          APFloat::getLargest(floatType.getFloatSemantics()).convertToDouble();
      for (auto [arg, value] : llvm::zip(stmt.init->args, args))
        if (roundsToInfinity(value, floatType)) {
          error(arg->getLoc()) << formatNumber(value) << " is out of range for "
                               << *element << " (its largest is "
                               << formatNumber(largest) << ")";
          bind(scope, name, Value(), true);
          return;
        }
      // Nor may it be zeros where a nonzero value was asked for: a
      // constant, or a uniform range both of whose bounds round to 0.
      if (llvm::all_of(args, [&](double value) { return roundsToZero(value, floatType); })) {
        error(stmt.init->args.front()->getLoc())
            << formatNumber(args.front()) << (args.size() > 1 ? " and the other bound round" : " rounds")
            << " to 0 in " << *element << " (its least value is " << leastValue(floatType)
            << "): the param would be zeros";
        bind(scope, name, Value(), true);
        return;
      }
    }
    attrs.push_back(builder.getNamedAttr(attr::kInit, init));
  }

  auto type = RankedTensorType::get(*shape, *element);
  Value value;
  if (expert && stmt.shard && stmt.shard->dims.size() != shape->size()) {
    error(stmt.shard->loc) << "rank mismatch: shard spec has "
                           << stmt.shard->dims.size()
                           << " entries for a tensor of rank " << shape->size();
    bind(scope, name, Value(), true);
    return;
  }
  if (expert) {
    // An expert's parameter is stored once per expert: [E, ...] in the
    // model, split over the expert axis; the body sees one expert's slice.
    SmallVector<int64_t> stacked{expert->experts};
    stacked.append(shape->begin(), shape->end());
    // The stacked tensor is what the model holds: within the 2^48 elements
    // of any tensor (16384 experts of 2^48 had wrapped the plan's sizes).
    if (!checkSize(stacked, stmt.loc)) {
      bind(scope, name, Value(), true);
      return;
    }
    auto stackedType = RankedTensorType::get(stacked, *element);
    if (!isInput)
      attrs.push_back(builder.getNamedAttr(attr::kExpertParam, builder.getUnitAttr()));
    Value outer = addArgument(stackedType, stmt.loc, attrs);
    ShardSpec spec;
    spec.loc = stmt.shard ? stmt.shard->loc : stmt.loc;
    spec.dims.push_back({stmt.loc, {Name{expert->axis, stmt.loc}}});
    if (stmt.shard)
      for (const ShardDim &dim : stmt.shard->dims)
        spec.dims.push_back(dim);
    else
      spec.dims.resize(stacked.size(), ShardDim{stmt.loc, {}});
    OpBuilder::InsertionGuard guard(builder);
    builder.restoreInsertionPoint(expert->outer.saveInsertionPoint());
    size_t splitsBefore = model ? model->splitAxes.size() : 0;
    if (Value annotated = annotateSharding(outer, spec, scope, /*dimOffset=*/1))
      outer = annotated;
    // The expert dim's split is the block's `axis`, checked as the block's.
    if (model && model->splitAxes.size() > splitsBefore)
      model->splitAxes.erase(model->splitAxes.begin() + splitsBefore);
    expert->params.push_back(outer);
    value = expert->body->addArgument(type, loc(stmt.loc));
  } else {
    value = addArgument(type, stmt.loc, attrs);
    if (isInput && !shape->empty()) {
      // The dim's name, when it is a global dim's; a dim of the model's
      // own (or a loop variable) shadows it, and cannot be resized for a
      // microbatch (buildForOneMicrobatch says so).
      std::string dim, localDim;
      if (auto *named = llvm::dyn_cast<NameExpr>(stmt.type->dims.front().get())) {
        if (scope.ints.count(named->name) && &scope != &globals)
          localDim = named->name;
        else if (globals.ints.count(named->name))
          dim = named->name;
      }
      model->batchDims.push_back({fullName, shape->front(), dim,
                                  stmt.type->dims.front()->getLoc(), localDim});
    }
    if (stmt.shard)
      value = annotateSharding(value, *stmt.shard, scope);
  }
  bind(scope, name, value, true);
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

void Elaborator::emitBlock(const Block &block, Scope &scope, BodyKind body) {
  for (const StmtPtr &stmt : block)
    emitStatement(*stmt, scope, body);
}

/// Where a statement kind may appear, for the error when it may not.
static const char *onlyInModel(Stmt::Kind kind) {
  switch (kind) {
  case Stmt::Kind::Output: return "output";
  case Stmt::Kind::Stage: return "stage";
  case Stmt::Kind::Pipeline: return "pipeline";
  case Stmt::Kind::Train: return "train";
  default: return nullptr;
  }
}

bool Elaborator::countStatement(SMLoc where) {
  if (++statementsElaborated <= kMaxStatements)
    return true;
  if (statementsElaborated == kMaxStatements + 1)
    error(where) << "the script unrolls to more than " << kMaxStatements
                 << " statements";
  return false;
}

void Elaborator::emitStatement(const Stmt &stmt, Scope &scope, BodyKind body) {
  // Loops and layers multiply: bound the unrolled program, not each loop.
  if (!countStatement(stmt.loc))
    return;
  if (const char *what = onlyInModel(stmt.kind); what && body != BodyKind::Model) {
    error(stmt.loc) << "'" << what
                    << "' is only valid in a model, not in a layer or expert";
    return;
  }
  switch (stmt.kind) {
  case Stmt::Kind::Dim: {
    const Name &name = stmt.names.front();
    std::optional<int64_t> value = evalInt(*stmt.value, scope);
    if (auto it = dimSizes.find(name.text); it != dimSizes.end() && &scope == &globals)
      value = it->second;
    if (scope.values.count(name.text))
      error(name.loc) << "dimension '" << name.text
                      << "' has the name of a tensor";
    else if (!scope.ints.try_emplace(name.text, value.value_or(1)).second)
      error(name.loc) << "dimension '" << name.text << "' is already defined";
    return;
  }
  case Stmt::Kind::Input:
  case Stmt::Kind::Param:
    return emitTensorDecl(stmt, scope, body);
  case Stmt::Kind::Let: {
    Operand value = emitExpr(*stmt.value, scope);
    size_t count = value.kind == Operand::Kind::Tuple ? value.tuple.size() : 1;
    if (value.kind == Operand::Kind::Number) {
      error(stmt.value->getLoc()) << "expected a tensor, got a number (use "
                                     "'dim' for named sizes)";
      value = Operand::poison();
    } else if (!value.isPoison() && count != stmt.names.size()) {
      error(stmt.loc) << "the expression produces " << count
                      << " value(s) but " << stmt.names.size()
                      << " name(s) are bound";
      value = Operand::poison();
    }
    bool shardingFailed = false;
    for (auto [i, name] : llvm::enumerate(stmt.names)) {
      Value v = value.kind == Operand::Kind::Tuple ? value.tuple[i] : value.tensor;
      if (v && stmt.shard) // one spec for all names: report its errors once
        shardingFailed |= !(v = shardingFailed ? Value()
                                               : annotateSharding(v, *stmt.shard, scope));
      bind(scope, name, v, /*isNew=*/true);
    }
    return;
  }
  case Stmt::Kind::Assign: {
    const Name &name = stmt.names.front();
    // The output holds the value it was given: a new one would only be
    // read by what follows, silently not returned.
    if (body == BodyKind::Model && model)
      if (auto output = outputLocs.find((model->func.getSymName() + "." + name.text).str());
          output != outputLocs.end()) {
        InFlightDiagnostic diag = error(name.loc);
        diag << "'" << name.text << "' is an output: assigning it would not change "
             << "what the model returns (bind a new name with 'let')";
        diag.attachNote(loc(output->second)) << "the output is declared here";
        return;
      }
    return bind(scope, name, emitTensor(*stmt.value, scope, "the assignment"), false);
  }
  case Stmt::Kind::Output: {
    Value value = emitTensor(*stmt.value, scope, "the output");
    const Name &name = stmt.names.front();
    if (!model->externalNames.try_emplace(name.text, name.loc).second)
      error(name.loc) << "'" << name.text << "' is already declared";
    else if (!value)
      bind(scope, name, Value(), /*isNew=*/true); // silences later uses
    else {
      // Outputs are also names, e.g. for the train section's loss.
      bind(scope, name, value, /*isNew=*/true);
      model->results.push_back(value);
      model->resultLocs.push_back(loc(name.loc));
      model->resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
          attr::kOutput, builder.getStringAttr(name.text))));
      outputLocs[(model->func.getSymName() + "." + name.text).str()] = name.loc;
    }
    return;
  }
  case Stmt::Kind::Return:
    if (body == BodyKind::Model) {
      error(stmt.loc) << "a model ends with 'output', not 'return'";
      return;
    }
    if (returned) {
      error(stmt.loc) << "a body returns once";
      return;
    }
    returned = emitTensor(*stmt.value, scope, "the returned value");
    return;
  case Stmt::Kind::For: {
    const Name &var = stmt.names.front();
    std::optional<int64_t> low = evalInt(*stmt.value, scope);
    std::optional<int64_t> high = evalInt(*stmt.upper, scope);
    if (!low || !high)
      return;
    if (*high - *low > 4096) {
      error(stmt.loc) << "loop of " << *high - *low
                      << " iterations is too long to unroll (at most 4096)";
      return;
    }
    if (isIntName(scope, var.text)) {
      error(var.loc) << "loop variable '" << var.text
                     << "' shadows a dimension or an enclosing loop variable";
      return;
    }
    if (scope.values.count(var.text)) {
      error(var.loc) << "loop variable '" << var.text
                     << "' shadows the tensor '" << var.text << "'";
      return;
    }
    // Loops are unrolled: each iteration is a fresh copy of the body, and
    // a name its `let`s bind is bound anew in every iteration.
    llvm::StringSet<> definedBefore;
    for (auto &entry : scope.definedAt)
      definedBefore.insert(entry.getKey());
    // Explain's sample: a long loop runs only its first iterations.
    int64_t end = *high;
    if (loopLimit && *high - *low > 2) {
      end = *low + loopLimit;
      if (loopTripCount)
        *loopTripCount = *loopTripCount == 0 || *loopTripCount == *high - *low
                             ? *high - *low
                             : -1;
    }
    // An error in one iteration would repeat in every other: stop there.
    unsigned errorsBefore = errorCount;
    // Each iteration counts as a statement: nested loops with empty
    // bodies would otherwise unroll 4096^depth times unbounded.
    for (int64_t i = *low;
         i < end && errorCount == errorsBefore && countStatement(stmt.loc); ++i) {
      scope.ints[var.text] = i;
      SmallVector<StringRef> fromLastIteration;
      for (auto &entry : scope.definedAt)
        if (!definedBefore.contains(entry.getKey()))
          fromLastIteration.push_back(entry.getKey());
      for (StringRef name : fromLastIteration)
        scope.definedAt.erase(name);
      emitBlock(stmt.body, scope, body);
    }
    scope.ints.erase(var.text);
    return;
  }
  case Stmt::Kind::Stage:
    return emitStage(stmt, scope);
  case Stmt::Kind::Pipeline: {
    const Name &axis = stmt.names.front();
    if (!llvm::any_of(meshAxes, [&](auto &a) { return a.name == axis.text; }))
      error(axis.loc) << "unknown mesh axis '" << axis.text << "'";
    else if (model->lastStage >= 0)
      error(stmt.loc) << "the pipeline axis must be chosen before the first stage";
    else if (model->pipelineAxis)
      error(stmt.loc) << "the pipeline axis is already '" << *model->pipelineAxis
                      << "'";
    else
      model->pipelineAxis = axis.text;
    return;
  }
  case Stmt::Kind::Train:
    return emitTrain(stmt, scope);
  }
}

void Elaborator::emitStage(const Stmt &stmt, Scope &scope) {
  if (model->stageRegion) {
    error(stmt.loc) << "stages cannot be nested";
    return;
  }
  // A stage that cannot be placed still binds its names, so that later
  // uses do not cascade into "unknown name" errors.
  auto elaborateUnplaced = [&] { emitBlock(stmt.body, scope, BodyKind::Model); };
  std::optional<int64_t> number = evalInt(*stmt.value, scope);
  if (!number)
    return elaborateUnplaced();
  std::string axis = model->pipelineAxis.value_or("pp");
  auto it = llvm::find_if(meshAxes, [&](auto &a) { return a.name == axis; });
  if (it == meshAxes.end()) {
    error(stmt.loc) << "stage needs a pipeline mesh axis: name one with "
                       "'pipeline AXIS' or call a mesh axis 'pp'";
    return elaborateUnplaced();
  }
  // More stages than ranks are virtual stages (v = stages / ranks per
  // rank, round-robin), which loom-place-stages checks against the axis.
  if (*number < 0) {
    error(stmt.value->getLoc()) << "invalid stage " << *number
                                << ": stages are numbered from 0";
    return elaborateUnplaced();
  }
  // The plan's pipeline record holds at most 65536 stages (and the
  // schedules are built per stage: stage 999999 ran for minutes, 2^31 ran
  // out of memory).
  constexpr int64_t kMostStages = 65536;
  if (*number >= kMostStages) {
    error(stmt.value->getLoc()) << "stage " << *number << " is past the last "
                                << "a pipeline may have (" << kMostStages - 1 << ")";
    return elaborateUnplaced();
  }
  if (*number < model->lastStage) {
    error(stmt.value->getLoc()) << "stage " << *number << " comes after stage "
                                << model->lastStage
                                << "; stages must appear in order";
    return elaborateUnplaced();
  }
  model->lastStage = *number;
  model->lastStageLoc = stmt.loc;

  // Elaborate the body into a detached region, then wrap it in a stage op
  // whose results are the values the rest of the model still refers to.
  Region region;
  mlir::Block *block = new mlir::Block();
  region.push_back(block);
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(block);
    model->stageRegion = &region;
    emitBlock(stmt.body, scope, BodyKind::Model);
    model->stageRegion = nullptr;
  }
  // Yield, in definition order, the stage's values that names or outputs
  // still refer to.
  llvm::DenseSet<Value> referenced(model->results.begin(), model->results.end());
  for (auto &entry : scope.values)
    referenced.insert(entry.second);
  model->emptyLastStage =
      block->empty() ? std::optional<SMLoc>(stmt.loc) : std::nullopt;
  SmallVector<Value> escaping;
  for (Operation &op : *block)
    for (Value result : op.getResults())
      if (referenced.contains(result))
        escaping.push_back(result);
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(block);
    YieldOp::create(builder, loc(stmt.loc), escaping);
  }
  auto stage = StageOp::create(builder, loc(stmt.loc),
                                     ValueRange(escaping).getTypes(), *number);
  stage.getBody().takeBody(region);
  for (auto [inner, outer] : llvm::zip(escaping, stage.getResults())) {
    for (auto &entry : scope.values)
      if (entry.second == inner)
        entry.second = outer;
    for (Value &v : model->results)
      if (v == inner)
        v = outer;
  }
}

/// Whether `loss` is a loss op's mean, or means that reduce every dim of a
/// tensor (`mean(mean(x, axis = 1), axis = 0)`), behind an optional cast.
static bool isMeanOverAllDims(Value loss) {
  if (auto cast = loss.getDefiningOp<CastOp>())
    loss = cast.getInput();
  if (isa_and_nonnull<CrossEntropyOp, MseOp>(loss.getDefiningOp()))
    return true;
  // The first tensor the outer means reduce whole: the chain may go on
  // into the means that made it (`mean(mean(y))` of a `keepdim` row mean
  // y had counted three means over y's input, of rank 2, and was refused).
  int64_t means = 0;
  while (auto mean = loss.getDefiningOp<MeanOp>()) {
    loss = mean.getInput();
    if (cast<RankedTensorType>(loss.getType()).getRank() == ++means)
      return true;
  }
  return false;
}

bool Elaborator::averagesMicrobatches(Value loss) {
  llvm::DenseMap<Value, bool> reads;
  mlir::Block *entry = &model->func.getBody().front();
  std::function<bool(Value)> readsInput = [&](Value v) -> bool {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return arg.getOwner() == entry && arg.getArgNumber() < model->argAttrs.size() &&
             model->argAttrs[arg.getArgNumber()].contains(attr::kInput);
    if (auto found = reads.find(v); found != reads.end())
      return found->second;
    bool any = llvm::any_of(valuesRead(v.getDefiningOp()), readsInput);
    reads[v] = any;
    return any;
  };
  return !nonAveragingTerm(loss, [&](Value v) { return !readsInput(v); },
                           isMeanOverAllDims, throughStages);
}

void Elaborator::emitTrain(const Stmt &stmt, Scope &scope) {
  if (model->hasTrain) {
    error(stmt.loc) << "a model has one train section";
    return;
  }
  model->hasTrain = true;
  std::string optimizer = "adamw", schedule = "1f1b", lossScale = "none";
  SmallVector<NamedAttribute> hyper;
  int64_t microbatches = 1, steps = 1;
  std::optional<double> initialScale, clipGradNorm;
  bool f16Loss = false;
  LrSchedule lrSchedule;
  int64_t zero = 0;
  Value loss;
  llvm::StringMap<SMLoc> seen;

  auto nameOf = [](const Expr &e) -> std::optional<std::string> {
    if (auto *name = llvm::dyn_cast<NameExpr>(&e))
      return name->name;
    if (auto *call = llvm::dyn_cast<CallExpr>(&e))
      return call->callee;
    return std::nullopt;
  };
  for (const TrainEntry &entry : stmt.entries) {
    StringRef key = entry.key.text;
    const Expr &value = *entry.value;
    if (!seen.try_emplace(key, entry.key.loc).second) {
      error(entry.key.loc) << "'" << key << "' is set twice";
      continue;
    }
    if (key == "loss") {
      loss = emitTensor(value, scope, "the loss");
      if (loss && cast<RankedTensorType>(loss.getType()).getRank() != 0) {
        error(value.getLoc()) << "the loss must be a scalar, got "
                              << loss.getType();
        loss = Value();
      }
      // An integer has no gradient: training would only decay the params.
      if (loss && !isa<FloatType>(cast<RankedTensorType>(loss.getType()).getElementType())) {
        error(value.getLoc()) << "the loss must be a float scalar, got "
                              << loss.getType() << " (an integer has no gradient)";
        loss = Value();
      }
      f16Loss = loss && cast<RankedTensorType>(loss.getType()).getElementType().isF16();
      if (loss && !cast<RankedTensorType>(loss.getType()).getElementType().isF32())
        loss = castTo(loss, builder.getF32Type(), value.getLoc());
    } else if (key == "optimizer") {
      std::optional<std::string> name = nameOf(value);
      if (!name || !llvm::is_contained({"sgd", "adam", "adamw"}, *name)) {
        error(value.getLoc()) << "unknown optimizer (expected sgd, adam or adamw)";
        continue;
      }
      optimizer = *name;
      if (auto *call = llvm::dyn_cast<CallExpr>(&value)) {
        if (!call->args.empty())
          error(call->args.front()->getLoc())
              << "optimizer settings are named, e.g. lr = 3e-4";
        for (const KeywordArg &kwarg : call->kwargs) {
          ArrayRef<StringRef> known = TrainOp::hyperparametersOf(optimizer);
          if (!llvm::is_contained(known, kwarg.name)) {
            InFlightDiagnostic diag = error(kwarg.loc);
            diag << "optimizer '" << optimizer << "' has no hyperparameter '"
                 << kwarg.name << "' (expected ";
            llvm::interleaveComma(known, diag);
            diag << ")";
            continue;
          }
          std::optional<double> v = evalNumber(*kwarg.value, scope);
          bool beta = kwarg.name == "beta1" || kwarg.name == "beta2";
          if (v && !(*v >= 0))
            error(kwarg.value->getLoc()) << "'" << kwarg.name
                                         << "' must be non-negative";
          // Adam's bias correction divides by 1 - beta^t (beta1 = 1 made
          // the first update NaN), as torch refuses.
          else if (v && beta && !(*v < 1))
            error(kwarg.value->getLoc())
                << "'" << kwarg.name << "' must be below 1 (Adam divides by 1 - "
                << kwarg.name << "^t), got " << formatNumber(*v);
          else if (v && fitsF32(*v, kwarg.value->getLoc(), "'" + kwarg.name + "'"))
            hyper.push_back(builder.getNamedAttr(kwarg.name,
                                                 builder.getF64FloatAttr(*v)));
        }
      }
    } else if (key == "microbatches" || key == "steps") {
      std::optional<int64_t> v = evalInt(value, scope);
      if (v && *v < 1)
        error(value.getLoc()) << "'" << key << "' must be at least 1";
      else if (v)
        (key == "steps" ? steps : microbatches) = *v;
    } else if (key == "schedule") {
      std::optional<std::string> name = nameOf(value);
      if (!name || !llvm::isa<NameExpr>(value) ||
          !llvm::is_contained({"gpipe", "1f1b", "interleaved", "zero_bubble"}, *name))
        error(value.getLoc()) << "unknown pipeline schedule (expected gpipe, "
                                 "1f1b, interleaved or zero_bubble)";
      else
        schedule = *name;
    } else if (key == "loss_scale") {
      std::optional<std::string> name = nameOf(value);
      // static(S), or dynamic(S) with an initial scale other than 2^16.
      if (auto *call = llvm::dyn_cast<CallExpr>(&value);
          call && (call->callee == "static" || call->callee == "dynamic") &&
          call->args.size() == 1 && call->kwargs.empty()) {
        initialScale = evalNumber(*call->args.front(), scope);
        if (initialScale && !(*initialScale > 0)) {
          error(value.getLoc()) << "the loss scale must be positive";
          initialScale.reset();
        } else if (initialScale &&
                   !fitsF32(*initialScale, call->args.front()->getLoc(), "the loss scale")) {
          initialScale.reset();
        }
        lossScale = call->callee;
      } else if (name && (*name == "none" || *name == "dynamic") &&
                 llvm::isa<NameExpr>(value)) {
        lossScale = *name;
      } else {
        error(value.getLoc())
            << "expected loss scaling none, dynamic, dynamic(INITIAL) or "
               "static(SCALE)";
      }
    } else if (key == "clip_grad_norm") {
      clipGradNorm = evalNumber(value, scope);
      if (clipGradNorm && !(*clipGradNorm > 0)) {
        error(value.getLoc()) << "'clip_grad_norm' must be positive";
        clipGradNorm.reset();
      } else if (clipGradNorm && !fitsF32(*clipGradNorm, value.getLoc(), "'clip_grad_norm'")) {
        clipGradNorm.reset();
      }
    } else if (key == "zero") {
      auto *word = llvm::dyn_cast<NameExpr>(&value);
      if (word && llvm::is_contained({"true", "false", "on", "off", "yes", "no"}, word->name)) {
        error(value.getLoc()) << "zero takes a stage number: zero 1 (the optimizer state "
                                 "split over the data-parallel ranks) or zero 0";
        continue;
      }
      std::optional<int64_t> stage = evalInt(value, scope);
      if (stage && *stage != 0 && *stage != 1)
        error(value.getLoc()) << "zero " << *stage
                              << " is not built (expected zero 0 or zero 1)";
      else if (stage)
        zero = *stage;
    } else if (key == "lr_schedule") {
      emitLrSchedule(value, scope, lrSchedule);
    } else {
      error(entry.key.loc) << "unknown train setting '" << key
                           << "' (expected loss, optimizer, microbatches, "
                              "schedule, loss_scale, lr_schedule, "
                              "clip_grad_norm, zero or steps)";
    }
  }
  if (!seen.count("loss")) {
    error(stmt.loc) << "the train section needs a loss";
    return;
  }
  auto lr = llvm::find_if(hyper, [](NamedAttribute a) { return a.getName() == "lr"; });
  checkLrSchedule(lrSchedule,
                  lr != hyper.end() ? cast<FloatAttr>(lr->getValue()).getValueAsDouble()
                                    : TrainOp::defaultLearningRate(optimizer),
                  steps, seen.lookup("steps"));
  // --microbatches' count is said at the train section, not at a script
  // line with another count (it had pointed "4 microbatches" at a line
  // reading `microbatches 2`).
  if (microbatchesOverride) {
    if (microbatches != *microbatchesOverride || !seen.count("microbatches"))
      seen["microbatches"] = stmt.loc;
    microbatches = *microbatchesOverride;
  }
  if (microbatches > 1 && !perMicrobatch) {
    for (const BatchDim &batch : model->batchDims)
      // A forward build whose batch --dim resized (a batch of one for
      // generate) runs no microbatches of the train section's.
      if (batch.size % microbatches != 0 &&
          (splitsMicrobatches || batch.dim.empty() || !dimSizes.count(batch.dim)))
        error(seen.lookup("microbatches"))
            << microbatches << " microbatches do not divide the batch dimension "
            << batch.size << " of input '" << batch.input << "'";
  }
  if (microbatches > 1 && !perMicrobatch && splitsMicrobatches) {
    // The step is the mean of the microbatches' steps: that equals the
    // whole batch's only for a loss that is a mean over the batch.
    if (loss && !averagesMicrobatches(loss))
      error(seen.lookup("loss"))
          << "with microbatches the loss must be a mean over the batch "
             "(cross_entropy, mse or mean), or sums and multiples of such "
             "means and of terms that read no input, since the step "
             "averages the microbatches' losses and gradients";
    microbatchSplit = MicrobatchSplit{microbatches, seen.lookup("microbatches"),
                                      model->batchDims, /*forwardModel=*/""};
  }
  bool trainsF16 = computeType.isF16();
  for (auto [type, attrs] : llvm::zip(
           model->func.getBody().front().getArgumentTypes(), model->argAttrs))
    trainsF16 |= attrs.contains(attr::kParam) &&
                 cast<RankedTensorType>(type).getElementType().isF16();
  if (trainsF16 && lossScale == "none" && !perMicrobatch)
    emitWarning(loc(stmt.loc)) << "f16 training without loss scaling may lose "
                                  "small gradients; add 'loss_scale dynamic'";
  // The backward of an f16 loss starts from the scale cast to f16, inf
  // from 65520 up: a static scale there skips every step (as torch does).
  if (f16Loss && lossScale == "static" && initialScale && *initialScale >= 65520 &&
      !perMicrobatch)
    emitWarning(loc(seen.lookup("loss_scale")))
        << "static(" << formatNumber(*initialScale) << ") overflows f16, the loss's type, in the "
        << "backward's first step (f16 holds at most 65504): every step would be "
           "skipped; compute the loss in f32 or take a scale of at most 32768";
  if (!loss || failed())
    return;
  model->loss = loss;
  model->lossLoc = seen.lookup("loss");
  outputLocs[(model->func.getSymName() + ".loss").str()] = model->lossLoc;
  model->results.push_back(loss);
  model->resultLocs.push_back(loc(model->lossLoc));
  model->resultAttrs.push_back(builder.getDictionaryAttr(
      builder.getNamedAttr(attr::kLoss, builder.getStringAttr("loss"))));
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  auto number = [&](std::optional<double> value) {
    return value ? builder.getF64FloatAttr(*value) : FloatAttr();
  };
  TrainOp::create(
      builder, loc(stmt.loc), model->func.getSymName(), optimizer,
      builder.getDictionaryAttr(hyper), microbatches, schedule, lossScale,
      number(initialScale), steps,
      lrSchedule.name == "constant" ? StringAttr()
                                    : builder.getStringAttr(lrSchedule.name),
      number(lrSchedule.warmup), number(lrSchedule.minLr), number(clipGradNorm),
      zero ? builder.getI64IntegerAttr(zero) : IntegerAttr());
}

// constant | warmup_cosine(warmup = W, min_lr = L) | warmup_linear(...)
void Elaborator::emitLrSchedule(const Expr &value, Scope &scope,
                                LrSchedule &schedule) {
  // A name alone is the schedule with its defaults, as `optimizer adamw`.
  if (auto *name = llvm::dyn_cast<NameExpr>(&value)) {
    if (name->name == "warmup_cosine" || name->name == "warmup_linear") {
      schedule.name = name->name;
      return;
    }
    if (name->name == "constant")
      return;
  }
  auto *call = llvm::dyn_cast<CallExpr>(&value);
  if (call && call->callee == "constant") {
    if (!call->args.empty() || !call->kwargs.empty())
      error(value.getLoc()) << "the constant schedule has no settings (the optimizer's lr "
                               "is the rate)";
    return;
  }
  if (!call || (call->callee != "warmup_cosine" && call->callee != "warmup_linear")) {
    error(value.getLoc()) << "unknown learning-rate schedule (expected constant, "
                             "warmup_cosine(warmup = STEPS, min_lr = LR) or "
                             "warmup_linear(warmup = STEPS, min_lr = LR))";
    return;
  }
  schedule.name = call->callee;
  if (!call->args.empty())
    error(call->args.front()->getLoc())
        << "schedule settings are named, e.g. warmup = 100";
  for (const KeywordArg &kwarg : call->kwargs) {
    if (kwarg.name != "warmup" && kwarg.name != "min_lr") {
      error(kwarg.loc) << schedule.name << " has no setting '" << kwarg.name
                       << "' (expected warmup, min_lr)";
      continue;
    }
    if (kwarg.name == "warmup") {
      std::optional<int64_t> steps = evalInt(*kwarg.value, scope);
      if (steps && *steps < 0)
        error(kwarg.value->getLoc()) << "'warmup' must be non-negative";
      else if (steps)
        schedule.warmup = static_cast<double>(*steps);
      schedule.warmupLoc = kwarg.value->getLoc();
      continue;
    }
    std::optional<double> lr = evalNumber(*kwarg.value, scope);
    if (lr && !(*lr >= 0))
      error(kwarg.value->getLoc()) << "'min_lr' must be non-negative";
    else if (lr && fitsF32(*lr, kwarg.value->getLoc(), "'min_lr'"))
      schedule.minLr = *lr;
    schedule.minLrLoc = kwarg.value->getLoc();
  }
}

// Settings each valid alone that together make a schedule nobody means.
void Elaborator::checkLrSchedule(const LrSchedule &schedule, double lr,
                                 int64_t steps, SMLoc stepsLoc) {
  // The decay would raise the rate from lr up to min_lr.
  if (schedule.minLr && *schedule.minLr > lr)
    error(schedule.minLrLoc) << "'min_lr' " << formatNumber(*schedule.minLr)
                             << " is above the optimizer's lr "
                             << formatNumber(lr) << " (" << schedule.name
                             << " decays from lr down to min_lr)";
  // The schedule runs over the section's steps (not --steps): a warmup as
  // long leaves no decay, a longer one never reaches lr within them.
  if (schedule.warmup && *schedule.warmup > 0 && *schedule.warmup >= steps)
    emitWarning(loc(schedule.warmupLoc))
        << "a warmup of " << formatNumber(*schedule.warmup)
        << " steps is not shorter than the train section's " << steps
        << (steps == 1 ? " step" : " steps") << (stepsLoc.isValid() ? "" : " (the default)")
        << ": the learning rate "
        << (*schedule.warmup > steps ? "never reaches lr" : "reaches lr only at the last step")
        << " and " << schedule.name << " never decays it";
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

void Elaborator::declareMesh(const MeshDecl &mesh) {
  if (meshName) {
    error(mesh.loc) << "a script declares one mesh";
    return;
  }
  SmallVector<int64_t> shape;
  SmallVector<Attribute> names;
  llvm::StringSet<> seen;
  bool ok = true;
  uint64_t ranks = 1;
  for (const MeshAxis &axis : mesh.axes) {
    std::optional<int64_t> size = evalInt(*axis.size, globals);
    bool fromOption = false;
    if (auto it = meshSizes.find(axis.name.text); it != meshSizes.end())
      size = it->second, fromOption = true;
    if (size && *size < 1) {
      error(axis.size->getLoc()) << "mesh axis size must be at least 1, got "
                                 << *size;
      size.reset();
    }
    if (!seen.insert(axis.name.text).second) {
      error(axis.name.loc) << "mesh axis '" << axis.name.text
                           << "' is declared twice";
      size.reset();
    }
    // The plan records the ranks as a 32-bit count: a larger mesh wrapped
    // (to 0 ranks, or negative) in what loomc printed.
    constexpr uint64_t maxRanks = ::loom::runtime::kMaxMeshRanks;
    if (ranks > maxRanks) {
      size.reset(); // said at the axis that passed the limit
    } else if (size && uint64_t(*size) > maxRanks / ranks) {
      // The caret is at the script's size; the size may be --mesh's.
      error(axis.size->getLoc()) << "mesh '" << mesh.name.text << "' has more than "
                                 << maxRanks << " ranks at axis '" << axis.name.text << "'"
                                 << (fromOption ? " (its size from --mesh, " +
                                                      std::to_string(*size) + ")"
                                                : std::string());
      ranks = maxRanks + 1;
      size.reset();
    } else if (size) {
      ranks *= *size;
    }
    ok &= size.has_value();
    meshAxes.push_back({axis.name.text, size.value_or(1)});
    shape.push_back(size.value_or(1));
    names.push_back(builder.getStringAttr(axis.name.text));
  }
  meshName = mesh.name.text;
  for (const auto &entry : meshSizes)
    if (!seen.contains(entry.getKey())) {
      std::string axes;
      for (const MeshAxis &axis : mesh.axes)
        axes += (axes.empty() ? "" : ", ") + axis.name.text;
      error(mesh.name.loc) << "--mesh sets axis '" << entry.getKey()
                           << "', which mesh '" << mesh.name.text
                           << "' does not have (its axes: " << axes << ")";
      ok = false;
    }
  if (!ok)
    return;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(module.getBody());
  auto grid = shard::GridOp::create(builder, loc(mesh.loc), mesh.name.text, shape);
  grid->setAttr(attr::kAxes, builder.getArrayAttr(names));
  // Private so that symbol-dce can drop the grid once partitioning is done.
  grid.setPrivate();
}

void Elaborator::declarePrecision(const PrecisionDecl &precision) {
  // A name that is no type at all is said in the precision line's terms
  // (a tensor's dtype list offered i32 and i64, which precision refuses,
  // and called tf32 unknown where it is a compute type only).
  auto resolve = [&](const Name &name, bool isCompute) -> std::optional<Type> {
    if (name.text == "tf32" && !isCompute) {
      error(name.loc) << "tf32 rounds a matmul's operands: it is a compute "
                         "type, not an accumulation type (expected f32, f16 or bf16)";
      return std::nullopt;
    }
    if (!llvm::is_contained({"f32", "f16", "bf16", "tf32", "i32", "i64"}, name.text)) {
      error(name.loc) << "unknown precision type '" << name.text
                      << "' (expected f32, f16 or bf16, or tf32 for the compute type)";
      return std::nullopt;
    }
    return resolveDtype(name);
  };
  // tf32 is a matmul policy rather than a dtype: tensors stay f32.
  bool tf32 = precision.compute.text == "tf32";
  std::optional<Type> compute = tf32 ? std::optional<Type>(builder.getTF32Type())
                                     : resolve(precision.compute, true);
  std::optional<Type> accumulate = precision.accumulate
                                       ? resolve(*precision.accumulate, false)
                                       : std::optional<Type>(builder.getF32Type());
  if (!compute || !accumulate)
    return;
  auto attr = PrecisionAttr::getChecked(
      [&] { return error(precision.loc); }, &context, *compute, *accumulate);
  if (!attr)
    return;
  computeType = tf32 ? builder.getF32Type() : *compute;
  accumulateType = *accumulate;
  tf32Matmuls = tf32;
  module->setAttr(attr::kPrecision, attr);
}

/// The block argument `value` is, through sharding annotations, or null.
/// The func arguments whose elements `value` holds unchanged: through
/// sharding annotations, reshapes, transposes, concats, splits, integer
/// casts and pipeline stages (ids reshaped before an embedding are still
/// the input's ids).
static void argumentsOf(Value value, SmallVectorImpl<BlockArgument> &args) {
  SmallVector<Value> work{value};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (isa<func::FuncOp>(arg.getOwner()->getParentOp()))
        args.push_back(arg);
      continue;
    }
    Operation *op = v.getDefiningOp();
    if (auto stage = dyn_cast<StageOp>(op)) {
      work.push_back(stage.getBody().front().getTerminator()->getOperand(
          cast<OpResult>(v).getResultNumber()));
    } else if (auto cast = dyn_cast<CastOp>(op)) {
      if (getElementTypeOrSelf(cast.getInput().getType()).isInteger())
        work.push_back(cast.getInput());
    } else if (isa<shard::ShardOp, ReshapeOp, TransposeOp, SplitOp>(op)) {
      work.push_back(op->getOperand(0));
    } else if (isa<ConcatOp>(op)) {
      llvm::append_range(work, op->getOperands());
    }
  }
}

/// Gives each integer input that indexes an embedding table or names a
/// loss's classes its bound (`loom.index_bound`): the fewest rows or
/// classes it indexes. Inputs are untrusted data, so the runtime checks
/// them where they enter; values computed in the model are clamped by the
/// kernels instead (docs/runtime.md, "Inputs, outputs and the plan's
/// buffers").
static void markIndexBounds(func::FuncOp func) {
  llvm::DenseMap<BlockArgument, int64_t> bounds;
  auto bound = [&](Value index, int64_t size) {
    SmallVector<BlockArgument> args;
    argumentsOf(index, args);
    for (BlockArgument arg : args) {
      if (!func.getArgAttr(arg.getArgNumber(), attr::kInput))
        continue;
      auto [it, inserted] = bounds.try_emplace(arg, size);
      if (!inserted)
        it->second = std::min(it->second, size);
    }
  };
  func.walk([&](Operation *op) {
    if (auto embedding = dyn_cast<EmbeddingOp>(op))
      bound(embedding.getIds(),
            cast<RankedTensorType>(embedding.getTable().getType()).getDimSize(0));
    else if (auto loss = dyn_cast<CrossEntropyOp>(op))
      bound(loss.getLabels(),
            cast<RankedTensorType>(loss.getLogits().getType()).getShape().back());
  });
  Builder b(func.getContext());
  for (auto [arg, size] : bounds)
    func.setArgAttr(arg.getArgNumber(), attr::kIndexBound, b.getI64IntegerAttr(size));
}

void Elaborator::emitModel(const ModelDecl &decl) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  model.emplace();
  instanceCounts.clear(); // parameter names restart in every model
  dropoutStreams = 0;     // so do dropouts' numbers: another model leaves them
  model->func = func::FuncOp::create(builder, loc(decl.loc), decl.name.text,
                                     builder.getFunctionType({}, {}));
  builder.setInsertionPointToStart(model->func.addEntryBlock());
  Scope scope;
  scope.parent = &globals;
  emitBlock(decl.body, scope, BodyKind::Model);
  if (model->results.empty() && !failed())
    error(decl.loc) << "model '" << decl.name.text << "' has no outputs";

  // The return's location holds each result's statement (the plan's errors
  // about an output point at it); a bare model's has its own.
  Location returnLoc = loc(decl.loc);
  if (!model->resultLocs.empty()) {
    // Tagged with the results' names: passes that add results (the
    // gradients, the optimizer's) keep the location, not the order.
    SmallVector<Attribute> names{builder.getStringAttr(attr::kResultLocs)};
    for (DictionaryAttr attrs : model->resultAttrs) {
      auto name = attrs.getAs<StringAttr>(attr::kOutput);
      names.push_back(name ? name : attrs.getAs<StringAttr>(attr::kLoss));
    }
    returnLoc = FusedLoc::get(&context, model->resultLocs, builder.getArrayAttr(names));
  }
  func::ReturnOp::create(builder, returnLoc, model->results);
  func::FuncOp func = model->func;
  func.setFunctionType(builder.getFunctionType(
      func.getBody().front().getArgumentTypes(),
      ValueRange(model->results).getTypes()));
  func.setAllArgAttrs(model->argAttrs);
  func.setAllResultAttrs(model->resultAttrs);
  markIndexBounds(func);
  if (model->pipelineAxis)
    func->setAttr(attr::kPipelineAxis, builder.getStringAttr(*model->pipelineAxis));
  checkStageCount(decl);
  checkPipelineAxisUnsplit();
  splitPipelinedForward(decl.loc);
  model.reset();
}

/// The pipeline axis's ranks run different stages: a tensor split over it
/// would have its pieces on ranks of other stages, whose collectives the
/// stage's ranks never meet (the run hung, or a forward's rows came back
/// as copies of the first rank's).
void Elaborator::checkPipelineAxisUnsplit() {
  if (!model->pipelineAxis)
    return;
  llvm::SmallPtrSet<const char *, 8> said; // a layer's specs, once
  for (const auto &[axis, where, moe] : model->splitAxes)
    if (axis == *model->pipelineAxis && said.insert(where.getPointer()).second)
      error(where) << "mesh axis '" << axis
                   << "' is the pipeline axis, whose ranks run different stages: "
                   << (moe ? "an MoE block's experts" : "a tensor")
                   << " cannot be split over it (use another axis)";
}

/// Whether `value` is computed from a result of stage `number`.
static bool readsStageResult(Value value, int64_t number) {
  llvm::DenseSet<Operation *> seen;
  SmallVector<Value> work{value};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (auto stage = dyn_cast<StageOp>(def);
        stage && static_cast<int64_t>(stage.getStage()) == number)
      return true;
    llvm::append_range(work, valuesRead(def));
  }
  return false;
}

void Elaborator::checkStageCount(const ModelDecl &decl) {
  // loom-place-stages checks the same on the partitioned program; here the
  // script is rejected before anything is built from it.
  if (!model->pipelineAxis || model->lastStage < 0 || failed())
    return;
  auto axis = llvm::find_if(
      meshAxes, [&](auto &a) { return a.name == *model->pipelineAxis; });
  if (axis == meshAxes.end() || axis->size <= 1)
    return;
  // loom-place-stages counts the stages its ops carry: a last stage with
  // none would vanish from the count.
  if (model->emptyLastStage) {
    error(*model->emptyLastStage)
        << "stage " << model->lastStage
        << " computes nothing: the last stage of a pipelined model needs "
           "some of its work";
    return;
  }
  int64_t stages = model->lastStage + 1, ranks = axis->size;
  if (stages >= ranks && stages % ranks == 0) {
    // A microbatched training step keeps only its loss: a last stage whose
    // results the loss does not read is left with no work, and the
    // partitioner counted a stage fewer ("1 pipeline stage, which the 2
    // ranks cannot share" of a script with two).
    if (microbatchSplit && microbatchSplit->forwardModel.empty() && model->loss &&
        !readsStageResult(model->loss, model->lastStage))
      error(model->lastStageLoc)
          << "stage " << model->lastStage
          << " computes nothing the loss reads: a training step with "
             "microbatches keeps only its loss (other outputs would hold one "
             "microbatch each), which leaves the last stage no work; make the "
             "loss read its results, or train without microbatches";
    return;
  }
  error(decl.loc) << "model '" << decl.name.text << "' has " << stages
                  << " pipeline stage" << (stages == 1 ? "" : "s")
                  << ", which the " << ranks << " ranks of axis '"
                  << *model->pipelineAxis
                  << "' cannot share: give it a multiple of " << ranks
                  << " stages (a rank holds stages/" << ranks << " of them)";
}

/// A forward-only build given `--microbatches m` pipelines m microbatches
/// through the stages of a model placed on a pipeline axis of several
/// ranks: like a training step, it is built again for one microbatch
/// (mlirGen), and its outputs are assembled from the microbatches'.
void Elaborator::splitPipelinedForward(SMLoc where) {
  // After an error (emitTrain's own check that the microbatches divide
  // the batch among them) there is nothing to split.
  if (splitsMicrobatches || perMicrobatch || !microbatchesOverride ||
      *microbatchesOverride < 2 || model->lastStage < 0 || failed())
    return;
  std::string axis = model->pipelineAxis.value_or("pp");
  auto pipeline = llvm::find_if(meshAxes, [&](auto &a) { return a.name == axis; });
  if (pipeline == meshAxes.end() || pipeline->size < 2)
    return;
  int64_t count = *microbatchesOverride;
  for (const BatchDim &batch : model->batchDims)
    if (batch.size % count != 0) {
      error(batch.loc) << "--microbatches " << count
                       << " do not divide the batch dimension " << batch.size
                       << " of input '" << batch.input << "'";
      return;
    }
  // The loss is the microbatches' mean: the whole batch's only for a mean.
  if (model->loss && !averagesMicrobatches(model->loss)) {
    error(model->lossLoc) << "with microbatches the loss must be a mean over "
                             "the batch (cross_entropy, mse or mean), or sums "
                             "and multiples of such means and of terms that "
                             "read no input, since a pipelined forward "
                             "averages the microbatches' losses";
    return;
  }
  microbatchSplit = MicrobatchSplit{count, where, model->batchDims,
                                    model->func.getSymName().str()};
}

/// The model whose compiler-made symbol `name` would be (its per-rank
/// program `M_spmd`, the kernels `M_kN` and `M_spmd_kN` of either), among
/// the script's `models`.
static std::optional<std::string>
compilerNameOwner(StringRef name, const llvm::StringSet<> &models) {
  StringRef owner = name;
  size_t k = owner.rfind("_k");
  StringRef index = k == StringRef::npos ? "" : owner.substr(k + 2);
  // Kernel indices are decimal without leading zeros: a_k01 is no kernel's.
  if (!index.empty() && llvm::all_of(index, llvm::isDigit) &&
      (index == "0" || index.front() != '0'))
    owner = owner.take_front(k);
  owner.consume_back("_spmd");
  if (owner != name && models.contains(owner))
    return owner.str();
  return std::nullopt;
}

OwningOpRef<ModuleOp> Elaborator::run(const Module &ast) {
  OwningOpRef<ModuleOp> owned = ModuleOp::create(builder.getUnknownLoc());
  module = *owned;
  computeType = accumulateType = builder.getF32Type();
  for (const StmtPtr &dim : ast.globals)
    emitStatement(*dim, globals, BodyKind::Layer);
  for (const auto &entry : dimSizes)
    if (!globals.ints.count(entry.getKey())) {
      std::string names;
      for (const StmtPtr &dim : ast.globals)
        names += (names.empty() ? "" : ", ") + dim->names.front().text;
      mlir::emitError(builder.getUnknownLoc())
          << "--dim sets '" << entry.getKey()
          << "', which the script does not declare (its dims: "
          << (names.empty() ? std::string("none") : names) << ")";
      return nullptr;
    }
  for (const MeshDecl &mesh : ast.meshes)
    declareMesh(mesh);
  if (ast.precisions.size() > 1)
    error(ast.precisions[1].loc) << "a script declares one precision policy";
  if (!ast.precisions.empty())
    declarePrecision(ast.precisions.front());
  for (const FunctionDecl &fn : ast.functions) {
    if (!functions.try_emplace(fn.name.text, &fn).second)
      error(fn.name.loc) << "'" << fn.name.text << "' is already defined";
    // Its params would be 'opt.0.w', ...: plans, checkpoints, explain and
    // the runtime know the optimizer's state by that prefix (a zero-init
    // bias of such a layer was taken for state and zeroed by --weights).
    else if (fn.name.text == "opt")
      error(fn.name.loc) << (fn.isMoe ? "an MoE block" : "a layer")
                         << " cannot be named 'opt': its params would be named "
                            "'opt.0.*', the prefix of the optimizer's state "
                            "(opt.m.w, ...) in plans and checkpoints";
    // Checked once here, not at every call (bind skips arguments).
    for (const Name &arg : fn.args)
      if (isIntName(globals, arg.text))
        error(arg.loc) << "'" << arg.text
                       << "' is already a dimension or loop variable";
  }
  llvm::StringSet<> modelNames, declared;
  for (const ModelDecl &decl : ast.models)
    declared.insert(decl.name.text);
  for (const ModelDecl &decl : ast.models) {
    std::optional<std::string> owner = compilerNameOwner(decl.name.text, declared);
    if (meshName && decl.name.text == *meshName)
      error(decl.name.loc) << "model '" << decl.name.text
                           << "' has the name of the mesh";
    // Its kernels are symbols named after it, which the executable's C glue
    // and PTX must spell (`2x_k0` had failed the link with clang's errors
    // about a temporary file, and ptxas with a syntax error).
    else if (llvm::isDigit(decl.name.text.front()))
      error(decl.name.loc) << "model name '" << decl.name.text
                           << "' starts with a digit: its kernels are symbols named after "
                              "it ('"
                           << decl.name.text << "_k0'), which C and PTX do not allow";
    else if (owner)
      error(decl.name.loc)
          << "model '" << decl.name.text << "' has the name loomc gives model '"
          << *owner << "''s "
          << (StringRef(decl.name.text).ends_with("_spmd") ? "per-rank program"
                                                           : "kernels")
          << ": rename one of them";
    else if (!modelNames.insert(decl.name.text).second)
      error(decl.name.loc) << "model '" << decl.name.text
                           << "' is already defined";
    else
      emitModel(decl);
  }
  if (ast.models.empty())
    error(SMLoc::getFromPointer(
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBufferStart()))
        << "the script declares no model";
  if (failed())
    return nullptr;
  // The rules above mirror the op verifiers; a failure here is a Loom bug.
  if (mlir::failed(mlir::verify(module))) {
    emitError(module.getLoc()) << "internal error: the generated loom IR does "
                                  "not verify";
    return nullptr;
  }
  return owned;
}

/// The params of every model in `module`, by name.
static llvm::StringMap<Type> paramTypes(ModuleOp module) {
  llvm::StringMap<Type> types;
  for (auto func : module.getOps<func::FuncOp>())
    for (BlockArgument arg : func.getArguments())
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam))
        types[(func.getSymName() + "." + name.getValue()).str()] = arg.getType();
  return types;
}

/// A pipelined forward built for one microbatch returns one microbatch's
/// outputs; the runtime makes the whole batch's from them. Each output says
/// how (loom.assemble): the loss is the mean of the microbatches' (a mean
/// over the batch, which emitTrain checked); any other output must be the
/// microbatches' stacked along its dim 0, as the inputs are split.
static LogicalResult markForwardAssembly(Elaborator &elaborator,
                                         ModuleOp wholeModule, ModuleOp built) {
  const Elaborator::MicrobatchSplit &split = *elaborator.microbatchSplit;
  auto micro = built.lookupSymbol<func::FuncOp>(split.forwardModel);
  auto whole = wholeModule.lookupSymbol<func::FuncOp>(split.forwardModel);
  OpBuilder b(micro);
  micro->setAttr(attr::kForwardMicrobatches, b.getI64IntegerAttr(split.count));
  for (unsigned i = 0; i < micro.getNumResults(); ++i) {
    StringRef kind = "rows";
    if (micro.getResultAttr(i, attr::kLoss)) {
      kind = "mean";
    } else {
      auto one = cast<RankedTensorType>(micro.getResultTypes()[i]);
      auto all = cast<RankedTensorType>(whole.getResultTypes()[i]);
      bool stacked = one.getRank() >= 1 && one.getRank() == all.getRank() &&
                     all.getDimSize(0) == split.count * one.getDimSize(0) &&
                     one.getShape().drop_front() == all.getShape().drop_front();
      if (!stacked) {
        auto name = micro.getResultAttrOfType<StringAttr>(i, attr::kOutput);
        StringRef text = name ? name.getValue() : StringRef("?");
        elaborator.error(elaborator.outputLocs.lookup(
            (micro.getSymName() + "." + text).str()))
            << "output '" << text << "' " << all << " of a forward pipelined in "
            << split.count << " microbatches is not their outputs " << one
            << " stacked along dim 0: a pipelined forward's outputs need "
               "the batch as their first dim (or build without --microbatches)";
        return failure();
      }
    }
    micro.setResultAttr(i, attr::kAssemble, b.getStringAttr(kind));
  }
  return success();
}

/// With `microbatches m`, the step's program is the model built for one
/// microbatch: elaborated again with its batch dims divided by m, so that
/// every shape the script derives from them (reshapes, aranges) is the
/// microbatch's. The runtime runs it m times per step (loom.accumulate).
static OwningOpRef<ModuleOp>
buildForOneMicrobatch(MLIRContext &context, const Module &module,
                      const llvm::SourceMgr &sourceMgr,
                      const llvm::StringMap<int64_t> &meshSizes,
                      Elaborator &whole, ModuleOp wholeModule) {
  const Elaborator::MicrobatchSplit &split = *whole.microbatchSplit;
  llvm::StringMap<int64_t> sizes;
  for (const Elaborator::BatchDim &batch : split.batchDims) {
    if (!batch.localDim.empty()) {
      whole.error(batch.loc)
          << "with 'microbatches " << split.count << "', the batch dimension of input '"
          << batch.input << "' must be a dim declared before the model, not the model's own '"
          << batch.localDim << "', so that the model can be built for one microbatch";
      return nullptr;
    }
    if (batch.dim.empty()) {
      whole.error(batch.loc)
          << "with 'microbatches " << split.count
          << "', the batch dimension of input '" << batch.input
          << "' must be a named dim (e.g. 'dim B = " << batch.size
          << "'), so that the model can be built for one microbatch";
      return nullptr;
    }
    sizes[batch.dim] = batch.size / split.count;
  }
  Elaborator micro(context, sourceMgr);
  micro.meshSizes = meshSizes;
  micro.recomputeLayers = whole.recomputeLayers;
  micro.microbatchesOverride = whole.microbatchesOverride;
  micro.loopLimit = whole.loopLimit;
  micro.dimSizes = sizes;
  // And --dim's values of the other dims.
  for (const auto &entry : whole.dimSizes)
    micro.dimSizes.try_emplace(entry.getKey(), entry.getValue());
  micro.perMicrobatch = true;
  OwningOpRef<ModuleOp> built = micro.run(module);
  std::string dims;
  for (const auto &entry : sizes)
    dims += (dims.empty() ? "" : ", ") + entry.getKey().str() + " = " +
            std::to_string(entry.getValue());
  if (!built) {
    whole.error(split.where) << "while building the model for one of "
                             << split.count << " microbatches ("
                             << (whole.microbatchesOverride ? "--microbatches; " : "")
                             << dims << ")";
    return nullptr;
  }
  // Only the batch may shrink: a param sized by a batch dim would change.
  llvm::StringMap<Type> before = paramTypes(wholeModule);
  for (const auto &entry : paramTypes(*built))
    if (before.lookup(entry.getKey()) != entry.getValue()) {
      whole.error(split.where)
          << "microbatches split the batch only, but param '"
          << entry.getKey().split('.').second << "' is sized by a batch dim ("
          << dims << " changes it from " << before.lookup(entry.getKey())
          << " to " << entry.getValue() << ")";
      return nullptr;
    }
  // The rows must be computed on their own up to the loss (and the stacked
  // outputs of a pipelined forward), or the split changes the answer.
  for (auto func : wholeModule.getOps<func::FuncOp>()) {
    auto micro = built->lookupSymbol<func::FuncOp>(func.getSymName());
    bool forward = func.getSymName() == split.forwardModel;
    bool trains = llvm::any_of(llvm::seq(func.getNumResults()), [&](unsigned i) {
      return bool(func.getResultAttr(i, attr::kLoss));
    });
    if (!micro || (!forward && !trains))
      continue;
    auto resultLoc = [&](unsigned i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, attr::kOutput);
      if (!name)
        name = func.getResultAttrOfType<StringAttr>(i, attr::kLoss);
      return whole.loc(whole.outputLocs.lookup(
          (func.getSymName() + "." + (name ? name.getValue() : "")).str()));
    };
    if (failed(checkMicrobatchRows(func, micro, split.count, forward,
                                   whole.loc(split.where), resultLoc))) {
      ++whole.errorCount;
      return nullptr;
    }
  }
  if (!split.forwardModel.empty() &&
      failed(markForwardAssembly(whole, wholeModule, *built)))
    return nullptr;
  return built;
}

namespace loom {
OwningOpRef<ModuleOp> mlirGen(MLIRContext &context, const Module &module,
                                    const llvm::SourceMgr &sourceMgr,
                                    const ElaborationOptions &options) {
  const llvm::StringMap<int64_t> &meshSizes = options.meshSizes;
  Elaborator elaborator(context, sourceMgr);
  elaborator.meshSizes = meshSizes;
  elaborator.dimSizes = options.dimSizes;
  elaborator.recomputeLayers = options.recomputeLayers;
  elaborator.splitsMicrobatches = options.trainStep;
  elaborator.microbatchesOverride = options.microbatches;
  elaborator.loopLimit = options.loopLimit;
  elaborator.loopTripCount = options.loopTripCount;
  if (!meshSizes.empty() && module.meshes.empty()) {
    SMLoc where = !module.models.empty()
                      ? module.models.front().name.loc
                      : SMLoc::getFromPointer(
                            sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())
                                ->getBufferStart());
    elaborator.error(where) << "--mesh is given, but the script declares no mesh";
    return nullptr;
  }
  OwningOpRef<ModuleOp> whole = elaborator.run(module);
  if (!whole || !elaborator.microbatchSplit)
    return whole;
  return buildForOneMicrobatch(context, module, sourceMgr, meshSizes,
                               elaborator, *whole);
}
} // namespace loom
