#include "dpkit/tools/cli.h"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <set>
#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dpkit::tools {
namespace {

std::set<std::string>& GivenFlags() {
  static auto* given = new std::set<std::string>();
  return *given;
}

}  // namespace

namespace {

// Sets each flag with a command default to it (the flags are process-wide; each run of
// dpkit parses one command).
absl::Status ApplyCommandDefaults(const Command& command) {
  for (const FlagSpec& spec : command.flags) {
    if (spec.default_value.empty()) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(spec.name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(spec.default_value, &error)) {
      return absl::InternalError(
          absl::StrCat("default of --", spec.name, " does not parse: ", error));
    }
  }
  return absl::OkStatus();
}

// Checks each flag with choices against them ("--format must be one of ...").
absl::Status CheckChoices(const Command& command) {
  for (const FlagSpec& spec : command.flags) {
    if (spec.choices.empty()) continue;
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(spec.name);
    if (flag == nullptr) return absl::InternalError(absl::StrCat("flag --", spec.name, " is not defined"));
    absl::Status s = CheckOneOf(spec.name, flag->CurrentValue(), spec.choices);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ParseFlagWords(const Command& command, int argc, char** argv,
                            std::vector<std::string>* positional);

}  // namespace

absl::Status ParseCommandFlags(const Command& command, int argc, char** argv,
                               std::vector<std::string>* positional) {
  GivenFlags().clear();
  absl::Status s = ApplyCommandDefaults(command);
  if (s.ok()) s = ParseFlagWords(command, argc, argv, positional);
  if (s.ok()) s = CheckChoices(command);
  return s;
}

namespace {

absl::Status ParseFlagWords(const Command& command, int argc, char** argv,
                            std::vector<std::string>* positional) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional->push_back(argv[i]);
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      positional->push_back(arg);
      continue;
    }
    std::string body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    std::string name = body;
    std::string value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    bool negated = false;
    auto allowed = [&](const std::string& n) {
      return std::any_of(command.flags.begin(), command.flags.end(),
                         [&](const FlagSpec& spec) { return spec.name == n; });
    };
    if (!allowed(name) && absl::StartsWith(name, "no") && allowed(name.substr(2))) {
      name = name.substr(2);
      negated = true;
    }
    if (!allowed(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag --", Abbreviate(name), " (this command takes: --",
          absl::StrJoin(command.flags, ", --",
                        [](std::string* out, const FlagSpec& spec) { out->append(spec.name); }),
          ")"));
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      return absl::InternalError(absl::StrCat("flag --", name, " is not defined"));
    }
    bool is_bool = flag->IsOfType<bool>();
    if (negated) {
      if (!is_bool || has_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("--no", name, " is only for boolean flags, without a value"));
      }
      value = "false";
      has_value = true;
    }
    if (!has_value) {
      if (is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      // Abseil's message repeats the value; name the expected type instead.
      const char* type = flag->IsOfType<double>()    ? "a number"
                         : flag->IsOfType<int64_t>()  ? "an integer"
                         : flag->IsOfType<uint64_t>() ? "a non-negative integer"
                         : flag->IsOfType<bool>()     ? "true or false"
                                                      : "a value";
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": cannot parse '",
                                                     Abbreviate(value), "' as ", type));
    }
    if (GivenFlags().count(name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " is given twice"));
    }
    GivenFlags().insert(name);
  }
  return absl::OkStatus();
}

}  // namespace

bool FlagGiven(absl::string_view name) {
  return GivenFlags().count(std::string(name)) > 0;
}

absl::Status CheckFinitePositive(absl::string_view name, double value) {
  if (std::isfinite(value) && value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", name, " must be finite and > 0, got ", FormatNumber(value)));
}

absl::Status CheckFiniteNonNegative(absl::string_view name, double value) {
  if (std::isfinite(value) && value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--", name, " must be finite and >= 0, got ", FormatNumber(value)));
}

absl::Status CheckOpenUnit(absl::string_view name, double value) {
  if (value > 0 && value < 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, " must be in (0, 1), got ", FormatNumber(value)));
}

absl::Status CheckHalfOpenUnit(absl::string_view name, double value) {
  if (value > 0 && value <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, " must be in (0, 1], got ", FormatNumber(value)));
}

absl::Status CheckPositiveInt(absl::string_view name, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, " must be an integer >= 1, got ", value));
}

absl::Status CheckOneOf(absl::string_view name, absl::string_view value,
                        const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", name, " must be one of ", absl::StrJoin(allowed, "|"), ", got '",
      Abbreviate(value), "'"));
}

absl::Status CheckDelta(absl::string_view name, double value, double min_delta) {
  if (value >= min_delta && value < 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [",
                                                 FormatNumber(min_delta), ", 1), got ",
                                                 FormatNumber(value)));
}

absl::Status CheckPositiveAtMost(absl::string_view name, double value, double max) {
  if (std::isfinite(value) && value > 0 && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", name, " must be finite and in (0, ",
                                                 FormatNumber(max), "], got ",
                                                 FormatNumber(value)));
}

std::string Abbreviate(absl::string_view text) {
  constexpr size_t kMax = 80;
  std::string out;
  for (char c : text.substr(0, kMax)) {
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
  if (text.size() > kMax) absl::StrAppend(&out, "... (", text.size(), " characters)");
  return out;
}

std::string FormatNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  // Shortest representation that round-trips (at most 17 significant digits).
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

absl::StatusOr<std::string> ReadInputText(const std::string& path, absl::string_view what) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    if (std::cin.bad()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " from standard input"));
    }
    return text.str();
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat("cannot open ", what, " file ", Abbreviate(path),
                                                   ": ", std::strerror(errno)));
  }
  text << file.rdbuf();
  if (file.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " file ", Abbreviate(path)));
  }
  return text.str();
}

}  // namespace dpkit::tools
