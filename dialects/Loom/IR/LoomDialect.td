//===- LoomDialect.td - The loom dialect: model-level tensor ops ---------===//

#ifndef LOOM_DIALECT_TD
#define LOOM_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::mlir::loom";
  let summary = "Tensor-level operations of Loom model scripts";
  let description = [{
    The `loom` dialect holds a model script after the front end: tensor
    operations on value semantics, precision carried by element types (the
    policy lives in the `loom.precision` module attribute), the device mesh
    and shardings expressed with upstream `shard` ops, and pipeline stages
    and mixture-of-experts blocks as region ops.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect",
                           "::mlir::func::FuncDialect"];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class Loom_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Loom_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // LOOM_DIALECT_TD
