//===- LoomAttrs.cpp - Precision policy and initializer attributes --------===//

#include "Loom/IR/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::loom;

#include "Loom/IR/LoomEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Loom/IR/LoomAttrs.cpp.inc"

void LoomDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Loom/IR/LoomAttrs.cpp.inc"
      >();
}

static bool isStorageFloat(Type type) {
  return type.isF32() || type.isF16() || type.isBF16();
}

LogicalResult
PrecisionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      Type compute, Type accumulate) {
  // tf32 is no storage type: tensors stay f32, matmuls round to tf32.
  if (compute.isTF32()) {
    if (!accumulate.isF32())
      return emitError() << "tf32 matmuls accumulate in f32, not " << accumulate;
    return success();
  }
  if (!isStorageFloat(compute) || !isStorageFloat(accumulate))
    return emitError()
           << "precision types must be f32, f16 or bf16 (or tf32 for the compute type)";
  // f16 and bf16 have different ranges: neither holds the other's products.
  if (accumulate != compute && !accumulate.isF32())
    return emitError() << "accumulation type " << accumulate
                       << " must be f32 or the compute type " << compute;
  return success();
}

/// How many numbers each initializer takes.
static unsigned initArity(InitKind kind) {
  switch (kind) {
  case InitKind::zeros:
  case InitKind::ones:
    return 0;
  case InitKind::constant:
  case InitKind::normal:
    return 1;
  case InitKind::uniform:
    return 2;
  }
  return 0;
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, DenseF64ArrayAttr argsAttr) {
  ArrayRef<double> args = argsAttr ? argsAttr.asArrayRef() : ArrayRef<double>();
  if (args.size() != initArity(kind))
    return emitError() << "initializer '" << stringifyInitKind(kind)
                       << "' takes " << initArity(kind) << " argument(s), got "
                       << args.size();
  if (kind == InitKind::normal && !(args[0] > 0))
    return emitError() << "normal initializer needs a positive standard deviation";
  if (kind == InitKind::uniform && !(args[0] < args[1]))
    return emitError() << "uniform initializer needs low < high";
  return success();
}

// Syntax: `<` kind (`(` number (`,` number)* `)`)? `>`
Attribute InitAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown initializer '" << keyword << "'";
    return {};
  }
  SmallVector<double> args;
  if (succeeded(parser.parseOptionalLParen())) {
    if (parser.parseCommaSeparatedList([&] {
          return parser.parseFloat(args.emplace_back());
        }) ||
        parser.parseRParen())
      return {};
  }
  if (parser.parseGreater())
    return {};
  DenseF64ArrayAttr argsAttr;
  if (!args.empty())
    argsAttr = DenseF64ArrayAttr::get(parser.getContext(), args);
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), *kind, argsAttr);
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyInitKind(getKind());
  if (getArgs() && !getArgs().empty()) {
    printer << '(';
    llvm::interleaveComma(getArgs().asArrayRef(), printer);
    printer << ')';
  }
  printer << '>';
}
