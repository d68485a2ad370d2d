//===- Parser.h - Recursive-descent parser for Loom scripts --------------===//

#ifndef LOOM_FRONTEND_PARSER_H
#define LOOM_FRONTEND_PARSER_H

#include "Frontend/AST.h"
#include "Frontend/Lexer.h"

namespace loom {

/// Parses one script. Syntax errors are reported through `emitError`; the
/// parser then skips to the next statement so one run reports several.
class Parser {
public:
  using ErrorFn = Lexer::ErrorFn;
  Parser(llvm::StringRef buffer, ErrorFn emitError);

  /// The script, or null when any error was reported.
  std::unique_ptr<Module> parseModule();

private:
  // Token handling.
  void consume();
  Token lexSkippingErrors();
  bool consumeIf(TokenKind kind);
  bool expect(TokenKind kind, llvm::StringRef context);
  bool parseName(Name &name, llvm::StringRef what);
  void skipNewlines();
  void recoverToStatementEnd();
  void error(SMLoc loc, const llvm::Twine &message);

  // Declarations and statements.
  bool parseTopLevel(Module &module);
  bool parseMesh(Module &module);
  bool parsePrecision(Module &module);
  bool parseFunction(Module &module, bool isMoe);
  bool parseModel(Module &module);
  bool parseBlock(Block &block, llvm::StringRef context);
  bool parseBlockBody(Block &block, llvm::StringRef context);
  StmtPtr parseStatement();
  StmtPtr parseTensorDecl(Stmt::Kind kind);
  StmtPtr parseTrain();
  bool endStatement();
  std::optional<TypeSpec> parseType();
  std::optional<ShardSpec> parseShard();
  std::optional<InitSpec> parseInit();

  // Expressions, by precedence: additive (+ -) < multiplicative (* / @) < unary.
  ExprPtr parseExpr();
  ExprPtr parseAdditive();
  ExprPtr parseBinary(int minPrecedence);
  ExprPtr parseUnary();
  ExprPtr parsePrimary();
  bool rejectIndexing();
  ExprPtr parseCall(Token name);
  ExprPtr parseList();
  bool parseArguments(std::vector<ExprPtr> &args,
                      std::vector<KeywordArg> &kwargs, TokenKind close);

  Lexer lexer;
  ErrorFn emitError;
  Token tok, peekTok;
  bool hasPeek = false;
  unsigned errors = 0;
  unsigned depth = 0; // expression nesting, bounded against stack overflow
  unsigned blockDepth = 0; // braces, bounded alike
  unsigned operators = 0;  // binary operators in the statement being parsed
};

} // namespace loom

#endif // LOOM_FRONTEND_PARSER_H
