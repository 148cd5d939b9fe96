#include <chrono>
#include <cstdio>
#include <cstdlib>
#include "accounting/pld.h"
using namespace dpkit::accounting;
int main(int argc, char** argv) {
  double q = atof(argv[1]), sigma = atof(argv[2]); long T = atol(argv[3]); double delta = atof(argv[4]);
  PldOptions o; if (argc > 5) o.discretization_interval = atof(argv[5]);
  if (argc > 6) o.epsilon_tolerance = atof(argv[6]);
  auto e = DpSgdEvent(q, sigma, T);
  auto t0 = std::chrono::steady_clock::now();
  auto r = PldEpsilon(*e, delta, o);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) { printf("error %s\n", r.error().c_str()); return 1; }
  printf("upper %.9f lower %.9f h %g  %.1f ms\n", r->epsilon_upper, r->epsilon_lower, r->discretization_interval, ms);
}
