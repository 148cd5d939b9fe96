#include "dpkit/optim/torch/dp_embedding.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dpkit/optim/torch/per_example_kernels.h"

namespace dpkit::optim {
namespace {

using per_example_internal::BatchedFrobeniusInner;
using per_example_internal::CheckCapture;
using per_example_internal::FromHandle;
using per_example_internal::ParallelBmm;
using per_example_internal::ToHandle;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& indices,
                               const torch::Tensor& weight, int64_t handle) {
    ctx->saved_data["capture"] = handle;
    FromHandle(handle)->activation = indices;
    return torch::embedding(weight, indices);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    FromHandle(ctx)->backprop = grad_outputs[0];
    return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

DpEmbeddingImpl::DpEmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  TORCH_CHECK(num_embeddings > 0 && embedding_dim > 0, "DpEmbedding: sizes must be > 0");
  weight = register_parameter("weight", torch::randn({num_embeddings, embedding_dim}));
}

torch::Tensor DpEmbeddingImpl::forward(const torch::Tensor& indices) {
  TORCH_CHECK(indices.dim() >= 1 && indices.scalar_type() == torch::kLong, Describe(),
              ": input must be int64 indices of shape (B, ...)");
  ClearCapture();
  if (!torch::GradMode::is_enabled()) return torch::embedding(weight, indices);
  return EmbeddingFunction::apply(indices, weight, ToHandle(&capture_));
}

int64_t DpEmbeddingImpl::CapturedBatchSize() const { return capture_.activation.size(0); }

void DpEmbeddingImpl::AppendSquaredNorms(std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  int64_t batch = capture_.activation.size(0);
  torch::Tensor idx = capture_.activation.reshape({batch, -1});
  torch::Tensor g = capture_.backprop.reshape({batch, -1, embedding_dim_});
  if (idx.size(1) == 1) {
    out->push_back(g.to(torch::kFloat64).pow(2).sum({1, 2}));
    return;
  }
  // Rows used at positions t and s coincide iff x_t = x_s: sum [x_t = x_s] <g_t, g_s>.
  torch::Tensor same = idx.unsqueeze(2).eq(idx.unsqueeze(1)).to(g.scalar_type());
  torch::Tensor gg = ParallelBmm(g, g.transpose(1, 2));
  out->push_back(BatchedFrobeniusInner(same, gg));
}

std::vector<torch::Tensor> DpEmbeddingImpl::PerExampleGradients() {
  CheckCapture(*this);
  int64_t batch = capture_.activation.size(0);
  torch::Tensor idx = capture_.activation.reshape({batch, -1});
  torch::Tensor g = capture_.backprop.reshape({-1, embedding_dim_});
  torch::Tensor rows =
      (idx + torch::arange(batch, idx.options()).view({batch, 1}) * num_embeddings_).flatten();
  return {torch::zeros({batch * num_embeddings_, embedding_dim_}, g.options())
              .index_add_(0, rows, g)
              .view({batch, num_embeddings_, embedding_dim_})};
}

void DpEmbeddingImpl::AppendMicrobatchSquaredNorms(const torch::Tensor& microbatches,
                                                   std::vector<torch::Tensor>* out) {
  CheckCapture(*this);
  const int64_t batch = capture_.activation.size(0), m = microbatches.size(0);
  const torch::Device device = capture_.backprop.device();
  // A microbatch's gradient has one non-zero row per distinct index it uses, the sum of
  // the backprops at those positions: ||sum_i G_i||^2 = sum_{(j, row)} ||sum_t g_t||^2.
  // Summing rows per (microbatch, index) key costs O(positions * dim) memory, where the
  // Gram form of Li et al. 2021, Sec. 4.2, would need (n T)^2 per microbatch.
  torch::Tensor members = microbatches.flatten().to(device);
  torch::Tensor owner = torch::arange(m, members.options()).repeat_interleave(microbatches.size(1));
  torch::Tensor real = members.lt(batch);
  torch::Tensor microbatch_of_example = torch::zeros({batch}, members.options())
                                            .index_put_({members.index({real})}, owner.index({real}));
  torch::Tensor idx = capture_.activation.reshape({batch, -1});
  torch::Tensor key = (microbatch_of_example.view({batch, 1}) * num_embeddings_ + idx).flatten();
  auto [unique_keys, inverse] = torch::_unique(key, /*sorted=*/false, /*return_inverse=*/true);
  torch::Tensor g = capture_.backprop.reshape({-1, embedding_dim_});
  torch::Tensor rows = torch::zeros({unique_keys.size(0), embedding_dim_}, g.options())
                           .index_add_(0, inverse.flatten(), g);
  out->push_back(torch::zeros({m}, rows.options().dtype(torch::kFloat64))
                     .index_add_(0, unique_keys.div(num_embeddings_, "floor"),
                                 rows.to(torch::kFloat64).pow(2).sum(1)));
}

void DpEmbeddingImpl::AddScaledGradientSums(const std::vector<torch::Tensor>& scales,
                                            std::vector<torch::Tensor>* sums) {
  CheckCapture(*this);
  TORCH_CHECK(scales.size() == 1 && sums->size() == 1, Describe(),
              ": expected 1 scale vector and 1 sum");
  int64_t batch = capture_.activation.size(0);
  torch::Tensor idx = capture_.activation.reshape({batch, -1});
  torch::Tensor g = capture_.backprop.reshape({batch, -1, embedding_dim_});
  torch::Tensor gs = g * scales[0].to(g.scalar_type()).view({batch, 1, 1});
  // Only the rows used by the batch are touched; no table-sized temporary.
  (*sums)[0].index_add_(0, idx.flatten(), gs.reshape({-1, embedding_dim_}));
}

std::string DpEmbeddingImpl::Describe() const {
  return absl::StrCat("DpEmbedding(", num_embeddings_, ", ", embedding_dim_, ")");
}

}  // namespace dpkit::optim
