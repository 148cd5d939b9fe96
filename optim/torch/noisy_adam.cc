#include "dpkit/optim/torch/noisy_adam.h"

#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace dpkit::optim {

NoisyAdam::NoisyAdam(std::vector<torch::Tensor> parameters, torch::optim::AdamOptions options)
    : torch::optim::Adam(std::move(parameters), options) {
  TORCH_CHECK(options.weight_decay() == 0, "NoisyAdam has no weight decay (Bu et al. 2020, Alg. 2)");
  TORCH_CHECK(!options.amsgrad(), "NoisyAdam has no AMSGrad variant (Bu et al. 2020, Alg. 2)");
}

torch::Tensor NoisyAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = {};
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    const double beta1 = std::get<0>(options.betas());
    const double beta2 = std::get<1>(options.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = p.grad();
      auto key = c10::guts::to_string(p.unsafeGetTensorImpl());
      auto found = state_.find(key);
      if (found == state_.end()) {
        // Algorithm 2's initial momentum m_0 = 0 and past squared gradient u_0 = 0.
        auto state = std::make_unique<torch::optim::AdamParamState>();
        state->step(0);
        state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        found = state_.emplace(key, std::move(state)).first;
      }
      auto& state = static_cast<torch::optim::AdamParamState&>(*found->second);
      state.step(state.step() + 1);
      torch::Tensor& m = state.exp_avg();
      torch::Tensor& u = state.exp_avg_sq();
      // Bu et al. 2020, Alg. 2: m_t, u_t, w_t = m_t / (sqrt(u_t) + xi), theta -= eta w_t.
      m.mul_(beta1).add_(grad, 1 - beta1);
      u.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      torch::Tensor denominator = u.sqrt().add_(options.eps());
      p.addcdiv_(m, denominator, -options.lr());
    }
  }
  return loss;
}

}  // namespace dpkit::optim
