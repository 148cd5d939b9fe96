// Non-throwing JSON parsing for the accounting core.
#ifndef DPKIT_ACCOUNTING_INTERNAL_JSON_PARSE_H_
#define DPKIT_ACCOUNTING_INTERNAL_JSON_PARSE_H_

#include <string>
#include <string_view>

#include "accounting/result.h"
#include "nlohmann/json.hpp"

namespace dpkit::accounting::internal {

// Parses one JSON text. Never throws (accounting/ also builds with exceptions disabled
// for WebAssembly); a syntax error returns nlohmann's message without its exception tag,
// naming the line and column: "parse error at line 1, column 2: syntax error ...".
Result<nlohmann::json> ParseJson(std::string_view text);

// JSON text of `value` for an error message: never throws on invalid UTF-8, and is cut
// to at most 80 characters.
std::string DumpForMessage(const nlohmann::json& value);

}  // namespace dpkit::accounting::internal

#endif  // DPKIT_ACCOUNTING_INTERNAL_JSON_PARSE_H_
