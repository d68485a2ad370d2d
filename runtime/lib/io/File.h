//===- File.h - Checked stdio helpers for file formats ----------*- C++ -*-===//
//
// Internal to the runtime library. Every failure becomes a message naming
// the file, since the runtime reports errors instead of throwing.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_LIB_IO_FILE_H
#define LOOM_RUNTIME_LIB_IO_FILE_H

#include "loom/runtime/support/DType.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace loom::runtime {

struct FileCloser {
  void operator()(std::FILE *file) const {
    if (file)
      std::fclose(file);
  }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

/// Opens a regular file for reading and returns its size.
bool openForReading(const std::string &path, FilePtr &file, uint64_t &size,
                    std::string &error);
/// Opens (truncates) `path` for writing.
bool openForWriting(const std::string &path, FilePtr &file, std::string &error);
/// Whether `path` could be written now (its directory exists and is
/// writable, and it is not a directory), without touching it: a run checks
/// the files it writes at its end before its first step. The message is
/// openForWriting's ("cannot write PATH: No such file or directory").
bool checkWritable(const std::string &path, std::string &error);
/// Reads exactly `bytes` bytes at `offset`.
bool readAt(std::FILE *file, uint64_t offset, void *data, uint64_t bytes);
/// Reads `count` elements stored as `from` at `offset` into `data` as `to`:
/// the bytes as they are for the same dtype, else each element converted
/// (storeElement: to 16 bits rounded to nearest even, to f32 exactly), a
/// chunk at a time so that no second copy of a large tensor is made.
/// `overflows`, if given, counts the finite values that became inf (past
/// f16's 65504 or bf16's range).
bool readConverted(std::FILE *file, uint64_t offset, DType from, DType to,
                   void *data, uint64_t count, uint64_t *overflows = nullptr);
/// "N finite values past DTYPE's largest (V) became inf": what a warning
/// says of readConverted's `overflows`.
std::string overflowMessage(uint64_t overflows, DType to);
/// A write that replaces `path` whole: into `temporary` (beside the file a
/// symlink names), renamed over `destination` once complete, so that a
/// failed write leaves the old file; a device or a FIFO is written in
/// place (`temporary` empty: renaming over `--save /dev/null` replaced
/// the device node).
struct ReplacingWrite {
  std::string destination, temporary;
  /// A descriptor's link (/dev/stdout): appended to, in place.
  bool append = false;
  const std::string &target() const {
    return temporary.empty() ? destination : temporary;
  }
};
ReplacingWrite planReplacingWrite(const std::string &path);
/// Opens `write`'s target; an error names the destination (a missing
/// directory is the user's path's, not the temporary's).
bool openReplacingWrite(const ReplacingWrite &write, FilePtr &file, std::string &error);
/// Closes a write planned by planReplacingWrite whose writes went `ok`:
/// renames the temporary into place, or (failed) says why and removes it.
bool finishReplacingWrite(FilePtr &file, const ReplacingWrite &write, bool ok,
                          std::string &error);
/// "cannot write PATH: REASON", the reason of the write that just failed
/// (errno; EIO's where fwrite set none).
std::string writeError(const std::string &path);
/// Writes all of `bytes` bytes.
bool writeAll(std::FILE *file, const void *data, uint64_t bytes);
/// Flushes and closes a file opened for writing; false (with a message
/// naming `path`) if anything written was lost.
bool finishWriting(FilePtr &file, const std::string &path, std::string &error);
/// Flushes `file` (written at `temporary`) to the disk (fsync), closes it
/// and renames it to `path`, then syncs `path`'s directory: afterwards
/// `path` is the whole new file, and before it was the old one.
bool finishWritingAtomically(FilePtr &file, const std::string &temporary,
                             const std::string &path, std::string &error);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_LIB_IO_FILE_H
