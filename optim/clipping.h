// Per-example clipping: clip factors, the grouping of parameters into clipped groups, and
// the sensitivity, noise and ledger entries that follow from them.
//
// Framework-free (plain C++ on spans). A DP step clips each record's gradient g_i to L2
// norm at most C:  g_i * min(1, C / ||g_i||)  (Abadi et al. 2016, Alg. 1, "clip gradient").
// McMahan et al. 2018, Sec. 3, generalise this to groups of parameters (layers):
//   flat       one group holding every parameter, clip norm C; noise N(0, (sigma C)^2).
//   per_layer  one group per layer, each clipped on its own to C_g = C / sqrt(L), so the
//              sensitivity of the sum is sqrt(sum_g C_g^2) = C; noise N(0, (sigma C)^2) on
//              every coordinate (their eq. (1) with every s_g = sigma C).
//   per_layer_dim  dimensionality-adjusted per-layer clipping (McMahan et al. 2018, Sec. 3,
//              "per-layer clipping": C_j chosen with sum_j C_j^2 = C^2, here
//              C_j = C sqrt(d_j / D) with d_j the layer's parameter count and D = sum_j d_j,
//              so a layer's share of the clip norm grows with its dimension); the
//              sensitivity of the concatenation is sqrt(sum_j C_j^2) = C and the noise is
//              N(0, (sigma C)^2) on every coordinate, as for per_layer.
//   joint      caller-chosen groups of layers with scale parameters s_g > 0: the record is
//              clipped as a whole, with one factor, so that sqrt(sum_g ||g_g||^2 / s_g^2)
//              <= C; group g gets noise N(0, (sigma C s_g)^2). This is the flat Gaussian
//              sum query (clip C, noise sigma C) on the rescaled record (g_g / s_g),
//              followed by the fixed rescaling by s_g (post-processing), exactly as
//              mechanisms/gaussian_sum_query.h's GaussianSumQuery::Joint (whose clip
//              factors and noise plan this file calls); one ledger entry
//              {C, sigma C}. A group with a small s_g gets less noise and a smaller share
//              of the clip norm.
//
// Records and sensitivity (add/remove adjacency, which the Poisson accountants assume):
//   microbatch_size 1  a record is one example's gradient. Adding an example adds one
//                      clipped record: the sum moves by at most Delta = S (S = C for flat and
//                      joint-in-rescaled-units, sqrt(sum_g C_g^2) for per-layer).
//   microbatch_size k  a record is the AVERAGE gradient of the examples of one microbatch
//                      (Abadi et al. 2016 / TF Privacy's num_microbatches; McMahan et al.
//                      2018 Sec. 3), clipped as above. Adding an example x changes ONLY the
//                      record of x's microbatch (the microbatch assignment of every other
//                      example must not depend on x: see AssignMicrobatches in
//                      optim/poisson_sampler.h), from clip(a) to clip(b). Both have norm
//                      <= S, so the sum moves by at most Delta = 2S — not S: e.g. a = 10u,
//                      b = -10u give clip(a) - clip(b) = 2Su. (S is reached only when x's
//                      microbatch was otherwise empty.)
// The noise is calibrated to Delta (standard deviation sigma * Delta per coordinate, times
// s_g for joint groups), and the ledger records each group's sum query as
// {clip_norm = Delta_g, noise_stddev} with Delta_g the group's share of Delta, so the
// collapsed noise multiplier (McMahan et al. 2018, eq. (1): z = (sum_g (Delta_g/s_g)^2)^-1/2)
// is sigma for every mode and microbatch size: the Poisson-sampled Gaussian event is the
// same as without microbatches, at twice the noise standard deviation for k > 1.
#ifndef DPKIT_OPTIM_CLIPPING_H_
#define DPKIT_OPTIM_CLIPPING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpkit/mechanisms/gaussian_sum_query.h"

namespace dpkit::optim {

// min(1, C / ||g||) for ||g||^2 = squared_norm (Abadi et al. 2016, Alg. 1); 1 for g = 0.
double ClipFactor(double squared_norm, double clip_norm);

// factors[i] = ClipFactor(squared_norms[i], clip_norm); spans of equal length.
void ClipFactors(absl::Span<const double> squared_norms, double clip_norm,
                 absl::Span<double> factors);

enum class ClippingMode { kFlat, kPerLayer, kJoint, kPerLayerDim };

// Parses "flat" | "per_layer" | "joint" | "per_layer_dim".
absl::StatusOr<ClippingMode> ParseClippingMode(const std::string& name);

// Which group each layer belongs to, each group's clip norm and (joint) scale.
struct ClippingGroups {
  ClippingMode mode = ClippingMode::kFlat;
  std::vector<int> group_of_layer;  // size = number of layers, values in [0, groups)
  // flat / per_layer / per_layer_dim: C_g, one per group. joint: one entry, the joint
  // clip norm C.
  std::vector<double> clip_norms;
  std::vector<double> scales;  // joint: s_g, one per group; empty otherwise
  int num_groups() const;
  // Delta for single-example records: sqrt(sum_g C_g^2) (flat, per_layer) or C (joint,
  // in rescaled units).
  double TotalSensitivity() const;
};

// Flat and per-layer groups for `num_layers` layers and total clip norm C > 0.
// For kJoint, `joint_groups` lists each group's layer indices (a partition of
// 0..num_layers-1) and `joint_scales` their s_g (finite > 0); C is the joint clip norm.
// For kPerLayerDim, `layer_dims` gives each layer's parameter count d_j >= 1 (size
// num_layers): C_j = C sqrt(d_j / sum_i d_i).
absl::StatusOr<ClippingGroups> MakeClippingGroups(
    ClippingMode mode, double clip_norm, int num_layers,
    const std::vector<std::vector<int>>& joint_groups = {},
    const std::vector<double>& joint_scales = {},
    const std::vector<int64_t>& layer_dims = {});

// The clip factor of each group for ONE record whose per-group squared L2 norms are
// `group_squared_norms` (size num_groups): flat/per-layer min(1, C_g / ||r_g||); joint the
// same factor min(1, C / sqrt(sum_g ||r_g||^2 / s_g^2)) for every group.
void RecordClipFactors(const ClippingGroups& groups, absl::Span<const double> group_squared_norms,
                       absl::Span<double> factors);

// 1 for single-example records, 2 for microbatches of k > 1 examples (see the file comment).
double SensitivityMultiplier(int64_t microbatch_size);

// The noise plan of one DP step: the ONE place where (clip norm, noise multiplier, groups,
// scales, microbatching) become both the noise standard deviation of each group's
// coordinates and the ledger's sum-query records, so what is drawn and what is recorded
// cannot disagree. With m = SensitivityMultiplier(k) and Delta = m * TotalSensitivity():
//   flat / per_layer / per_layer_dim  group g: noise sigma Delta, record {m C_g, sigma Delta}
//                     (mechanisms::IndependentGroupsNoise);
//   joint             group g: noise sigma Delta s_g, one record {Delta, sigma Delta}
//                     (mechanisms::JointGroupsNoise).
// The records' collapsed noise multiplier (McMahan et al. 2018, eq. (1)) is sigma. With
// sigma = 0 (not private) the standard deviations are 0 and the records are not a valid
// ledger entry (the trainers write no ledger then).
using NoisePlan = mechanisms::SumQueryNoise;
NoisePlan MakeNoisePlan(const ClippingGroups& groups, double noise_multiplier,
                        int64_t microbatch_size);

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_CLIPPING_H_
