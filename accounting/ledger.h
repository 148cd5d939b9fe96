// The privacy ledger (McMahan et al. 2018, §3 and §6): what a training run did to the
// data, written as it happens, so that any accountant can process it afterwards (and a
// better accountant can re-account an old run).
//
// A ledger is a JSON-lines file. Each line is one entry:
//   {"type":"sample","step":12,"sampling_rate":0.01,
//    "queries":[{"clip_norm":1,"noise_stddev":1.1}, ...]}
//     one Poisson sampling of the data (rate q) and the Gaussian sum queries run on that
//     sample (clip norm C_i, noise standard deviation s_i);
//   {"type":"event","event":{...Event JSON, see event.h...}}
//     any other mechanism.
//
// Crash safety: LedgerWriter appends each line with a single write() on an O_APPEND
// descriptor followed by fsync(), so a crash leaves at most one unterminated last line.
// Open() removes such a fragment before appending; ReadLedger() ignores an unterminated
// last line unless it is a complete, valid entry (a file written by hand without a final
// newline). A writer must append a step's entry before it releases that step's output;
// then an entry lost in a crash belongs to a step whose output was never released.
// One process writes a given ledger at a time (Open's repair assumes no other writer).
#ifndef DPKIT_ACCOUNTING_LEDGER_H_
#define DPKIT_ACCOUNTING_LEDGER_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/result.h"

namespace dpkit::accounting {

// One Gaussian sum query (McMahan et al. 2018, §3): records clipped to L2 norm
// clip_norm are summed and N(0, noise_stddev²) noise is added per coordinate.
struct SumQueryRecord {
  double clip_norm;     // finite, > 0
  double noise_stddev;  // finite, > 0
};

// One Poisson sampling step and the sum queries run on its sample.
struct SamplingRecord {
  int64_t step = 0;                     // >= 0; informational (not used by accountants)
  double sampling_rate = 0;             // in (0, 1]
  std::vector<SumQueryRecord> queries;  // may be empty (nothing released)
};

// The sum queries of one sample together are one Gaussian mechanism with noise multiplier
// z = (Σ_i (C_i/s_i)²)^{−1/2} (McMahan et al. 2018, eq. 1). Errors: empty list, or a
// clip_norm / noise_stddev that is not finite and > 0. (A sample entry read from JSON or
// appended to a ledger must also have z >= kMinJsonNoiseMultiplier, event.h.)
Result<double> CollapsedNoiseMultiplier(const std::vector<SumQueryRecord>& queries);

struct LedgerEntry {
  std::variant<SamplingRecord, Event> record;
};

// Appends entries to a ledger file. Move-only; closes the file when destroyed.
class LedgerWriter {
 public:
  // Opens `path` for appending, creating it (mode 0644) if absent. An unterminated last
  // line left by a crash is cut off first.
  static Result<LedgerWriter> Open(const std::string& path);

  LedgerWriter(LedgerWriter&& other) noexcept;
  LedgerWriter& operator=(LedgerWriter&& other) noexcept;
  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;
  ~LedgerWriter();

  // Validates the record or event (as ReadLedger would, JSON ranges included), then
  // writes one line and fsyncs.
  Result<void> Append(const SamplingRecord& record);
  Result<void> Append(const Event& event);

 private:
  LedgerWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Result<void> AppendLine(const std::string& line);

  int fd_ = -1;
  std::string path_;
};

// The JSON object of one entry, and its validating inverse.
nlohmann::json LedgerEntryToJson(const LedgerEntry& entry);
Result<LedgerEntry> LedgerEntryFromJson(const nlohmann::json& json);

// Reads a ledger file; the path "-" reads standard input. Empty lines are skipped. Errors
// are one line, name the file and the 1-based line number ("ledger.jsonl line 3: unknown
// ledger entry type \"sampel\" ..."), and echo at most about 80 characters of a bad
// value; a file name with control characters or over 200 characters is quoted and cut.
// Anything but a regular file is refused at once (a FIFO is never waited on: give "-"
// and redirect it). Entries must lie in the ranges of events read from JSON (event.h,
// kMinJsonNoiseMultiplier ...; for a sample entry, its collapsed noise multiplier), so
// that every accountant answers within seconds.
Result<std::vector<LedgerEntry>> ReadLedger(const std::string& path);

// The same from a stream (`name` for messages) or from the ledger's text.
Result<std::vector<LedgerEntry>> ReadLedger(std::istream& in, std::string_view name);
Result<std::vector<LedgerEntry>> ParseLedger(std::string_view text, std::string_view name);

// The event tree of a ledger, in order: each maximal run of k consecutive sampling
// records with the same sampling rate and the same collapsed noise multiplier z becomes
// SelfComposed(PoissonSampled(q, Gaussian(z)), k); event entries are kept as they are,
// except that a maximal run of k > 1 identical SampledWithoutReplacement events (one per
// fixed-size training step, optim/fixed_size_sampler.h) becomes SelfComposed(event, k)
// (the same mechanism run k times: every accountant's composition of it is unchanged);
// sampling records without queries release nothing and are skipped. The result is the
// single element, or Composed of all. Error if nothing remains.
Result<Event> LedgerToEvent(const std::vector<LedgerEntry>& entries);

}  // namespace dpkit::accounting

#endif  // DPKIT_ACCOUNTING_LEDGER_H_
