#include "models/wide/dense_dp_optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "mechanisms/gaussian.h"

namespace dpkit::models::wide {

absl::StatusOr<DenseDpOptimizer> DenseDpOptimizer::Create(const std::string& optimizer,
                                                          int64_t num_params,
                                                          double learning_rate, double clip_norm,
                                                          double noise_multiplier,
                                                          double expected_batch_size) {
  if (optimizer != "sgd" && optimizer != "adam") {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer must be sgd or adam, got ", optimizer));
  }
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (!positive(learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat("learning_rate must be finite and > 0, got ", learning_rate));
  }
  if (!positive(clip_norm)) {
    return absl::InvalidArgumentError(absl::StrCat("clip_norm must be finite and > 0, got ", clip_norm));
  }
  if (!std::isfinite(noise_multiplier) || noise_multiplier < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise_multiplier must be finite and >= 0, got ", noise_multiplier));
  }
  if (!positive(expected_batch_size) || num_params < 1) {
    return absl::InvalidArgumentError("expected_batch_size must be > 0 and num_params >= 1");
  }
  return DenseDpOptimizer(optimizer == "adam", num_params, learning_rate, clip_norm,
                          noise_multiplier, expected_batch_size);
}

void DenseDpOptimizer::Step(absl::Span<const float> per_example, int64_t batch,
                            absl::Span<float> params, mechanisms::RandomGenerator& rng) {
  const size_t n = static_cast<size_t>(num_params_);
  std::fill(gradient_.begin(), gradient_.end(), 0.0);
  for (int64_t e = 0; e < batch; ++e) {
    const float* g = per_example.data() + static_cast<size_t>(e) * n;
    double squared = 0;
    for (size_t i = 0; i < n; ++i) squared += static_cast<double>(g[i]) * g[i];
    const double norm = std::sqrt(squared);
    const double factor = norm > clip_norm_ ? clip_norm_ / norm : 1.0;
    for (size_t i = 0; i < n; ++i) gradient_[i] += factor * g[i];
  }
  StepWithClippedSum(absl::MakeSpan(gradient_), params, rng);
}

void DenseDpOptimizer::StepWithClippedSum(absl::Span<double> clipped_sum,
                                          absl::Span<float> params,
                                          mechanisms::RandomGenerator& rng) {
  const size_t n = static_cast<size_t>(num_params_);
  if (clipped_sum.data() != gradient_.data()) {
    std::copy(clipped_sum.begin(), clipped_sum.end(), gradient_.begin());
  }
  if (noise_multiplier_ > 0) {
    mechanisms::AddGaussian(rng, noise_multiplier_ * clip_norm_, gradient_.data(), n);
  }
  for (double& g : gradient_) g /= expected_batch_size_;
  if (!adam_) {
    for (size_t i = 0; i < n; ++i) params[i] -= static_cast<float>(learning_rate_ * gradient_[i]);
    return;
  }
  // Kingma & Ba 2015, Alg. 1 (beta1 0.9, beta2 0.999, epsilon 1e-8).
  ++t_;
  const double b1 = 0.9, b2 = 0.999;
  const double c1 = 1 - std::pow(b1, static_cast<double>(t_));
  const double c2 = 1 - std::pow(b2, static_cast<double>(t_));
  for (size_t i = 0; i < n; ++i) {
    m_[i] = b1 * m_[i] + (1 - b1) * gradient_[i];
    v_[i] = b2 * v_[i] + (1 - b2) * gradient_[i] * gradient_[i];
    params[i] -= static_cast<float>(learning_rate_ * (m_[i] / c1) / (std::sqrt(v_[i] / c2) + 1e-8));
  }
}

}  // namespace dpkit::models::wide
