#include "dpkit/accounting/internal/pld_common.h"

#include <cmath>
#include <limits>
#include <string>

#include "dpkit/accounting/internal/format.h"

namespace dpkit::accounting::pld_internal {

Error GridLimitError(int64_t need, int64_t limit, double h) {
  Error error{"the privacy loss grid would need " + std::to_string(need) + " points (limit " +
              std::to_string(limit) + ") at spacing " + internal::FormatDouble(h) +
              "; increase epsilon_tolerance or discretization_interval"};
  error.code = ErrorCode::kGridLimit;
  error.grid_points = need;
  return error;
}

void FillLogs(Pmf* pmf) {
  pmf->log_mass.resize(pmf->mass.size());
  for (size_t i = 0; i < pmf->mass.size(); ++i) {
    pmf->log_mass[i] = pmf->mass[i] > 0 ? std::log(pmf->mass[i])
                                        : -std::numeric_limits<ld>::infinity();
  }
}

}  // namespace dpkit::accounting::pld_internal
