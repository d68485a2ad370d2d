//===- Lexer.h - Splits a Loom script into tokens ------------------------===//

#ifndef LOOM_FRONTEND_LEXER_H
#define LOOM_FRONTEND_LEXER_H

#include "Frontend/Token.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/Twine.h"

#include <functional>

namespace loom {

/// Produces tokens on demand. Statements end at newlines, except inside
/// parentheses and brackets, so long expressions may span lines.
class Lexer {
public:
  using ErrorFn = std::function<void(llvm::SMLoc, const llvm::Twine &)>;

  /// A UTF-8 byte-order mark at the start (some Windows editors write one)
  /// is skipped.
  Lexer(llvm::StringRef buffer, ErrorFn emitError)
      : buffer(buffer),
        cur(buffer.begin() + (buffer.starts_with("\xEF\xBB\xBF") ? 3 : 0)),
        emitError(std::move(emitError)) {}

  Token next();

private:
  Token make(TokenKind kind, const char *start) {
    return Token{kind, llvm::StringRef(start, cur - start)};
  }
  Token lexIdentifier(const char *start);
  Token lexNonAscii(const char *start);
  Token lexNumber(const char *start);
  void skipComment();

  llvm::StringRef buffer;
  const char *cur;
  ErrorFn emitError;
  int nesting = 0; // open ( and [ : newlines inside them are not statement ends
};

} // namespace loom

#endif // LOOM_FRONTEND_LEXER_H
