#include "dpkit/models/wide/word2vec.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/container/flat_hash_map.h"

namespace dpkit::models::wide {
namespace {

// log sigmoid(x), stable for large |x|.
double LogSigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }
double Sigmoid(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }

}  // namespace

Word2Vec::Word2Vec(int32_t vocabulary_size, int32_t dim, uint64_t seed)
    : vocabulary_size_(vocabulary_size), dim_(dim),
      table_(static_cast<size_t>(2 * static_cast<int64_t>(vocabulary_size) * dim), 0.0f) {
  std::mt19937_64 engine(seed);  // initialisation only, never noise
  const float bound = 1.0f / std::sqrt(static_cast<float>(dim));
  std::uniform_real_distribution<float> uniform(-bound, bound);
  for (float& x : table_) x = uniform(engine);
}

void Word2Vec::ContextMean(absl::Span<const int32_t> context, std::vector<double>* h) const {
  h->assign(static_cast<size_t>(dim_), 0.0);
  for (int32_t c : context) {
    const float* u = Row(c);
    for (int32_t j = 0; j < dim_; ++j) (*h)[static_cast<size_t>(j)] += u[j];
  }
  for (double& x : *h) x /= static_cast<double>(context.size());
}

double Word2Vec::Loss(const CbowSample& sample, absl::Span<const int32_t> negatives) const {
  std::vector<double> h;
  ContextMean(sample.context, &h);
  auto dot = [&](int32_t word) {
    const float* w = Row(vocabulary_size_ + word);
    double s = 0;
    for (int32_t j = 0; j < dim_; ++j) s += w[j] * h[static_cast<size_t>(j)];
    return s;
  };
  double loss = -LogSigmoid(dot(sample.target));
  for (int32_t n : negatives) loss -= LogSigmoid(-dot(n));
  return loss;
}

double Word2Vec::LossAndGradient(const CbowSample& sample, absl::Span<const int32_t> negatives,
                                 optim::sparse::SparseRowGradient* gradient) const {
  std::vector<double> h;
  ContextMean(sample.context, &h);
  const size_t d = static_cast<size_t>(dim_);
  absl::flat_hash_map<int64_t, size_t> position;
  std::vector<int64_t> rows;
  std::vector<double> values;
  auto accumulate = [&](int64_t row, double scale, const double* v, const float* vf) {
    auto [it, inserted] = position.try_emplace(row, rows.size());
    if (inserted) {
      rows.push_back(row);
      values.resize(values.size() + d, 0.0);
    }
    double* out = values.data() + it->second * d;
    for (size_t j = 0; j < d; ++j) out[j] += scale * (v ? v[j] : vf[j]);
  };
  std::vector<double> dh(d, 0.0);
  double loss = 0;
  // d/dz [-log sigmoid(z)] = sigmoid(z) - 1 for the target; d/dz [-log sigmoid(-z)] =
  // sigmoid(z) for a negative.
  auto term = [&](int32_t word, bool positive) {
    const int64_t row = vocabulary_size_ + word;
    const float* w = Row(row);
    double z = 0;
    for (size_t j = 0; j < d; ++j) z += w[j] * h[j];
    loss -= positive ? LogSigmoid(z) : LogSigmoid(-z);
    const double g = positive ? Sigmoid(z) - 1 : Sigmoid(z);
    accumulate(row, g, h.data(), nullptr);
    for (size_t j = 0; j < d; ++j) dh[j] += g * w[j];
  };
  term(sample.target, true);
  for (int32_t n : negatives) term(n, false);
  const double share = 1.0 / static_cast<double>(sample.context.size());
  for (int32_t c : sample.context) accumulate(c, share, dh.data(), nullptr);
  gradient->rows = std::move(rows);
  gradient->values.assign(values.begin(), values.end());
  return loss;
}

double Word2Vec::LogPerplexity(absl::Span<const int32_t> context, int32_t target) const {
  std::vector<double> h;
  ContextMean(context, &h);
  std::vector<double> logits(static_cast<size_t>(vocabulary_size_));
  for (int32_t v = 0; v < vocabulary_size_; ++v) {
    const float* w = Row(vocabulary_size_ + v);
    double z = 0;
    for (int32_t j = 0; j < dim_; ++j) z += w[j] * h[static_cast<size_t>(j)];
    logits[static_cast<size_t>(v)] = z;
  }
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double z : logits) sum += std::exp(z - max);
  return -(logits[static_cast<size_t>(target)] - max - std::log(sum));
}

}  // namespace dpkit::models::wide
