#include "dpkit/optim/clipping.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dpkit::optim {

double ClipFactor(double squared_norm, double clip_norm) {
  // Abadi et al. 2016, Alg. 1: g / max(1, ||g|| / C).
  double norm = std::sqrt(squared_norm);
  return norm > clip_norm ? clip_norm / norm : 1.0;
}

void ClipFactors(absl::Span<const double> squared_norms, double clip_norm,
                 absl::Span<double> factors) {
  for (size_t i = 0; i < squared_norms.size() && i < factors.size(); ++i) {
    factors[i] = ClipFactor(squared_norms[i], clip_norm);
  }
}

absl::StatusOr<ClippingMode> ParseClippingMode(const std::string& name) {
  if (name == "flat") return ClippingMode::kFlat;
  if (name == "per_layer") return ClippingMode::kPerLayer;
  if (name == "joint") return ClippingMode::kJoint;
  if (name == "per_layer_dim") return ClippingMode::kPerLayerDim;
  return absl::InvalidArgumentError(absl::StrCat(
      "clipping must be one of flat, per_layer, joint, per_layer_dim, got '", name, "'"));
}

namespace {

// McMahan et al. 2018, Sec. 3 (per-layer clipping with sum_j C_j^2 = C^2), the
// dimensionality-adjusted choice C_j = C sqrt(d_j / D), D = sum_j d_j.
absl::StatusOr<ClippingGroups> DimensionAdjustedGroups(double clip_norm, int num_layers,
                                                       const std::vector<int64_t>& layer_dims) {
  if (static_cast<int>(layer_dims.size()) != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "per_layer_dim clipping needs one dimension per layer (", num_layers, "), got ",
        layer_dims.size()));
  }
  double total = 0;
  for (int64_t d : layer_dims) {
    if (d < 1) {
      return absl::InvalidArgumentError(absl::StrCat("layer dimensions must be >= 1, got ", d));
    }
    total += static_cast<double>(d);
  }
  ClippingGroups groups;
  groups.mode = ClippingMode::kPerLayerDim;
  for (int l = 0; l < num_layers; ++l) {
    groups.group_of_layer.push_back(l);
    groups.clip_norms.push_back(clip_norm * std::sqrt(static_cast<double>(layer_dims[l]) / total));
  }
  return groups;
}

}  // namespace

int ClippingGroups::num_groups() const {
  return mode == ClippingMode::kJoint ? static_cast<int>(scales.size())
                                      : static_cast<int>(clip_norms.size());
}

double ClippingGroups::TotalSensitivity() const {
  if (mode == ClippingMode::kJoint) return clip_norms[0];
  double sum = 0;
  for (double c : clip_norms) sum += c * c;
  return std::sqrt(sum);
}

absl::StatusOr<ClippingGroups> MakeClippingGroups(
    ClippingMode mode, double clip_norm, int num_layers,
    const std::vector<std::vector<int>>& joint_groups,
    const std::vector<double>& joint_scales, const std::vector<int64_t>& layer_dims) {
  if (num_layers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_layers must be >= 1, got ", num_layers));
  }
  if (!(std::isfinite(clip_norm) && clip_norm > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip_norm must be finite and > 0, got ", clip_norm));
  }
  ClippingGroups groups;
  groups.mode = mode;
  switch (mode) {
    case ClippingMode::kFlat:
      groups.group_of_layer.assign(num_layers, 0);
      groups.clip_norms = {clip_norm};
      return groups;
    case ClippingMode::kPerLayer:
      // McMahan et al. 2018, Sec. 3: C_g = C / sqrt(L) keeps sqrt(sum_g C_g^2) = C.
      for (int l = 0; l < num_layers; ++l) groups.group_of_layer.push_back(l);
      groups.clip_norms.assign(num_layers, clip_norm / std::sqrt(static_cast<double>(num_layers)));
      return groups;
    case ClippingMode::kPerLayerDim:
      return DimensionAdjustedGroups(clip_norm, num_layers, layer_dims);
    case ClippingMode::kJoint:
      break;
  }
  if (joint_groups.empty() || joint_groups.size() != joint_scales.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "joint clipping needs at least one group and one scale per group, got ",
        joint_groups.size(), " groups and ", joint_scales.size(), " scales"));
  }
  groups.clip_norms = {clip_norm};
  groups.group_of_layer.assign(num_layers, -1);
  for (size_t g = 0; g < joint_groups.size(); ++g) {
    double s = joint_scales[g];
    if (!(std::isfinite(s) && s > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("scale of clipping group ", g, " must be finite and > 0, got ", s));
    }
    for (int layer : joint_groups[g]) {
      if (layer < 0 || layer >= num_layers) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer index must be in [0, ", num_layers, "), got ", layer));
      }
      if (groups.group_of_layer[layer] != -1) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", layer, " is in more than one clipping group"));
      }
      groups.group_of_layer[layer] = static_cast<int>(g);
    }
    groups.scales.push_back(s);
  }
  for (int l = 0; l < num_layers; ++l) {
    if (groups.group_of_layer[l] == -1) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, " is in no clipping group"));
    }
  }
  return groups;
}

void RecordClipFactors(const ClippingGroups& groups, absl::Span<const double> group_squared_norms,
                       absl::Span<double> factors) {
  if (groups.mode != ClippingMode::kJoint) {
    mechanisms::IndependentClipFactors(groups.clip_norms, group_squared_norms, factors);
    return;
  }
  mechanisms::JointClipFactors(groups.clip_norms[0], groups.scales, group_squared_norms, factors);
}

double SensitivityMultiplier(int64_t microbatch_size) { return microbatch_size > 1 ? 2.0 : 1.0; }

NoisePlan MakeNoisePlan(const ClippingGroups& groups, double noise_multiplier,
                        int64_t microbatch_size) {
  const double m = SensitivityMultiplier(microbatch_size);
  const double delta = m * groups.TotalSensitivity();
  const double stddev = noise_multiplier * delta;
  if (groups.mode == ClippingMode::kJoint) {
    // McMahan et al. 2018 / GaussianSumQuery::Joint: noise sigma Delta on the rescaled
    // record, i.e. sigma Delta s_g on group g after the rescaling; one query {Delta, sigma Delta}.
    return mechanisms::JointGroupsNoise(delta, stddev, groups.scales);
  }
  std::vector<double> sensitivities;
  for (double c : groups.clip_norms) sensitivities.push_back(m * c);
  return mechanisms::IndependentGroupsNoise(
      sensitivities, std::vector<double>(sensitivities.size(), stddev));
}

}  // namespace dpkit::optim
