// Small file helpers of the Abseil layers (the one copy): path joining, directory creation,
// durable renames and atomic writes that respect special files and symlinks.
#ifndef DPKIT_BASE_FILES_H_
#define DPKIT_BASE_FILES_H_

#include <string>

#include "absl/status/status.h"

namespace dpkit::base {

// dir + "/" + name, or name alone when dir is empty.
std::string Join(const std::string& dir, const std::string& name);

// Creates `dir` and its parents (NotFound naming the directory when that fails).
absl::Status MakeDirs(const std::string& dir);

// True when `path` exists (any kind of file).
bool PathExists(const std::string& path);

// Removes `path` if it exists; Internal when it exists and cannot be removed.
absl::Status RemoveIfExists(const std::string& path);

// fsync of an open-able regular file or directory (Internal on failure).
absl::Status SyncPath(const std::string& path);

// Renames `from` over `to` and fsyncs the directory holding `to`, so that the rename
// survives a crash (POSIX rename is atomic: a reader sees the old file or the new one).
absl::Status RenameDurably(const std::string& from, const std::string& to);

// Writes `text` to `path` so that a reader never sees a partial file:
//  - a new path or an existing regular file: written to path.tmp, fsynced and renamed over
//    `path` (RenameDurably);
//  - a symlink: the same, at the file it resolves to (the link itself is kept);
//  - an existing special file (a device such as /dev/stdout or /dev/full, a FIFO with a
//    reader): written into it, as a user expects; it is never replaced by a regular file.
// Every write error is reported (Internal, naming the path and the system's reason),
// e.g. "No space left on device" for /dev/full.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace dpkit::base

#endif  // DPKIT_BASE_FILES_H_
