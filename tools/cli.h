// Flag parsing and input validation for dpkit subcommands.
//
// Flags are defined with ABSL_FLAG; a flag read by more than one subcommand is
// defined once in common_flags.cc (declared in common_flags.h). Parsing goes through
// Abseil's flag reflection so that every error becomes one line and exit code 2
// (absl::ParseCommandLine would exit 1).
#ifndef DPKIT_TOOLS_CLI_H_
#define DPKIT_TOOLS_CLI_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dpkit/tools/command.h"

namespace dpkit::tools {

// Parses argv (the words after the subcommand) into the flags `command` declares.
// Accepts --name=value, --name value, --flag / --noflag for booleans, and stops at
// "--". Words that are not flags are appended to `positional`.
absl::Status ParseCommandFlags(const Command& command, int argc, char** argv,
                               std::vector<std::string>* positional);

// True if --name was given on the command line of this run.
bool FlagGiven(absl::string_view name);

// Validation helpers: each returns InvalidArgumentError naming --name and the
// allowed range, e.g. "--delta must be in (0, 1), got 2".
absl::Status CheckFinitePositive(absl::string_view name, double value);
absl::Status CheckFiniteNonNegative(absl::string_view name, double value);
absl::Status CheckOpenUnit(absl::string_view name, double value);       // (0, 1)
absl::Status CheckHalfOpenUnit(absl::string_view name, double value);   // (0, 1]
absl::Status CheckPositiveInt(absl::string_view name, int64_t value);
absl::Status CheckOneOf(absl::string_view name, absl::string_view value,
                        const std::vector<std::string>& allowed);

// Smallest --delta the accounting commands accept: below it the RDP conversions leave
// double's range (exp(-708) underflows), so smaller values are refused at parse time.
inline constexpr double kMinDelta = 1e-300;
// --delta in [min_delta, 1) (kMinDelta unless a command's accountants need more),
// "--delta must be in [1e-300, 1), got 2".
absl::Status CheckDelta(absl::string_view name, double value, double min_delta = kMinDelta);
// A finite value in (0, max]: "--scale must be finite and in (0, 1e+300], got 1e+308".
absl::Status CheckPositiveAtMost(absl::string_view name, double value, double max);

// A user's text for an error message: at most ~80 characters (longer text is cut with
// "..." and its length), control characters (a newline in a file name) escaped, so that
// every error stays one short line.
std::string Abbreviate(absl::string_view text);

// The whole text of FILE, or of standard input when `path` is "-" (a pipe or a terminal
// too). Errors are InvalidArgumentError naming `what` and the file: "cannot open event
// file x.json: No such file or directory".
absl::StatusOr<std::string> ReadInputText(const std::string& path, absl::string_view what);

// Formats a number for output: shortest round-trip decimal, "inf" only for a true
// infinity. NaN must never reach output; callers check before formatting.
std::string FormatNumber(double value);

}  // namespace dpkit::tools

#endif  // DPKIT_TOOLS_CLI_H_
