// Test-only helpers that run the built `dpkit` binary (a data dependency of the test)
// and check its exit code and output. Shared by the end-to-end CLI tests.
#ifndef DPKIT_TESTS_CLI_DPKIT_RUNNER_H_
#define DPKIT_TESTS_CLI_DPKIT_RUNNER_H_

#include <string>
#include <vector>

namespace dpkit::testing {

struct CliRun {
  int exit_code;    // -1 when the process did not exit normally
  std::string out;  // stdout
  std::string err;  // stderr
};

// Whole contents of a file ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// $TEST_TMPDIR, or /tmp outside Bazel.
std::string TempDir();

// Path of the dpkit binary in the test's runfiles.
std::string DpkitPath();

// Runs `dpkit ARGS` (ARGS is shell text) and captures exit code, stdout and stderr.
// `environment` ("NAME=value ...", shell text) is set for that run only.
CliRun Dpkit(const std::string& args, const std::string& environment = "");

// The non-empty lines of `text`, without their '\n'.
std::vector<std::string> Lines(const std::string& text);

// Number of '\n' in `text`.
int CountLines(const std::string& text);

// Expects `dpkit ARGS` to fail as a usage error: exit code 2, nothing on stdout, one
// line on stderr that contains `message_part`.
void ExpectUsageError(const std::string& args, const std::string& message_part);

}  // namespace dpkit::testing

#endif  // DPKIT_TESTS_CLI_DPKIT_RUNNER_H_
