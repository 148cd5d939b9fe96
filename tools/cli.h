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
#include "absl/strings/string_view.h"
#include "tools/command.h"

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

// Formats a number for output: shortest round-trip decimal, "inf" only for a true
// infinity. NaN must never reach output; callers check before formatting.
std::string FormatNumber(double value);

}  // namespace dpkit::tools

#endif  // DPKIT_TOOLS_CLI_H_
