#include "dpkit/models/dp_step_options.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dpkit/models/train_metrics.h"
#include "dpkit/optim/torch/per_example_layers.h"

ABSL_FLAG(std::string, clipping, "flat",
          "per-example clipping: flat | per_layer | joint | per_layer_dim (per-layer clip "
          "norms C_j = C sqrt(d_j / D), d_j the layer's parameter count; McMahan et al. 2018)");
ABSL_FLAG(std::string, clipping_groups, "",
          "--clipping=joint: ';'-separated groups of ','-separated layer names, e.g. "
          "'conv1,conv2;fc1,fc2' (default: one group per layer)");
ABSL_FLAG(std::string, clipping_scales, "",
          "--clipping=joint: ','-separated scale s_g > 0 per group; the record is clipped so "
          "that sqrt(sum_g ||g_g||^2 / s_g^2) <= C and group g gets noise sigma C s_g");
ABSL_FLAG(int64_t, microbatch_size, 1,
          "a clipped record is the average gradient of a microbatch of this many examples "
          "(expected); 1 = per-example clipping. Sensitivity 2C when > 1 (noise doubles)");
ABSL_FLAG(std::string, sampler, "poisson",
          "poisson (covered by the accountants) | fixed_size (a uniformly random subset of "
          "exactly batch_size examples per step; covered under replace-one adjacency) | "
          "shuffled (fixed-size shuffled batches: NOT covered, no epsilon is reported)");
ABSL_FLAG(std::string, privacy_unit, "example",
          "example | user: user-level DP (McMahan et al. 2018): Poisson-sample users at rate "
          "batch_size / #users, clip each sampled user's mean gradient to C; epsilon is "
          "per user");
ABSL_FLAG(std::string, user_ids, "",
          "--privacy_unit=user for models without a user column: file with one integer user "
          "id per line, line i for training example i");
ABSL_FLAG(int64_t, physical_batch_size, 0,
          "largest number of examples per forward/backward (a logical Poisson batch is "
          "split into physical batches; the privacy analysis is unchanged); when not given, "
          "the model's: 512 for the MNIST family, 2048 for adult, imdb, movielens");

namespace dpkit::models {
namespace {

std::string Flag(const TrainOptions& o, const std::string& name, const std::string& dflt) {
  const auto it = o.extra_flags.find(name);
  return it == o.extra_flags.end() ? dflt : it->second;
}

// --clipping_groups / --clipping_scales for the model's per-example layers `layers`.
absl::Status ParseJointClipping(const std::vector<optim::NamedPerExampleLayer>& layers,
                                const std::string& groups_text, const std::string& scales_text,
                                optim::DpOptimizerOptions* options) {
  std::vector<std::string> names;
  for (const auto& l : layers) names.push_back(l.name);
  const std::string known = absl::StrJoin(names, ", ");
  options->joint_groups.clear();
  if (groups_text.empty()) {
    for (size_t l = 0; l < layers.size(); ++l) options->joint_groups.push_back({static_cast<int>(l)});
  } else {
    for (absl::string_view group : absl::StrSplit(groups_text, ';')) {
      std::vector<int> members;
      for (absl::string_view name : absl::StrSplit(group, ',', absl::SkipWhitespace())) {
        auto it = std::find(names.begin(), names.end(), std::string(name));
        if (it == names.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--clipping_groups: unknown layer '", name, "' (layers: ", known, ")"));
        }
        members.push_back(static_cast<int>(it - names.begin()));
      }
      options->joint_groups.push_back(members);
    }
  }
  if (scales_text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--clipping=joint needs --clipping_scales: one scale > 0 per group (",
        options->joint_groups.size(), " groups; layers: ", known, ")"));
  }
  options->joint_scales.clear();
  for (absl::string_view text : absl::StrSplit(scales_text, ',')) {
    double scale = 0;
    if (!absl::SimpleAtod(text, &scale) || !std::isfinite(scale) || scale <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--clipping_scales must be finite numbers > 0, got '", text, "'"));
    }
    options->joint_scales.push_back(scale);
  }
  if (options->joint_scales.size() != options->joint_groups.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--clipping_scales must give one scale per clipping group (", options->joint_groups.size(),
        "), got ", options->joint_scales.size()));
  }
  std::vector<int> uses(layers.size(), 0);
  for (const auto& group : options->joint_groups) {
    for (int l : group) ++uses[l];
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    if (uses[l] != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--clipping_groups: layer '", names[l], "' is in ", uses[l],
          " groups; each layer must be in exactly one (layers: ", known, ")"));
    }
  }
  // Anything else the validating factory rejects.
  absl::StatusOr<optim::ClippingGroups> check = optim::MakeClippingGroups(
      optim::ClippingMode::kJoint, options->clip_norm, static_cast<int>(layers.size()),
      options->joint_groups, options->joint_scales);
  if (!check.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--clipping_groups: ", check.status().message(), " (layers: ", known, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

const char kShuffledNote[] =
    "not certified: --sampler=shuffled draws fixed-size shuffled batches, which the "
    "Poisson-subsampling accountants do not cover (use --sampler=poisson for a certified "
    "epsilon)";

std::vector<std::string> DpStepFlagNames() {
  std::vector<std::string> names = {"clipping",  "clipping_groups", "clipping_scales",
                                    "microbatch_size", "physical_batch_size", "sampler",
                                    "privacy_unit", "user_ids"};
  for (std::string& name : TrainMetricsFlagNames()) names.push_back(std::move(name));
  return names;
}

absl::StatusOr<DpStepOptions> ParseDpStepOptions(const TrainOptions& o, int64_t batch_size,
                                                 int64_t default_physical_batch_size) {
  DpStepOptions step;
  step.clipping_name = Flag(o, "clipping", "flat");
  absl::StatusOr<optim::ClippingMode> clipping = optim::ParseClippingMode(step.clipping_name);
  if (!clipping.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--clipping must be flat, per_layer, joint or per_layer_dim, got '",
                     step.clipping_name, "'"));
  }
  step.clipping = *clipping;
  step.clipping_groups = Flag(o, "clipping_groups", "");
  step.clipping_scales = Flag(o, "clipping_scales", "");
  if (step.clipping != optim::ClippingMode::kJoint &&
      (!step.clipping_groups.empty() || !step.clipping_scales.empty())) {
    return absl::InvalidArgumentError(
        "--clipping_groups and --clipping_scales need --clipping=joint");
  }
  // Through `dpkit train` an extra flag always carries a value (its default when not
  // given); only a given --physical_batch_size overrides the model's default.
  step.physical_batch_size = default_physical_batch_size;
  if (o.given_flags.count("physical_batch_size")) {
    const std::string text = Flag(o, "physical_batch_size", "");
    if (!absl::SimpleAtoi(text, &step.physical_batch_size) || step.physical_batch_size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--physical_batch_size must be an integer >= 1, got '", text, "'"));
    }
  }
  const std::string microbatch_text = Flag(o, "microbatch_size", "1");
  if (!absl::SimpleAtoi(microbatch_text, &step.microbatch_size) || step.microbatch_size < 1 ||
      step.microbatch_size > batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("--microbatch_size must be in [1, batch_size = ",
                                                   batch_size, "], got ", microbatch_text));
  }
  step.sampler = Flag(o, "sampler", "poisson");
  if (step.sampler != "poisson" && step.sampler != "shuffled" && step.sampler != "fixed_size") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sampler must be poisson, fixed_size or shuffled, got '", step.sampler, "'"));
  }
  if (step.shuffled() && o.target_epsilon) {
    return absl::InvalidArgumentError(
        "--target_epsilon needs --sampler=poisson or fixed_size: shuffled batches are not "
        "accounted");
  }
  if (step.fixed_size() && step.microbatch_size > 1) {
    return absl::InvalidArgumentError("--sampler=fixed_size needs --microbatch_size=1");
  }
  step.privacy_unit = Flag(o, "privacy_unit", "example");
  if (step.privacy_unit != "example" && step.privacy_unit != "user") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--privacy_unit must be example or user, got '", step.privacy_unit, "'"));
  }
  step.user_ids = Flag(o, "user_ids", "");
  if (!step.user_level() && !step.user_ids.empty()) {
    return absl::InvalidArgumentError("--user_ids needs --privacy_unit=user");
  }
  if (step.user_level() && (step.sampler != "poisson" || step.microbatch_size > 1)) {
    return absl::InvalidArgumentError(
        "--privacy_unit=user needs --sampler=poisson and --microbatch_size=1 (the users are "
        "Poisson sampled; each user's examples are one record)");
  }
  return step;
}

absl::Status ApplyDpStepOptions(const DpStepOptions& step, torch::nn::Module& model,
                                optim::DpOptimizerOptions* dp_options) {
  dp_options->clipping = step.clipping;
  dp_options->microbatch_size = step.microbatch_size;
  dp_options->unit_records = step.user_level();
  if (step.clipping != optim::ClippingMode::kJoint) return absl::OkStatus();
  std::vector<optim::NamedPerExampleLayer> layers;
  absl::Status valid = optim::ValidateForPerExampleGradients(model, &layers);
  if (!valid.ok()) return valid;
  return ParseJointClipping(layers, step.clipping_groups, step.clipping_scales, dp_options);
}

}  // namespace dpkit::models
