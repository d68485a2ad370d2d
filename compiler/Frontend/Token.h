//===- Token.h - Tokens of the Loom script language ----------------------===//

#ifndef LOOM_FRONTEND_TOKEN_H
#define LOOM_FRONTEND_TOKEN_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

namespace loom {

enum class TokenKind {
  eof,
  error,
  newline,
  identifier,
  integer,
  number,
  // Punctuation.
  l_paren, r_paren, l_square, r_square, l_brace, r_brace,
  comma, colon, equal, plus, minus, star, slash, at, dotdot,
  // Keywords.
  kw_mesh, kw_precision, kw_accumulate, kw_dim, kw_model, kw_layer, kw_moe,
  kw_input, kw_param, kw_let, kw_output, kw_return, kw_for, kw_in, kw_stage,
  kw_pipeline, kw_shard, kw_init, kw_train,
};

/// A token: its kind and the source text it spans.
struct Token {
  TokenKind kind = TokenKind::eof;
  llvm::StringRef spelling;

  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data());
  }
  bool is(TokenKind k) const { return kind == k; }
  bool isKeyword() const { return kind >= TokenKind::kw_mesh; }
};

/// How a token kind reads in diagnostics ("'{'", "identifier", ...).
llvm::StringRef describe(TokenKind kind);

} // namespace loom

#endif // LOOM_FRONTEND_TOKEN_H
