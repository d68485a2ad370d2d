//===- SourceCarets.cpp - Carets under script lines with non-ASCII text ---===//

#include "Driver/SourceCarets.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

using namespace mlir;

namespace {
bool isAscii(llvm::StringRef text) {
  return llvm::all_of(text, [](char c) { return (unsigned char)c < 0x80; });
}

const char *severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error: return "error";
  case DiagnosticSeverity::Warning: return "warning";
  case DiagnosticSeverity::Note: return "note";
  case DiagnosticSeverity::Remark: return "remark";
  }
  return "error";
}

/// `text` as a terminal shows it: tabs to stops of 8, a UTF-8 sequence one
/// column. Returns the display column of byte `byte` (where the caret goes).
std::string expand(llvm::StringRef text, size_t byte, size_t &caret) {
  std::string shown;
  size_t column = 0;
  caret = std::string::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == byte)
      caret = column;
    unsigned char c = text[i];
    if (c == '\t') {
      size_t next = (column / 8 + 1) * 8;
      shown.append(next - column, ' ');
      column = next;
      continue;
    }
    shown.push_back(char(c));
    if ((c & 0xC0) != 0x80) // continuation bytes share their lead's column
      ++column;
  }
  if (caret == std::string::npos)
    caret = column;
  return shown;
}
} // namespace

loom::SourceCaretHandler::SourceCaretHandler(llvm::SourceMgr &sourceMgr,
                                             MLIRContext *context,
                                             llvm::raw_ostream &os)
    : ScopedDiagnosticHandler(context), sourceMgr(sourceMgr), os(os) {
  setHandler([this](Diagnostic &diag) -> LogicalResult {
    unsigned line, column;
    llvm::StringRef file;
    std::optional<llvm::StringRef> text =
        lineOf(diag.getLocation(), line, column, file);
    if (!text || isAscii(*text))
      return failure();
    print(diag.getLocation(), diag.getSeverity(), diag.str());
    for (Diagnostic &note : diag.getNotes())
      print(note.getLocation(), note.getSeverity(), note.str());
    return success();
  });
}

std::optional<llvm::StringRef>
loom::SourceCaretHandler::lineOf(Location loc, unsigned &line, unsigned &column,
                                 llvm::StringRef &file) {
  auto fileLoc = dyn_cast<FileLineColLoc>(loc);
  if (!fileLoc || fileLoc.getLine() == 0)
    return std::nullopt;
  file = fileLoc.getFilename().getValue();
  line = fileLoc.getLine();
  column = fileLoc.getColumn();
  for (unsigned id = 1; id <= sourceMgr.getNumBuffers(); ++id) {
    const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(id);
    if (buffer->getBufferIdentifier() != file)
      continue;
    llvm::SMLoc start = sourceMgr.FindLocForLineAndColumn(id, line, 1);
    if (!start.isValid())
      return std::nullopt;
    llvm::StringRef rest(start.getPointer(),
                         buffer->getBufferEnd() - start.getPointer());
    return rest.take_until([](char c) { return c == '\n' || c == '\r'; });
  }
  return std::nullopt;
}

void loom::SourceCaretHandler::print(Location loc, DiagnosticSeverity severity,
                                     llvm::StringRef message) {
  unsigned line = 0, column = 0;
  llvm::StringRef file;
  std::optional<llvm::StringRef> text = lineOf(loc, line, column, file);
  if (!text) {
    os << loc << ": " << severityName(severity) << ": " << message << "\n";
    return;
  }
  os << file << ":" << line << ":" << column << ": " << severityName(severity)
     << ": " << message << "\n";
  size_t caret;
  std::string shown = expand(*text, column ? column - 1 : 0, caret);
  os << shown << "\n" << std::string(caret, ' ') << "^\n";
}
