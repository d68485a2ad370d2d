//===- LoomAttrs.td - Attributes of the loom dialect ---------------------===//

#ifndef LOOM_ATTRS_TD
#define LOOM_ATTRS_TD

include "Loom/IR/LoomDialect.td"
include "mlir/IR/EnumAttr.td"

def Loom_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
    I32EnumAttrCase<"zeros", 0>, I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"constant", 2>, I32EnumAttrCase<"normal", 3>,
    I32EnumAttrCase<"uniform", 4>]> {
  let cppNamespace = "::mlir::loom";
  let genSpecializedAttr = 0;
}

def Loom_PrecisionAttr : Loom_Attr<"Precision", "precision"> {
  let summary = "The script's precision policy";
  let description = [{
    The compute type is the storage type of tensors declared without a
    dtype and the input type of matmuls; the accumulation type is what
    matmuls accumulate in. Example:
    `#loom.precision<compute = bf16, accumulate = f32>`. A compute type of
    tf32 (with accumulate f32) keeps tensors in f32 and has matmuls round
    their f32 operands to tf32 (`loom.matmul ... multiply tf32`).
  }];
  let parameters = (ins "::mlir::Type":$compute, "::mlir::Type":$accumulate);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Loom_InitAttr : Loom_Attr<"Init", "init"> {
  let summary = "How a parameter is initialized when no weights are given";
  let description = [{
    `#loom.init<zeros>`, `#loom.init<ones>`, `#loom.init<constant(0.5)>`,
    `#loom.init<normal(0.02)>` (mean 0, the given standard deviation),
    `#loom.init<uniform(-0.1, 0.1)>`.
  }];
  let parameters = (ins EnumParameter<Loom_InitKind>:$kind,
                        OptionalParameter<"::mlir::DenseF64ArrayAttr">:$args);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // LOOM_ATTRS_TD
