// Bu, Dong, Long, Su 2020, Table 1 row 2 (q = 256/60000, sigma 1.1, 14063 steps, delta
// 1e-5): dpkit's certified PLD interval for epsilon, printed exactly (%.17g).
#include <cstdio>

#include "accounting/budget.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"

int main() {
  namespace acc = dpkit::accounting;
  const acc::Result<acc::Event> event = acc::DpSgdEvent(256.0 / 60000, 1.1, 14063);
  if (!event.ok()) return std::fprintf(stderr, "%s\n", event.error().c_str()), 1;
  const acc::Result<acc::EpsilonBounds> eps = acc::PldEpsilon(*event, 1e-5);
  if (!eps.ok()) return std::fprintf(stderr, "%s\n", eps.error().c_str()), 1;
  std::printf("epsilon in [%.17g, %.17g] at delta 1e-05\n", eps->epsilon_lower, eps->epsilon_upper);
  std::printf("fits a budget of (3, 1e-05): %s\n",
              consumer::Fits({3.0, 1e-5}, eps->epsilon_upper, 1e-5) ? "yes" : "no");
}
