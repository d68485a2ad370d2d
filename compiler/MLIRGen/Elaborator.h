//===- Elaborator.h - State of the script-to-loom elaboration (internal) -===//
//
// Elaboration evaluates dimensions, unrolls loops, instantiates layers and
// MoE blocks, checks every rule with a diagnostic at the script location,
// and builds loom ops. MLIRGen.cpp handles declarations and statements,
// Builtins.cpp the built-in functions.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_MLIRGEN_ELABORATOR_H
#define LOOM_MLIRGEN_ELABORATOR_H

#include "Frontend/AST.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace loom {

/// What an expression evaluates to. Poison means an error was already
/// reported, so users of the value stay silent instead of cascading.
struct Operand {
  enum class Kind { Poison, Number, Tensor, Tuple };
  Kind kind = Kind::Poison;
  double number = 0;
  bool isInteger = false;
  mlir::Value tensor;
  llvm::SmallVector<mlir::Value> tuple;

  static Operand poison() { return {}; }
  static Operand ofNumber(double value, bool isInteger) {
    Operand op;
    op.kind = Kind::Number;
    op.number = value;
    op.isInteger = isInteger;
    return op;
  }
  static Operand ofTensor(mlir::Value value) {
    if (!value)
      return poison();
    Operand op;
    op.kind = Kind::Tensor;
    op.tensor = value;
    return op;
  }
  bool isPoison() const { return kind == Kind::Poison; }
};

/// Names visible in a model, layer or expert body. Tensor names are local to
/// the body; dimensions and loop variables are also looked up in `parent`.
struct Scope {
  Scope *parent = nullptr;
  llvm::StringMap<mlir::Value> values; // a null value: poisoned by an error
  llvm::StringMap<SMLoc> definedAt;
  llvm::StringMap<int64_t> ints;
};

/// Which kind of body statements are elaborated in.
enum class BodyKind { Model, Layer, Expert };

class Elaborator {
public:
  Elaborator(mlir::MLIRContext &context, const llvm::SourceMgr &sourceMgr);
  mlir::OwningOpRef<mlir::ModuleOp> run(const Module &module);

  /// Mesh axis sizes that replace the script's (loomc --mesh).
  llvm::StringMap<int64_t> meshSizes;
  /// Global dim sizes that replace the script's: the batch dims of a model
  /// built for one microbatch (perMicrobatch), which then neither checks
  /// that the microbatches divide the batch nor warns again.
  llvm::StringMap<int64_t> dimSizes;
  bool perMicrobatch = false;
  /// Whether `microbatches m` splits the model (a training step, loomc
  /// --train); otherwise only --microbatches splits a pipelined forward.
  bool splitsMicrobatches = false;
  /// loomc --recompute=layers: every layer instance is recomputed in the
  /// backward, as `recompute block(h)` asks for one.
  bool recomputeLayers = false;
  /// loomc --microbatches, and explain's loop sample (ElaborationOptions).
  std::optional<int64_t> microbatchesOverride;
  int64_t loopLimit = 0;
  int64_t *loopTripCount = nullptr;

  /// An input's batch (its dim 0), and the global dim that sizes it, if
  /// it is written as one (`dim B = 16`, `x : [B, 64]`).
  struct BatchDim {
    std::string input;
    int64_t size;
    std::string dim; // empty: a literal or an expression
    SMLoc loc;
    /// The dim's name where it is one of the model's own (`dim B = 4`
    /// inside the model), which a microbatch build cannot resize.
    std::string localDim = {};
  };
  /// A train section's `microbatches m`, m > 1: the model is built again
  /// for one microbatch (mlirGen).
  struct MicrobatchSplit {
    int64_t count;
    SMLoc where;
    llvm::SmallVector<BatchDim> batchDims;
    /// The model of a forward-only pipelined build, whose outputs are
    /// assembled from the microbatches' (loom.assemble); empty for a
    /// training step.
    std::string forwardModel;
  };
  std::optional<MicrobatchSplit> microbatchSplit;
  void splitPipelinedForward(SMLoc where);
  /// A pipelined model's stages must be shared evenly by the pipeline
  /// axis's ranks (a multiple of them: virtual stages).
  void checkStageCount(const ModelDecl &decl);
  void checkPipelineAxisUnsplit();
  /// Where each model's outputs are declared ("MODEL.NAME"), for the
  /// diagnostics of checks after elaboration.
  llvm::StringMap<SMLoc> outputLocs;

  //===--------------------------------------------------------------------===//
  // Diagnostics and locations
  //===--------------------------------------------------------------------===//
  mlir::Location loc(SMLoc where);
  mlir::InFlightDiagnostic error(SMLoc where);
  /// A callback for TypeRules that reports at `where`.
  auto errorAt(SMLoc where) {
    return [this, where] { return error(where); };
  }

  //===--------------------------------------------------------------------===//
  // Expressions (MLIRGen.cpp)
  //===--------------------------------------------------------------------===//
  Operand emitExpr(const Expr &expr, Scope &scope);
  /// A tensor, or null after reporting `what` was expected.
  mlir::Value emitTensor(const Expr &expr, Scope &scope, llvm::StringRef what);
  std::optional<int64_t> evalInt(const Expr &expr, Scope &scope);
  std::optional<double> evalNumber(const Expr &expr, Scope &scope);
  /// Whether a setting the program computes with in f32 (an eps, a loss
  /// scale, a hyperparameter) keeps its meaning there: not rounded to
  /// infinity, and not to zero unless it is zero. Errors at `where`.
  bool fitsF32(double number, SMLoc where, llvm::StringRef what);
  mlir::Value requireFloat(mlir::Value value, SMLoc where, llvm::StringRef what);
  mlir::Value scalarLike(double number, mlir::Value like, SMLoc where);
  mlir::Value castTo(mlir::Value value, mlir::Type element, SMLoc where);
  Operand emitBinary(const BinaryExpr &expr, Scope &scope);
  /// The elementwise ops of two operands: the operators `+ - * /` and the
  /// builtins maximum and minimum.
  enum class Arithmetic { Add, Sub, Mul, Div, Maximum, Minimum };
  /// Elementwise `op` of two operands: numbers fold, a number next to a
  /// tensor takes its dtype, tensors broadcast and promote.
  Operand emitArithmetic(Arithmetic op, const Operand &lhs, const Operand &rhs,
                         SMLoc where);
  Operand emitMatmul(mlir::Value lhs, mlir::Value rhs, SMLoc where);
  std::optional<mlir::Type> resolveDtype(const Name &name);

  //===--------------------------------------------------------------------===//
  // Calls (Builtins.cpp)
  //===--------------------------------------------------------------------===//
  Operand emitCall(const CallExpr &call, Scope &scope);
  Operand emitBuiltin(const CallExpr &call, Scope &scope);
  Operand instantiateLayer(const FunctionDecl &layer, const CallExpr &call,
                           Scope &scope);
  Operand instantiateMoe(const FunctionDecl &moe, const CallExpr &call,
                         Scope &scope);

  //===--------------------------------------------------------------------===//
  // Statements and declarations (MLIRGen.cpp)
  //===--------------------------------------------------------------------===//
  void emitBlock(const Block &block, Scope &scope, BodyKind body);
  void emitStatement(const Stmt &stmt, Scope &scope, BodyKind body);
  void emitTensorDecl(const Stmt &stmt, Scope &scope, BodyKind body);
  void emitStage(const Stmt &stmt, Scope &scope);
  void emitTrain(const Stmt &stmt, Scope &scope);
  /// A train section's `lr_schedule`, with where its settings were written.
  struct LrSchedule {
    std::string name = "constant";
    std::optional<double> warmup, minLr;
    llvm::SMLoc warmupLoc, minLrLoc;
  };
  void emitLrSchedule(const Expr &value, Scope &scope, LrSchedule &schedule);
  void checkLrSchedule(const LrSchedule &schedule, double lr, int64_t steps,
                       llvm::SMLoc stepsLoc);
  /// Whether the mean of `loss` over microbatches is the whole batch's: a
  /// sum of multiples of means over the batch and of terms that read no
  /// input.
  bool averagesMicrobatches(mlir::Value loss);
  void bind(Scope &scope, const Name &name, mlir::Value value, bool isNew,
            bool isArgument = false);
  std::optional<llvm::SmallVector<int64_t>> evalShape(const TypeSpec &type,
                                                      Scope &scope);
  /// `dimOffset` hidden leading dims (an expert param's expert dimension)
  /// are left out of the dimension numbers in diagnostics.
  mlir::Value annotateSharding(mlir::Value value, const ShardSpec &spec,
                               Scope &scope, int64_t dimOffset = 0);
  /// Reports a result shape past kMaxTensorElements.
  bool checkSize(llvm::ArrayRef<int64_t> shape, SMLoc where);
  mlir::Value addArgument(mlir::RankedTensorType type, SMLoc where,
                          llvm::ArrayRef<mlir::NamedAttribute> attrs);
  void emitModel(const ModelDecl &model);
  void declareMesh(const MeshDecl &mesh);
  void declarePrecision(const PrecisionDecl &precision);

  //===--------------------------------------------------------------------===//
  // State
  //===--------------------------------------------------------------------===//
  mlir::MLIRContext &context;
  const llvm::SourceMgr &sourceMgr;
  mlir::OpBuilder builder;
  mlir::ModuleOp module;
  unsigned errorCount = 0;
  bool failed() const { return errorCount != 0; }
  static constexpr unsigned kMaxStatements = 200000;
  /// Counts one more elaborated statement (or loop iteration); false, with
  /// an error the first time, past kMaxStatements.
  bool countStatement(SMLoc where);
  unsigned statementsElaborated = 0;

  // Script-wide declarations.
  struct MeshAxisInfo {
    std::string name;
    int64_t size;
  };
  std::optional<std::string> meshName;
  std::vector<MeshAxisInfo> meshAxes;
  mlir::Type computeType, accumulateType;
  /// `precision tf32`: f32 matmuls round their operands to tf32.
  bool tf32Matmuls = false;
  Scope globals;
  llvm::StringMap<const FunctionDecl *> functions;

  // The model being elaborated.
  struct ModelState {
    mlir::func::FuncOp func;
    llvm::SmallVector<mlir::DictionaryAttr> argAttrs;
    llvm::SmallVector<mlir::Value> results;
    llvm::SmallVector<mlir::Location> resultLocs; // each result's statement
    llvm::SmallVector<mlir::DictionaryAttr> resultAttrs;
    llvm::StringMap<SMLoc> externalNames; // inputs, params, outputs
    std::optional<std::string> pipelineAxis;
    int64_t lastStage = -1;
    SMLoc lastStageLoc;
    /// Where the last stage is, if it computes nothing (checkStageCount).
    std::optional<SMLoc> emptyLastStage;
    mlir::Region *stageRegion = nullptr;
    bool hasTrain = false;
    llvm::SmallVector<BatchDim> batchDims;
    mlir::Value loss; // the train section's
    SMLoc lossLoc;
    /// Each mesh axis a shard spec or an MoE block splits over, where:
    /// none may be the pipeline axis (checkPipelineAxisUnsplit).
    llvm::SmallVector<std::tuple<std::string, SMLoc, bool /*moe*/>> splitAxes;
  };
  std::optional<ModelState> model;
  /// The next dropout's stream (loom.dropout): each draws its own mask.
  int64_t dropoutStreams = 0;

  // Layer and expert instantiation.
  std::string paramPrefix;            // "block.2." inside an instance
  llvm::StringMap<unsigned> instanceCounts;
  llvm::StringSet<> activeCalls;      // rejects recursive layers
  /// The layer and MoE calls being elaborated, outermost first: an error in
  /// a body notes the calls it came through (error()).
  llvm::SmallVector<std::pair<SMLoc, const FunctionDecl *>> callSites;
  llvm::StringSet<> failedFunctions;  // report a body's errors once
  struct ExpertState {
    mlir::Block *body;
    int64_t experts;
    std::string axis;
    mlir::OpBuilder outer;            // where model-level params are annotated
    llvm::SmallVector<mlir::Value> params; // model-level [E, ...] params
  };
  ExpertState *expert = nullptr;
  std::optional<mlir::Value> returned; // a layer or expert body's `return`
};

/// Normalizes a possibly negative axis; reports and returns nullopt when out of range.
std::optional<int64_t> normalizeAxis(Elaborator &e, int64_t axis, int64_t rank,
                                     SMLoc where);

} // namespace loom

#endif // LOOM_MLIRGEN_ELABORATOR_H
