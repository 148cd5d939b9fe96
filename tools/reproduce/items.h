// The items of `dpkit reproduce all` (item.h), one function each, so that each item's
// Bazel test runs exactly its computation.
#ifndef DPKIT_TOOLS_REPRODUCE_ITEMS_H_
#define DPKIT_TOOLS_REPRODUCE_ITEMS_H_

#include <cmath>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "dpkit/tools/reproduce/item.h"

namespace dpkit::tools::reproduce {

// Bu, Dong, Long, Su 2020 (bu_items.cc).
absl::StatusOr<ItemResult> BuFig2();        // delta against epsilon: CLT, MA, PLD
absl::StatusOr<ItemResult> BuFig3();        // tradeoff curves; 77.6% vs 9.4% min errors
absl::StatusOr<ItemResult> BuGeneralClt();  // general CLT of a heterogeneous schedule

// Asoodeh, Liao, Calmon, Kosut, Sankar 2020 (asoodeh_items.cc).
absl::StatusOr<ItemResult> AsoodehIterations();  // max steps under 3 conversions
absl::StatusOr<ItemResult> AsoodehRegion();      // RDP -> f-DP regions vs the exact curve

// Abadi et al. 2016 (abadi_items.cc).
absl::StatusOr<ItemResult> AbadiComposition();  // epsilon vs epochs: MA vs strong comp.

// A JSON number, or null for a non-finite value.
inline nlohmann::json JsonValue(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

// MNIST as in Bu et al. 2020, Table 1 and Abadi et al. 2016: 60000 examples.
inline constexpr double kMnistSize = 60000;

}  // namespace dpkit::tools::reproduce

#endif  // DPKIT_TOOLS_REPRODUCE_ITEMS_H_
