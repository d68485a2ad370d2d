//===- Parser.cpp - Recursive-descent parser for Loom scripts ------------===//

#include "Frontend/Parser.h"

#include <cstdlib>

using namespace loom;

/// Deeper expressions than this are rejected rather than risking the stack.
static constexpr unsigned kMaxDepth = 200;
/// Binary operators in one statement: a left-associative chain nests as
/// deep as it is long, and the elaborator walks it recursively (10000
/// terms overflowed its stack).
static constexpr unsigned kMaxOperators = 1000;
/// A run stops reporting syntax errors after this many.
static constexpr unsigned kMaxErrors = 20;

Parser::Parser(llvm::StringRef buffer, ErrorFn emitError)
    : lexer(buffer, [this](SMLoc loc, const llvm::Twine &message) {
        error(loc, message);
      }),
      emitError(std::move(emitError)) {
  consume();
}

Token Parser::lexSkippingErrors() {
  // Invalid characters were reported by the lexer; skip them here.
  Token next;
  do
    next = lexer.next();
  while (next.is(TokenKind::error));
  return next;
}

void Parser::consume() {
  if (hasPeek) {
    tok = peekTok;
    hasPeek = false;
    return;
  }
  tok = lexSkippingErrors();
}

void Parser::error(SMLoc loc, const llvm::Twine &message) {
  ++errors;
  if (errors <= kMaxErrors)
    emitError(loc, message);
  else if (errors == kMaxErrors + 1)
    emitError(loc, "too many errors; stopping");
}

bool Parser::consumeIf(TokenKind kind) {
  if (!tok.is(kind))
    return false;
  consume();
  return true;
}

/// "got 'foo'" for names, "got end of line" for the rest.
static std::string got(const Token &tok) {
  if (tok.is(TokenKind::identifier) || tok.isKeyword() ||
      tok.is(TokenKind::integer) || tok.is(TokenKind::number))
    return "'" + tok.spelling.str() + "'";
  return describe(tok.kind).str();
}

bool Parser::expect(TokenKind kind, llvm::StringRef context) {
  if (consumeIf(kind))
    return true;
  error(tok.getLoc(), "expected " + describe(kind) + " " + context + ", got " +
                          got(tok));
  return false;
}

bool Parser::parseName(Name &name, llvm::StringRef what) {
  if (!tok.is(TokenKind::identifier)) {
    error(tok.getLoc(), "expected " + what + ", got " + got(tok));
    return false;
  }
  name = {tok.spelling.str(), tok.getLoc()};
  consume();
  return true;
}

void Parser::skipNewlines() {
  while (tok.is(TokenKind::newline))
    consume();
}

void Parser::recoverToStatementEnd() {
  int braces = 0;
  while (!tok.is(TokenKind::eof)) {
    if (tok.is(TokenKind::newline) && braces == 0)
      return;
    if (tok.is(TokenKind::l_brace))
      ++braces;
    if (tok.is(TokenKind::r_brace) && braces-- == 0)
      return; // the enclosing block's end: leave it to the block
    consume();
  }
}

bool Parser::endStatement() {
  if (tok.is(TokenKind::newline) || tok.is(TokenKind::eof) ||
      tok.is(TokenKind::r_brace))
    return true;
  error(tok.getLoc(), "expected end of line after statement, got " + got(tok));
  return false;
}

//===----------------------------------------------------------------------===//
// Top level
//===----------------------------------------------------------------------===//

std::unique_ptr<Module> Parser::parseModule() {
  auto module = std::make_unique<Module>();
  skipNewlines();
  while (!tok.is(TokenKind::eof) && errors <= kMaxErrors) {
    if (!parseTopLevel(*module)) {
      recoverToStatementEnd();
      consumeIf(TokenKind::r_brace);
    }
    skipNewlines();
  }
  return errors ? nullptr : std::move(module);
}

bool Parser::parseTopLevel(Module &module) {
  operators = 0;
  switch (tok.kind) {
  case TokenKind::kw_mesh:
    return parseMesh(module);
  case TokenKind::kw_precision:
    return parsePrecision(module);
  case TokenKind::kw_layer:
    return parseFunction(module, /*isMoe=*/false);
  case TokenKind::kw_moe:
    return parseFunction(module, /*isMoe=*/true);
  case TokenKind::kw_model:
    return parseModel(module);
  case TokenKind::kw_dim: {
    StmtPtr dim = parseStatement();
    if (!dim)
      return false;
    module.globals.push_back(std::move(dim));
    return true;
  }
  default:
    error(tok.getLoc(), "expected 'mesh', 'precision', 'dim', 'layer', 'moe' "
                        "or 'model' at the top level, got " + got(tok));
    return false;
  }
}

// mesh NAME '[' axis '=' size (',' axis '=' size)* ']'
bool Parser::parseMesh(Module &module) {
  MeshDecl mesh;
  mesh.loc = tok.getLoc();
  consume();
  if (!parseName(mesh.name, "a mesh name") ||
      !expect(TokenKind::l_square, "after the mesh name"))
    return false;
  do {
    MeshAxis axis;
    if (!parseName(axis.name, "a mesh axis name") ||
        !expect(TokenKind::equal, "after the mesh axis name"))
      return false;
    if (!(axis.size = parseExpr()))
      return false;
    mesh.axes.push_back(std::move(axis));
  } while (consumeIf(TokenKind::comma));
  if (!expect(TokenKind::r_square, "to close the mesh axes") || !endStatement())
    return false;
  module.meshes.push_back(std::move(mesh));
  return true;
}

// precision DTYPE ('accumulate' DTYPE)?
bool Parser::parsePrecision(Module &module) {
  PrecisionDecl precision;
  precision.loc = tok.getLoc();
  consume();
  if (!parseName(precision.compute, "a dtype (f32, f16 or bf16)"))
    return false;
  if (consumeIf(TokenKind::kw_accumulate)) {
    Name accumulate;
    if (!parseName(accumulate, "an accumulation dtype"))
      return false;
    precision.accumulate = accumulate;
  }
  if (!endStatement())
    return false;
  module.precisions.push_back(std::move(precision));
  return true;
}

// layer NAME '(' args ')' block
// moe NAME '(' arg ')' (key '=' expr (',' key '=' expr)*)? block
bool Parser::parseFunction(Module &module, bool isMoe) {
  FunctionDecl fn;
  fn.loc = tok.getLoc();
  fn.isMoe = isMoe;
  consume();
  if (!parseName(fn.name, isMoe ? "an MoE block name" : "a layer name") ||
      !expect(TokenKind::l_paren, "to open the argument list"))
    return false;
  if (!tok.is(TokenKind::r_paren)) {
    do {
      Name arg;
      if (!parseName(arg, "an argument name"))
        return false;
      fn.args.push_back(arg);
    } while (consumeIf(TokenKind::comma));
  }
  if (!expect(TokenKind::r_paren, "to close the argument list"))
    return false;
  if (isMoe && !tok.is(TokenKind::l_brace)) {
    do {
      KeywordArg option;
      Name key;
      if (!parseName(key, "an MoE option (experts, top_k, capacity, axis, aux_loss, z_loss)") ||
          !expect(TokenKind::equal, "after the MoE option"))
        return false;
      option.name = key.text;
      option.loc = key.loc;
      if (!(option.value = parseExpr()))
        return false;
      fn.options.push_back(std::move(option));
    } while (consumeIf(TokenKind::comma));
  }
  if (!parseBlock(fn.body, isMoe ? "the MoE body" : "the layer body"))
    return false;
  module.functions.push_back(std::move(fn));
  return true;
}

bool Parser::parseModel(Module &module) {
  ModelDecl model;
  model.loc = tok.getLoc();
  consume();
  if (!parseName(model.name, "a model name") ||
      !parseBlock(model.body, "the model body"))
    return false;
  module.models.push_back(std::move(model));
  return true;
}

// '{' statement* '}'; a statement with an error is skipped, not the block.
bool Parser::parseBlock(Block &block, llvm::StringRef context) {
  if (blockDepth >= kMaxDepth) {
    error(tok.getLoc(), "blocks nested too deeply (at most " + std::to_string(kMaxDepth) + ")");
    return false;
  }
  if (!expect(TokenKind::l_brace, "to open " + context.str()))
    return false;
  ++blockDepth;
  bool closed = parseBlockBody(block, context);
  --blockDepth;
  return closed;
}

bool Parser::parseBlockBody(Block &block, llvm::StringRef context) {
  skipNewlines();
  while (!tok.is(TokenKind::r_brace)) {
    if (tok.is(TokenKind::eof)) {
      error(tok.getLoc(), "expected '}' to close " + context + ", got end of file");
      return false;
    }
    if (errors > kMaxErrors)
      return false;
    if (StmtPtr stmt = parseStatement())
      block.push_back(std::move(stmt));
    else
      recoverToStatementEnd();
    skipNewlines();
  }
  consume();
  return endStatement();
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

StmtPtr Parser::parseStatement() {
  SMLoc loc = tok.getLoc();
  operators = 0;
  switch (tok.kind) {
  case TokenKind::kw_input:
    return parseTensorDecl(Stmt::Kind::Input);
  case TokenKind::kw_param:
    return parseTensorDecl(Stmt::Kind::Param);
  case TokenKind::kw_train:
    return parseTrain();
  case TokenKind::kw_dim:
  case TokenKind::kw_output: {
    auto stmt = std::make_unique<Stmt>(
        tok.is(TokenKind::kw_dim) ? Stmt::Kind::Dim : Stmt::Kind::Output, loc);
    consume();
    Name name;
    if (!parseName(name, "a name") ||
        !expect(TokenKind::equal, "after the name"))
      return nullptr;
    stmt->names.push_back(name);
    if (!(stmt->value = parseExpr()) || !endStatement())
      return nullptr;
    return stmt;
  }
  case TokenKind::kw_let: {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::Let, loc);
    consume();
    do {
      Name name;
      if (!parseName(name, "a name to bind"))
        return nullptr;
      stmt->names.push_back(name);
    } while (consumeIf(TokenKind::comma));
    if (!expect(TokenKind::equal, "after the bound names") ||
        !(stmt->value = parseExpr()))
      return nullptr;
    if (tok.is(TokenKind::kw_shard) && !(stmt->shard = parseShard()))
      return nullptr;
    return endStatement() ? std::move(stmt) : nullptr;
  }
  case TokenKind::kw_return: {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::Return, loc);
    consume();
    if (!(stmt->value = parseExpr()) || !endStatement())
      return nullptr;
    return stmt;
  }
  case TokenKind::kw_pipeline: {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::Pipeline, loc);
    consume();
    Name axis;
    if (!parseName(axis, "the pipeline mesh axis") || !endStatement())
      return nullptr;
    stmt->names.push_back(axis);
    return stmt;
  }
  case TokenKind::kw_for: {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::For, loc);
    consume();
    Name var;
    if (!parseName(var, "a loop variable") ||
        !expect(TokenKind::kw_in, "after the loop variable") ||
        !(stmt->value = parseAdditive()) ||
        !expect(TokenKind::dotdot, "in the loop range (lo..hi)") ||
        !(stmt->upper = parseAdditive()))
      return nullptr;
    stmt->names.push_back(var);
    if (!parseBlock(stmt->body, "the loop body"))
      return nullptr;
    return stmt;
  }
  case TokenKind::kw_stage: {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::Stage, loc);
    consume();
    if (!(stmt->value = parseExpr()) ||
        !parseBlock(stmt->body, "the stage body"))
      return nullptr;
    return stmt;
  }
  case TokenKind::identifier: {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::Assign, loc);
    Name name;
    parseName(name, "a name");
    stmt->names.push_back(name);
    if (!expect(TokenKind::equal, "after '" + name.text +
                                      "' (bind new names with 'let')") ||
        !(stmt->value = parseExpr()) || !endStatement())
      return nullptr;
    return stmt;
  }
  default:
    error(loc, "expected a statement, got " + got(tok));
    return nullptr;
  }
}

// (input|param) NAME ':' type shard? init?
StmtPtr Parser::parseTensorDecl(Stmt::Kind kind) {
  auto stmt = std::make_unique<Stmt>(kind, tok.getLoc());
  consume();
  Name name;
  if (!parseName(name, "a tensor name") ||
      !expect(TokenKind::colon, "before the tensor type"))
    return nullptr;
  stmt->names.push_back(name);
  if (!(stmt->type = parseType()))
    return nullptr;
  if (tok.is(TokenKind::kw_shard) && !(stmt->shard = parseShard()))
    return nullptr;
  if (tok.is(TokenKind::kw_init)) {
    if (kind != Stmt::Kind::Param) {
      error(tok.getLoc(), "only parameters have initializers");
      return nullptr;
    }
    if (!(stmt->init = parseInit()))
      return nullptr;
  }
  return endStatement() ? std::move(stmt) : nullptr;
}

// DTYPE? '[' dim (',' dim)* ']'
std::optional<TypeSpec> Parser::parseType() {
  TypeSpec type;
  type.loc = tok.getLoc();
  if (tok.is(TokenKind::identifier)) {
    type.dtype = Name{tok.spelling.str(), tok.getLoc()};
    consume();
  }
  if (!expect(TokenKind::l_square, "to open the tensor shape"))
    return std::nullopt;
  if (!tok.is(TokenKind::r_square)) {
    do {
      ExprPtr dim = parseExpr();
      if (!dim)
        return std::nullopt;
      type.dims.push_back(std::move(dim));
    } while (consumeIf(TokenKind::comma));
  }
  if (!expect(TokenKind::r_square, "to close the tensor shape"))
    return std::nullopt;
  return type;
}

// 'shard' '[' entry (',' entry)* ']' with entry := '_' | axis | '(' axis, ... ')'
std::optional<ShardSpec> Parser::parseShard() {
  ShardSpec spec;
  spec.loc = tok.getLoc();
  consume();
  if (!expect(TokenKind::l_square, "to open the shard spec"))
    return std::nullopt;
  do {
    ShardDim dim;
    dim.loc = tok.getLoc();
    if (consumeIf(TokenKind::l_paren)) {
      do {
        Name axis;
        if (!parseName(axis, "a mesh axis"))
          return std::nullopt;
        dim.axes.push_back(axis);
      } while (consumeIf(TokenKind::comma));
      if (!expect(TokenKind::r_paren, "to close the axis group"))
        return std::nullopt;
    } else {
      Name axis;
      if (!parseName(axis, "a mesh axis or '_'"))
        return std::nullopt;
      if (axis.text != "_")
        dim.axes.push_back(axis);
    }
    spec.dims.push_back(std::move(dim));
  } while (consumeIf(TokenKind::comma));
  if (!expect(TokenKind::r_square, "to close the shard spec"))
    return std::nullopt;
  return spec;
}

// 'init' KIND ('(' expr (',' expr)* ')')?
std::optional<InitSpec> Parser::parseInit() {
  consume();
  InitSpec init;
  if (!parseName(init.kind, "an initializer (zeros, ones, constant, normal, uniform)"))
    return std::nullopt;
  if (consumeIf(TokenKind::l_paren)) {
    if (!tok.is(TokenKind::r_paren)) {
      do {
        ExprPtr arg = parseExpr();
        if (!arg)
          return std::nullopt;
        init.args.push_back(std::move(arg));
      } while (consumeIf(TokenKind::comma));
    }
    if (!expect(TokenKind::r_paren, "to close the initializer arguments"))
      return std::nullopt;
  }
  return init;
}

// 'train' '{' (KEY '='? expr NEWLINE)* '}'
StmtPtr Parser::parseTrain() {
  auto stmt = std::make_unique<Stmt>(Stmt::Kind::Train, tok.getLoc());
  consume();
  if (!expect(TokenKind::l_brace, "to open the train section"))
    return nullptr;
  skipNewlines();
  while (!tok.is(TokenKind::r_brace)) {
    if (tok.is(TokenKind::eof)) {
      error(tok.getLoc(), "expected '}' to close the train section, got end of file");
      return nullptr;
    }
    TrainEntry entry;
    if (!parseName(entry.key, "a train setting (loss, optimizer, "
                              "microbatches, schedule, loss_scale, "
                              "lr_schedule, clip_grad_norm, zero, steps)")) {
      recoverToStatementEnd();
    } else {
      consumeIf(TokenKind::equal);
      if ((entry.value = parseExpr()) && endStatement())
        stmt->entries.push_back(std::move(entry));
      else
        recoverToStatementEnd();
    }
    if (errors > kMaxErrors)
      return nullptr;
    skipNewlines();
  }
  consume();
  return endStatement() ? std::move(stmt) : nullptr;
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

ExprPtr Parser::parseExpr() {
  if (depth >= kMaxDepth) {
    error(tok.getLoc(), "expression nested too deeply");
    return nullptr;
  }
  ++depth;
  ExprPtr expr = parseAdditive();
  --depth;
  return expr;
}

/// Binding strength of a binary operator token; 0 for other tokens.
static int precedence(TokenKind kind) {
  switch (kind) {
  case TokenKind::plus:
  case TokenKind::minus:
    return 1;
  case TokenKind::star:
  case TokenKind::slash:
  case TokenKind::at:
    return 2;
  default:
    return 0;
  }
}

ExprPtr Parser::parseAdditive() { return parseBinary(1); }

// Left-associative operators of at least `minPrecedence`.
ExprPtr Parser::parseBinary(int minPrecedence) {
  ExprPtr lhs = minPrecedence > 1 ? parseUnary() : parseBinary(minPrecedence + 1);
  while (lhs && precedence(tok.kind) == minPrecedence) {
    Token op = tok;
    consume();
    if (++operators > kMaxOperators) {
      error(op.getLoc(), "more than " + std::to_string(kMaxOperators) +
                             " operators in one statement: split it with 'let'");
      return nullptr;
    }
    // `x ** 2`: the second '*' is where an operand should be.
    if (op.is(TokenKind::star) && tok.is(TokenKind::star)) {
      error(tok.getLoc(), "expected an expression, got '*' ('**' is no operator: write x * x, "
                          "or exp(y * log(x)))");
      return nullptr;
    }
    ExprPtr rhs = minPrecedence > 1 ? parseUnary() : parseBinary(minPrecedence + 1);
    if (!rhs)
      return nullptr;
    lhs = std::make_unique<BinaryExpr>(op.getLoc(), op.spelling[0],
                                       std::move(lhs), std::move(rhs));
  }
  return lhs;
}

ExprPtr Parser::parseUnary() {
  if (!tok.is(TokenKind::minus))
    return parsePrimary();
  SMLoc loc = tok.getLoc();
  consume();
  if (depth >= kMaxDepth) {
    error(loc, "expression nested too deeply");
    return nullptr;
  }
  ++depth;
  ExprPtr operand = parseUnary();
  --depth;
  if (!operand)
    return nullptr;
  return std::make_unique<UnaryExpr>(loc, '-', std::move(operand));
}

ExprPtr Parser::parsePrimary() {
  Token start = tok;
  switch (tok.kind) {
  case TokenKind::integer:
  case TokenKind::number: {
    consume();
    std::string text = start.spelling.str();
    return std::make_unique<NumberExpr>(start.getLoc(),
                                        std::strtod(text.c_str(), nullptr),
                                        start.is(TokenKind::integer));
  }
  case TokenKind::identifier:
    consume();
    if (tok.is(TokenKind::l_paren)) {
      ExprPtr call = parseCall(start);
      return call && rejectIndexing() ? nullptr : std::move(call);
    }
    // `recompute layer(...)`: two names in a row mean nothing else.
    if (start.spelling == "recompute" && tok.is(TokenKind::identifier)) {
      Token callee = tok;
      consume();
      if (!tok.is(TokenKind::l_paren)) {
        error(callee.getLoc(), "'recompute' applies to a layer call, e.g. "
                               "'recompute block(h)'");
        return nullptr;
      }
      ExprPtr call = parseCall(callee);
      if (call)
        llvm::cast<CallExpr>(*call).recompute = true;
      return call;
    }
    if (rejectIndexing())
      return nullptr;
    return std::make_unique<NameExpr>(start.getLoc(), start.spelling.str());
  case TokenKind::l_paren: {
    consume();
    ExprPtr inner = parseExpr();
    if (!inner || !expect(TokenKind::r_paren, "to close the parenthesis"))
      return nullptr;
    return inner;
  }
  case TokenKind::l_square:
    return parseList();
  default:
    error(tok.getLoc(), "expected an expression, got " + got(tok));
    return nullptr;
  }
}

/// `x[...]` after a name or a call: tensors are not indexed (it had read as
/// a statement ending early: "expected end of line after statement").
bool Parser::rejectIndexing() {
  if (!tok.is(TokenKind::l_square))
    return false;
  error(tok.getLoc(), "tensors are not indexed with [...]: slice(x, start, end, axis = A) "
                      "takes a range of one dimension, split(x, n, axis = A) equal pieces");
  return true;
}

ExprPtr Parser::parseCall(Token name) {
  auto call = std::make_unique<CallExpr>(name.getLoc(), name.spelling.str());
  consume(); // '('
  if (!parseArguments(call->args, call->kwargs, TokenKind::r_paren))
    return nullptr;
  return call;
}

ExprPtr Parser::parseList() {
  auto list = std::make_unique<ListExpr>(tok.getLoc());
  consume(); // '['
  std::vector<KeywordArg> none;
  if (!parseArguments(list->elements, none, TokenKind::r_square))
    return nullptr;
  if (!none.empty()) {
    error(none.front().loc, "a list holds values, not 'name = value'");
    return nullptr;
  }
  return list;
}

// (expr | NAME '=' expr) (',' ...)* CLOSE; positional before keyword.
bool Parser::parseArguments(std::vector<ExprPtr> &args,
                            std::vector<KeywordArg> &kwargs, TokenKind close) {
  if (consumeIf(close))
    return true;
  do {
    // A trailing comma, as Python allows: `adamw(lr = 0.1,)`.
    if (!args.empty() || !kwargs.empty())
      if (consumeIf(close))
        return true;
    // A keyword before '=' is a name too (`softmax(x, dim = -1)`), so the
    // call can say which arguments it takes; it had been "expected an
    // expression, got 'dim'".
    if (tok.is(TokenKind::identifier) || tok.isKeyword()) {
      if (!hasPeek) {
        peekTok = lexSkippingErrors();
        hasPeek = true;
      }
      if (peekTok.is(TokenKind::equal)) {
        KeywordArg kwarg{tok.spelling.str(), tok.getLoc(), nullptr};
        for (const KeywordArg &earlier : kwargs)
          if (earlier.name == kwarg.name) {
            error(kwarg.loc, "argument '" + kwarg.name + "' is given twice");
            return false;
          }
        consume();
        consume();
        if (!(kwarg.value = parseExpr()))
          return false;
        kwargs.push_back(std::move(kwarg));
        continue;
      }
    }
    if (!kwargs.empty()) {
      error(tok.getLoc(), "positional argument after a keyword argument");
      return false;
    }
    ExprPtr arg = parseExpr();
    if (!arg)
      return false;
    args.push_back(std::move(arg));
  } while (consumeIf(TokenKind::comma));
  return expect(close, close == TokenKind::r_paren ? "to close the arguments"
                                                   : "to close the list");
}
