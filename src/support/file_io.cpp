#include "support/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace tpu {

namespace {

// Process-wide, like the stdout it describes.
bool gReaderClosedOutput = false;

// Reports a failed write unless the reader went away (see readerClosedOutput).
void reportWriteError(int savedErrno, std::string_view what, const std::string& name,
                      DiagnosticEngine& diags) {
  if (savedErrno == EPIPE) {
    gReaderClosedOutput = true;
    return;
  }
  diags.error(fmt::format("{}: {}", what, std::strerror(savedErrno)), name);
}

bool isTerminalPath(const std::string& path) {
  if (path == "-") return stdoutIsTerminal();
  int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  bool terminal = ::isatty(fd) != 0;
  ::close(fd);
  return terminal;
}

// Reads straight into `out`'s spare capacity: a 64 KiB bounce buffer on the
// stack cost 16 page faults per run (~3 us each on the build VM).
bool readAll(int fd, std::string& out) {
  size_t size = out.size();
  for (;;) {
    if (out.capacity() == size)
      out.reserve(std::max<size_t>(out.capacity() * 2, size + (size_t{64} << 10)));
    // The spare capacity is exposed to read() through resize; shrunk back below.
    out.resize(out.capacity());
    ssize_t n = ::read(fd, out.data() + size, out.size() - size);
    if (n <= 0) {
      out.resize(size);
      if (n == 0) return true;
      if (errno == EINTR) continue;
      return false;
    }
    size += static_cast<size_t>(n);
  }
}

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::unique_ptr<SourceFile> readInputFile(const std::string& path, DiagnosticEngine& diags) {
  std::string contents;
  if (path == "-") {
    if (!readAll(STDIN_FILENO, contents)) {
      diags.error(fmt::format("cannot read standard input: {}", std::strerror(errno)), "<stdin>");
      return nullptr;
    }
    return std::make_unique<SourceFile>("<stdin>", std::move(contents));
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    diags.error(fmt::format("cannot open file: {}", std::strerror(errno)), path);
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    diags.error("is a directory, not a file", path);
    return nullptr;
  }
  // One byte more than the size, so the read that sees the end needs no growth.
  if (st.st_size > 0) contents.reserve(static_cast<size_t>(st.st_size) + 1);
  bool ok = readAll(fd, contents);
  int savedErrno = errno;
  ::close(fd);
  if (!ok) {
    diags.error(fmt::format("cannot read file: {}", std::strerror(savedErrno)), path);
    return nullptr;
  }
  return std::make_unique<SourceFile>(path, std::move(contents));
}

bool writeOutputFile(const std::string& path, std::string_view data, DiagnosticEngine& diags) {
  if (path == "-") {
    // A closed pipe must be an error we report, not a silent SIGPIPE death.
    std::signal(SIGPIPE, SIG_IGN);
    std::fflush(stdout);
    if (!writeAll(STDOUT_FILENO, data)) {
      reportWriteError(errno, "cannot write standard output", "<stdout>", diags);
      return false;
    }
    return true;
  }
  // Devices, FIFOs and the like (/dev/null, /dev/stdout, a pipe) are written
  // in place: renaming over them would replace the node itself.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      diags.error("cannot write output file: is a directory", path);
      return false;
    }
    std::signal(SIGPIPE, SIG_IGN);
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      diags.error(fmt::format("cannot open output file: {}", std::strerror(errno)), path);
      return false;
    }
    bool ok = writeAll(fd, data);
    int savedErrno = errno;
    if (::close(fd) != 0 && ok) {
      ok = false;
      savedErrno = errno;
    }
    if (!ok) reportWriteError(savedErrno, "cannot write output file", path, diags);
    return ok;
  }
  // The temp file lives beside the target so rename() stays on one filesystem.
  std::string tempPath = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(tempPath.data());
  if (fd < 0) {
    diags.error(fmt::format("cannot create output file: {}", std::strerror(errno)), path);
    return false;
  }
  // No fsync: the rename is what makes the output appear whole to other
  // processes and after a crash of the tool; syncing to the disk as well
  // cost ~15 ms per output (most of a pipeline stage's time), and compilers
  // do not either.
  bool ok = writeAll(fd, data);
  int savedErrno = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    savedErrno = errno;
  }
  if (ok) {
    // mkstemp creates 0600; give the file the usual permissions.
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::chmod(tempPath.c_str(), 0666 & ~mask);
    if (::rename(tempPath.c_str(), path.c_str()) != 0) {
      ok = false;
      savedErrno = errno;
    }
  }
  if (!ok) {
    ::unlink(tempPath.c_str());
    diags.error(fmt::format("cannot write output file: {}", std::strerror(savedErrno)), path);
  }
  return ok;
}

bool writeBinaryOutputFile(const std::string& path, std::string_view data, bool force, std::string_view how,
                           DiagnosticEngine& diags) {
  // Only devices can be terminals; regular files are not opened twice.
  struct stat st {};
  bool maybeTerminal = path == "-" || (::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode));
  if (!force && maybeTerminal && isTerminalPath(path)) {
    diags.error(fmt::format("refusing to write binary output to a terminal; {}", how),
                path == "-" ? std::string("<stdout>") : path);
    return false;
  }
  return writeOutputFile(path, data, diags);
}

bool readerClosedOutput() { return gReaderClosedOutput; }

bool stdoutIsTerminal() { return ::isatty(STDOUT_FILENO) != 0; }

}  // namespace tpu
