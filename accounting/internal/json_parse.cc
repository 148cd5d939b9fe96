#include "accounting/internal/json_parse.h"

#include <cstddef>

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

}  // namespace

Result<json> ParseJson(std::string_view text) {
  ErrorCapturingSax sax;
  const bool parsed = json::sax_parse(text.begin(), text.end(), &sax);
  if (!parsed || !sax.error.empty()) {
    std::string message = sax.error.empty() ? std::string("invalid JSON") : sax.error;
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep the position.
    if (!message.empty() && message.front() == '[') {
      const size_t end = message.find("] ");
      if (end != std::string::npos) message.erase(0, end + 2);
    }
    return Error{message};
  }
  return std::move(sax.value);
}

std::string DumpForMessage(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

}  // namespace dpkit::accounting::internal
