#include "optim/clipping.h"

#include <cmath>
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
  return absl::InvalidArgumentError(
      absl::StrCat("clipping must be one of flat, per_layer, joint, got '", name, "'"));
}

double ClippingGroups::TotalSensitivity() const {
  double sum = 0;
  for (double c : clip_norms) sum += c * c;
  return std::sqrt(sum);
}

absl::StatusOr<ClippingGroups> MakeClippingGroups(
    ClippingMode mode, double clip_norm, int num_layers,
    const std::vector<std::vector<int>>& joint_groups,
    const std::vector<double>& joint_clip_norms) {
  if (num_layers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_layers must be >= 1, got ", num_layers));
  }
  ClippingGroups groups;
  if (mode != ClippingMode::kJoint && !(std::isfinite(clip_norm) && clip_norm > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip_norm must be finite and > 0, got ", clip_norm));
  }
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
    case ClippingMode::kJoint:
      break;
  }
  if (joint_groups.empty() || joint_groups.size() != joint_clip_norms.size()) {
    return absl::InvalidArgumentError(
        "joint clipping needs one clip norm per group and at least one group");
  }
  groups.group_of_layer.assign(num_layers, -1);
  for (size_t g = 0; g < joint_groups.size(); ++g) {
    double c = joint_clip_norms[g];
    if (!(std::isfinite(c) && c > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("clip norm of group ", g, " must be finite and > 0, got ", c));
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
    groups.clip_norms.push_back(c);
  }
  for (int l = 0; l < num_layers; ++l) {
    if (groups.group_of_layer[l] == -1) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", l, " is in no clipping group"));
    }
  }
  return groups;
}

}  // namespace dpkit::optim
