#include "dpkit/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace dpkit::base {

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : absl::StrCat(dir, "/", name);
}

absl::Status MakeDirs(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!partial.empty() && ::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::NotFoundError(absl::StrCat("cannot create --output_dir ", dir));
      }
    }
    if (i < dir.size()) partial += dir[i];
  }
  struct stat info;
  if (!dir.empty() && (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))) {
    return absl::NotFoundError(absl::StrCat("--output_dir ", dir, " is not a directory"));
  }
  return absl::OkStatus();
}

bool PathExists(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

absl::Status RemoveIfExists(const std::string& path) {
  if (std::remove(path.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status SyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, " to sync it"));
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) return absl::InternalError(absl::StrCat("cannot sync ", path));
  return absl::OkStatus();
}

absl::Status RenameDurably(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", from, " to ", to, ": ", std::strerror(errno)));
  }
  const size_t slash = to.rfind('/');
  return SyncPath(slash == std::string::npos ? "." : (slash == 0 ? "/" : to.substr(0, slash)));
}

namespace {

// Writes all of `text` to an open descriptor (retrying short writes and EINTR).
absl::Status WriteAll(int fd, const std::string& path, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(
          absl::StrCat("cannot write ", path, ": ", std::strerror(n < 0 ? errno : EIO)));
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Writes into an existing special file (never replacing it). O_NONBLOCK keeps open()
// from blocking on a FIFO without a reader (it fails with ENXIO instead).
absl::Status WriteIntoSpecialFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  absl::Status status = WriteAll(fd, path, text);
  if (::close(fd) != 0 && status.ok()) {
    status = absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return status;
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  std::string target = path;
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
    // Replace the file the link points to, not the link (a dangling link: its target path).
    char* resolved = ::realpath(path.c_str(), nullptr);
    if (resolved != nullptr) {
      target = resolved;
      std::free(resolved);
    } else {
      char buffer[4096];
      const ssize_t n = ::readlink(path.c_str(), buffer, sizeof(buffer) - 1);
      if (n <= 0) return absl::InternalError(absl::StrCat("cannot resolve the link ", path));
      target.assign(buffer, static_cast<size_t>(n));
      if (target[0] != '/') {
        const size_t slash = path.rfind('/');
        if (slash != std::string::npos) target = path.substr(0, slash + 1) + target;
      }
    }
  }
  if (::stat(target.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    if (S_ISDIR(info.st_mode)) {
      return absl::InternalError(absl::StrCat("cannot write ", path, ": it is a directory"));
    }
    return WriteIntoSpecialFile(target, text);
  }
  const std::string tmp = target + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  absl::Status status = WriteAll(fd, tmp, text);
  const bool synced = ::fsync(fd) == 0;
  if (::close(fd) != 0 || !synced) {
    if (status.ok()) status = absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return RenameDurably(tmp, target);
}

}  // namespace dpkit::base
