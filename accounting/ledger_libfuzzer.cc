// libFuzzer target for the ledger and event JSON parsers (issue 21), beside the seeded
// GoogleTest mutation test ledger_fuzz_test.cc, with the same checks: an input is either
// refused with a one-line message of at most 300 characters, or gives entries whose
// events have finite parameters within the ranges of events read from files. Built with
// Debian's clang outside Bazel (Bazel's toolchain here is GCC): see run_ledger_libfuzzer.sh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "dpkit/accounting/event.h"
#include "dpkit/accounting/ledger.h"

namespace {

using dpkit::accounting::Event;

void CheckMessage(const std::string& message) {
  if (message.empty() || message.size() > 300 || message.find('\n') != std::string::npos) {
    std::abort();
  }
}

void CheckEvent(const Event& event) {
  for (double value : {event.noise_multiplier(), event.scale(), event.sigma(), event.epsilon(),
                       event.delta(), event.sampling_rate()}) {
    if (!std::isfinite(value)) std::abort();
  }
  for (const Event& child : event.children()) CheckEvent(child);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto entries = dpkit::accounting::ParseLedger(text, "fuzz.jsonl");
  if (!entries.ok()) {
    CheckMessage(entries.error());
  } else {
    for (const auto& entry : *entries) {
      if (const Event* event = std::get_if<Event>(&entry.record)) {
        CheckEvent(*event);
        if (!dpkit::accounting::CheckFileRanges(*event).ok()) std::abort();
      }
    }
    auto event = dpkit::accounting::LedgerToEvent(*entries);
    if (event.ok()) {
      CheckEvent(*event);
    } else {
      CheckMessage(event.error());
    }
  }
  auto event = Event::FromJsonString(text);
  if (event.ok()) {
    CheckEvent(*event);
  } else {
    CheckMessage(event.error());
  }
  return 0;
}
