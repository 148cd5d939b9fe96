#include "dpkit/accounting/internal/json_parse.h"

#include <cstddef>
#include <string>

namespace dpkit::accounting::internal {
namespace {

using nlohmann::json;

// Builds a json value like nlohmann's DOM parser but records a parse error instead of
// throwing it.
struct ErrorCapturingSax {
  json value;
  nlohmann::detail::json_sax_dom_parser<json> dom{value, /*allow_exceptions_=*/false};
  std::string error;

  bool null() { return dom.null(); }
  bool boolean(bool b) { return dom.boolean(b); }
  bool number_integer(json::number_integer_t v) { return dom.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return dom.number_float(v, s);
  }
  bool string(json::string_t& s) { return dom.string(s); }
  bool binary(json::binary_t& b) { return dom.binary(b); }
  bool start_object(std::size_t n) { return dom.start_object(n); }
  bool key(json::string_t& k) { return dom.key(k); }
  bool end_object() { return dom.end_object(); }
  bool start_array(std::size_t n) { return dom.start_array(n); }
  bool end_array() { return dom.end_array(); }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) {
    error = ex.what();
    return false;
  }
};

// Where the nesting of `text` first exceeds max_depth (0-based offset), or npos. Brackets
// inside strings do not count; an unbalanced text is left to the parser to report.
size_t NestingExceededAt(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// Cuts the input token that nlohmann's message quotes ("last read: '...'", "number overflow
// parsing '...'") to kMaxEchoedChars: a 1 MB unterminated string or a 10,000-digit number
// was echoed whole. The token runs from the first quote to the last.
void CutQuotedToken(std::string* message) {
  const size_t open = message->find('\'');
  const size_t close = message->rfind('\'');
  if (open == std::string::npos || close <= open + 1 + kMaxEchoedChars) return;
  message->replace(open + 1, close - open - 1,
                   message->substr(open + 1, kMaxEchoedChars - 3) + "...");
}

}  // namespace

Result<json> ParseJson(std::string_view text) {
  if (const size_t at = NestingExceededAt(text, kMaxJsonDepth); at != std::string_view::npos) {
    return Error{"JSON nesting deeper than " + std::to_string(kMaxJsonDepth) +
                 " levels at column " + std::to_string(at + 1)};
  }
  ErrorCapturingSax sax;
  const bool parsed = json::sax_parse(text.begin(), text.end(), &sax);
  if (!parsed || !sax.error.empty()) {
    std::string message = sax.error.empty() ? std::string("invalid JSON") : sax.error;
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep the position.
    if (!message.empty() && message.front() == '[') {
      const size_t end = message.find("] ");
      if (end != std::string::npos) message.erase(0, end + 2);
    }
    CutQuotedToken(&message);
    return Error{message};
  }
  return std::move(sax.value);
}

std::string DumpForMessage(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxEchoedChars) text = text.substr(0, kMaxEchoedChars - 3) + "...";
  return text;
}

std::string QuoteForMessage(std::string_view text) {
  // Only the first kMaxEchoedChars bytes can appear, so a long text is not copied whole.
  const bool cut = text.size() > kMaxEchoedChars;
  std::string quoted = json(std::string(text.substr(0, kMaxEchoedChars)))
                           .dump(-1, ' ', false, json::error_handler_t::replace);
  if (cut || quoted.size() > kMaxEchoedChars) {
    quoted = quoted.substr(0, kMaxEchoedChars - 4) + "...\"";
  }
  return quoted;
}

}  // namespace dpkit::accounting::internal
