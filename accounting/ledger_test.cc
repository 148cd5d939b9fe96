#include "dpkit/accounting/ledger.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dpkit::accounting {
namespace {

std::string TempPath(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::remove(path.c_str());
  return path;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

SamplingRecord Sample(int64_t step, double q, std::vector<SumQueryRecord> queries) {
  SamplingRecord r;
  r.step = step;
  r.sampling_rate = q;
  r.queries = std::move(queries);
  return r;
}

const std::string kSample =
    R"({"type":"sample","step":0,"sampling_rate":0.01,"queries":[{"clip_norm":1,"noise_stddev":1.1}]})";

// Hand computation of McMahan et al. 2018 eq. (1).
TEST(LedgerTest, CollapsedNoiseMultiplierMatchesHandComputation) {
  // One query: z = s/C.
  EXPECT_DOUBLE_EQ(CollapsedNoiseMultiplier({{2.0, 3.0}}).value(), 1.5);
  // Two queries, C/s = 1/2 and 1/2: Σ = 1/2, z = √2.
  EXPECT_DOUBLE_EQ(CollapsedNoiseMultiplier({{1.0, 2.0}, {3.0, 6.0}}).value(), std::sqrt(2.0));
  // Three queries, C/s = 1, 2, 2: Σ = 9, z = 1/3.
  EXPECT_DOUBLE_EQ(CollapsedNoiseMultiplier({{1.0, 1.0}, {2.0, 1.0}, {4.0, 2.0}}).value(),
                   1.0 / 3.0);
  // Extreme but representable ratios neither overflow nor underflow.
  EXPECT_DOUBLE_EQ(CollapsedNoiseMultiplier({{1e200, 1e-100}, {1e200, 1e-100}}).value(),
                   1e-300 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(CollapsedNoiseMultiplier({{1e-200, 1e100}}).value(), 1e300);
}

TEST(LedgerTest, CollapsedNoiseMultiplierRejectsBadQueries) {
  EXPECT_EQ(CollapsedNoiseMultiplier({}).error(),
            "queries must be non-empty to collapse a noise multiplier");
  EXPECT_EQ(CollapsedNoiseMultiplier({{0.0, 1.0}}).error(), "clip_norm must be finite and > 0, got 0");
  EXPECT_EQ(CollapsedNoiseMultiplier({{1.0, -2.0}}).error(),
            "noise_stddev must be finite and > 0, got -2");
  EXPECT_EQ(CollapsedNoiseMultiplier({{1.0, std::nan("")}}).error(),
            "noise_stddev must be finite and > 0, got nan");
  EXPECT_NE(CollapsedNoiseMultiplier({{1e300, 1e-300}}).error().find("out of range"),
            std::string::npos);
}

TEST(LedgerTest, WrittenEntriesReadBackExactly) {
  const std::string path = TempPath("round_trip.jsonl");
  const Event laplace = Event::Laplace(0.5).value();
  {
    Result<LedgerWriter> writer = LedgerWriter::Open(path);
    ASSERT_TRUE(writer.ok()) << writer.error();
    ASSERT_TRUE(writer->Append(Sample(0, 0.0042666, {{1.0, 1.1}, {0.3, 0.7}})).ok());
    ASSERT_TRUE(writer->Append(laplace).ok());
    ASSERT_TRUE(writer->Append(Sample(1, 1.0 / 3.0, {})).ok());
  }
  {  // Reopening appends.
    Result<LedgerWriter> writer = LedgerWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->Append(Sample(2, 0.1, {{2.0, 3.0}})).ok());
  }
  const std::string text = ReadFile(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
  Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
  ASSERT_TRUE(entries.ok()) << entries.error();
  ASSERT_EQ(entries->size(), 4u);
  const SamplingRecord& first = std::get<SamplingRecord>((*entries)[0].record);
  EXPECT_EQ(first.step, 0);
  EXPECT_EQ(first.sampling_rate, 0.0042666);
  ASSERT_EQ(first.queries.size(), 2u);
  EXPECT_EQ(first.queries[1].clip_norm, 0.3);
  EXPECT_EQ(first.queries[1].noise_stddev, 0.7);
  EXPECT_EQ(std::get<Event>((*entries)[1].record), laplace);
  EXPECT_EQ(std::get<SamplingRecord>((*entries)[2].record).sampling_rate, 1.0 / 3.0);
  EXPECT_TRUE(std::get<SamplingRecord>((*entries)[2].record).queries.empty());
  EXPECT_EQ(std::get<SamplingRecord>((*entries)[3].record).step, 2);
}

TEST(LedgerTest, ReaderIgnoresAnUnterminatedLastLineFromACrash) {
  const std::string path = TempPath("crash.jsonl");
  WriteFile(path, kSample + "\n" + kSample + "\n" + kSample.substr(0, 40));
  Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
  ASSERT_TRUE(entries.ok()) << entries.error();
  EXPECT_EQ(entries->size(), 2u);
}

TEST(LedgerTest, ReaderKeepsAValidLastLineWithoutNewline) {
  // Written by hand without a final newline: a complete entry must not be lost.
  const std::string path = TempPath("no_newline.jsonl");
  WriteFile(path, kSample + "\n" + kSample);
  EXPECT_EQ(ReadLedger(path)->size(), 2u);
}

TEST(LedgerTest, WriterCutsACrashFragmentBeforeAppending) {
  const std::string path = TempPath("repair.jsonl");
  WriteFile(path, kSample + "\n" + kSample.substr(0, 25));
  {
    Result<LedgerWriter> writer = LedgerWriter::Open(path);
    ASSERT_TRUE(writer.ok()) << writer.error();
    ASSERT_TRUE(writer->Append(Sample(1, 0.5, {{1.0, 2.0}})).ok());
  }
  Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
  ASSERT_TRUE(entries.ok()) << entries.error();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ(std::get<SamplingRecord>((*entries)[1].record).sampling_rate, 0.5);
  // A file that is only a fragment becomes empty, then holds the new line.
  WriteFile(path, "{\"type\":\"sam");
  {
    Result<LedgerWriter> writer = LedgerWriter::Open(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->Append(Event::PureDp(1).value()).ok());
  }
  EXPECT_EQ(ReadFile(path), "{\"event\":{\"epsilon\":1.0,\"type\":\"pure_dp\"},\"type\":\"event\"}\n");
}

TEST(LedgerTest, ReaderSkipsEmptyLinesButCountsThem) {
  const std::string path = TempPath("blank.jsonl");
  WriteFile(path, "\n" + kSample + "\r\n  \n{oops}\n");
  Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
  ASSERT_FALSE(entries.ok());
  EXPECT_NE(entries.error().find("blank.jsonl line 4: "), std::string::npos) << entries.error();
}

struct MalformedCase {
  std::string line;
  std::string expected_substring;
};

TEST(LedgerTest, MalformedCompleteLinesAreRejectedWithTheirLineNumber) {
  const std::vector<MalformedCase> cases = {
      {"not json", "parse error at column 2: syntax error"},
      {"[1]", "ledger entry must be a JSON object"},
      {R"({"step":1})", "string field \"type\""},
      {R"({"type":"sampel"})", "unknown ledger entry type \"sampel\""},
      {R"({"type":"sample","step":0,"sampling_rate":0.1})", "missing field \"queries\""},
      {R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":[],"x":1})",
       "unknown field \"x\""},
      {R"({"type":"sample","step":-1,"sampling_rate":0.1,"queries":[]})", "step must be >= 0"},
      {R"({"type":"sample","step":1.5,"sampling_rate":0.1,"queries":[]})",
       "\"step\" must be an integer"},
      {R"({"type":"sample","step":0,"sampling_rate":0,"queries":[]})",
       "sampling_rate must be in (0, 1], got 0"},
      {R"({"type":"sample","step":0,"sampling_rate":"0.1","queries":[]})", "must be a number"},
      {R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":{}})",
       "\"queries\" must be an array"},
      {R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":[3]})",
       "each query must be a JSON object"},
      {R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":[{"clip_norm":1}]})",
       "missing field \"noise_stddev\""},
      {R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":[{"clip_norm":1,"noise_stddev":0}]})",
       "noise_stddev must be finite and > 0, got 0"},
      {R"({"type":"event"})", "missing field \"event\""},
      {R"({"type":"event","event":{"type":"gaussian","noise_multiplier":-1}})",
       "noise_multiplier must be finite and > 0, got -1"},
  };
  const std::string path = TempPath("malformed.jsonl");
  for (const MalformedCase& c : cases) {
    WriteFile(path, kSample + "\n" + kSample + "\n" + c.line + "\n" + kSample + "\n");
    Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
    ASSERT_FALSE(entries.ok()) << c.line;
    EXPECT_NE(entries.error().find("malformed.jsonl line 3: "), std::string::npos)
        << entries.error();
    EXPECT_NE(entries.error().find(c.expected_substring), std::string::npos)
        << c.line << " -> " << entries.error();
    EXPECT_EQ(entries.error().find('\n'), std::string::npos);
  }
}

TEST(LedgerTest, MissingFileAndDirectoryAreErrors) {
  EXPECT_NE(ReadLedger(TempPath("absent.jsonl")).error().find("cannot open ledger"),
            std::string::npos);
  EXPECT_NE(ReadLedger(::testing::TempDir()).error().find("is not a regular file"),
            std::string::npos);
  EXPECT_FALSE(LedgerWriter::Open(::testing::TempDir()).ok());
  EXPECT_NE(LedgerWriter::Open("/nonexistent-dir/x.jsonl").error().find("cannot open ledger"),
            std::string::npos);
}

TEST(LedgerTest, WriterRejectsInvalidRecordsWithoutWriting) {
  const std::string path = TempPath("invalid.jsonl");
  Result<LedgerWriter> writer = LedgerWriter::Open(path);
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ(writer->Append(Sample(0, 1.5, {{1, 1}})).error(), "sampling_rate must be in (0, 1], got 1.5");
  EXPECT_EQ(writer->Append(Sample(-3, 0.5, {{1, 1}})).error(), "step must be >= 0, got -3");
  EXPECT_EQ(writer->Append(Sample(0, 0.5, {{1, 0}})).error(), "noise_stddev must be finite and > 0, got 0");
  EXPECT_EQ(ReadFile(path), "");
}

TEST(LedgerTest, LedgerToEventMergesConsecutiveIdenticalSteps) {
  const Event laplace = Event::Laplace(2).value();
  std::vector<LedgerEntry> entries;
  // Steps 0-2: q = 0.01, one query C = 1, s = 1.1 (z = 1.1).
  for (int64_t step = 0; step < 3; ++step) entries.push_back({Sample(step, 0.01, {{1.0, 1.1}})});
  // Step 3: same q, different queries with the same collapsed z = 1.1 → same run.
  entries.push_back({Sample(3, 0.01, {{2.0, 2.2}})});
  // Step 4: nothing released.
  entries.push_back({Sample(4, 0.01, {})});
  // Steps 5-6: two queries, C/s = 1/2 each → z = √2.
  entries.push_back({Sample(5, 0.01, {{1.0, 2.0}, {1.0, 2.0}})});
  entries.push_back({Sample(6, 0.01, {{1.0, 2.0}, {1.0, 2.0}})});
  entries.push_back({laplace});
  entries.push_back({Sample(7, 0.01, {{1.0, 2.0}, {1.0, 2.0}})});
  // Step 8: different rate.
  entries.push_back({Sample(8, 0.02, {{1.0, 2.0}, {1.0, 2.0}})});

  Result<Event> event = LedgerToEvent(entries);
  ASSERT_TRUE(event.ok()) << event.error();
  const double z2 = CollapsedNoiseMultiplier({{1.0, 2.0}, {1.0, 2.0}}).value();
  const Event expected = Event::Composed({DpSgdEvent(0.01, 1.1, 4).value(),
                                          DpSgdEvent(0.01, z2, 2).value(), laplace,
                                          DpSgdEvent(0.01, z2, 1).value(),
                                          DpSgdEvent(0.02, z2, 1).value()})
                             .value();
  EXPECT_EQ(*event, expected) << event->ToJsonString();
  EXPECT_DOUBLE_EQ(z2, std::sqrt(2.0));
}

// Fixed-size steps (optim/fixed_size_sampler.h) are event entries; a run of identical
// ones becomes one SelfComposed event, a different one or anything else ends the run, and
// other events are never merged.
TEST(LedgerTest, LedgerToEventMergesRunsOfIdenticalWithoutReplacementSteps) {
  const Event a = Event::SampledWithoutReplacement(1000, 10, Event::Gaussian(0.5).value()).value();
  const Event b = Event::SampledWithoutReplacement(1000, 20, Event::Gaussian(0.5).value()).value();
  const Event laplace = Event::Laplace(2).value();
  std::vector<LedgerEntry> entries = {{a}, {a}, {a}, {b}, {Sample(0, 0.01, {{1.0, 1.1}})},
                                      {a}, {a}, {laplace}, {laplace}, {a}};
  Result<Event> event = LedgerToEvent(entries);
  ASSERT_TRUE(event.ok()) << event.error();
  const Event expected =
      Event::Composed({Event::SelfComposed(a, 3).value(), b, DpSgdEvent(0.01, 1.1, 1).value(),
                       Event::SelfComposed(a, 2).value(), laplace, laplace, a})
          .value();
  EXPECT_EQ(*event, expected) << event->ToJsonString();
  EXPECT_EQ(LedgerToEvent({{a}, {a}}).value(), Event::SelfComposed(a, 2).value());
}

TEST(LedgerTest, LedgerToEventOfOneRunIsThatRun) {
  std::vector<LedgerEntry> entries(5, LedgerEntry{Sample(0, 0.1, {{1.0, 0.8}})});
  EXPECT_EQ(LedgerToEvent(entries).value(), DpSgdEvent(0.1, 0.8, 5).value());
}

TEST(LedgerTest, LedgerToEventOfNothingIsAnError) {
  EXPECT_EQ(LedgerToEvent({}).error(), "ledger has no entries that release anything");
  EXPECT_EQ(LedgerToEvent({LedgerEntry{Sample(0, 0.1, {})}}).error(),
            "ledger has no entries that release anything");
  EXPECT_NE(LedgerToEvent({LedgerEntry{Sample(0, 2.0, {{1, 1}})}}).error().find(
                "ledger entry 1: sampling_rate must be in (0, 1]"),
            std::string::npos);
}

TEST(LedgerTest, DeeplyNestedLineIsAOneLineErrorNotACrash) {
  // 70,000 nested brackets overflowed the stack while the error message was formatted.
  const std::string path = TempPath("deep.jsonl");
  WriteFile(path, kSample + "\n" + std::string(70000, '[') + std::string(70000, ']') + "\n");
  Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
  ASSERT_FALSE(entries.ok());
  EXPECT_NE(entries.error().find("deep.jsonl line 2: JSON nesting deeper than 513 levels"),
            std::string::npos)
      << entries.error();
}

TEST(LedgerTest, ErrorsEchoAtMostEightyCharactersOfABadValue) {
  // A 1 MB value (type string, field name, unterminated string) was echoed whole, and a
  // newline in a field name split the message.
  const std::string big(1000000, 'x');
  const std::vector<std::string> lines = {
      R"({"type":")" + big + R"("})",
      R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":[],")" + big + R"(":1})",
      R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":[],"a\nb":1})",
      R"({"type":"event","event":{"type":")" + big + R"("}})",
      R"({"type":"event","event":{"type":"pure_dp","epsilon":1,")" + big + R"(":1}})",
      R"({"type":"sample","step":")" + big + R"(","sampling_rate":0.1,"queries":[]})",
      "\"" + big,
      "[" + big,
  };
  for (const std::string& line : lines) {
    Result<std::vector<LedgerEntry>> entries = ParseLedger(line + "\n", "long.jsonl");
    ASSERT_FALSE(entries.ok()) << line.substr(0, 100);
    EXPECT_LE(entries.error().size(), 300u) << entries.error().substr(0, 400);
    EXPECT_EQ(entries.error().find('\n'), std::string::npos) << entries.error();
  }
}

TEST(LedgerTest, FileNameWithANewlineGivesAOneLineError) {
  const std::string path = TempPath("two\nlines.jsonl");
  WriteFile(path, "{oops}\n");
  Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.error().find('\n'), std::string::npos) << entries.error();
  EXPECT_NE(entries.error().find("two\\nlines.jsonl"), std::string::npos) << entries.error();
  EXPECT_EQ(ReadLedger(TempPath("absent\nfile")).error().find('\n'), std::string::npos);
}

TEST(LedgerTest, FifoIsRefusedAtOnceInsteadOfWaitingForAWriter) {
  // open() of a FIFO for reading blocked until a writer appeared: forever.
  const std::string path = TempPath("ledger.fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(entries.ok());
  EXPECT_NE(entries.error().find("is not a regular file (give - to read standard input)"),
            std::string::npos)
      << entries.error();
  ::unlink(path.c_str());
}

TEST(LedgerTest, StreamsAreReadLikeFiles) {
  std::istringstream in(kSample + "\n" + kSample + "\n{cut");
  Result<std::vector<LedgerEntry>> entries = ReadLedger(in, "standard input");
  ASSERT_TRUE(entries.ok()) << entries.error();
  EXPECT_EQ(entries->size(), 2u);
  std::istringstream bad(kSample + "\n{oops}\n");
  EXPECT_EQ(ReadLedger(bad, "standard input").error().rfind("standard input line 2: ", 0), 0u);
}

TEST(LedgerTest, EntriesOutsideTheAccountantsRangesAreRefusedAtParseTime) {
  // Each of these made an accountant run for minutes or fail after parsing (issue 21).
  const std::vector<MalformedCase> cases = {
      {R"({"type":"event","event":{"type":"discrete_gaussian","sigma":0.001,"sensitivity":1099511627776}})",
       "discrete_gaussian sigma / sensitivity must be >= 0.01 in a ledger or event file, got "
       "0.001 / 1099511627776"},
      {R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":[{"clip_norm":1e308,"noise_stddev":1}]})",
       "collapsed noise multiplier (sum over queries of (clip_norm / noise_stddev)^2)^(-1/2) "
       "must be >= 0.01 in a ledger, got 1e-308"},
      {R"({"type":"sample","step":0,"sampling_rate":0.1,"queries":[{"clip_norm":1,"noise_stddev":1e-308}]})",
       "must be >= 0.01 in a ledger, got 1e-308"},
      {R"({"type":"event","event":{"type":"self_composed","count":4611686018427387904,"event":{"type":"gaussian","noise_multiplier":1}}})",
       "self_composed count must be in [1, 1000000000] (nested self_composed counts multiply "
       "to at most 1000000000) in a ledger or event file, got 4611686018427387904"},
      {R"({"type":"event","event":{"type":"pure_dp","epsilon":1e308}})",
       "pure_dp epsilon must be in [0, 10000] in a ledger or event file, got 1e+308"},
  };
  const std::string path = TempPath("ranges.jsonl");
  for (const MalformedCase& c : cases) {
    WriteFile(path, kSample + "\n" + c.line + "\n");
    Result<std::vector<LedgerEntry>> entries = ReadLedger(path);
    ASSERT_FALSE(entries.ok()) << c.line;
    EXPECT_NE(entries.error().find("ranges.jsonl line 2: "), std::string::npos)
        << entries.error();
    EXPECT_NE(entries.error().find(c.expected_substring), std::string::npos)
        << c.line << " -> " << entries.error();
  }
  // The writer refuses what the reader would refuse, so a written ledger always reads.
  Result<LedgerWriter> writer = LedgerWriter::Open(TempPath("ranges_written.jsonl"));
  ASSERT_TRUE(writer.ok());
  EXPECT_FALSE(writer->Append(Sample(0, 0.1, {{1, 1e-3}})).ok());
  EXPECT_FALSE(writer->Append(Event::PureDp(1e5).value()).ok());
  EXPECT_TRUE(writer->Append(Event::PureDp(1e4).value()).ok());
}

}  // namespace
}  // namespace dpkit::accounting
