// The `dpkit` command line: a registry of subcommands.
//
// Each subcommand lives in its own cc_library (tools/<name>_command.cc, alwayslink)
// and registers itself with DPKIT_REGISTER_COMMAND. The main program parses only the
// flags a subcommand declares (see cli.h), so a flag of another subcommand is an
// error, not silently ignored.
#ifndef DPKIT_TOOLS_COMMAND_H_
#define DPKIT_TOOLS_COMMAND_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace dpkit::tools {

// Exit codes of the dpkit binary.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // a valid request that could not be done
inline constexpr int kExitUsage = 2;    // bad input: flags, values, files

struct CommandContext {
  // Positional arguments after the subcommand name, flags removed.
  std::vector<std::string> args;
};

// One flag a command reads: its name, and optionally the command's own default and the
// values it allows. The parser (cli.h) applies the default before parsing and checks the
// choices after it, and `dpkit NAME --help` prints both, so the help cannot disagree with
// the behaviour. A bare name ("delta") keeps the ABSL_FLAG's default and allows any value
// its type parses.
struct FlagSpec {
  FlagSpec(const char* flag_name) : name(flag_name) {}          // NOLINT: implicit by design
  FlagSpec(const std::string& flag_name) : name(flag_name) {}   // NOLINT: implicit by design
  FlagSpec(std::string flag_name, std::string command_default, std::vector<std::string> allowed)
      : name(std::move(flag_name)),
        default_value(std::move(command_default)),
        choices(std::move(allowed)) {}
  std::string name;           // without dashes
  std::string default_value;  // empty: the ABSL_FLAG's default
  std::vector<std::string> choices;  // empty: any value
};

// The default --help states for `spec`: its default_value, else the ABSL_FLAG's default;
// empty when that is "" or "0" for a flag without choices (a value that must be
// given, or that is derived from other flags: the help text says which).
std::string HelpDefault(const FlagSpec& spec);

struct Command {
  std::string name;     // e.g. "epsilon"
  std::string summary;  // one line for `dpkit --help`
  std::string usage;    // text after the flag list in `dpkit NAME --help`
  // Flags this command reads; all others are rejected.
  std::vector<FlagSpec> flags;
  // Runs the command. Return absl::InvalidArgumentError for bad input (printed as
  // one line, exit 2), another error for failures (exit 1), OkStatus for success.
  absl::Status (*run)(const CommandContext& context);
  // Optional: `dpkit NAME [ARGS] --help` prints the command this returns for the
  // positional ARGS (flags removed) instead, e.g. `dpkit train mnist --help` with that
  // model's own flags and defaults. nullptr: the command itself.
  Command (*help_for)(const std::vector<std::string>& args) = nullptr;
};

// Registers a command; called from static initialisers. Returns true.
bool RegisterCommand(Command command);

// Registers a command that takes over the whole command line: RunMain hands it argv
// unparsed (argv[1] is its name), including --help, and returns its exit code. `dpkit
// train` is one: it execs the training binary (tools/train_launcher.cc). Returns true.
bool RegisterRawCommand(const std::string& name, const std::string& summary,
                        int (*main)(int argc, char** argv));

// All registered commands, sorted by name.
std::vector<const Command*> RegisteredCommands();

// Runs the dpkit program: argv[1] is the subcommand. Returns the exit code.
int RunMain(int argc, char** argv);

}  // namespace dpkit::tools

#define DPKIT_CONCAT_INNER_(a, b) a##b
#define DPKIT_CONCAT_(a, b) DPKIT_CONCAT_INNER_(a, b)
// Usage at namespace scope: DPKIT_REGISTER_COMMAND(MakeEpsilonCommand());
#define DPKIT_REGISTER_COMMAND(command_expr)                          \
  [[maybe_unused]] static const bool DPKIT_CONCAT_(kRegistered_, __LINE__) = \
      ::dpkit::tools::RegisterCommand(command_expr)

#endif  // DPKIT_TOOLS_COMMAND_H_
