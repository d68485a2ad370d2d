//===- LoomOps.td - Operations of the loom dialect -----------------------===//

#ifndef LOOM_OPS_TD
#define LOOM_OPS_TD

include "Loom/IR/LoomDialect.td"
include "Loom/IR/LoomAttrs.td"
include "Loom/IR/LoomVjpInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic, traits>;

def Loom_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def Loom_IndexTensor : RankedTensorOf<[I32, I64]>;
def Loom_Tensor : RankedTensorOf<[F32, F16, BF16, I32, I64]>;

// An op whose result type follows from its operands by a rule in
// TypeRules.h, the same rule the front end checks scripts with.
class Loom_InferredOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)>;

//===----------------------------------------------------------------------===//
// Constants and elementwise arithmetic
//===----------------------------------------------------------------------===//

def Loom_ConstantOp : Loom_Op<"constant", [Pure, ConstantLike]> {
  let summary = "A scalar (rank-0) constant";
  let description = [{
    A number written in a script. Scalars broadcast against any tensor.

    ```mlir
    %c = loom.constant 1.250000e-01 : tensor<bf16>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
  // ConstantLike ops must fold to their value (m_Constant relies on it).
  let hasFolder = 1;
}

class Loom_BinaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Loom_InferredOp<mnemonic, !listconcat(traits, [DeclareOpInterfaceMethods<Loom_VjpOpInterface>])> {
  let summary = "Elementwise " # what # " with numpy broadcasting";
  let description = [{
    Shapes broadcast from the trailing dimension; element types must match
    or one of them is f32, to which the other is promoted.

    ```mlir
    %r = loom.}] # mnemonic # [{ %a, %b : (tensor<64x2048xbf16>, tensor<2048xf32>) -> tensor<64x2048xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::loom::inferBroadcastOp(loc, adaptor.getLhs().getType(),
                                             adaptor.getRhs().getType(), types);
    }
  }];
}

def Loom_AddOp : Loom_BinaryOp<"add", "addition", [Commutative]>;
def Loom_SubOp : Loom_BinaryOp<"sub", "subtraction">;
def Loom_MulOp : Loom_BinaryOp<"mul", "multiplication", [Commutative]>;
def Loom_DivOp : Loom_BinaryOp<"div", "division">;
// IEEE 754-2019 maximum and minimum (arith.maximumf/minimumf): a NaN operand
// gives NaN, as numpy.maximum and torch.maximum; -0 < +0.
def Loom_MaximumOp : Loom_BinaryOp<"maximum", "maximum (a NaN operand gives NaN)", [Commutative]>;
def Loom_MinimumOp : Loom_BinaryOp<"minimum", "minimum (a NaN operand gives NaN)", [Commutative]>;

class Loom_UnaryOp<string mnemonic, string what>
    : Loom_Op<mnemonic, [Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Elementwise " # what;
  let description = [{
    Computed in f32 and rounded to the storage type (round to nearest even).

    ```mlir
    %r = loom.}] # mnemonic # [{ %x : tensor<64x2048xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Loom_NegOp : Loom_UnaryOp<"neg", "negation">;
def Loom_GeluOp : Loom_UnaryOp<"gelu", "GELU (tanh approximation)">;
def Loom_ReluOp : Loom_UnaryOp<"relu", "rectified linear unit">;
def Loom_SiluOp : Loom_UnaryOp<"silu", "SiLU (x * sigmoid(x))">;
def Loom_SigmoidOp : Loom_UnaryOp<"sigmoid", "logistic sigmoid (1 / (1 + exp(-x)))">;
def Loom_ExpOp : Loom_UnaryOp<"exp", "exponential">;
def Loom_LogOp : Loom_UnaryOp<"log", "natural logarithm">;
def Loom_TanhOp : Loom_UnaryOp<"tanh", "hyperbolic tangent">;
def Loom_SqrtOp : Loom_UnaryOp<"sqrt", "square root">;
def Loom_SinOp : Loom_UnaryOp<"sin", "sine (radians)">;
def Loom_CosOp : Loom_UnaryOp<"cos", "cosine (radians)">;
def Loom_AbsOp : Loom_UnaryOp<"abs", "absolute value">;
def Loom_ErfOp : Loom_UnaryOp<"erf", "error function (2 / sqrt(pi)) * integral of exp(-t^2) from 0 to x">;

def Loom_CastOp : Loom_Op<"cast", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure]> {
  let summary = "Element type conversion (round to nearest even)";
  let description = [{
    ```mlir
    %r = loom.cast %x : tensor<64x512xf32> to tensor<64x512xbf16>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Loom_MatmulOp : Loom_InferredOp<"matmul", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Matrix product, batched, with an accumulation type";
  let description = [{
    `[..., M, K] x [K, N]` or batched `[b..., M, K] x [b..., K, N]` (batch
    dimensions broadcast). Both operands have the same element type; the
    products are accumulated in `accumulate` and the result is rounded to
    the operand type. The result may instead have the accumulation type:
    partitioning does that for a matmul whose contraction dimension is split,
    so that its partial sums are reduced across ranks before they are
    rounded, exactly once, as on one rank.

    With `multiply tf32` (f32 operands, f32 accumulation: `precision tf32`)
    each operand element is first rounded to tf32, to nearest with ties
    away from zero, so that the products are what tf32 tensor cores
    compute (Loom/IR/Tf32.h).

    ```mlir
    %y = loom.matmul %x, %w accumulate f32
        : (tensor<64x512xbf16>, tensor<512x2048xbf16>) -> tensor<64x2048xbf16>
    %z = loom.matmul %a, %b multiply tf32 accumulate f32
        : (tensor<64x512xf32>, tensor<512x2048xf32>) -> tensor<64x2048xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       TypeAttrOf<AnyFloat>:$accumulate,
                       OptionalAttr<TypeAttrOf<AnyFloat>>:$multiply);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`multiply` $multiply^)? `accumulate` $accumulate attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The inferred type, or the same shape in f32 (partial sums).
    static bool isCompatibleReturnTypes(::mlir::TypeRange inferred,
                                        ::mlir::TypeRange actual);
  }];
}

//===----------------------------------------------------------------------===//
// Normalizations and attention helpers
//===----------------------------------------------------------------------===//

def Loom_SoftmaxOp : Loom_Op<"softmax", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "Softmax along one axis, accumulated in f32";
  let description = [{
    ```mlir
    %p = loom.softmax %s axis 3 : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Loom_CausalMaskOp : Loom_Op<"causal_mask",
                                [DeclareOpInterfaceMethods<Loom_VjpOpInterface>,
                                 Pure, SameOperandsAndResultType]> {
  let summary = "Sets entries above the diagonal of the last two dims to -inf";
  let description = [{
    Entry `[..., i, j]` becomes `-inf` where `j > i`: a query attends only
    to keys at or before its position.

    ```mlir
    %m = loom.causal_mask %s : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Loom_DropoutOp : Loom_Op<"dropout",
                             [DeclareOpInterfaceMethods<Loom_VjpOpInterface>,
                              Pure, AttrSizedOperandSegments]> {
  let summary = "Zeroes each element with a probability, scaling the others";
  let description = [{
    Inverted dropout: an element is kept when `u >= probability`, with
    `u` in [0, 1) a hash of the step's `keys` (the run's seed and step,
    the microbatch), the op's `stream` and the element's `positions` (one
    i32 vector per dim: its global index along that dim), and a kept
    element is multiplied by 1 / (1 - probability), in f32. The mask is a
    function of global positions, so a partitioned program drops what
    one rank would. Without keys (a forward, a gradient program) it is
    the identity; a microbatch key below 0 (a held-out loss) too.

    ```mlir
    %y = loom.dropout %x positions(%rows, %cols) keys(%seed, %microbatch)
        {probability = 1.0e-01 : f64, stream = 0 : i64}
        : (tensor<4x8xf32>, tensor<4xi32>, tensor<8xi32>, tensor<f32>, tensor<f32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input,
                       Variadic<RankedTensorOf<[I32]>>:$positions,
                       Variadic<RankedTensorOf<[F32]>>:$keys,
                       F64Attr:$probability, I64Attr:$stream);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `positions` `(` $positions `)` (`keys` `(` $keys^ `)`)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_AttentionOp : Loom_Op<"attention",
                               [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure]> {
  let summary = "Scaled dot-product attention, one op for its five";
  let description = [{
    `softmax(causal_mask(query @ transpose(key) * scale), axis = -1) @ value`
    exactly as those ops compute it, rounding points included: the scores
    are rounded to the operand type after the matmul and after the scale,
    the probabilities after the softmax (statistics in f32), the output
    after `@ value`; both matmuls accumulate in `accumulate`. `scale` (a
    scalar of the operand type) and `causal` are optional.
    `loom-fuse-attention` forms it from those ops; on the CPU it lowers to
    one kernel that never holds the [queries, keys] scores: per block of
    queries, one pass over the key blocks finds each row's maximum and sum,
    a second one forms the probabilities and accumulates `@ value`
    (key blocks wholly above the diagonal skipped when causal).
    With a second result, `lse` (f32, `[..., queries]`), it also gives each
    row's log-sum-exp of its scores, `m + log(sum exp(s - m))` with m the
    row's maximum: loom-autodiff asks for it, so that the backward
    (`loom.attention_grad`) need not find the rows' statistics again.

    ```mlir
    %o = loom.attention %q, %k, %v scale %s causal accumulate f32
        : (tensor<2x4x64x16xbf16>, tensor<2x4x64x16xbf16>,
           tensor<2x4x64x16xbf16>, tensor<bf16>) -> tensor<2x4x64x16xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value,
                       Optional<Loom_FloatTensor>:$scale, UnitAttr:$causal,
                       TypeAttrOf<AnyFloat>:$accumulate);
  let results = (outs Loom_FloatTensor:$result, Optional<Loom_FloatTensor>:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`scale` $scale^)? (`causal` $causal^)?
    `accumulate` $accumulate attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_LayerNormOp : Loom_Op<"layernorm", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure, AttrSizedOperandSegments]> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias`, statistics in f32.

    ```mlir
    %n = loom.layernorm %x scale %g bias %b epsilon 1.000000e-05
        : (tensor<64x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input,
                       Optional<Loom_FloatTensor>:$scale,
                       Optional<Loom_FloatTensor>:$bias, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $scale^)? (`bias` $bias^)? `epsilon` $epsilon attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_RmsNormOp : Loom_Op<"rmsnorm", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure]> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale`, statistics in f32.

    ```mlir
    %n = loom.rmsnorm %x scale %g epsilon 1.000000e-05
        : (tensor<64x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input,
                       Optional<Loom_FloatTensor>:$scale, F64Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $scale^)? `epsilon` $epsilon attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Indexing and data movement
//===----------------------------------------------------------------------===//

def Loom_EmbeddingOp : Loom_InferredOp<"embedding", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Row lookup: table[V, D] indexed by integer ids";
  let description = [{
    Ids are clamped into the table. With `rows %r of V` (a vocab-parallel
    lookup, which loom-partition builds), the table holds consecutive rows
    `r[0]`, `r[0] + 1`, ... of a table of `V` rows: an id is clamped into
    `[0, V)`, and one that falls outside the rows held gives zeros (the
    ranks' results sum to the whole table's lookup).

    ```mlir
    %e = loom.embedding %table[%ids]
        : (tensor<1000x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
    %p = loom.embedding %half[%ids] rows %r of 1000
        : (tensor<500x64xf32>, tensor<2x16xi32>, tensor<500xi32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$table, Loom_IndexTensor:$ids,
                       Optional<Loom_IndexTensor>:$rows, OptionalAttr<I64Attr>:$vocab);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $table `[` $ids `]` (`rows` $rows^ `of` $vocab)? attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    OpBuilder<(ins "Type":$type, "Value":$table, "Value":$ids), [{
      build($_builder, $_state, type, table, ids, Value(), IntegerAttr());
    }]>
  ];
  let hasVerifier = 1;
}

def Loom_ArangeOp : Loom_Op<"arange", [Pure]> {
  let summary = "The integers 0, 1, ..., N-1 (positions)";
  let description = [{
    ```mlir
    %pos = loom.arange : tensor<16xi32>
    ```
  }];
  let results = (outs Loom_IndexTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Loom_TransposeOp : Loom_InferredOp<"transpose", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Permutes dimensions: result dim i is input dim perm[i]";
  let description = [{
    ```mlir
    %t = loom.transpose %x perm [0, 2, 1, 3]
        : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `perm` $permutation attr-dict `:` type($input) `->` type($result)
  }];
}

def Loom_ReshapeOp : Loom_Op<"reshape", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure]> {
  let summary = "Reinterprets a tensor with a new shape, same element count";
  let description = [{
    ```mlir
    %r = loom.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_SplitOp : Loom_Op<"split", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure]> {
  let summary = "Splits a tensor along an axis into consecutive pieces";
  let description = [{
    ```mlir
    %q, %k = loom.split %x axis 1 : tensor<16x64xf32> -> tensor<16x32xf32>, tensor<16x32xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<Loom_Tensor>:$results);
  let assemblyFormat = [{
    $input `axis` $axis attr-dict `:` type($input) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Loom_ConcatOp : Loom_InferredOp<"concat", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Concatenates tensors along an axis";
  let description = [{
    ```mlir
    %c = loom.concat %a, %b axis 1
        : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis attr-dict `:` functional-type($inputs, $result)
  }];
}

class Loom_ReduceOp<string mnemonic, string what>
    : Loom_InferredOp<mnemonic, [DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Reduces one axis by " # what # ", accumulating in f32";
  let description = [{
    ```mlir
    %r = loom.}] # mnemonic # [{ %x axis 1 keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$axis,
                       UnitAttr:$keepdim);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `axis` $axis (`keepdim` $keepdim^)? attr-dict
    `:` type($input) `->` type($result)
  }];
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::loom::inferReduceOp(loc, adaptor.getInput().getType(),
                                          adaptor.getAxis(),
                                          adaptor.getKeepdim(), types);
    }
  }];
}

def Loom_SumOp : Loom_ReduceOp<"sum", "summation">;
def Loom_MeanOp : Loom_ReduceOp<"mean", "the arithmetic mean">;
def Loom_MaxOp : Loom_ReduceOp<"max", "the maximum">;

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure]> {
  let summary = "Mean softmax cross-entropy of logits[..., V] against labels[...]";
  let description = [{
    ```mlir
    %l = loom.cross_entropy %logits, %labels
        : (tensor<2x16x1000xf32>, tensor<2x16xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_MseOp : Loom_Op<"mse", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure]> {
  let summary = "Mean squared error between two tensors of one shape";
  let description = [{
    ```mlir
    %l = loom.mse %y, %t : (tensor<64x8xf32>, tensor<64x8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$prediction, Loom_FloatTensor:$target);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = [{
    $prediction `,` $target attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

include "Loom/IR/LoomGradOps.td"
include "Loom/IR/LoomStructureOps.td"
include "Loom/IR/LoomMoeOps.td"

#endif // LOOM_OPS_TD
