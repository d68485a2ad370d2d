//===- File.cpp - Checked stdio helpers shared by the file formats --------===//

#include "io/File.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/vfs.h>
#endif
#include <unistd.h>
#include <vector>

using namespace loom::runtime;

bool loom::runtime::openForReading(const std::string &path, FilePtr &file,
                                   uint64_t &size, std::string &error) {
  // Non-blocking, so that a FIFO with no writer is refused below instead
  // of blocking the open forever; a regular file's reads ignore the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    file.reset(::fdopen(fd, "rb"));
    if (!file)
      ::close(fd);
  }
  if (!file) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  // Directories open too; reading them fails later and less clearly.
  struct stat info;
  if (fstat(fileno(file.get()), &info) != 0 || !S_ISREG(info.st_mode)) {
    error = "cannot read " + path + ": not a regular file";
    file.reset();
    return false;
  }
  size = static_cast<uint64_t>(info.st_size);
  return true;
}

bool loom::runtime::openForWriting(const std::string &path, FilePtr &file,
                                   std::string &error) {
  file.reset(std::fopen(path.c_str(), "wb"));
  if (!file) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

/// "cannot write PATH: TEMPORARY (its temporary) is a directory": what an
/// interrupted run or a user left where the write goes first.
static std::string temporaryIsDirectory(const std::string &path,
                                        const std::string &temporary) {
  return "cannot write " + path + ": " + temporary + " (its temporary) is a directory";
}

bool loom::runtime::checkWritable(const std::string &path, std::string &error) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    error = "cannot write " + path + ": " + std::strerror(EISDIR);
    return false;
  }
  ReplacingWrite write = planReplacingWrite(path);
  if (!write.temporary.empty() && ::lstat(write.temporary.c_str(), &info) == 0 &&
      S_ISDIR(info.st_mode)) {
    error = temporaryIsDirectory(path, write.temporary);
    return false;
  }
  if (write.append)
    return true; // an open descriptor's
  // The directory of the file written: a link's target's (a dangling link
  // into a missing directory had failed only after the run).
  const std::string &target = write.destination;
  size_t slash = target.find_last_of('/');
  std::string directory = slash == std::string::npos ? "."
                          : slash == 0              ? "/"
                                                    : target.substr(0, slash);
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    error = "cannot write " + target + ": " + std::strerror(errno);
    return false;
  }
#ifdef __linux__
  // Root passes access() on /proc and /sys, where no file can be made:
  // the write had failed only after the run.
  constexpr long kProcMagic = 0x9fa0, kSysfsMagic = 0x62656572;
  struct statfs filesystem;
  if (::statfs(directory.c_str(), &filesystem) == 0 &&
      (filesystem.f_type == kProcMagic || filesystem.f_type == kSysfsMagic)) {
    error = "cannot write " + target + ": " + directory +
            " is on a kernel filesystem (proc or sysfs), where no file can be created";
    return false;
  }
#endif
  return true;
}

bool loom::runtime::readAt(std::FILE *file, uint64_t offset, void *data,
                           uint64_t bytes) {
  if (offset > static_cast<uint64_t>(INT64_MAX) ||
      fseeko(file, static_cast<off_t>(offset), SEEK_SET) != 0)
    return false;
  return std::fread(data, 1, bytes, file) == bytes;
}

bool loom::runtime::readConverted(std::FILE *file, uint64_t offset, DType from,
                                  DType to, void *data, uint64_t count,
                                  uint64_t *overflows) {
  if (from == to)
    return readAt(file, offset, data, count * dtypeSize(from));
  constexpr uint64_t kChunk = 1u << 16;
  size_t size = dtypeSize(from);
  std::vector<char> chunk(kChunk * size);
  for (uint64_t done = 0; done < count; done += kChunk) {
    uint64_t n = count - done < kChunk ? count - done : kChunk;
    if (!readAt(file, offset + done * size, chunk.data(), n * size))
      return false;
    for (uint64_t i = 0; i < n; ++i) {
      double value = loadElement(from, chunk.data(), i);
      storeElement(to, data, done + i, value);
      if (overflows && std::isfinite(value) && std::isinf(loadElement(to, data, done + i)))
        ++*overflows;
    }
  }
  return true;
}

ReplacingWrite loom::runtime::planReplacingWrite(const std::string &path) {
  ReplacingWrite write{path, path + ".tmp"};
  struct stat entry;
  if (lstat(path.c_str(), &entry) != 0)
    return write;
  // A descriptor's link (/dev/stdout, /dev/fd/1, /proc/self/fd/1) is
  // written in place, appended to, even where it resolves to a regular
  // file (stdout redirected to a log, `>> run.log`): the rename had
  // replaced the log, its earlier lines and the run's summaries lost.
  if (S_ISLNK(entry.st_mode) && (path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0)) {
    write.temporary.clear();
    write.append = true;
    return write;
  }
  if (S_ISLNK(entry.st_mode)) {
    if (char *resolved = realpath(path.c_str(), nullptr)) {
      write.destination = resolved;
      std::free(resolved);
    } else {
      // A link to a file not there yet: the link's text, from its
      // directory.
      char text[4096];
      ssize_t length = readlink(path.c_str(), text, sizeof(text) - 1);
      if (length > 0) {
        std::string linked(text, static_cast<size_t>(length));
        size_t slash = path.rfind('/');
        write.destination = linked.front() == '/' || slash == std::string::npos
                                ? linked
                                : path.substr(0, slash + 1) + linked;
      }
    }
    write.temporary = write.destination + ".tmp";
  }
  struct stat target;
  if (stat(write.destination.c_str(), &target) == 0 && !S_ISREG(target.st_mode))
    write.temporary.clear();
  return write;
}

bool loom::runtime::openReplacingWrite(const ReplacingWrite &write, FilePtr &file,
                                       std::string &error) {
  if (write.append) {
    file.reset(std::fopen(write.destination.c_str(), "ab"));
    if (file)
      return true;
  } else if (write.temporary.empty()) {
    if (openForWriting(write.destination, file, error))
      return true;
  } else {
    // What is left at the temporary's path goes first, and the temporary
    // is created anew: a symlink there had been followed, overwriting the
    // file it named, and the rename then made the destination that link.
    struct stat left;
    if (::lstat(write.temporary.c_str(), &left) == 0) {
      if (S_ISDIR(left.st_mode)) {
        error = temporaryIsDirectory(write.destination, write.temporary);
        return false;
      }
      if (::unlink(write.temporary.c_str()) != 0) {
        error = "cannot write " + write.destination + ": cannot remove " + write.temporary +
                ": " + std::strerror(errno);
        return false;
      }
    }
    int fd = ::open(write.temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      file.reset(::fdopen(fd, "wb"));
      if (file)
        return true;
      ::close(fd);
    }
  }
  error = "cannot write " + write.destination + ": " + std::strerror(errno);
  return false;
}

bool loom::runtime::finishReplacingWrite(FilePtr &file, const ReplacingWrite &write,
                                         bool ok, std::string &error) {
  if (!ok) {
    // What fwrite failed on (a full disk, a file size limit), and no torn
    // temporary left behind.
    error = writeError(write.target());
    file.reset();
    if (!write.temporary.empty())
      std::remove(write.temporary.c_str());
    return false;
  }
  if (write.temporary.empty())
    return finishWriting(file, write.destination, error);
  return finishWritingAtomically(file, write.temporary, write.destination, error);
}

std::string loom::runtime::writeError(const std::string &path) {
  return "cannot write " + path + ": " + std::strerror(errno ? errno : EIO);
}

std::string loom::runtime::overflowMessage(uint64_t overflows, DType to) {
  return std::to_string(overflows) + " finite value" + (overflows == 1 ? "" : "s") +
         " past " + dtypeName(to) + "'s largest (" +
         (to == DType::F16 ? "65504" : "3.39e38") + ") became inf";
}

bool loom::runtime::writeAll(std::FILE *file, const void *data,
                             uint64_t bytes) {
  return std::fwrite(data, 1, bytes, file) == bytes;
}

bool loom::runtime::finishWriting(FilePtr &file, const std::string &path,
                                  std::string &error) {
  bool ok = !std::ferror(file.get());
  ok &= std::fclose(file.release()) == 0;
  if (!ok)
    error = "cannot write " + path + ": " + std::strerror(errno);
  return ok;
}

bool loom::runtime::finishWritingAtomically(FilePtr &file,
                                            const std::string &temporary,
                                            const std::string &path,
                                            std::string &error) {
  bool ok = std::fflush(file.get()) == 0 && !std::ferror(file.get()) &&
            fsync(fileno(file.get())) == 0;
  ok &= std::fclose(file.release()) == 0;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot write " + (ok ? path : temporary) + ": " + std::strerror(errno);
    std::remove(temporary.c_str());
    return false;
  }
  // The rename itself reaches the disk with the directory's entry.
  size_t slash = path.rfind('/');
  std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  int fd = open(directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  return true;
}
