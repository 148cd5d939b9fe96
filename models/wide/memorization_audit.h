// Memorization audit of Carlini et al. 2019 ("The Secret Sharer"), as used by Zhang,
// Mironov & Hejazinia 2021, Sec. 6.5 (their Table 2): insert random 3-word canaries
// (a, b, c) into the training data, train, then rank each canary among random
// reference phrases by log-perplexity. Without memorization a canary's rank is uniform;
// the ranks of all canaries, binned into equal bins, are compared with the uniform
// distribution by Pearson's chi-square (the "chi-square distance from uniform") and its
// p-value. A small p-value means the model ranks its canaries unusually high:
// memorization.
//
// Out-of-training baseline (Zhang, Mironov & Hejazinia 2021, Table 2): as many further
// random phrases ("held-out canaries") drawn like the canaries but never inserted are
// ranked the same way; the inserted canaries' rank histogram is compared with theirs by
// Pearson's chi-square test of homogeneity, so the baseline is what the same model does
// with phrases it never saw. Exposure (Carlini et al. 2019, Def. 4) summarises a rank:
// log2(number of candidates) - log2(1-based rank).
//
// For CBOW a canary (a, b, c) is the training sample "target b in context (a, c)"; its
// log-perplexity is -log P(b | a, c) under the model's softmax (Word2Vec::LogPerplexity).
#ifndef DPKIT_MODELS_WIDE_MEMORIZATION_AUDIT_H_
#define DPKIT_MODELS_WIDE_MEMORIZATION_AUDIT_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "dpkit/models/wide/brown_corpus.h"
#include "dpkit/models/wide/word2vec.h"

namespace dpkit::models::wide {

struct Phrase {
  int32_t first, middle, last;
};

// `count` phrases of words drawn uniformly from [0, vocabulary_size).
std::vector<Phrase> RandomPhrases(int32_t vocabulary_size, int count, std::mt19937_64& engine);

// The CBOW sample of a phrase: target `middle`, context (first, last).
CbowSample PhraseSample(const Phrase& phrase);

// Number of reference phrases with smaller log-perplexity than `canary` (0 = the model
// finds the canary more likely than every reference phrase).
int64_t CanaryRank(const Word2Vec& model, const Phrase& canary,
                   const std::vector<double>& reference_log_perplexities);

struct ChiSquareResult {
  double statistic;
  int degrees_of_freedom;
  double p_value;
};

// Pearson's chi-square of `ranks` (each in [0, num_reference]) against the uniform
// distribution on num_reference + 1 positions, binned into `bins` equal bins.
// bins >= 2, ranks non-empty.
absl::StatusOr<ChiSquareResult> UniformRankChiSquare(const std::vector<int64_t>& ranks,
                                                     int64_t num_reference, int bins);

// Pearson's chi-square test of homogeneity of two rank samples (each rank in
// [0, num_reference]), both binned into `bins` equal bins of the num_reference + 1
// positions: statistic sum over samples s and non-empty bins b of (O_sb - E_sb)^2 / E_sb
// with E_sb = n_s (O_1b + O_2b) / (n_1 + n_2); degrees of freedom (non-empty bins - 1), at
// least 1. bins >= 2, both samples non-empty.
absl::StatusOr<ChiSquareResult> TwoSampleRankChiSquare(const std::vector<int64_t>& ranks,
                                                       const std::vector<int64_t>& baseline,
                                                       int64_t num_reference, int bins);

// Exposure of a canary of rank `rank` (0 = more likely than every reference phrase) among
// num_reference reference phrases: log2(num_reference + 1) - log2(rank + 1) (Carlini et al.
// 2019, Def. 4, the candidates being the canary and the reference phrases).
double Exposure(int64_t rank, int64_t num_reference);

}  // namespace dpkit::models::wide

#endif  // DPKIT_MODELS_WIDE_MEMORIZATION_AUDIT_H_
