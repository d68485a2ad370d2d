//===- Builtins.cpp - Built-in functions, layers and MoE blocks ----------===//

#include "MLIRGen/Elaborator.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <limits>

using namespace loom;
using namespace mlir;
using namespace mlir::loom;
using llvm::StringRef;

namespace {
/// Checks and reads the arguments of one call to a built-in function.
class CallArgs {
public:
  CallArgs(Elaborator &e, const CallExpr &call, Scope &scope)
      : e(e), call(call), scope(scope) {}

  /// Reports a wrong number of positional arguments or an unknown keyword.
  bool check(size_t min, size_t max, std::initializer_list<StringRef> keywords) {
    size_t n = call.args.size();
    if (n < min || n > max) {
      InFlightDiagnostic diag = e.error(call.getLoc());
      diag << call.callee << " takes ";
      if (min == max)
        diag << min;
      else
        diag << min << " to " << max;
      diag << " argument(s), got " << n;
      // sum(x, 0) means sum(x, axis = 0): say so.
      if (n > max && keywords.size()) {
        diag << "; ";
        llvm::interleave(keywords, diag, ", ");
        diag << (keywords.size() == 1 ? " is a keyword argument" : " are keyword arguments")
             << " (" << *keywords.begin() << " = ...)";
        // torch's max(a, b) is elementwise.
        if ((call.callee == "max" || call.callee == "min") && n == 2)
          diag << "; the elementwise " << call.callee << "imum of two tensors is "
               << call.callee << "imum(a, b)";
      }
      return false;
    }
    for (const KeywordArg &kwarg : call.kwargs)
      if (!llvm::is_contained(keywords, kwarg.name)) {
        InFlightDiagnostic diag = e.error(kwarg.loc);
        diag << call.callee << " has no argument '" << kwarg.name << "'";
        // Say what it has: torch's `dim =` is Loom's `axis =`.
        if (keywords.size()) {
          diag << " (its keyword argument" << (keywords.size() == 1 ? ": " : "s: ");
          llvm::interleave(keywords, diag, ", ");
          diag << ")";
        } else {
          diag << " (it takes no keyword arguments)";
        }
        return false;
      }
    return true;
  }

  bool has(size_t i) const { return i < call.args.size(); }
  SMLoc at(size_t i) const { return call.args[i]->getLoc(); }

  Value tensor(size_t i) {
    return e.emitTensor(*call.args[i], scope,
                        "argument " + std::to_string(i + 1) + " of " + call.callee);
  }
  Value floatTensor(size_t i) {
    return e.requireFloat(tensor(i), at(i), call.callee);
  }
  const KeywordArg *keyword(StringRef name) const {
    for (const KeywordArg &kwarg : call.kwargs)
      if (kwarg.name == name)
        return &kwarg;
    return nullptr;
  }
  std::optional<int64_t> intKeyword(StringRef name, int64_t fallback) {
    const KeywordArg *kwarg = keyword(name);
    return kwarg ? e.evalInt(*kwarg->value, scope) : fallback;
  }
  std::optional<double> numberKeyword(StringRef name, double fallback) {
    const KeywordArg *kwarg = keyword(name);
    return kwarg ? e.evalNumber(*kwarg->value, scope) : fallback;
  }
  /// `axis = k` normalized against `rank` (default: the last dimension).
  std::optional<int64_t> axis(int64_t rank) {
    std::optional<int64_t> axis = intKeyword("axis", -1);
    if (!axis)
      return std::nullopt;
    const KeywordArg *kwarg = keyword("axis");
    return normalizeAxis(e, *axis, rank, kwarg ? kwarg->value->getLoc() : call.getLoc());
  }
  /// `[a, b, ...]` of integers at argument `i`.
  std::optional<SmallVector<int64_t>> intList(size_t i) {
    auto *list = llvm::dyn_cast<ListExpr>(call.args[i].get());
    if (!list) {
      e.error(at(i)) << "expected a list such as [0, 2, 1]";
      return std::nullopt;
    }
    SmallVector<int64_t> values;
    for (const ExprPtr &element : list->elements) {
      std::optional<int64_t> v = e.evalInt(*element, scope);
      if (!v)
        return std::nullopt;
      values.push_back(*v);
    }
    return values;
  }

  /// `f(x, [d0, d1, ...])` (reshape, broadcast): the tensor and the list.
  std::optional<std::pair<Value, SmallVector<int64_t>>> tensorAndList() {
    if (!check(2, 2, {}))
      return std::nullopt;
    Value x = tensor(0);
    std::optional<SmallVector<int64_t>> list = intList(1);
    if (!x || !list)
      return std::nullopt;
    return std::make_pair(x, std::move(*list));
  }

  Elaborator &e;
  const CallExpr &call;
  Scope &scope;
};
} // namespace

static RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

Operand Elaborator::emitCall(const CallExpr &call, Scope &scope) {
  if (auto it = functions.find(call.callee); it != functions.end()) {
    const FunctionDecl &fn = *it->second;
    if (activeCalls.contains(fn.name.text)) {
      error(call.getLoc()) << "'" << fn.name.text << "' calls itself";
      return Operand::poison();
    }
    // Each instance elaborates its body recursively: 10000 layers calling
    // each other overflowed the stack.
    constexpr size_t kMaxCallDepth = 200;
    if (activeCalls.size() >= kMaxCallDepth) {
      error(call.getLoc()) << "layer calls nested too deeply (at most " << kMaxCallDepth
                           << "): '" << fn.name.text << "'";
      return Operand::poison();
    }
    if (failedFunctions.contains(fn.name.text))
      return Operand::poison();
    if (fn.isMoe && call.recompute) {
      error(call.getLoc()) << "'recompute' applies to a layer instance, not "
                              "to MoE block '"
                           << call.callee << "'";
      return Operand::poison();
    }
    return fn.isMoe ? instantiateMoe(fn, call, scope)
                    : instantiateLayer(fn, call, scope);
  }
  if (call.recompute) {
    error(call.getLoc()) << "'recompute' applies to a layer instance; '"
                         << call.callee << "' is not a layer";
    return Operand::poison();
  }
  return emitBuiltin(call, scope);
}

/// A normalization's scale or bias: a float `[D]` for an input `[..., D]`.
static Value normParam(Elaborator &e, CallArgs &args, size_t i, Value input) {
  if (!args.has(i))
    return Value();
  Value param = args.floatTensor(i);
  if (!param)
    return Value();
  int64_t features = typeOf(input).getShape().back();
  if (typeOf(param).getShape() != ArrayRef<int64_t>{features}) {
    e.error(args.at(i)) << "shape mismatch: " << args.call.callee
                        << " expects a [" << features << "] parameter, got "
                        << formatShape(typeOf(param).getShape());
    return Value();
  }
  return param;
}

Operand Elaborator::emitBuiltin(const CallExpr &call, Scope &scope) {
  CallArgs args(*this, call, scope);
  StringRef name = call.callee;
  mlir::Location at = loc(call.getLoc());

  // Elementwise functions of one float tensor.
  using UnaryBuilder = Value (*)(OpBuilder &, mlir::Location, Value);
  UnaryBuilder unary =
      llvm::StringSwitch<UnaryBuilder>(name)
          .Case("gelu", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return GeluOp::create(b, l, x); })
          .Case("relu", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return ReluOp::create(b, l, x); })
          .Case("silu", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return SiluOp::create(b, l, x); })
          .Case("sigmoid", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return SigmoidOp::create(b, l, x); })
          .Case("exp", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return ExpOp::create(b, l, x); })
          .Case("log", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return LogOp::create(b, l, x); })
          .Case("tanh", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return TanhOp::create(b, l, x); })
          .Case("sqrt", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return SqrtOp::create(b, l, x); })
          .Case("sin", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return SinOp::create(b, l, x); })
          .Case("cos", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return CosOp::create(b, l, x); })
          .Case("abs", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return AbsOp::create(b, l, x); })
          .Case("erf", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return ErfOp::create(b, l, x); })
          .Case("causal_mask", [](OpBuilder &b, mlir::Location l, Value x) -> Value { return CausalMaskOp::create(b, l, x); })
          .Default(nullptr);
  if (unary) {
    if (!args.check(1, 1, {}))
      return Operand::poison();
    // Of a number, the math functions are numbers too (`1 / sqrt(64)`, a
    // dim's square root for a scale); gelu(2) and kin stay errors.
    double (*math)(double) = llvm::StringSwitch<double (*)(double)>(name)
                                 .Case("exp", [](double v) { return std::exp(v); })
                                 .Case("log", [](double v) { return std::log(v); })
                                 .Case("tanh", [](double v) { return std::tanh(v); })
                                 .Case("sqrt", [](double v) { return std::sqrt(v); })
                                 .Case("sin", [](double v) { return std::sin(v); })
                                 .Case("cos", [](double v) { return std::cos(v); })
                                 .Case("abs", [](double v) { return std::fabs(v); })
                                 .Case("erf", [](double v) { return std::erf(v); })
                                 .Default(nullptr);
    Operand operand = emitExpr(*call.args[0], scope);
    if (operand.isPoison())
      return Operand::poison();
    if (operand.kind == Operand::Kind::Number && math) {
      double value = math(operand.number);
      if (!std::isfinite(value)) {
        error(call.getLoc()) << name << "(" << formatNumber(operand.number)
                             << ") is not a finite number";
        return Operand::poison();
      }
      // |n| of an integer is an integer, as n + m is.
      return Operand::ofNumber(value, name == "abs" && operand.isInteger);
    }
    Value x;
    if (operand.kind == Operand::Kind::Number)
      error(args.at(0)) << "expected a tensor for argument 1 of " << name << ", got a number";
    else if (operand.kind == Operand::Kind::Tuple)
      error(args.at(0)) << "expected one tensor for argument 1 of " << name << ", got "
                        << operand.tuple.size() << " values";
    else
      x = requireFloat(operand.tensor, args.at(0), name);
    if (!x)
      return Operand::poison();
    if (name == "causal_mask" && typeOf(x).getRank() < 2) {
      error(args.at(0)) << "causal_mask needs a tensor of rank >= 2 "
                           "(queries x keys), got "
                        << formatShape(typeOf(x).getShape());
      return Operand::poison();
    }
    return Operand::ofTensor(unary(builder, at, x));
  }

  // Elementwise maximum and minimum of two operands, broadcast and
  // promoted as arithmetic is (`maximum(x, 0.0)` computes relu; its
  // gradient at 0 is a tie's half, where relu's is 0).
  if (name == "maximum" || name == "minimum") {
    if (!args.check(2, 2, {}))
      return Operand::poison();
    Operand lhs = emitExpr(*call.args[0], scope), rhs = emitExpr(*call.args[1], scope);
    if (lhs.isPoison() || rhs.isPoison())
      return Operand::poison();
    const Operand *sides[] = {&lhs, &rhs};
    for (size_t i = 0; i < 2; ++i)
      if (sides[i]->kind == Operand::Kind::Tuple) {
        error(args.at(i)) << "expected one tensor for argument " << i + 1 << " of " << name
                          << ", got " << sides[i]->tuple.size() << " values";
        return Operand::poison();
      }
    return emitArithmetic(name == "maximum" ? Arithmetic::Maximum : Arithmetic::Minimum,
                          lhs, rhs, call.getLoc());
  }

  if (name == "softmax") {
    if (!args.check(1, 1, {"axis"}))
      return Operand::poison();
    Value x = args.floatTensor(0);
    if (!x)
      return Operand::poison();
    std::optional<int64_t> axis = args.axis(typeOf(x).getRank());
    if (!axis)
      return Operand::poison();
    return Operand::ofTensor(SoftmaxOp::create(builder, at, x, *axis));
  }

  if (name == "layernorm" || name == "rmsnorm") {
    bool isLayer = name == "layernorm";
    if (!args.check(1, isLayer ? 3 : 2, {"eps"}))
      return Operand::poison();
    Value x = args.floatTensor(0);
    if (!x)
      return Operand::poison();
    if (typeOf(x).getRank() == 0) {
      error(args.at(0)) << name << " cannot normalize a scalar";
      return Operand::poison();
    }
    Value scale = normParam(*this, args, 1, x);
    Value bias = isLayer ? normParam(*this, args, 2, x) : Value();
    if ((args.has(1) && !scale) || (args.has(2) && !bias))
      return Operand::poison();
    std::optional<double> eps = args.numberKeyword("eps", 1e-5);
    if (!eps)
      return Operand::poison();
    if (!(*eps > 0)) {
      error(args.keyword("eps")->value->getLoc()) << "eps must be positive";
      return Operand::poison();
    }
    // The variance and eps are summed in f32.
    if (args.keyword("eps") && !fitsF32(*eps, args.keyword("eps")->value->getLoc(), "eps"))
      return Operand::poison();
    Type element = typeOf(x).getElementType();
    for (Value p : {scale, bias})
      if (p) {
        FailureOr<Type> promoted = promoteElementTypes(
            element, typeOf(p).getElementType(), errorAt(call.getLoc()));
        if (mlir::failed(promoted))
          return Operand::poison();
        element = *promoted;
      }
    auto type = typeOf(x).clone(element);
    if (isLayer)
      return Operand::ofTensor(LayerNormOp::create(
          builder, at, type, x, scale, bias, builder.getF64FloatAttr(*eps)));
    return Operand::ofTensor(RmsNormOp::create(builder, at, type, x, scale,
                                               builder.getF64FloatAttr(*eps)));
  }

  if (name == "embedding") {
    if (!args.check(2, 2, {}))
      return Operand::poison();
    Value table = args.floatTensor(0);
    Value ids = args.tensor(1);
    if (!table || !ids)
      return Operand::poison();
    if (!isa<IntegerType>(typeOf(ids).getElementType())) {
      error(args.at(1)) << "dtype conflict: embedding ids must be i32 or i64, got "
                        << ids.getType();
      return Operand::poison();
    }
    FailureOr<SmallVector<int64_t>> shape = embeddingShape(
        typeOf(table).getShape(), typeOf(ids).getShape(), errorAt(args.at(0)));
    // Its result is ids' shape times the table's row: as large as any
    // declared tensor may be (an unchecked one wrapped the plan's bytes).
    if (mlir::failed(shape) || !checkSize(*shape, call.getLoc()))
      return Operand::poison();
    return Operand::ofTensor(EmbeddingOp::create(
        builder, at, typeOf(table).clone(*shape), table, ids));
  }

  if (name == "arange") {
    if (!args.check(1, 1, {}))
      return Operand::poison();
    std::optional<int64_t> n = evalInt(*call.args[0], scope);
    if (!n)
      return Operand::poison();
    if (*n < 1) {
      error(args.at(0)) << "arange needs a positive length, got " << *n;
      return Operand::poison();
    }
    // Its values are i32: longer, the last ones had wrapped negative.
    if (*n > std::numeric_limits<int32_t>::max()) {
      error(args.at(0)) << "arange's values are i32, so its length is at most 2147483647, got "
                        << *n;
      return Operand::poison();
    }
    return Operand::ofTensor(ArangeOp::create(
        builder, at, RankedTensorType::get({*n}, builder.getI32Type())));
  }

  if (name == "transpose") {
    if (!args.check(1, 2, {}))
      return Operand::poison();
    Value x = args.tensor(0);
    if (!x)
      return Operand::poison();
    int64_t rank = typeOf(x).getRank();
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    if (args.has(1)) {
      std::optional<SmallVector<int64_t>> given = args.intList(1);
      if (!given)
        return Operand::poison();
      perm = *given;
    } else if (rank >= 2) {
      std::swap(perm[rank - 1], perm[rank - 2]); // the matrix transpose
    }
    FailureOr<SmallVector<int64_t>> shape = transposeShape(
        typeOf(x).getShape(), perm, errorAt(args.has(1) ? args.at(1) : call.getLoc()));
    if (mlir::failed(shape))
      return Operand::poison();
    return Operand::ofTensor(TransposeOp::create(
        builder, at, typeOf(x).clone(*shape), x, builder.getDenseI64ArrayAttr(perm)));
  }

  if (name == "reshape") {
    auto operands = args.tensorAndList();
    if (!operands)
      return Operand::poison();
    auto &[x, shape] = *operands;
    // One -1 takes whatever the other dimensions leave.
    int64_t known = 1, inferred = -1;
    for (auto [i, d] : llvm::enumerate(shape)) {
      if (d == -1 && inferred < 0) {
        inferred = i;
      } else if (d < 1) {
        error(args.at(1)) << "reshape dimensions must be positive (one may be -1)";
        return Operand::poison();
      } else if (__builtin_mul_overflow(known, d, &known)) {
        error(args.at(1)) << "reshape dimensions are too large";
        return Operand::poison();
      }
    }
    int64_t total = typeOf(x).getNumElements();
    if (inferred >= 0 && total % known == 0)
      shape[inferred] = total / known;
    if (checkedElementCount(shape) != total || (inferred >= 0 && total % known)) {
      error(args.at(1)) << "shape mismatch: cannot reshape "
                        << formatShape(typeOf(x).getShape()) << " ("
                        << total << " elements) to " << formatShape(shape);
      return Operand::poison();
    }
    return Operand::ofTensor(
        ReshapeOp::create(builder, at, typeOf(x).clone(shape), x));
  }

  if (name == "split") {
    if (!args.check(2, 2, {"axis"}))
      return Operand::poison();
    Value x = args.tensor(0);
    std::optional<int64_t> parts = evalInt(*call.args[1], scope);
    if (!x || !parts)
      return Operand::poison();
    std::optional<int64_t> axis = args.axis(typeOf(x).getRank());
    if (!axis)
      return Operand::poison();
    int64_t size = typeOf(x).getDimSize(*axis);
    if (*parts > 64) {
      error(args.at(1)) << "split makes at most 64 parts, got " << *parts;
      return Operand::poison();
    }
    if (*parts < 1 || size % *parts != 0) {
      error(args.at(1)) << "cannot split dimension " << *axis << " of size "
                        << size << " into " << *parts << " equal parts";
      return Operand::poison();
    }
    SmallVector<int64_t> pieceShape(typeOf(x).getShape());
    pieceShape[*axis] = size / *parts;
    SmallVector<Type> types(*parts, typeOf(x).clone(pieceShape));
    auto split = SplitOp::create(builder, at, types, x, *axis);
    if (*parts == 1)
      return Operand::ofTensor(split.getResult(0));
    Operand result;
    result.kind = Operand::Kind::Tuple;
    result.tuple.assign(split.getResults().begin(), split.getResults().end());
    return result;
  }

  if (name == "broadcast") {
    auto operands = args.tensorAndList();
    if (!operands)
      return Operand::poison();
    auto &[x, shape] = *operands;
    // NumPy's rules: aligned at the end, a dim of 1 repeats, new dims lead.
    ArrayRef<int64_t> from = typeOf(x).getShape();
    bool fits = from.size() <= shape.size();
    for (size_t d = 0; fits && d < from.size(); ++d) {
      int64_t to = shape[shape.size() - from.size() + d];
      fits = from[d] == to || from[d] == 1;
    }
    if (!fits || llvm::any_of(shape, [](int64_t d) { return d < 1; })) {
      error(call.getLoc()) << "shape mismatch: cannot broadcast " << formatShape(from)
                           << " to " << formatShape(shape);
      return Operand::poison();
    }
    if (!checkSize(shape, args.at(1)))
      return Operand::poison();
    // Built even to its own shape: a microbatch's build (B = 1 rows of a
    // [1, D] class token) must have the whole batch's ops (it had been
    // refused: "its ops change with the batch size").
    return Operand::ofTensor(BroadcastOp::create(builder, at, typeOf(x).clone(shape), x));
  }

  if (name == "dropout") {
    // Inverted dropout, in a training step only (loom.dropout): p in
    // [0, 1), positional or torch's keyword (`dropout(x, p = 0.1)`), and
    // each dim's global positions for the mask's hash.
    const KeywordArg *keyword = args.keyword("p");
    if (!args.check(1, 2, {"p"}))
      return Operand::poison();
    if (keyword ? args.has(1) : !args.has(1)) {
      error(call.getLoc()) << (keyword ? "dropout's p is given twice"
                                       : "dropout needs its probability: dropout(x, p)");
      return Operand::poison();
    }
    Value x = args.floatTensor(0);
    const Expr &given = keyword ? *keyword->value : *call.args[1];
    std::optional<double> p = evalNumber(given, scope);
    if (!x || !p)
      return Operand::poison();
    if (!(*p >= 0 && *p < 1)) {
      error(given.getLoc()) << "dropout's probability must be in [0, 1), got "
                            << formatNumber(*p);
      return Operand::poison();
    }
    // The kernels compare with p in f32: one that rounds to 1 there would
    // drop everything.
    if (static_cast<float>(*p) >= 1.0f) {
      error(given.getLoc()) << "dropout's probability " << formatNumber(*p)
                            << " rounds to 1 in f32, where it is used";
      return Operand::poison();
    }
    if (*p == 0)
      return Operand::ofTensor(x);
    // Positions are i32 (the hash's words): a longer dim would repeat them.
    for (int64_t size : typeOf(x).getShape())
      if (size > std::numeric_limits<int32_t>::max()) {
        error(call.getLoc()) << "dropout of a dimension of " << size
                             << " elements: its positions are i32, at most 2^31 - 1";
        return Operand::poison();
      }
    SmallVector<Value> positions;
    for (int64_t size : typeOf(x).getShape())
      positions.push_back(ArangeOp::create(
          builder, at, RankedTensorType::get({size}, builder.getI32Type())));
    return Operand::ofTensor(DropoutOp::create(
        builder, at, x.getType(), x, positions, ValueRange(),
        builder.getF64FloatAttr(*p), builder.getI64IntegerAttr(dropoutStreams++)));
  }

  if (name == "slice") {
    if (!args.check(3, 3, {"axis"}))
      return Operand::poison();
    Value x = args.tensor(0);
    std::optional<int64_t> start = evalInt(*call.args[1], scope);
    std::optional<int64_t> end = evalInt(*call.args[2], scope);
    if (!x || !start || !end)
      return Operand::poison();
    std::optional<int64_t> axis = args.axis(typeOf(x).getRank());
    if (!axis)
      return Operand::poison();
    // [start, end), negative counting from the end, as Python's.
    int64_t size = typeOf(x).getDimSize(*axis);
    int64_t lo = *start < 0 ? *start + size : *start;
    int64_t hi = *end < 0 ? *end + size : *end;
    if (lo < 0 || hi > size || lo >= hi) {
      error(call.getLoc()) << "slice [" << *start << ", " << *end << ") of dimension "
                           << *axis << " (of size " << size
                           << ") is empty or out of range: 0 <= start < end <= " << size
                           << ", a negative index counting from the end";
      return Operand::poison();
    }
    if (lo == 0 && hi == size)
      return Operand::ofTensor(x);
    // The pieces of a loom.split, the range one of them: its gradient,
    // partitioning and lowering are split's (the other pieces unread).
    SmallVector<int64_t> shape(typeOf(x).getShape());
    SmallVector<Type> types;
    auto piece = [&](int64_t length) {
      shape[*axis] = length;
      types.push_back(typeOf(x).clone(shape));
    };
    if (lo > 0)
      piece(lo);
    unsigned range = types.size();
    piece(hi - lo);
    if (hi < size)
      piece(size - hi);
    return Operand::ofTensor(SplitOp::create(builder, at, types, x, *axis).getResult(range));
  }

  if (name == "concat") {
    if (!args.check(1, 64, {"axis"}))
      return Operand::poison();
    SmallVector<Value> inputs;
    for (size_t i = 0; i < call.args.size(); ++i)
      if (Value v = args.tensor(i))
        inputs.push_back(v);
    if (inputs.size() != call.args.size())
      return Operand::poison();
    std::optional<int64_t> axis = args.axis(typeOf(inputs[0]).getRank());
    if (!axis)
      return Operand::poison();
    Type element = typeOf(inputs[0]).getElementType();
    SmallVector<ArrayRef<int64_t>> shapes;
    for (Value v : inputs) {
      if (typeOf(v).getElementType() != element) {
        error(call.getLoc()) << "dtype conflict: concat of " << element
                             << " and " << typeOf(v).getElementType();
        return Operand::poison();
      }
      shapes.push_back(typeOf(v).getShape());
    }
    FailureOr<SmallVector<int64_t>> shape =
        concatShape(shapes, *axis, errorAt(call.getLoc()));
    if (mlir::failed(shape) || !checkSize(*shape, call.getLoc()))
      return Operand::poison();
    return Operand::ofTensor(ConcatOp::create(
        builder, at, RankedTensorType::get(*shape, element), inputs, *axis));
  }

  if (name == "sum" || name == "mean" || name == "max" || name == "min") {
    if (!args.check(1, 1, {"axis", "keepdim"}))
      return Operand::poison();
    Value x = args.floatTensor(0);
    if (!x)
      return Operand::poison();
    std::optional<int64_t> axis = args.axis(typeOf(x).getRank());
    std::optional<int64_t> keep = args.intKeyword("keepdim", 0);
    if (!axis || !keep)
      return Operand::poison();
    SmallVector<int64_t> shape =
        *reduceShape(typeOf(x).getShape(), *axis, *keep != 0, nullptr);
    auto type = typeOf(x).clone(shape);
    Value r;
    if (name == "sum")
      r = SumOp::create(builder, at, type, x, *axis, *keep != 0);
    else if (name == "mean")
      r = MeanOp::create(builder, at, type, x, *axis, *keep != 0);
    else if (name == "max")
      r = MaxOp::create(builder, at, type, x, *axis, *keep != 0);
    else // min(x) = -max(-x): exact, and the gradient shared among ties as max's
      r = NegOp::create(builder, at,
                        MaxOp::create(builder, at, type, NegOp::create(builder, at, x), *axis,
                                      *keep != 0));
    return Operand::ofTensor(r);
  }

  if (name == "cast") {
    if (!args.check(2, 2, {}))
      return Operand::poison();
    Value x = args.tensor(0);
    auto *dtype = llvm::dyn_cast<NameExpr>(call.args[1].get());
    if (!dtype) {
      error(args.at(1)) << "expected a dtype (f32, f16, bf16, i32 or i64)";
      return Operand::poison();
    }
    std::optional<Type> element = resolveDtype({dtype->name, dtype->getLoc()});
    if (!x || !element)
      return Operand::poison();
    return Operand::ofTensor(castTo(x, *element, call.getLoc()));
  }

  if (name == "cross_entropy") {
    if (!args.check(2, 2, {}))
      return Operand::poison();
    Value logits = args.floatTensor(0);
    Value labels = args.tensor(1);
    if (!logits || !labels)
      return Operand::poison();
    if (!isa<IntegerType>(typeOf(labels).getElementType())) {
      error(args.at(1)) << "dtype conflict: labels must be i32 or i64, got "
                        << labels.getType();
      return Operand::poison();
    }
    ArrayRef<int64_t> l = typeOf(logits).getShape(), t = typeOf(labels).getShape();
    if (l.empty() || l.drop_back() != t) {
      error(call.getLoc()) << "shape mismatch: labels " << formatShape(t)
                           << " must be the logits' shape " << formatShape(l)
                           << " without the class dimension";
      return Operand::poison();
    }
    return Operand::ofTensor(CrossEntropyOp::create(
        builder, at, RankedTensorType::get({}, builder.getF32Type()), logits, labels));
  }

  if (name == "mse") {
    if (!args.check(2, 2, {}))
      return Operand::poison();
    Value a = args.floatTensor(0), b = args.floatTensor(1);
    if (!a || !b || mlir::failed(promoteElementTypes(
                        typeOf(a).getElementType(), typeOf(b).getElementType(),
                        errorAt(call.getLoc()))))
      return Operand::poison();
    if (typeOf(a).getShape() != typeOf(b).getShape()) {
      error(call.getLoc()) << "shape mismatch: mse of "
                           << formatShape(typeOf(a).getShape()) << " and "
                           << formatShape(typeOf(b).getShape());
      return Operand::poison();
    }
    return Operand::ofTensor(MseOp::create(
        builder, at, RankedTensorType::get({}, builder.getF32Type()), a, b));
  }

  error(call.getLoc()) << "unknown function '" << name << "'";
  return Operand::poison();
}

//===----------------------------------------------------------------------===//
// Layers and MoE blocks
//===----------------------------------------------------------------------===//

/// Evaluates a call's arguments as tensors bound to the callee's names.
static bool bindArguments(Elaborator &e, const FunctionDecl &fn,
                          const CallExpr &call, Scope &caller, Scope &callee) {
  if (!call.kwargs.empty()) {
    e.error(call.kwargs.front().loc)
        << "'" << fn.name.text << "' takes no keyword arguments";
    return false;
  }
  if (call.args.size() != fn.args.size()) {
    e.error(call.getLoc()) << "'" << fn.name.text << "' takes "
                           << fn.args.size() << " argument(s), got "
                           << call.args.size() + call.kwargs.size();
    return false;
  }
  bool ok = true;
  for (auto [arg, name] : llvm::zip(call.args, fn.args)) {
    Value v = e.emitTensor(*arg, caller, "an argument of '" + fn.name.text + "'");
    ok &= (bool)v;
    e.bind(callee, name, v, /*isNew=*/true, /*isArgument=*/true);
  }
  return ok;
}

/// Runs a layer or expert body under a fresh name prefix; returns its result.
static std::optional<Value> elaborateBody(Elaborator &e, const FunctionDecl &fn,
                                          const CallExpr &call, Scope &callee,
                                          BodyKind kind) {
  std::string savedPrefix = e.paramPrefix;
  std::string path = savedPrefix + fn.name.text;
  unsigned instance = e.instanceCounts[path]++;
  e.paramPrefix = path + "." + std::to_string(instance) + ".";
  std::optional<Value> savedReturn = std::move(e.returned);
  e.returned.reset();
  e.activeCalls.insert(fn.name.text);
  e.callSites.push_back({call.getLoc(), &fn});
  unsigned errorsBefore = e.errorCount;

  e.emitBlock(fn.body, callee, kind);
  std::optional<Value> result = std::move(e.returned);

  e.callSites.pop_back();
  e.activeCalls.erase(fn.name.text);
  e.returned = std::move(savedReturn);
  e.paramPrefix = savedPrefix;
  if (!result && e.errorCount == errorsBefore)
    e.error(fn.loc) << "'" << fn.name.text << "' does not return a value";
  // Every further instance would repeat the same errors.
  if (e.errorCount != errorsBefore)
    e.failedFunctions.insert(fn.name.text);
  return result;
}

Operand Elaborator::instantiateLayer(const FunctionDecl &layer,
                                     const CallExpr &call, Scope &scope) {
  Scope callee;
  callee.parent = &globals;
  if (!bindArguments(*this, layer, call, scope, callee))
    return Operand::poison();
  // The instance's name, as its params are named ("block.0").
  std::string path = paramPrefix + layer.name.text;
  std::string instance = path + "." + std::to_string(instanceCounts.lookup(path));
  mlir::Block *block = builder.getInsertionBlock();
  mlir::Block::iterator before = builder.getInsertionPoint();
  bool atStart = before == block->begin();
  if (!atStart)
    --before;
  std::optional<Value> result =
      elaborateBody(*this, layer, call, callee, BodyKind::Layer);
  // The ops the instance built, marked for loom-autodiff, which recomputes
  // them in the backward. An inner instance keeps its own mark.
  if (result && (call.recompute || recomputeLayers)) {
    auto name = builder.getStringAttr(instance);
    for (mlir::Block::iterator it = atStart ? block->begin() : std::next(before);
         it != builder.getInsertionPoint(); ++it)
      if (!it->hasAttr(attr::kRecompute))
        it->setAttr(attr::kRecompute, name);
  }
  return result ? Operand::ofTensor(*result) : Operand::poison();
}

/// The MoE options, checked: experts, top_k, capacity (factor), axis and
/// aux_loss and z_loss (the weights of the load-balancing loss and of the
/// router z-loss).
struct MoeOptions {
  int64_t experts = 0, topK = 0;
  double capacityFactor = 1.0, auxLoss = 0.0, zLoss = 0.0;
  std::string axis;
};

static std::optional<MoeOptions> readMoeOptions(Elaborator &e,
                                                const FunctionDecl &moe) {
  MoeOptions options;
  bool ok = true, hasExperts = false, hasTopK = false, hasAxis = false;
  Scope &scope = e.globals;
  llvm::StringSet<> seen;
  for (const KeywordArg &option : moe.options) {
    SMLoc at = option.value->getLoc();
    if (!seen.insert(option.name).second) {
      e.error(option.loc) << "MoE option '" << option.name << "' is given twice";
      ok = false;
      continue;
    }
    if (option.name == "experts") {
      std::optional<int64_t> v = e.evalInt(*option.value, scope);
      if (v && *v < 1) {
        e.error(at) << "an MoE block needs at least 1 expert, got " << *v;
        v.reset();
      }
      ok &= hasExperts = v.has_value();
      options.experts = v.value_or(0);
    } else if (option.name == "top_k") {
      std::optional<int64_t> v = e.evalInt(*option.value, scope);
      ok &= hasTopK = v.has_value();
      options.topK = v.value_or(0);
    } else if (option.name == "capacity") {
      std::optional<double> v = e.evalNumber(*option.value, scope);
      if (v && !(*v > 0 && *v <= 64)) {
        e.error(at) << "capacity factor must be in (0, 64], got "
                    << formatNumber(*v);
        v.reset();
      }
      ok &= v.has_value();
      options.capacityFactor = v.value_or(1.0);
    } else if (option.name == "aux_loss" || option.name == "z_loss") {
      std::optional<double> v = e.evalNumber(*option.value, scope);
      if (v && !(*v >= 0 && *v <= 1e3)) {
        e.error(at) << option.name << " must be in [0, 1000], got " << formatNumber(*v);
        v.reset();
      }
      ok &= v.has_value();
      (option.name == "z_loss" ? options.zLoss : options.auxLoss) = v.value_or(0.0);
    } else if (option.name == "axis") {
      auto *name = llvm::dyn_cast<NameExpr>(option.value.get());
      auto axis = name ? llvm::find_if(e.meshAxes, [&](auto &a) {
                           return a.name == name->name;
                         })
                       : e.meshAxes.end();
      if (axis == e.meshAxes.end()) {
        e.error(at) << "expected a mesh axis for the experts"
                    << (name ? ", got unknown axis '" + name->name + "'" : "");
        ok = false;
        continue;
      }
      hasAxis = true;
      options.axis = axis->name;
      if (e.model)
        e.model->splitAxes.emplace_back(axis->name, at, true);
    } else {
      e.error(option.loc) << "unknown MoE option '" << option.name
                          << "' (expected experts, top_k, capacity, axis, aux_loss or z_loss)";
      ok = false;
    }
  }
  for (auto [present, what] : {std::pair{hasExperts, "experts"},
                               std::pair{hasTopK, "top_k"},
                               std::pair{hasAxis, "axis"}})
    if (!present && ok) {
      e.error(moe.loc) << "MoE block '" << moe.name.text << "' needs '" << what
                       << "'";
      ok = false;
    }
  if (!ok)
    return std::nullopt;
  if (options.topK < 1 || options.topK > options.experts) {
    e.error(moe.loc) << "top_k must be between 1 and the number of experts ("
                     << options.experts << "), got " << options.topK;
    return std::nullopt;
  }
  int64_t ways = llvm::find_if(e.meshAxes, [&](auto &a) {
                   return a.name == options.axis;
                 })->size;
  if (options.experts % ways != 0) {
    e.error(moe.loc) << options.experts << " experts cannot be split evenly over "
                     << "mesh axis '" << options.axis << "' of size " << ways;
    return std::nullopt;
  }
  if (moe.args.size() != 1) {
    e.error(moe.loc) << "an MoE block takes one argument (the tokens)";
    return std::nullopt;
  }
  return options;
}

Operand Elaborator::instantiateMoe(const FunctionDecl &moe, const CallExpr &call,
                                   Scope &scope) {
  if (expert) {
    error(call.getLoc()) << "MoE blocks cannot be nested";
    return Operand::poison();
  }
  std::optional<MoeOptions> options = readMoeOptions(*this, moe);
  if (!options)
    return Operand::poison();
  if (!call.kwargs.empty()) {
    error(call.kwargs.front().loc)
        << "'" << moe.name.text << "' takes no keyword arguments";
    return Operand::poison();
  }
  if (call.args.size() != 1) {
    error(call.getLoc()) << "'" << moe.name.text << "' takes 1 argument, got "
                         << call.args.size();
    return Operand::poison();
  }
  Value input = requireFloat(emitTensor(*call.args[0], scope, "the MoE input"),
                             call.args[0]->getLoc(), "an MoE block");
  if (!input)
    return Operand::poison();
  auto inputType = typeOf(input);
  if (inputType.getRank() < 1) {
    error(call.args[0]->getLoc()) << "MoE input needs a feature dimension";
    return Operand::poison();
  }
  int64_t features = inputType.getShape().back();
  int64_t tokens = inputType.getNumElements() / features;
  // The router [features, experts] and the slots [experts * capacity, ...]
  // are tensors like any other: within 2^48 elements.
  if (!checkSize({features, options->experts}, call.getLoc()))
    return Operand::poison();
  int64_t capacity = MoeOp::computeCapacity(tokens, options->experts,
                                            options->topK, options->capacityFactor);

  // The router is a model parameter: f32, since routing decisions are
  // sensitive to rounding.
  std::string prefix = paramPrefix + moe.name.text + "." +
                       std::to_string(instanceCounts[paramPrefix + moe.name.text]) + ".";
  auto routerType =
      RankedTensorType::get({features, options->experts}, builder.getF32Type());
  Value router = addArgument(
      routerType, call.getLoc(),
      {builder.getNamedAttr(attr::kParam, builder.getStringAttr(prefix + "router")),
       builder.getNamedAttr(attr::kInit,
                            InitAttr::get(&context, InitKind::normal,
                                          builder.getDenseF64ArrayAttr({0.02})))});

  Region region;
  mlir::Block *body = new mlir::Block();
  region.push_back(body);
  auto tileType = inputType.clone({capacity, features});
  body->addArgument(tileType, loc(call.getLoc()));
  ExpertState state{body, options->experts, options->axis, builder, {}};
  Scope callee;
  callee.parent = &globals;
  bind(callee, moe.args.front(), body->getArgument(0), /*isNew=*/true,
       /*isArgument=*/true);
  std::optional<Value> result;
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(body);
    expert = &state;
    result = elaborateBody(*this, moe, call, callee, BodyKind::Expert);
    expert = nullptr;
    if (result && *result) {
      auto out = typeOf(*result);
      if (out.getRank() != 2 || out.getShape()[0] != capacity) {
        error(moe.loc) << "an expert must return one row per token: ["
                       << capacity << ", features], got "
                       << formatShape(out.getShape());
        result.reset();
      } else if (!isa<FloatType>(out.getElementType())) {
        // Gates weigh the rows: the combine is a floating-point sum.
        error(moe.loc) << "an expert must return a floating-point tile, got "
                       << out;
        result.reset();
      } else {
        YieldOp::create(builder, loc(moe.loc), *result);
      }
    }
  }
  if (!result || !*result)
    return Operand::poison();
  SmallVector<int64_t> shape(inputType.getShape().drop_back());
  shape.push_back(typeOf(*result).getShape()[1]);
  auto moeOp = MoeOp::create(
      builder, loc(call.getLoc()),
      RankedTensorType::get(shape, typeOf(*result).getElementType()), input,
      router, state.params, options->experts, options->topK,
      llvm::APFloat(options->capacityFactor), capacity, options->axis,
      llvm::APFloat(options->auxLoss), llvm::APFloat(options->zLoss));
  moeOp.getBody().takeBody(region);
  return Operand::ofTensor(moeOp);
}
