// Native reference timing of the calculator's boundary: answers each request given on the
// command line (JSON, as the page sends it) with the same HandleRequest the WebAssembly
// module runs, and prints one JSON line per request with the process CPU seconds it took
// and the reply. web/tests/timing.js does the same in Node's WebAssembly, so that
// benchmarks/gate.py (kind "web_ratio") can compare the two in one run.
//   usage: web_timing [--repetitions=N] REQUEST_JSON...
// With repetitions N > 1 each request runs N times and the smallest CPU time is printed.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "nlohmann/json.hpp"
#include "dpkit/web/calculator_bindings.h"

namespace {

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  int repetitions = 1;
  int first = 1;
  if (argc > 1 && std::strncmp(argv[1], "--repetitions=", 14) == 0) {
    repetitions = std::max(1, std::atoi(argv[1] + 14));
    first = 2;
  }
  if (first >= argc) {
    std::fprintf(stderr, "usage: web_timing [--repetitions=N] REQUEST_JSON...\n");
    return 2;
  }
  for (int i = first; i < argc; ++i) {
    double best = std::numeric_limits<double>::infinity();
    std::string reply;
    for (int r = 0; r < repetitions; ++r) {
      const double start = CpuSeconds();
      reply = dpkit::web::HandleRequest(argv[i]);
      best = std::min(best, CpuSeconds() - start);
    }
    nlohmann::json line = {{"cpu_seconds", best},
                           {"reply", nlohmann::json::parse(reply, nullptr, false)}};
    std::printf("%s\n", line.dump().c_str());
  }
  return 0;
}
