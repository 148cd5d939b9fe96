#ifndef DPKIT_TOOLS_SIBLING_BINARY_H_
#define DPKIT_TOOLS_SIBLING_BINARY_H_

#include <string>

namespace dpkit::tools {

// The path of another dpkit executable (`name`, e.g. "dpkit_train"), searched for
//   1. at $env_var, when set and non-empty (used as given; exec reports a bad path);
//   2. beside the running executable (/proc/self/exe, symlinks resolved: the same
//      bazel-bin/tools/ folder, or an install folder), then beside argv0;
//   3. in the Bazel runfiles of argv0 (argv0.runfiles/<workspace>/tools/name, or under
//      $RUNFILES_DIR / $TEST_SRCDIR; the workspace is $TEST_WORKSPACE or "dpkit").
// "" when none is executable. Only libc and std::string: the static `dpkit` launcher
// (dpkit_launcher.cc) uses it as well as `dpkit train` (train_launcher.cc).
std::string FindSiblingBinary(const char* name, const char* env_var, const char* argv0);

}  // namespace dpkit::tools

#endif  // DPKIT_TOOLS_SIBLING_BINARY_H_
