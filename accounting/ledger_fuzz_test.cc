// Seeded mutation fuzzing of the ledger and event JSON parsers (issue 21): valid ledger
// lines and events are mutated at random, byte by byte and token by token, with a fixed
// seed and a fixed budget, and every input must either be refused with a short one-line
// message or give entries whose events are well formed: finite, non-NaN parameters within
// the ranges of events read from files. A crash, hang or exception fails the test.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/ledger.h"
#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

constexpr int kInputs = 20000;     // per test: the fixed budget
constexpr size_t kMaxMessage = 300;  // longest accepted error message

const std::vector<std::string>& LedgerSeeds() {
  static const std::vector<std::string> seeds = {
      R"({"type":"sample","step":0,"sampling_rate":0.01,"queries":[{"clip_norm":1,"noise_stddev":1.1}]})",
      R"({"type":"sample","step":7,"sampling_rate":0.5,"queries":[{"clip_norm":0.5,"noise_stddev":2},{"clip_norm":3,"noise_stddev":4}]})",
      R"({"type":"sample","step":2,"sampling_rate":1,"queries":[]})",
      R"({"type":"event","event":{"type":"gaussian","noise_multiplier":1.3}})",
      R"({"type":"event","event":{"type":"self_composed","count":100,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"laplace","scale":2}}}})",
      R"({"type":"event","event":{"type":"composed","events":[{"type":"pure_dp","epsilon":0.5},{"type":"approx_dp","epsilon":1,"delta":1e-6},{"type":"bounded_range","epsilon":0.25}]}})",
      R"({"type":"event","event":{"type":"sampled_without_replacement","population":60000,"sample_size":256,"event":{"type":"discrete_gaussian","sigma":1500,"sensitivity":1025}}})",
  };
  return seeds;
}

// Tokens that change structure or values where plain byte noise rarely does.
const std::vector<std::string>& Tokens() {
  static const std::vector<std::string> tokens = {
      "[", "]", "{", "}", ",", ":", "\"", "\\", "\\u0000", "\n", "\r", " ", "null", "true",
      "-", "0", "-0", "1e308", "1e-308", "4e-324", "1e400", "-1", "0.5", "1099511627777",
      "9223372036854775807", "18446744073709551615", "4611686018427387904", "NaN",
      "\"type\"", "\"event\"", "\"sample\"", "\"gaussian\"", "\"self_composed\"", "\"count\"",
      "\"composed\"", "\"events\"", "\"queries\"", "\"noise_stddev\"", "\"clip_norm\"",
      "\"sigma\"", "\"sensitivity\"", "\"epsilon\"", "\"sampling_rate\"", "\xff", "\xc3"};
  return tokens;
}

// One random mutation of `text` (never empty unless `text` is).
void Mutate(std::mt19937_64& rng, std::string* text) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const size_t pos = text->empty() ? 0 : pick(text->size() + 1);
  switch (pick(10)) {
    case 0:  // flip a byte
      if (!text->empty()) (*text)[pick(text->size())] = static_cast<char>(pick(256));
      break;
    case 1:  // delete a short range
      if (!text->empty()) text->erase(pick(text->size()), 1 + pick(8));
      break;
    case 2:  // insert a token
    case 3:
      text->insert(pos, Tokens()[pick(Tokens().size())]);
      break;
    case 4: {  // duplicate a range (repeats keys, nests objects)
      if (text->empty()) break;
      const size_t start = pick(text->size()), length = 1 + pick(40);
      text->insert(pos, text->substr(start, length));
      break;
    }
    case 5: {  // replace a number with another token
      const size_t digit = text->find_first_of("0123456789", pos);
      if (digit == std::string::npos) break;
      const size_t end = text->find_first_not_of("0123456789.e-+", digit);
      text->replace(digit, (end == std::string::npos ? text->size() : end) - digit,
                    Tokens()[pick(Tokens().size())]);
      break;
    }
    case 6: {  // deep or long: many copies of one token (brackets, digits, letters)
      const std::string token = Tokens()[pick(Tokens().size())];
      std::string run;
      const size_t copies = std::uniform_int_distribution<size_t>(10, 2000)(rng);
      for (size_t i = 0; i < copies; ++i) run += token;
      text->insert(pos, run);
      break;
    }
    case 7:
    case 8: {  // replace a number with a random one of any magnitude (values, not syntax)
      const size_t digit = text->find_first_of("0123456789", pos);
      if (digit == std::string::npos) break;
      const size_t end = text->find_first_not_of("0123456789.e-+", digit);
      const int exponent = std::uniform_int_distribution<int>(-330, 330)(rng);
      const std::string number = std::to_string(1 + pick(999)) + "e" + std::to_string(exponent);
      text->replace(digit, (end == std::string::npos ? text->size() : end) - digit, number);
      break;
    }
    default:  // swap two bytes
      if (text->size() > 1) std::swap((*text)[pick(text->size())], (*text)[pick(text->size())]);
      break;
  }
}

// A seed with `mutations` random mutations.
std::string MutatedSeed(std::mt19937_64& rng, int mutations) {
  const std::vector<std::string>& seeds = LedgerSeeds();
  std::string text = seeds[rng() % seeds.size()];
  for (int m = 0; m < mutations; ++m) Mutate(rng, &text);
  return text;
}

// Mostly one mutation (which often leaves a valid entry with a changed value), sometimes
// up to five.
std::string RandomInput(std::mt19937_64& rng) {
  return MutatedSeed(rng, rng() % 4 == 0 ? 1 + static_cast<int>(rng() % 5) : 1);
}

void ExpectShortOneLine(const std::string& message, const std::string& input) {
  EXPECT_LE(message.size(), kMaxMessage) << message.substr(0, 400) << "\ninput: "
                                         << input.substr(0, 200);
  EXPECT_EQ(message.find('\n'), std::string::npos) << message << "\ninput: "
                                                   << input.substr(0, 200);
  EXPECT_FALSE(message.empty());
}

// Every parameter of an accepted event is finite (and not NaN), and the tree is within
// the ranges of events read from files.
void ExpectWellFormed(const Event& event, const std::string& input) {
  for (double value : {event.noise_multiplier(), event.scale(), event.sigma(), event.epsilon(),
                       event.delta(), event.sampling_rate()}) {
    ASSERT_TRUE(std::isfinite(value)) << event.ToJsonString() << "\ninput: " << input;
  }
  for (const Event& child : event.children()) ExpectWellFormed(child, input);
}

TEST(LedgerFuzzTest, MutatedLedgersAreRefusedInOneShortLineOrAccountable) {
  std::mt19937_64 rng(20261125);
  int accepted = 0, refused = 0;
  for (int i = 0; i < kInputs; ++i) {
    // Two lines (the first mutated half of the time), so that line numbers and the
    // unterminated-last-line rule count.
    std::string text = MutatedSeed(rng, static_cast<int>(rng() % 2)) + "\n" + RandomInput(rng);
    if (rng() % 2 == 0) text += "\n";
    Result<std::vector<LedgerEntry>> entries = ParseLedger(text, "fuzz.jsonl");
    if (!entries.ok()) {
      ++refused;
      ExpectShortOneLine(entries.error(), text);
      continue;
    }
    ++accepted;
    for (const LedgerEntry& entry : *entries) {
      if (const Event* event = std::get_if<Event>(&entry.record)) {
        ExpectWellFormed(*event, text);
        EXPECT_TRUE(CheckFileRanges(*event).ok()) << text;
      } else {
        const SamplingRecord& record = std::get<SamplingRecord>(entry.record);
        EXPECT_TRUE(record.sampling_rate > 0 && record.sampling_rate <= 1) << text;
        if (!record.queries.empty()) {
          Result<double> z = CollapsedNoiseMultiplier(record.queries);
          ASSERT_TRUE(z.ok()) << text;
          EXPECT_GE(*z, kMinFileNoiseMultiplier) << text;
        }
      }
    }
    Result<Event> event = LedgerToEvent(*entries);
    if (event.ok()) {
      ExpectWellFormed(*event, text);
    } else {
      ExpectShortOneLine(event.error(), text);
    }
    if (HasFatalFailure()) return;
  }
  // The mutations must exercise both outcomes (fixed seed: these counts are deterministic).
  EXPECT_GT(accepted, kInputs / 20);
  EXPECT_GT(refused, kInputs / 2);
}

TEST(LedgerFuzzTest, MutatedEventsAreRefusedInOneShortLineOrWellFormed) {
  std::mt19937_64 rng(20261126);
  int accepted = 0;
  for (int i = 0; i < kInputs; ++i) {
    // The "event" member of an event entry seed, mutated.
    std::string text;
    do {
      text = LedgerSeeds()[rng() % LedgerSeeds().size()];
    } while (text.find("\"event\":{") == std::string::npos);
    const size_t start = text.find("\"event\":{") + 8;
    text = text.substr(start, text.size() - start - 1);
    const int mutations = rng() % 4 == 0 ? 1 + static_cast<int>(rng() % 5) : 1;
    for (int m = 0; m < mutations; ++m) Mutate(rng, &text);
    Result<Event> event = Event::FromJsonString(text);
    if (!event.ok()) {
      ExpectShortOneLine(event.error(), text);
      continue;
    }
    ++accepted;
    ExpectWellFormed(*event, text);
    // An accepted event round-trips, and a range refusal is a short line too.
    Result<Event> back = Event::FromJsonString(event->ToJsonString());
    ASSERT_TRUE(back.ok()) << text;
    EXPECT_EQ(*back, *event) << text;
    if (Result<void> ranges = CheckFileRanges(*event); !ranges.ok()) {
      ExpectShortOneLine(ranges.error(), text);
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(accepted, kInputs / 20);
}

}  // namespace
}  // namespace dpkit::accounting
