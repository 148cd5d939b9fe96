// Small file helpers of the trainers: path joining, directory creation and durable atomic
// writes (the one copy; the training engine, the checkpoints and models/wide use these).
#ifndef DPKIT_MODELS_FILES_H_
#define DPKIT_MODELS_FILES_H_

#include <string>

#include "absl/status/status.h"

namespace dpkit::models {

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

// Writes `text` to path.tmp, fsyncs it and renames it over `path` (RenameDurably).
absl::Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace dpkit::models

#endif  // DPKIT_MODELS_FILES_H_
