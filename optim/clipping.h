// Per-example clipping: clip factors and the grouping of parameters into clipped groups.
//
// Framework-free (plain C++ on spans). A DP step clips each example's gradient g_i to L2
// norm at most C:  g_i * min(1, C / ||g_i||)  (Abadi et al. 2016, Alg. 1, "clip gradient").
// McMahan et al. 2018, Sec. 3, generalise this to groups of parameters: each group g is
// clipped to its own norm C_g, so the sensitivity of the summed gradient is
// sqrt(sum_g C_g^2), and Gaussian noise of standard deviation sigma * sqrt(sum_g C_g^2) on
// every coordinate gives the noise multiplier sigma (their eq. (1) with s_g = sigma * C).
//   flat       one group holding every parameter, clip norm C
//   per-layer  one group per layer, C_g = C / sqrt(L), so the total sensitivity is C
//   joint      caller-chosen groups of layers, each clipped jointly to its C_g
#ifndef DPKIT_OPTIM_CLIPPING_H_
#define DPKIT_OPTIM_CLIPPING_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dpkit::optim {

// min(1, C / ||g||) for ||g||^2 = squared_norm (Abadi et al. 2016, Alg. 1); 1 for g = 0.
double ClipFactor(double squared_norm, double clip_norm);

// factors[i] = ClipFactor(squared_norms[i], clip_norm); spans of equal length.
void ClipFactors(absl::Span<const double> squared_norms, double clip_norm,
                 absl::Span<double> factors);

enum class ClippingMode { kFlat, kPerLayer, kJoint };

// Parses "flat" | "per_layer" | "joint".
absl::StatusOr<ClippingMode> ParseClippingMode(const std::string& name);

// Which group each layer belongs to, and each group's clip norm.
struct ClippingGroups {
  std::vector<int> group_of_layer;  // size = number of layers, values in [0, groups)
  std::vector<double> clip_norms;   // C_g, one per group, finite > 0
  // sqrt(sum_g C_g^2): the L2 sensitivity of the sum of clipped gradients.
  double TotalSensitivity() const;
};

// Flat and per-layer groups for `num_layers` layers and total clip norm C > 0.
// For kJoint, `joint_groups` lists each group's layer indices (a partition of
// 0..num_layers-1) and `joint_clip_norms` their C_g (C is then unused).
absl::StatusOr<ClippingGroups> MakeClippingGroups(
    ClippingMode mode, double clip_norm, int num_layers,
    const std::vector<std::vector<int>>& joint_groups = {},
    const std::vector<double>& joint_clip_norms = {});

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_CLIPPING_H_
