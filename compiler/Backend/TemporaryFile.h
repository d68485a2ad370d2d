//===- TemporaryFile.h - Temporary files whose failure names TMPDIR ------===//

#ifndef LOOM_BACKEND_TEMPORARYFILE_H
#define LOOM_BACKEND_TEMPORARYFILE_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace loom {

/// Creates a temporary file `PREFIX-XXXXXX.SUFFIX` in the system's temporary
/// directory into `path`; where it cannot, an error at `loc` that names the
/// directory (a TMPDIR that does not exist had read as "No such file or
/// directory", with nothing to say which).
inline mlir::LogicalResult createTemporaryFile(mlir::Location loc, llvm::StringRef prefix,
                                               llvm::StringRef suffix,
                                               llvm::SmallVectorImpl<char> &path) {
  std::error_code ec = llvm::sys::fs::createTemporaryFile(prefix, suffix, path);
  if (!ec)
    return mlir::success();
  llvm::SmallString<128> directory;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, directory);
  return mlir::emitError(loc) << "cannot create a temporary file in '" << directory
                              << "' (TMPDIR): " << ec.message();
}

} // namespace loom

#endif // LOOM_BACKEND_TEMPORARYFILE_H
