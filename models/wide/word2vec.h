// word2vec CBOW with negative sampling (Mikolov et al. 2013), the model of Zhang,
// Mironov & Hejazinia 2021, Sec. 6.1, framework-free with per-example sparse gradients.
//
// Parameters: one table of 2V rows of dimension d: rows [0, V) are the input (context)
// embeddings u_v, rows [V, 2V) the output embeddings w_v. For a sample with context
// c_1..c_m and target t, h = (1/m) sum_j u_{c_j} and, with negatives n_1..n_K,
//   loss = -log sigmoid(w_t . h) - sum_k log sigmoid(-w_{n_k} . h)      (their Sec. 6.1)
// One example's gradient touches at most m + 1 + K rows, so it is a SparseRowGradient
// for optim/sparse. Negatives are drawn uniformly from the vocabulary (a data-independent
// distribution, so the sampling itself reveals nothing about the training data).
#ifndef DPKIT_MODELS_WIDE_WORD2VEC_H_
#define DPKIT_MODELS_WIDE_WORD2VEC_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "dpkit/models/wide/brown_corpus.h"
#include "dpkit/optim/sparse/sparse_dp_sgd.h"

namespace dpkit::models::wide {

class Word2Vec {
 public:
  // Random initialisation of u and w, i.i.d. U(-1/sqrt(d), 1/sqrt(d)), from `seed` (both
  // non-zero, so that the first DP steps already see gradients on every row kind).
  Word2Vec(int32_t vocabulary_size, int32_t dim, uint64_t seed);

  int32_t vocabulary_size() const { return vocabulary_size_; }
  int32_t dim() const { return dim_; }
  int64_t num_rows() const { return 2 * static_cast<int64_t>(vocabulary_size_); }
  std::vector<float>& table() { return table_; }
  const std::vector<float>& table() const { return table_; }

  // Loss of one sample with the given negatives (their Sec. 6.1).
  double Loss(const CbowSample& sample, absl::Span<const int32_t> negatives) const;

  // Loss and gradient of one sample, the gradient as distinct rows of the table.
  double LossAndGradient(const CbowSample& sample, absl::Span<const int32_t> negatives,
                         optim::sparse::SparseRowGradient* gradient) const;

  // Log-perplexity of `target` given `context` under the model's full softmax over the
  // output embeddings: -log softmax(w . h)_target, in nats (for the memorization audit,
  // Carlini et al. 2019, Sec. 3: log-perplexity of a sequence under the model).
  double LogPerplexity(absl::Span<const int32_t> context, int32_t target) const;

 private:
  void ContextMean(absl::Span<const int32_t> context, std::vector<double>* h) const;
  const float* Row(int64_t r) const { return table_.data() + r * dim_; }

  int32_t vocabulary_size_;
  int32_t dim_;
  std::vector<float> table_;
};

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_WORD2VEC_H_
