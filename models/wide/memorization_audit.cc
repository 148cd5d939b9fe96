#include "dpkit/models/wide/memorization_audit.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "boost/math/distributions/chi_squared.hpp"

namespace dpkit::models::wide {

std::vector<Phrase> RandomPhrases(int32_t vocabulary_size, int count, std::mt19937_64& engine) {
  std::uniform_int_distribution<int32_t> word(0, vocabulary_size - 1);
  std::vector<Phrase> phrases(static_cast<size_t>(count));
  for (Phrase& p : phrases) p = {word(engine), word(engine), word(engine)};
  return phrases;
}

CbowSample PhraseSample(const Phrase& phrase) { return {phrase.middle, {phrase.first, phrase.last}}; }

int64_t CanaryRank(const Word2Vec& model, const Phrase& canary,
                   const std::vector<double>& reference_log_perplexities) {
  const double own = model.LogPerplexity(std::vector<int32_t>{canary.first, canary.last},
                                         canary.middle);
  return std::count_if(reference_log_perplexities.begin(), reference_log_perplexities.end(),
                       [own](double x) { return x < own; });
}

absl::StatusOr<ChiSquareResult> UniformRankChiSquare(const std::vector<int64_t>& ranks,
                                                     int64_t num_reference, int bins) {
  if (bins < 2 || ranks.empty() || num_reference < bins) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need bins >= 2, ranks non-empty and num_reference >= bins; got bins ", bins, ", ",
        ranks.size(), " ranks, ", num_reference, " reference phrases"));
  }
  // Positions 0..n (n + 1 of them); bin b holds positions [b (n+1) / B, (b+1) (n+1) / B).
  const int64_t positions = num_reference + 1;
  std::vector<double> observed(static_cast<size_t>(bins), 0.0), expected(static_cast<size_t>(bins));
  for (int b = 0; b < bins; ++b) {
    const int64_t lo = b * positions / bins, hi = (b + 1) * positions / bins;
    expected[static_cast<size_t>(b)] =
        static_cast<double>(ranks.size()) * static_cast<double>(hi - lo) / static_cast<double>(positions);
  }
  for (int64_t r : ranks) {
    if (r < 0 || r > num_reference) {
      return absl::InvalidArgumentError(absl::StrCat("rank must be in [0, ", num_reference, "], got ", r));
    }
    observed[static_cast<size_t>(std::min<int64_t>(bins - 1, r * bins / positions))] += 1;
  }
  ChiSquareResult result{0, bins - 1, 1};
  for (int b = 0; b < bins; ++b) {
    const double diff = observed[static_cast<size_t>(b)] - expected[static_cast<size_t>(b)];
    result.statistic += diff * diff / expected[static_cast<size_t>(b)];
  }
  result.p_value = boost::math::cdf(
      boost::math::complement(boost::math::chi_squared(result.degrees_of_freedom), result.statistic));
  return result;
}

absl::StatusOr<ChiSquareResult> TwoSampleRankChiSquare(const std::vector<int64_t>& ranks,
                                                       const std::vector<int64_t>& baseline,
                                                       int64_t num_reference, int bins) {
  if (bins < 2 || ranks.empty() || baseline.empty() || num_reference < bins) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need bins >= 2, both rank samples non-empty and num_reference >= bins; got bins ",
        bins, ", ", ranks.size(), " and ", baseline.size(), " ranks, ", num_reference,
        " reference phrases"));
  }
  const int64_t positions = num_reference + 1;
  std::vector<std::vector<double>> observed(2, std::vector<double>(static_cast<size_t>(bins)));
  const std::vector<int64_t>* samples[2] = {&ranks, &baseline};
  for (int s = 0; s < 2; ++s) {
    for (int64_t r : *samples[s]) {
      if (r < 0 || r > num_reference) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank must be in [0, ", num_reference, "], got ", r));
      }
      observed[s][static_cast<size_t>(std::min<int64_t>(bins - 1, r * bins / positions))] += 1;
    }
  }
  const double n[2] = {static_cast<double>(ranks.size()), static_cast<double>(baseline.size())};
  ChiSquareResult result{0, -1, 1};
  for (size_t b = 0; b < static_cast<size_t>(bins); ++b) {
    const double column = observed[0][b] + observed[1][b];
    if (column == 0) continue;
    ++result.degrees_of_freedom;
    for (int s = 0; s < 2; ++s) {
      const double expected = n[s] * column / (n[0] + n[1]);
      const double diff = observed[s][b] - expected;
      result.statistic += diff * diff / expected;
    }
  }
  result.degrees_of_freedom = std::max(1, result.degrees_of_freedom);
  result.p_value = boost::math::cdf(boost::math::complement(
      boost::math::chi_squared(result.degrees_of_freedom), result.statistic));
  return result;
}

double Exposure(int64_t rank, int64_t num_reference) {
  return std::log2(static_cast<double>(num_reference + 1)) -
         std::log2(static_cast<double>(rank + 1));
}

}  // namespace dpkit::models::wide
