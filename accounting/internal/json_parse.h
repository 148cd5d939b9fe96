// Non-throwing JSON parsing for the accounting core.
#ifndef DPKIT_ACCOUNTING_INTERNAL_JSON_PARSE_H_
#define DPKIT_ACCOUNTING_INTERNAL_JSON_PARSE_H_

#include <string>
#include <string_view>

#include "dpkit/accounting/result.h"
#include "nlohmann/json.hpp"

namespace dpkit::accounting::internal {

// Deepest nesting of arrays and objects ParseJson accepts. An event tree at its own limit
// (kMaxEventDepth = 256 levels, event.h) takes at most two JSON levels per node (a
// "composed" object and its "events" array), plus one for a ledger entry around it.
// nlohmann's parser is iterative, but writing or comparing a value recurses once per
// level: a ledger line of 70,000 nested brackets overflowed the stack while its error
// message was formatted.
inline constexpr int kMaxJsonDepth = 2 * 256 + 1;

// Most characters of an input value echoed in an error message.
inline constexpr size_t kMaxEchoedChars = 80;

// Parses one JSON text. Never throws (accounting/ also builds with exceptions disabled
// for WebAssembly); a syntax error returns nlohmann's message without its exception tag,
// naming the line and column: "parse error at line 1, column 2: syntax error ...", with
// the input token it quotes ("last read: '...'") cut to kMaxEchoedChars. Text nested deeper
// than kMaxJsonDepth is refused before parsing (no recursion, no DOM built):
// "JSON nesting deeper than 513 levels at column 514".
Result<nlohmann::json> ParseJson(std::string_view text);

// JSON text of `value` for an error message: never throws on invalid UTF-8, and is cut
// to at most kMaxEchoedChars characters.
std::string DumpForMessage(const nlohmann::json& value);

// `text` as a JSON string literal for an error message: quoted, with control characters,
// quotes and backslashes escaped (so a message stays on one line) and invalid UTF-8
// replaced; cut to at most kMaxEchoedChars characters ("..." marks a cut).
std::string QuoteForMessage(std::string_view text);

}  // namespace dpkit::accounting::internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_JSON_PARSE_H_
