#include "dpkit/optim/torch/noisy_adam.h"

#include <cmath>
#include <sstream>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace dpkit::optim {
namespace {

constexpr double kLr = 0.01, kBeta1 = 0.9, kBeta2 = 0.999, kXi = 1e-8;

torch::optim::AdamOptions Options() {
  return torch::optim::AdamOptions(kLr).betas({kBeta1, kBeta2}).eps(kXi);
}

const std::vector<double> kTheta0 = {0.5, -1.0, 2.0};
const std::vector<std::vector<double>> kGradients = {{0.1, -0.2, 0.3}, {-0.05, 0.4, 0.0},
                                                     {0.2, 0.2, -0.1}};

// Steps `optimizer` over kGradients from kTheta0 (double tensors) and returns theta after
// each step.
template <typename Optimizer>
std::vector<std::vector<double>> StepThrough(torch::Tensor theta, Optimizer& optimizer) {
  std::vector<std::vector<double>> out;
  for (const auto& g : kGradients) {
    theta.mutable_grad() = torch::tensor(g, torch::kFloat64);
    optimizer.step();
    auto a = theta.accessor<double, 1>();
    out.push_back({a[0], a[1], a[2]});
  }
  return out;
}

// Bu et al. 2020, Algorithm 2, by hand in doubles, coordinate by coordinate.
std::vector<std::vector<double>> Algorithm2ByHand(bool bias_correction) {
  std::vector<double> theta = kTheta0, m(3, 0.0), u(3, 0.0);
  std::vector<std::vector<double>> out;
  for (size_t t = 1; t <= kGradients.size(); ++t) {
    for (int j = 0; j < 3; ++j) {
      const double g = kGradients[t - 1][j];
      m[j] = kBeta1 * m[j] + (1 - kBeta1) * g;
      u[j] = kBeta2 * u[j] + (1 - kBeta2) * g * g;
      double m_used = m[j], u_used = u[j];
      if (bias_correction) {  // Kingma & Ba 2015, Alg. 1 (torch's Adam)
        m_used /= 1 - std::pow(kBeta1, t);
        u_used /= 1 - std::pow(kBeta2, t);
      }
      theta[j] -= kLr * m_used / (std::sqrt(u_used) + kXi);
    }
    out.push_back(theta);
  }
  return out;
}

torch::Tensor Theta0() { return torch::tensor(kTheta0, torch::kFloat64).requires_grad_(true); }

TEST(NoisyAdamTest, StepsEqualAlgorithm2ByHand) {
  torch::Tensor theta = Theta0();
  NoisyAdam noisy({theta}, Options());
  const auto got = StepThrough(theta, noisy);
  const auto want = Algorithm2ByHand(/*bias_correction=*/false);
  for (size_t t = 0; t < want.size(); ++t) {
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(got[t][j], want[t][j], 1e-14) << t << " " << j;
  }
  // First step by hand: m_1 = 0.1 g, u_1 = 0.001 g^2, so theta moves by
  // lr * 0.1 |g| / (sqrt(0.001) |g| + xi) * sign(g), about 0.0316227766 * sign(g).
  EXPECT_NEAR(got[0][0], 0.5 - 0.01 * 0.01 / (std::sqrt(0.001) * 0.1 + 1e-8), 1e-15);
  EXPECT_NEAR(got[0][1], -1.0 + 0.01 * 0.02 / (std::sqrt(0.001) * 0.2 + 1e-8), 1e-15);
  EXPECT_NEAR(got[0][0], 0.5 - 0.0316227766, 2e-7);  // xi shortens the step by 1e-7
}

TEST(NoisyAdamTest, DiffersFromBiasCorrectedAdam) {
  torch::Tensor a = Theta0(), b = Theta0();
  NoisyAdam noisy({a}, Options());
  torch::optim::Adam adam({b}, Options());
  const auto got_noisy = StepThrough(a, noisy);
  const auto got_adam = StepThrough(b, adam);
  const auto want_adam = Algorithm2ByHand(/*bias_correction=*/true);
  for (size_t t = 0; t < want_adam.size(); ++t) {
    for (int j = 0; j < 3; ++j) {
      // The hand computation with bias correction is torch's Adam ...
      EXPECT_NEAR(got_adam[t][j], want_adam[t][j], 1e-14) << t << " " << j;
    }
  }
  // ... and its first step is lr * sign(g), about 1/3.16 of NoisyAdam's.
  EXPECT_NEAR(got_adam[0][0], 0.5 - 0.01, 1e-9);
  EXPECT_GT(std::abs(got_noisy[0][0] - got_adam[0][0]), 0.02);
}

TEST(NoisyAdamTest, SaveLoadContinuesTheSameTrajectory) {
  torch::Tensor a = Theta0();
  NoisyAdam straight({a}, Options());
  const auto want = StepThrough(a, straight);

  torch::Tensor b = Theta0();
  NoisyAdam first({b}, Options());
  b.mutable_grad() = torch::tensor(kGradients[0], torch::kFloat64);
  first.step();
  std::stringstream stream;
  {
    torch::serialize::OutputArchive archive;
    first.save(archive);
    archive.save_to(stream);
  }
  NoisyAdam resumed({b}, Options());
  torch::serialize::InputArchive archive;
  archive.load_from(stream);
  resumed.load(archive);
  for (size_t t = 1; t < kGradients.size(); ++t) {
    b.mutable_grad() = torch::tensor(kGradients[t], torch::kFloat64);
    resumed.step();
  }
  auto got = b.accessor<double, 1>();
  for (int j = 0; j < 3; ++j) EXPECT_DOUBLE_EQ(got[j], want.back()[j]) << j;
}

TEST(NoisyAdamTest, RejectsWeightDecayAndAmsgrad) {
  EXPECT_THROW(NoisyAdam({Theta0()}, Options().weight_decay(0.1)), c10::Error);
  EXPECT_THROW(NoisyAdam({Theta0()}, Options().amsgrad(true)), c10::Error);
}

}  // namespace
}  // namespace dpkit::optim
