// NoisyAdam: the Adam update of Bu, Dong, Long, Su 2020 ("Deep Learning with Gaussian
// Differential Privacy"), Algorithm 2, applied to the privatised gradient g~_t that
// DpOptimizer leaves in the parameters' .grad tensors. Unlike torch::optim::Adam (Kingma &
// Ba 2015, Alg. 1), Algorithm 2 has NO bias correction:
//   m_t = beta1 m_{t-1} + (1 - beta1) g~_t           (m_0 = 0)
//   u_t = beta2 u_{t-1} + (1 - beta2) g~_t (.) g~_t  (u_0 = 0)
//   w_t = m_t / (sqrt(u_t) + xi)
//   theta_{t+1} = theta_t - eta w_t
// torch's Adam instead steps by eta (m_t / (1 - beta1^t)) / (sqrt(u_t / (1 - beta2^t)) + xi).
// The update is post-processing of the noisy gradient: privacy is the DP step's alone.
//
// It reuses torch's AdamOptions (lr = eta, betas = (beta1, beta2), eps = xi; weight_decay
// and amsgrad must stay 0 / false: Algorithm 2 has neither) and AdamParamState (exp_avg =
// m_t, exp_avg_sq = u_t, step = t), so its save/load are torch::optim::Adam's.
#ifndef DPKIT_OPTIM_TORCH_NOISY_ADAM_H_
#define DPKIT_OPTIM_TORCH_NOISY_ADAM_H_

#include <vector>

#include <torch/torch.h>

namespace dpkit::optim {

class NoisyAdam : public torch::optim::Adam {
 public:
  // Throws c10::Error (like torch's optimizers) on weight_decay != 0 or amsgrad.
  NoisyAdam(std::vector<torch::Tensor> parameters, torch::optim::AdamOptions options);

  // One step of Algorithm 2 on every parameter with a defined .grad.
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace dpkit::optim

#endif  // DPKIT_OPTIM_TORCH_NOISY_ADAM_H_
