#include "dpkit/tools/command.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dpkit/tools/cli.h"

namespace dpkit::tools {
namespace {

std::map<std::string, Command>& Registry() {
  static auto* registry = new std::map<std::string, Command>();
  return *registry;
}

struct RawCommand {
  std::string summary;
  int (*main)(int argc, char** argv);
};

std::map<std::string, RawCommand>& RawRegistry() {
  static auto* registry = new std::map<std::string, RawCommand>();
  return *registry;
}

// An error message as one line of at most kMaxMessage characters: control characters
// escaped (a file name may hold a newline), the middle of a longer message cut (a ledger
// line echoed in full could be megabytes).
std::string OneLine(absl::string_view message) {
  constexpr size_t kMaxMessage = 1000;
  std::string out;
  for (char c : message) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  if (out.size() > kMaxMessage) {
    out = absl::StrCat(out.substr(0, kMaxMessage - 120), " ... ",
                       out.substr(out.size() - 80), " (", out.size(), " characters)");
  }
  return out;
}

void PrintProgramHelp() {
  std::printf(
      "dpkit: differential privacy accounting, mechanisms and training.\n\n"
      "Usage: dpkit COMMAND [--flag=value ...] [ARGS]\n\nCommands:\n");
  std::map<std::string, std::string> summaries;
  for (const Command* c : RegisteredCommands()) summaries[c->name] = c->summary;
  for (const auto& [name, raw] : RawRegistry()) summaries[name] = raw.summary;
  for (const auto& [name, summary] : summaries) {
    std::printf("  %-12s %s\n", name.c_str(), summary.c_str());
  }
  std::printf("\nRun `dpkit COMMAND --help` for the flags of one command.\n");
}

void PrintCommandHelp(const Command& c) {
  std::printf("dpkit %s: %s\n\n", c.name.c_str(), c.summary.c_str());
  if (!c.usage.empty()) std::printf("%s\n\n", c.usage.c_str());
  if (c.flags.empty()) return;
  std::printf("Flags:\n");
  std::vector<FlagSpec> specs = c.flags;
  std::sort(specs.begin(), specs.end(),
            [](const FlagSpec& a, const FlagSpec& b) { return a.name < b.name; });
  for (const FlagSpec& spec : specs) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(spec.name);
    if (flag == nullptr) continue;
    std::vector<std::string> notes;
    if (!spec.choices.empty()) notes.push_back("one of: " + absl::StrJoin(spec.choices, "|"));
    const std::string def = HelpDefault(spec);
    if (!def.empty()) notes.push_back("default: " + def);
    std::printf("  --%s  %s%s\n", spec.name.c_str(), flag->Help().c_str(),
                notes.empty() ? "" : absl::StrCat(" (", absl::StrJoin(notes, "; "), ")").c_str());
  }
}

}  // namespace

std::string HelpDefault(const FlagSpec& spec) {
  if (!spec.default_value.empty()) return spec.default_value;
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(spec.name);
  if (flag == nullptr) return "";
  const std::string def = flag->DefaultValue();
  if (spec.choices.empty() && def == "0") return "";
  return def;
}

bool RegisterCommand(Command command) {
  std::string name = command.name;
  Registry().emplace(name, std::move(command));
  return true;
}

bool RegisterRawCommand(const std::string& name, const std::string& summary,
                        int (*main)(int argc, char** argv)) {
  RawRegistry().emplace(name, RawCommand{summary, main});
  return true;
}

std::vector<const Command*> RegisteredCommands() {
  std::vector<const Command*> out;
  for (const auto& [name, command] : Registry()) out.push_back(&command);
  return out;
}

namespace {

// Prints a command's final one-line error. Under `dpkit train --nproc=N` the launcher
// (train_launcher.cc) gives each rank a file in DPKIT_ERROR_FILE: the line goes there, and
// the launcher prints each distinct line once, after the ranks end (every rank parses the
// same arguments, so a refusal would otherwise be printed N times).
void PrintFinalError(const std::string& name, const std::string& message) {
  const std::string line = absl::StrCat("dpkit ", name, ": ", OneLine(message), "\n");
  const char* path = std::getenv("DPKIT_ERROR_FILE");
  if (path != nullptr && *path != '\0') {
    if (FILE* f = std::fopen(path, "w"); f != nullptr) {
      const bool written = std::fputs(line.c_str(), f) >= 0;
      if (std::fclose(f) == 0 && written) return;
    }
  }
  std::fputs(line.c_str(), stderr);
}

}  // namespace

int RunMain(int argc, char** argv) {
  if (argc < 2) {
    PrintProgramHelp();
    return kExitUsage;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintProgramHelp();
    return kExitOk;
  }
  if (auto raw = RawRegistry().find(name); raw != RawRegistry().end()) {
    return raw->second.main(argc, argv);
  }
  auto it = Registry().find(name);
  if (it == Registry().end()) {
    std::fprintf(stderr,
                 "dpkit: unknown command '%s' (run `dpkit --help` for the list)\n",
                 Abbreviate(name).c_str());
    return kExitUsage;
  }
  const Command& command = it->second;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "--helpfull") {
      if (command.help_for == nullptr) {
        PrintCommandHelp(command);
        return kExitOk;
      }
      std::vector<std::string> positional;
      for (int j = 2; j < argc; ++j) {
        if (argv[j][0] != '-') positional.push_back(argv[j]);
      }
      PrintCommandHelp(command.help_for(positional));
      return kExitOk;
    }
  }
  CommandContext context;
  absl::Status parsed = ParseCommandFlags(command, argc - 2, argv + 2, &context.args);
  if (!parsed.ok()) {
    PrintFinalError(name, std::string(parsed.message()));
    return kExitUsage;
  }
  absl::Status status = command.run(context);
  if (status.ok()) return kExitOk;
  PrintFinalError(name, std::string(status.message()));
  return absl::IsInvalidArgument(status) || absl::IsOutOfRange(status) ||
                 absl::IsNotFound(status)
             ? kExitUsage
             : kExitFailure;
}

}  // namespace dpkit::tools
