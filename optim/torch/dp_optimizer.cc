#include "dpkit/optim/torch/dp_optimizer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/optim/poisson_sampler.h"

namespace dpkit::optim {

absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeTorchOptimizer(
    const std::string& name, std::vector<torch::Tensor> parameters, double learning_rate) {
  if (!(std::isfinite(learning_rate) && learning_rate > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning_rate must be finite and > 0, got ", learning_rate));
  }
  if (name == "sgd") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::SGD>(
        parameters, torch::optim::SGDOptions(learning_rate)));
  }
  if (name == "adam") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::Adam>(
        parameters, torch::optim::AdamOptions(learning_rate)));
  }
  if (name == "adagrad") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::Adagrad>(
        parameters, torch::optim::AdagradOptions(learning_rate)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer must be one of sgd, adam, adagrad, got '", name, "'"));
}

absl::StatusOr<std::unique_ptr<DpOptimizer>> DpOptimizer::Create(
    torch::nn::Module& model, std::unique_ptr<torch::optim::Optimizer> optimizer,
    const DpOptimizerOptions& options,
    std::unique_ptr<mechanisms::RandomGenerator> noise_generator) {
  if (optimizer == nullptr || noise_generator == nullptr) {
    return absl::InvalidArgumentError("optimizer and noise generator must be given");
  }
  if (!(std::isfinite(options.noise_multiplier) && options.noise_multiplier >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noise_multiplier must be finite and >= 0, got ", options.noise_multiplier));
  }
  if (options.microbatch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("microbatch_size must be >= 1, got ", options.microbatch_size));
  }
  if (options.unit_records && options.microbatch_size != 1) {
    return absl::InvalidArgumentError("unit_records needs microbatch_size 1");
  }
  if (!(options.sampling_rate > 0 && options.sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate must be in (0, 1], got ", options.sampling_rate));
  }
  if (!(std::isfinite(options.expected_batch_size) && options.expected_batch_size > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected_batch_size must be finite and > 0, got ", options.expected_batch_size));
  }
  auto dp = std::unique_ptr<DpOptimizer>(new DpOptimizer());
  absl::Status valid = ValidateForPerExampleGradients(model, &dp->layers_);
  if (!valid.ok()) return valid;
  // Each layer's parameter count d_j, for dimensionality-adjusted per-layer clipping.
  std::vector<int64_t> layer_dims;
  for (auto& l : dp->layers_) {
    int64_t d = 0;
    for (const torch::Tensor& p : l.layer->DpParameters()) d += p.numel();
    layer_dims.push_back(d);
  }
  absl::StatusOr<ClippingGroups> groups =
      MakeClippingGroups(options.clipping, options.clip_norm,
                         static_cast<int>(dp->layers_.size()), options.joint_groups,
                         options.joint_scales, layer_dims);
  if (!groups.ok()) return groups.status();
  // Every trainable parameter of the model must be one the optimizer steps and one a
  // layer clips; otherwise it would be updated without privacy.
  int64_t clipped = 0;
  for (auto& l : dp->layers_) clipped += static_cast<int64_t>(l.layer->DpParameters().size());
  int64_t trainable = 0;
  for (const auto& p : model.parameters()) trainable += p.requires_grad() ? 1 : 0;
  if (trainable != clipped) {
    return absl::InvalidArgumentError("model has trainable parameters outside its DP layers");
  }
  dp->optimizer_ = std::move(optimizer);
  dp->options_ = options;
  dp->groups_ = *std::move(groups);
  dp->noise_plan_ = MakeNoisePlan(dp->groups_, options.noise_multiplier, options.microbatch_size);
  dp->noise_ = std::move(noise_generator);
  for (auto& l : dp->layers_) dp->sums_.emplace_back(l.layer->DpParameters().size());
  return dp;
}

void DpOptimizer::EnsureAccumulators() {
  if (accumulators_ready_) return;
  // The parameters' .grad tensors are the step's accumulators: the per-example layers never
  // write them through autograd, so no second parameter-sized buffer is needed. They exist
  // only from the first physical batch to the end of Step() (like torch's
  // zero_grad(set_to_none)), so they do not coexist with the next forward's activations.
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<torch::Tensor> params = layers_[i].layer->DpParameters();
    for (size_t k = 0; k < params.size(); ++k) {
      params[k].mutable_grad() = torch::zeros_like(params[k], torch::MemoryFormat::Contiguous);
      sums_[i][k] = params[k].grad();
    }
  }
  accumulators_ready_ = true;
}

namespace {

// Microbatch j = examples [offset_j, offset_j + n_j) of a physical batch of `batch`
// examples, as (M, n_max) indices padded with `batch` (the layers' padding row).
torch::Tensor MicrobatchIndices(absl::Span<const int64_t> microbatch_sizes, int64_t batch) {
  const int64_t records = static_cast<int64_t>(microbatch_sizes.size());
  const int64_t n_max = *std::max_element(microbatch_sizes.begin(), microbatch_sizes.end());
  torch::Tensor microbatches = torch::full({records, n_max}, batch, torch::kLong);
  auto rows = microbatches.accessor<int64_t, 2>();
  int64_t offset = 0;
  for (int64_t j = 0; j < records; ++j) {
    for (int64_t t = 0; t < microbatch_sizes[j]; ++t) rows[j][t] = offset + t;
    offset += microbatch_sizes[j];
  }
  return microbatches;
}

}  // namespace

absl::StatusOr<int64_t> DpOptimizer::AccumulatePhysicalBatch(
    absl::Span<const int64_t> microbatch_sizes) {
  torch::NoGradGuard no_grad;
  int64_t batch = -1;
  for (auto& l : layers_) {
    if (!l.layer->HasCapture()) continue;
    int64_t b = l.layer->CapturedBatchSize();
    if (batch != -1 && b != batch) {
      return absl::InternalError(absl::StrCat("layer ", l.name, " captured ", b,
                                              " examples, another layer ", batch));
    }
    batch = b;
  }
  // Records of several examples: microbatches, or privacy units (unit_records).
  const bool micro = options_.microbatch_size > 1 || options_.unit_records;
  int64_t sizes_total = 0;
  for (int64_t size : microbatch_sizes) {
    if (size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("microbatch sizes must be >= 1, got ", size));
    }
    sizes_total += size;
  }
  if (!micro && !microbatch_sizes.empty()) {
    return absl::InvalidArgumentError(
        "microbatch sizes given, but microbatch_size is 1 and records are not units");
  }
  if (batch <= 0) {
    if (sizes_total != 0) {
      return absl::InvalidArgumentError("microbatch sizes given for an empty physical batch");
    }
    return 0;
  }
  if (micro && sizes_total != batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "microbatch sizes must sum to the physical batch size ", batch, ", got ", sizes_total));
  }
  const int64_t records = micro ? static_cast<int64_t>(microbatch_sizes.size()) : batch;
  const torch::Tensor microbatches =
      micro ? MicrobatchIndices(microbatch_sizes, batch) : torch::Tensor();
  // Squared norms of each record's gradient sum, per layer (sum over its parameters) and
  // then per group.
  const int num_groups = groups_.num_groups();
  std::vector<torch::Tensor> group_sq(num_groups);
  for (int g = 0; g < num_groups; ++g) group_sq[g] = torch::zeros({records}, torch::kFloat64);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i].layer->HasCapture()) continue;
    std::vector<torch::Tensor> norms;
    if (micro) {
      layers_[i].layer->AppendMicrobatchSquaredNorms(microbatches, &norms);
    } else {
      layers_[i].layer->AppendSquaredNorms(&norms);
    }
    for (const torch::Tensor& n : norms) group_sq[groups_.group_of_layer[i]] += n.cpu();
  }
  // Per record r and group g: the record is the mean (1/n_r) sum_i g_i (n_r = 1 for single
  // examples), its clip factor f_r,g (Abadi et al. 2016, Alg. 1; McMahan et al. 2018,
  // Sec. 3), so each example of r enters the sum with weight f_r,g / n_r.
  std::vector<torch::Tensor> scales(num_groups);
  std::vector<double*> scale_data(num_groups);
  std::vector<const double*> sq_data(num_groups);
  for (int g = 0; g < num_groups; ++g) {
    scales[g] = torch::empty({records}, torch::kFloat64);
    scale_data[g] = scales[g].data_ptr<double>();
    group_sq[g] = group_sq[g].contiguous();
    sq_data[g] = group_sq[g].data_ptr<double>();
  }
  last_norms_.assign(records, 0.0);
  std::vector<double> sq(num_groups), f(num_groups);
  for (int64_t r = 0; r < records; ++r) {
    const double n = micro ? static_cast<double>(microbatch_sizes[r]) : 1.0;
    double total = 0;
    for (int g = 0; g < num_groups; ++g) {
      sq[g] = sq_data[g][r] / (n * n);
      total += sq[g];
    }
    RecordClipFactors(groups_, sq, absl::MakeSpan(f));
    for (int g = 0; g < num_groups; ++g) scale_data[g][r] = f[g] / n;
    last_norms_[r] = std::sqrt(total);
  }
  if (micro) {
    torch::Tensor repeats = torch::tensor(
        std::vector<int64_t>(microbatch_sizes.begin(), microbatch_sizes.end()), torch::kLong);
    for (int g = 0; g < num_groups; ++g) scales[g] = scales[g].repeat_interleave(repeats);
  }
  EnsureAccumulators();
  for (size_t i = 0; i < layers_.size(); ++i) {
    PerExampleLayer* layer = layers_[i].layer;
    if (!layer->HasCapture()) continue;
    torch::Tensor s = scales[groups_.group_of_layer[i]].to(sums_[i][0].device());
    layer->AddScaledGradientSums(std::vector<torch::Tensor>(sums_[i].size(), s), &sums_[i]);
    layer->ClearCapture();
  }
  examples_ += batch;
  records_ += records;
  return batch;
}

void DpOptimizer::ReleaseAccumulators() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<torch::Tensor> params = layers_[i].layer->DpParameters();
    for (size_t k = 0; k < params.size(); ++k) {
      params[k].mutable_grad() = torch::Tensor();
      sums_[i][k] = torch::Tensor();
    }
  }
  accumulators_ready_ = false;
}

absl::StatusOr<DpStepResult> DpOptimizer::Step(int64_t step) {
  torch::NoGradGuard no_grad;
  const int64_t k = options_.microbatch_size;
  const std::vector<double>& noise_stddevs = noise_plan_.group_noise_stddevs;
  // The fixed denominator: the expected number of records.
  const double denominator = k > 1 ? static_cast<double>(NumMicrobatches(
                                         options_.expected_batch_size, k))
                                   : options_.expected_batch_size;
  EnsureAccumulators();  // an empty logical batch: zero sums, pure noise
  constexpr int64_t kChunk = int64_t{1} << 16;
  if (!noise_chunk_.defined()) noise_chunk_ = torch::empty({kChunk}, torch::kFloat32);
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<torch::Tensor> params = layers_[i].layer->DpParameters();
    const double noise_stddev = noise_stddevs[groups_.group_of_layer[i]];
    for (size_t p = 0; p < params.size(); ++p) {
      torch::Tensor& acc = sums_[i][p];
      if (noise_stddev > 0 && options_.draw_noise) {
        // N(0, noise_stddev^2) per coordinate from the secure generator, drawn on the CPU
        // in chunks (no parameter-sized temporary) and added in place.
        torch::Tensor flat = acc.view({-1});
        for (int64_t start = 0; start < flat.numel(); start += kChunk) {
          const int64_t len = std::min(kChunk, flat.numel() - start);
          mechanisms::FillGaussian(*noise_, noise_stddev, noise_chunk_.data_ptr<float>(),
                                   static_cast<size_t>(len));
          flat.narrow(0, start, len)
              .add_(noise_chunk_.narrow(0, 0, len).to(acc.device(), acc.scalar_type()));
        }
      }
      // Abadi et al. 2016, Alg. 1: g~ = (sum_r clip(g_r) + N(0, sigma^2 Delta^2 I)) / L.
      acc.mul_(1.0 / denominator);
      params[p].mutable_grad() = acc;
    }
  }
  DpStepResult result;
  result.sampling.step = step;
  result.sampling.sampling_rate = options_.sampling_rate;
  result.sampling.queries = noise_plan_.records;
  result.batch_examples = examples_;
  result.records = records_;
  examples_ = records_ = 0;
  // The listener (the engine's ledger append) runs before the update is applied.
  if (listener_) {
    absl::Status heard = listener_(result.sampling);
    if (!heard.ok()) {
      ReleaseAccumulators();
      return heard;
    }
  }
  optimizer_->step();
  // Release the accumulators (set the gradients to none) until the next physical batch.
  ReleaseAccumulators();
  return result;
}

}  // namespace dpkit::optim
