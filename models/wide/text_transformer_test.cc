// The transformer classifier made private by MakePrivate, checked against ordinary
// autograd run one example at a time on an unconverted twin (same seed, same parameters),
// in float64 with padded reviews: per-example gradient norms of every layer (ghost and
// materialised), and one whole DP-SGD step (clipping, sigma 0) of MakePrivate.
#include "dpkit/models/wide/text_transformer.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "dpkit/optim/torch/make_private.h"
#include "dpkit/optim/torch/per_example_layers.h"
#include "gtest/gtest.h"

namespace dpkit::models::wide {
namespace {

namespace F = torch::nn::functional;

TextTransformerOptions SmallOptions() {
  TextTransformerOptions o;
  o.vocabulary = 20;
  o.length = 7;
  o.dim = 8;
  o.heads = 2;
  o.layers = 2;
  o.hidden = 12;
  return o;
}

// Two identical float64 models: `plain` as written, `converted` after ConvertToPerExample.
struct Twins {
  TextTransformer plain{nullptr}, converted{nullptr};
};
Twins MakeTwins() {
  Twins t;
  torch::manual_seed(3);
  t.plain = TextTransformer(SmallOptions());
  torch::manual_seed(3);
  t.converted = TextTransformer(SmallOptions());
  t.plain->to(torch::kFloat64);
  t.converted->to(torch::kFloat64);
  EXPECT_TRUE(optim::ConvertToPerExample(*t.converted).ok());
  return t;
}

// Reviews padded at the start (id 0) as models/wide/imdb.h pads them; the last is empty.
torch::Tensor Tokens() {
  return torch::tensor({{3, 5, 7, 2, 9, 4, 11},
                        {0, 0, 0, 6, 6, 6, 19},
                        {0, 8, 1, 13, 2, 2, 5},
                        {0, 0, 0, 0, 0, 0, 0}},
                       torch::kLong);
}
torch::Tensor Labels() { return torch::tensor({1, 0, 1, 0}, torch::kLong); }

// Per-example gradients of `plain` by a batch-size-1 autograd loop: name -> (B, *shape).
// The attention projections are DpLinear in both twins (they produce no .grad): theirs are
// the single example's G^T A, the weight gradient autograd's linear backward computes
// (the rule itself is checked against autograd in optim/torch/dp_linear_test.cc).
std::map<std::string, torch::Tensor> LoopGradients(TextTransformer& plain) {
  const torch::Tensor x = Tokens(), y = Labels();
  std::map<std::string, std::vector<torch::Tensor>> rows;
  for (int64_t i = 0; i < x.size(0); ++i) {
    plain->zero_grad();
    F::cross_entropy(plain->forward(x.narrow(0, i, 1)), y.narrow(0, i, 1)).backward();
    std::map<torch::TensorImpl*, torch::Tensor> single;
    for (const auto& m : plain->modules()) {
      if (auto* layer = dynamic_cast<optim::PerExampleLayer*>(m.get())) {
        const std::vector<torch::Tensor> params = layer->DpParameters();
        const std::vector<torch::Tensor> g = layer->PerExampleGradients();
        for (size_t k = 0; k < params.size(); ++k) {
          single[params[k].unsafeGetTensorImpl()] = g[k][0];
        }
      }
    }
    for (const auto& p : plain->named_parameters()) {
      const torch::Tensor& grad = p.value().grad();
      const auto rule = single.find(p.value().unsafeGetTensorImpl());
      EXPECT_NE(grad.defined(), rule != single.end()) << p.key();
      rows[p.key()].push_back(grad.defined() ? grad.clone() : rule->second.clone());
    }
  }
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, r] : rows) out[name] = torch::stack(r);
  return out;
}

torch::Tensor LoopSquaredNorms(const std::map<std::string, torch::Tensor>& grads) {
  torch::Tensor total = torch::zeros({Tokens().size(0)}, torch::kFloat64);
  for (const auto& [name, g] : grads) total += g.pow(2).reshape({g.size(0), -1}).sum(1);
  return total;
}

TEST(TextTransformerTest, ConversionKeepsParametersAndOutputs) {
  torch::manual_seed(3);
  TextTransformer net(SmallOptions());
  std::map<std::string, torch::TensorImpl*> before;
  for (const auto& p : net->named_parameters()) before[p.key()] = p.value().unsafeGetTensorImpl();
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = net->forward(Tokens());
  ASSERT_TRUE(optim::ConvertToPerExample(*net).ok());
  std::map<std::string, torch::TensorImpl*> after;
  for (const auto& p : net->named_parameters()) after[p.key()] = p.value().unsafeGetTensorImpl();
  EXPECT_EQ(after, before);  // the same tensors under the same names
  // 2 blocks x (2 norms, 2 attention projections, 2 feed-forward) + 2 embeddings + final
  // norm + head.
  std::vector<optim::NamedPerExampleLayer> layers;
  ASSERT_TRUE(optim::ValidateForPerExampleGradients(*net, &layers).ok());
  EXPECT_EQ(layers.size(), 16u);
  // LayerNorm applies its affine after the normalisation: equal to float32 rounding.
  EXPECT_TRUE(torch::allclose(net->forward(Tokens()), expected, 1e-5, 1e-6));
}

TEST(TextTransformerTest, PerExampleNormsMatchAnAutogradLoopWithPadding) {
  Twins t = MakeTwins();
  const torch::Tensor expected = LoopSquaredNorms(LoopGradients(t.plain));
  std::vector<optim::NamedPerExampleLayer> layers;
  ASSERT_TRUE(optim::ValidateForPerExampleGradients(*t.converted, &layers).ok());
  for (optim::NormMethod method : {optim::NormMethod::kGhost, optim::NormMethod::kMaterialize}) {
    F::cross_entropy(t.converted->forward(Tokens()), Labels(),
                     F::CrossEntropyFuncOptions().reduction(torch::kSum))
        .backward();
    torch::Tensor total = torch::zeros({Tokens().size(0)}, torch::kFloat64);
    for (const auto& named : layers) {
      named.layer->SetNormMethod(method);
      std::vector<torch::Tensor> norms;
      named.layer->AppendSquaredNorms(&norms);
      for (const torch::Tensor& n : norms) total += n;
    }
    // float64 throughout: 1e-9 relative leaves room for summation order only.
    EXPECT_TRUE(torch::allclose(total, expected, 1e-9, 0)) << total << "\n" << expected;
  }
}

// One MakePrivate step with sigma 0 and q = 1 is theta - lr / B sum_i min(1, C/|g_i|) g_i
// (Abadi et al. 2016, Alg. 1 without noise); C is below some norms and above others.
TEST(TextTransformerTest, MakePrivateStepIsTheClippedMeanOfTheLoopsGradients) {
  Twins t = MakeTwins();
  const std::map<std::string, torch::Tensor> grads = LoopGradients(t.plain);
  const torch::Tensor norms = LoopSquaredNorms(grads).sqrt();
  const double clip = norms.median().item<double>();
  ASSERT_LT(norms.min().item<double>(), clip);
  ASSERT_GT(norms.max().item<double>(), clip);
  const torch::Tensor factors = (clip / norms).clamp_max(1.0);
  const double lr = 0.5;
  const int64_t batch = Tokens().size(0);
  std::map<std::string, torch::Tensor> expected;
  for (const auto& p : t.plain->named_parameters()) {
    const torch::Tensor& g = grads.at(p.key());
    std::vector<int64_t> shape(static_cast<size_t>(g.dim()), 1);
    shape[0] = batch;
    expected[p.key()] = p.value().detach() - lr * (g * factors.view(shape)).sum(0) / batch;
  }
  optim::MakePrivateOptions options;
  options.noise_multiplier = 0;  // clipping only: the step is deterministic
  options.max_grad_norm = clip;
  options.dataset_size = batch;
  options.expected_batch_size = batch;
  auto training = optim::MakePrivate(
      *t.converted, std::make_unique<torch::optim::SGD>(t.converted->parameters(), lr), options);
  ASSERT_TRUE(training.ok()) << training.status();
  F::cross_entropy(t.converted->forward(Tokens()), Labels(),
                   F::CrossEntropyFuncOptions().reduction(torch::kSum))
      .backward();
  ASSERT_TRUE((*training)->Step().ok());
  for (const auto& p : t.converted->named_parameters()) {
    EXPECT_TRUE(torch::allclose(p.value(), expected.at(p.key()), 1e-9, 1e-12)) << p.key();
  }
}

TEST(TextTransformerTest, RefusesTokensOfAnotherLength) {
  TextTransformer net(SmallOptions());
  EXPECT_THROW(net->forward(torch::zeros({2, 5}, torch::kLong)), c10::Error);
}

}  // namespace
}  // namespace dpkit::models::wide
