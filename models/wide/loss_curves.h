// Loss curves per epoch (their Figure 1) as a CSV file and an SVG plot that any browser
// opens. Both files are written to a temporary name and renamed, so a reader never sees
// a half-written file.
#ifndef DPKIT_MODELS_WIDE_LOSS_CURVES_H_
#define DPKIT_MODELS_WIDE_LOSS_CURVES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dpkit::models::wide {

struct LossCurve {
  std::string name;            // e.g. "train", "test"
  std::vector<double> values;  // one per epoch, epoch 1 first
};

// CSV: header "epoch,<name>,..." then one row per epoch.
absl::Status WriteLossCsv(const std::string& path, const std::vector<LossCurve>& curves);

// SVG line plot with axes, tick labels and a legend. Both are written atomically
// (models/files.h).
absl::Status WriteLossSvg(const std::string& path, const std::string& title,
                          const std::vector<LossCurve>& curves);

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_LOSS_CURVES_H_
