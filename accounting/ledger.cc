#include "dpkit/accounting/ledger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <istream>
#include <iostream>
#include <iterator>
#include <set>
#include <string_view>
#include <utility>

#include "dpkit/accounting/internal/format.h"
#include "dpkit/accounting/internal/json_parse.h"

namespace dpkit::accounting {
namespace {

using internal::DumpForMessage;
using internal::FormatDouble;
using internal::QuoteForMessage;
using nlohmann::json;

std::string ErrnoText() { return std::strerror(errno); }

// A file name for a one-line error message: as it is when it is printable and not absurdly
// long, else as a JSON string (control characters escaped: a name with a newline gave a
// two-line message) of which the last 120 characters are kept (the file's own name is at
// the end).
std::string PathForMessage(std::string_view path) {
  constexpr size_t kMaxPlainPath = 1024, kMaxQuotedPath = 120;
  const bool plain = path.size() <= kMaxPlainPath &&
                     std::all_of(path.begin(), path.end(), [](char c) {
                       return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
                     });
  if (plain) return std::string(path);
  std::string quoted =
      json(std::string(path)).dump(-1, ' ', false, json::error_handler_t::replace);
  if (quoted.size() > kMaxQuotedPath) {
    quoted = "\"..." + quoted.substr(quoted.size() - kMaxQuotedPath + 4);
  }
  return quoted;
}

Result<void> ValidateQuery(const SumQueryRecord& query) {
  if (!std::isfinite(query.clip_norm) || !(query.clip_norm > 0)) {
    return Error{"clip_norm must be finite and > 0, got " + FormatDouble(query.clip_norm)};
  }
  if (!std::isfinite(query.noise_stddev) || !(query.noise_stddev > 0)) {
    return Error{"noise_stddev must be finite and > 0, got " + FormatDouble(query.noise_stddev)};
  }
  return OkResult();
}

Result<void> ValidateSampling(const SamplingRecord& record) {
  if (record.step < 0) return Error{"step must be >= 0, got " + std::to_string(record.step)};
  if (!(record.sampling_rate > 0 && record.sampling_rate <= 1)) {
    return Error{"sampling_rate must be in (0, 1], got " + FormatDouble(record.sampling_rate)};
  }
  for (const SumQueryRecord& query : record.queries) DPKIT_RETURN_IF_ERROR(ValidateQuery(query));
  return OkResult();
}

// ValidateSampling, and the Gaussian that the queries amount to within the range of
// Gaussian events read from files (event.h): a clip_norm of 1e308 or a noise_stddev of
// 1e-308 kept PLD busy for over a minute.
Result<void> ValidateSamplingForFile(const SamplingRecord& record) {
  DPKIT_RETURN_IF_ERROR(ValidateSampling(record));
  if (record.queries.empty()) return OkResult();
  Result<double> z = CollapsedNoiseMultiplier(record.queries);
  if (!z.ok()) return Error{z.error()};
  if (!(*z >= kMinFileNoiseMultiplier)) {
    return Error{"the collapsed noise multiplier (sum over queries of (clip_norm / "
                 "noise_stddev)^2)^(-1/2) must be >= " +
                 FormatDouble(kMinFileNoiseMultiplier) + " in a ledger, got " + FormatDouble(*z)};
  }
  return OkResult();
}

Result<void> CheckFields(const json& object, const char* what,
                         const std::set<std::string>& fields) {
  for (const std::string& field : fields) {
    if (!object.contains(field)) {
      return Error{std::string(what) + " is missing field \"" + field + "\""};
    }
  }
  for (const auto& item : object.items()) {
    if (fields.count(item.key()) == 0) {
      return Error{std::string(what) + " has unknown field " + QuoteForMessage(item.key())};
    }
  }
  return OkResult();
}

Result<double> GetNumber(const json& object, const char* field) {
  const json& value = object.at(field);
  if (!value.is_number()) {
    return Error{std::string("field \"") + field + "\" must be a number, got " +
                 DumpForMessage(value)};
  }
  return value.get<double>();
}

}  // namespace

Result<double> CollapsedNoiseMultiplier(const std::vector<SumQueryRecord>& queries) {
  if (queries.empty()) return Error{"queries must be non-empty to collapse a noise multiplier"};
  // McMahan et al. 2018, eq. (1): z = (Σ_i (C_i/s_i)²)^{−1/2}; scaled by the largest
  // ratio so that the squares neither overflow nor underflow.
  double largest = 0;
  for (const SumQueryRecord& query : queries) {
    DPKIT_RETURN_IF_ERROR(ValidateQuery(query));
    largest = std::max(largest, query.clip_norm / query.noise_stddev);
  }
  double sum = 0;
  for (const SumQueryRecord& query : queries) {
    const double ratio = query.clip_norm / query.noise_stddev / largest;
    sum += ratio * ratio;
  }
  const double z = 1 / (largest * std::sqrt(sum));
  if (!std::isfinite(z) || !(z > 0)) {
    return Error{"collapsed noise multiplier must be finite and > 0, got " + FormatDouble(z) +
                 " (clip_norm / noise_stddev ratios out of range)"};
  }
  return z;
}

json LedgerEntryToJson(const LedgerEntry& entry) {
  if (const Event* event = std::get_if<Event>(&entry.record)) {
    return json{{"type", "event"}, {"event", event->ToJson()}};
  }
  const SamplingRecord& record = std::get<SamplingRecord>(entry.record);
  json queries = json::array();
  for (const SumQueryRecord& query : record.queries) {
    queries.push_back(json{{"clip_norm", query.clip_norm}, {"noise_stddev", query.noise_stddev}});
  }
  return json{{"type", "sample"},
              {"step", record.step},
              {"sampling_rate", record.sampling_rate},
              {"queries", std::move(queries)}};
}

Result<LedgerEntry> LedgerEntryFromJson(const json& in) {
  if (!in.is_object()) return Error{"ledger entry must be a JSON object, got " + DumpForMessage(in)};
  if (!in.contains("type") || !in.at("type").is_string()) {
    return Error{"ledger entry must have a string field \"type\" (\"sample\" or \"event\")"};
  }
  const std::string type = in.at("type").get<std::string>();
  if (type == "event") {
    DPKIT_RETURN_IF_ERROR(CheckFields(in, "event entry", {"type", "event"}));
    Result<Event> event = Event::FromJson(in.at("event"));
    if (!event.ok()) return Error{event.error()};
    DPKIT_RETURN_IF_ERROR(CheckFileRanges(*event));
    return LedgerEntry{std::move(event).value()};
  }
  if (type != "sample") {
    return Error{"unknown ledger entry type " + QuoteForMessage(type) +
                 " (expected \"sample\" or \"event\")"};
  }
  DPKIT_RETURN_IF_ERROR(
      CheckFields(in, "sample entry", {"type", "step", "sampling_rate", "queries"}));
  SamplingRecord record;
  const json& step = in.at("step");
  if (!step.is_number_integer()) {
    return Error{"field \"step\" must be an integer, got " + DumpForMessage(step)};
  }
  if (step.is_number_unsigned() && step.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return Error{"step must be at most " + std::to_string(INT64_MAX)};
  }
  record.step = step.get<int64_t>();
  Result<double> rate = GetNumber(in, "sampling_rate");
  if (!rate.ok()) return Error{rate.error()};
  record.sampling_rate = *rate;
  const json& queries = in.at("queries");
  if (!queries.is_array()) {
    return Error{"field \"queries\" must be an array, got " + DumpForMessage(queries)};
  }
  for (const json& query : queries) {
    if (!query.is_object()) {
      return Error{"each query must be a JSON object, got " + DumpForMessage(query)};
    }
    DPKIT_RETURN_IF_ERROR(CheckFields(query, "query", {"clip_norm", "noise_stddev"}));
    Result<double> clip = GetNumber(query, "clip_norm");
    if (!clip.ok()) return Error{clip.error()};
    Result<double> stddev = GetNumber(query, "noise_stddev");
    if (!stddev.ok()) return Error{stddev.error()};
    record.queries.push_back(SumQueryRecord{*clip, *stddev});
  }
  DPKIT_RETURN_IF_ERROR(ValidateSamplingForFile(record));
  return LedgerEntry{std::move(record)};
}

Result<LedgerWriter> LedgerWriter::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Error{"cannot open ledger " + PathForMessage(path) + ": " + ErrnoText()};
  LedgerWriter writer(fd, path);  // closes fd on every return below
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    return Error{"cannot stat ledger " + PathForMessage(path) + ": " + ErrnoText()};
  }
  if (!S_ISREG(info.st_mode)) {
    return Error{"ledger " + PathForMessage(path) + " is not a regular file"};
  }
  // Cut an unterminated last line (a write interrupted by a crash): find the last '\n'.
  off_t end = info.st_size;
  off_t keep = 0;
  bool found = false;
  char buffer[4096];
  while (end > 0 && !found) {
    const off_t start = std::max<off_t>(0, end - static_cast<off_t>(sizeof(buffer)));
    const ssize_t n = ::pread(fd, buffer, static_cast<size_t>(end - start), start);
    if (n != end - start) return Error{"cannot read ledger " + PathForMessage(path) + ": " + ErrnoText()};
    for (ssize_t i = n - 1; i >= 0; --i) {
      if (buffer[i] == '\n') {
        keep = start + i + 1;
        found = true;
        break;
      }
    }
    end = start;
  }
  if (keep != info.st_size) {
    if (::ftruncate(fd, keep) != 0 || ::fsync(fd) != 0) {
      return Error{"cannot repair the unterminated last line of ledger " + PathForMessage(path) + ": " +
                   ErrnoText()};
    }
  }
  return Result<LedgerWriter>(std::move(writer));
}

LedgerWriter::LedgerWriter(LedgerWriter&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

LedgerWriter& LedgerWriter::operator=(LedgerWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

LedgerWriter::~LedgerWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> LedgerWriter::AppendLine(const std::string& line) {
  if (fd_ < 0) return Error{"ledger writer is closed"};
  // One write() of the whole line: with O_APPEND it lands at the end in one piece; a
  // short write (disk full) is continued so the line is completed or reported.
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{"cannot write ledger " + PathForMessage(path_) + ": " + ErrnoText()};
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd_) != 0) return Error{"cannot fsync ledger " + PathForMessage(path_) + ": " + ErrnoText()};
  return OkResult();
}

Result<void> LedgerWriter::Append(const SamplingRecord& record) {
  DPKIT_RETURN_IF_ERROR(ValidateSamplingForFile(record));
  return AppendLine(LedgerEntryToJson(LedgerEntry{record}).dump() + "\n");
}

Result<void> LedgerWriter::Append(const Event& event) {
  // As ReadLedger would: an event outside the JSON ranges (event.h) is refused, so that a
  // ledger that was written can always be read.
  const json entry = LedgerEntryToJson(LedgerEntry{event});
  if (Result<LedgerEntry> back = LedgerEntryFromJson(entry); !back.ok()) {
    return Error{back.error()};
  }
  return AppendLine(entry.dump() + "\n");
}

Result<std::vector<LedgerEntry>> ParseLedger(std::string_view text, std::string_view name) {
  std::vector<LedgerEntry> entries;
  size_t begin = 0;
  int64_t line_number = 0;
  while (begin < text.size()) {
    ++line_number;
    const size_t newline = text.find('\n', begin);
    const bool terminated = newline != std::string_view::npos;
    std::string_view line = text.substr(begin, (terminated ? newline : text.size()) - begin);
    begin = terminated ? newline + 1 : text.size();
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    Result<json> parsed = internal::ParseJson(line);
    if (!parsed.ok()) {
      // The text is one line: "at line 1, column 7" says no more than "at column 7".
      std::string message = parsed.error();
      const size_t at = message.find("at line 1, column");
      if (at != std::string::npos) message.replace(at, 17, "at column");
      parsed = Error{message};
    }
    Result<LedgerEntry> entry =
        parsed.ok() ? LedgerEntryFromJson(*parsed) : Result<LedgerEntry>(Error{parsed.error()});
    if (!entry.ok()) {
      // An unterminated last line that is not a valid entry is a write cut by a crash.
      if (!terminated) break;
      return Error{PathForMessage(name) + " line " + std::to_string(line_number) + ": " +
                   entry.error()};
    }
    entries.push_back(std::move(entry).value());
  }
  return entries;
}

Result<std::vector<LedgerEntry>> ReadLedger(std::istream& in, std::string_view name) {
  std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (in.bad()) return Error{"cannot read ledger " + PathForMessage(name)};
  return ParseLedger(text, name);
}

Result<std::vector<LedgerEntry>> ReadLedger(const std::string& path) {
  if (path == "-") return ReadLedger(std::cin, "standard input");
  // O_NONBLOCK: opening a FIFO for reading blocks until a writer appears, forever if none
  // does; with it open() returns at once and the check below refuses the FIFO. Reads of a
  // regular file are not affected by the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error{"cannot open ledger " + PathForMessage(path) + ": " + ErrnoText()};
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Error{"ledger " + PathForMessage(path) +
                 " is not a regular file (give - to read standard input)"};
  }
  std::string text;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string message = ErrnoText();
      ::close(fd);
      return Error{"cannot read ledger " + PathForMessage(path) + ": " + message};
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return ParseLedger(text, path);
}

Result<Event> LedgerToEvent(const std::vector<LedgerEntry>& entries) {
  std::vector<Event> events;
  // The current run of identical sampling records.
  double run_rate = 0;
  double run_z = 0;
  int64_t run_length = 0;
  const auto flush_run = [&]() -> Result<void> {
    if (run_length == 0) return OkResult();
    Result<Event> event = DpSgdEvent(run_rate, run_z, run_length);
    if (!event.ok()) return Error{event.error()};
    events.push_back(std::move(event).value());
    run_length = 0;
    return OkResult();
  };
  // The current run of identical without-replacement sampled events (fixed-size steps).
  const Event* event_run = nullptr;
  int64_t event_run_length = 0;
  const auto flush_event_run = [&]() -> Result<void> {
    if (event_run_length == 0) return OkResult();
    if (event_run_length == 1) {
      events.push_back(*event_run);
    } else {
      Result<Event> composed = Event::SelfComposed(*event_run, event_run_length);
      if (!composed.ok()) return Error{composed.error()};
      events.push_back(std::move(composed).value());
    }
    event_run_length = 0;
    return OkResult();
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    if (const Event* event = std::get_if<Event>(&entries[i].record)) {
      DPKIT_RETURN_IF_ERROR(flush_run());
      if (event->kind() == EventKind::kSampledWithoutReplacement) {
        if (event_run_length > 0 && *event != *event_run) {
          DPKIT_RETURN_IF_ERROR(flush_event_run());
        }
        event_run = event;
        ++event_run_length;
        continue;
      }
      DPKIT_RETURN_IF_ERROR(flush_event_run());
      events.push_back(*event);
      continue;
    }
    DPKIT_RETURN_IF_ERROR(flush_event_run());
    const SamplingRecord& record = std::get<SamplingRecord>(entries[i].record);
    if (record.queries.empty()) continue;
    const Result<void> valid = ValidateSampling(record);
    if (!valid.ok()) return Error{"ledger entry " + std::to_string(i + 1) + ": " + valid.error()};
    Result<double> z = CollapsedNoiseMultiplier(record.queries);
    if (!z.ok()) return Error{"ledger entry " + std::to_string(i + 1) + ": " + z.error()};
    if (run_length > 0 && (record.sampling_rate != run_rate || *z != run_z)) {
      DPKIT_RETURN_IF_ERROR(flush_run());
    }
    run_rate = record.sampling_rate;
    run_z = *z;
    ++run_length;
  }
  DPKIT_RETURN_IF_ERROR(flush_run());
  DPKIT_RETURN_IF_ERROR(flush_event_run());
  if (events.empty()) return Error{"ledger has no entries that release anything"};
  if (events.size() == 1) return events.front();
  return Event::Composed(std::move(events));
}

}  // namespace dpkit::accounting
