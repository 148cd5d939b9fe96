// The C ABI that the WebAssembly module exports to JavaScript (see calculator_bindings.h).
//
// dpkit_call takes a NUL-terminated UTF-8 JSON request and returns a malloc'd NUL-terminated
// JSON reply that the caller releases with dpkit_free. Nothing else crosses the boundary.
#include <cstdlib>
#include <cstring>
#include <string>

#include "dpkit/web/calculator_bindings.h"

extern "C" {

char* dpkit_call(const char* request_json) {
  const std::string reply =
      dpkit::web::HandleRequest(request_json == nullptr ? "" : request_json);
  char* out = static_cast<char*>(std::malloc(reply.size() + 1));
  if (out == nullptr) return nullptr;  // The JS side reports "out of memory".
  std::memcpy(out, reply.c_str(), reply.size() + 1);
  return out;
}

void dpkit_free(char* reply) { std::free(reply); }

}  // extern "C"
