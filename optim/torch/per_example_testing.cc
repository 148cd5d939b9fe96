#include "dpkit/optim/torch/per_example_testing.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace dpkit::optim {
namespace F = torch::nn::functional;

double RelativeError(const torch::Tensor& actual, const torch::Tensor& expected) {
  double scale = expected.abs().max().item<double>();
  double diff = (actual.to(torch::kFloat64) - expected.to(torch::kFloat64)).abs().max()
                    .item<double>();
  return scale > 0 ? diff / scale : diff;
}

torch::Tensor PerExampleLoss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().reduction(torch::kNone));
}

void CheckAgainstLoop(TestModel& model, const torch::Tensor& inputs, const torch::Tensor& labels) {
  std::vector<NamedPerExampleLayer> layers;
  ASSERT_TRUE(ValidateForPerExampleGradients(*model.module, &layers).ok());
  int64_t batch = inputs.size(0);
  PerExampleLoss(model.forward(inputs), labels).sum().backward();

  std::vector<torch::Tensor> params;
  for (auto& l : layers) {
    for (auto& p : l.layer->DpParameters()) params.push_back(p);
  }
  // Reference: ordinary autograd, one example at a time.
  std::vector<std::vector<torch::Tensor>> expected(params.size());
  for (int64_t i = 0; i < batch; ++i) {
    torch::Tensor loss =
        PerExampleLoss(model.reference(inputs.narrow(0, i, 1)), labels.narrow(0, i, 1)).sum();
    std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, params);
    for (size_t p = 0; p < params.size(); ++p) expected[p].push_back(grads[p]);
  }
  torch::manual_seed(7);
  size_t p = 0;
  for (auto& l : layers) {
    std::vector<torch::Tensor> per = l.layer->PerExampleGradients();
    std::vector<torch::Tensor> scales;
    for (size_t k = 0; k < per.size(); ++k) scales.push_back(torch::rand({batch}, torch::kFloat64));
    std::vector<std::vector<torch::Tensor>> norms_by_method;
    for (NormMethod method : {NormMethod::kGhost, NormMethod::kMaterialize, NormMethod::kAuto}) {
      l.layer->SetNormMethod(method);
      std::vector<torch::Tensor> norms;
      l.layer->AppendSquaredNorms(&norms);
      ASSERT_EQ(norms.size(), per.size());
      std::vector<torch::Tensor> sums = l.layer->ScaledGradientSums(scales);
      for (size_t k = 0; k < per.size(); ++k) {
        torch::Tensor want = torch::stack(expected[p + k]).squeeze(1);
        want = want.view(per[k].sizes());
        torch::Tensor want_norms = want.reshape({batch, -1}).pow(2).sum(1);
        torch::Tensor want_sum =
            (want * scales[k].view({batch}).reshape(
                        [&] { std::vector<int64_t> s(want.dim(), 1); s[0] = batch; return s; }()))
                .sum(0);
        EXPECT_LT(RelativeError(per[k], want), kTolerance) << l.name << " param " << k;
        EXPECT_LT(RelativeError(norms[k], want_norms), kTolerance)
            << l.name << " param " << k << " method " << static_cast<int>(method);
        EXPECT_LT(RelativeError(sums[k], want_sum), kTolerance)
            << l.name << " param " << k << " method " << static_cast<int>(method);
      }
    }
    // Microbatches of uneven sizes whose members are not consecutive: the squared norm of
    // the sum of the loop's gradients over each microbatch's examples.
    std::vector<std::vector<int64_t>> members(3);
    for (int64_t i = 0; i < batch; ++i) members[(i * 2) % 3].push_back(i);
    int64_t n_max = 0;
    for (auto& m : members) n_max = std::max<int64_t>(n_max, m.size());
    torch::Tensor microbatches = torch::full({3, n_max}, batch, torch::kLong);
    for (int64_t j = 0; j < 3; ++j) {
      for (size_t t = 0; t < members[j].size(); ++t) microbatches[j][t] = members[j][t];
    }
    for (NormMethod method : {NormMethod::kGhost, NormMethod::kMaterialize, NormMethod::kAuto}) {
      l.layer->SetNormMethod(method);
      std::vector<torch::Tensor> norms;
      l.layer->AppendMicrobatchSquaredNorms(microbatches, &norms);
      ASSERT_EQ(norms.size(), per.size());
      for (size_t k = 0; k < per.size(); ++k) {
        std::vector<double> want_norms;
        for (const auto& m : members) {
          torch::Tensor sum = torch::zeros_like(expected[p + k][0]);
          for (int64_t i : m) sum += expected[p + k][i];
          want_norms.push_back(sum.pow(2).sum().item<double>());
        }
        EXPECT_LT(RelativeError(norms[k], torch::tensor(want_norms, torch::kFloat64)), kTolerance)
            << l.name << " param " << k << " microbatch norms, method "
            << static_cast<int>(method);
      }
    }
    p += per.size();
  }
}

}  // namespace dpkit::optim
