// Sparse DP-SGD (optim/sparse) against dense DP-SGD on one embedding table.
//
// Setting of issue 7: a 10^6 x 64 float table, a batch of 1,000 examples touching 10
// rows each (~1% of the rows), 1% of the rows (10,000) selected by the exponential
// mechanism. One step of each, same process, secure noise for both:
//   BM_SparseDpSgdStep: clip, score, select, clip, noise on the selected rows, update.
//   BM_DenseDpSgdStep:  clip each example, sum into a dense gradient of the table's
//                       size, noise on every coordinate, update every row.
// The gate (benchmarks/gate/sparse.json) checks the ratio of their real times.
// BM_SparseDpSgdStepRows/R sweeps the table size at the same batch: the sparse step's
// time and memory must not grow with R.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/random_testing.h"
#include "dpkit/optim/sparse/private_selection.h"
#include "dpkit/optim/sparse/sparse_dp_sgd.h"

namespace dpkit::optim::sparse {
namespace {

constexpr int64_t kRows = 1000000;
constexpr int64_t kDim = 64;
constexpr int kBatch = 1000;
constexpr int kRowsPerExample = 10;
constexpr int64_t kSelected = 10000;

std::vector<SparseRowGradient> MakeBatch(int64_t num_rows) {
  mechanisms::SeededRandomGeneratorForTesting rng(42);  // data, not noise
  std::vector<SparseRowGradient> batch(kBatch);
  for (SparseRowGradient& g : batch) {
    while (static_cast<int>(g.rows.size()) < kRowsPerExample) {
      const int64_t row =
          static_cast<int64_t>(mechanisms::UniformUint64Below(rng, static_cast<uint64_t>(num_rows)));
      bool seen = false;
      for (int64_t r : g.rows) seen |= (r == row);
      if (!seen) g.rows.push_back(row);
    }
    g.values.resize(g.rows.size() * kDim);
    for (float& v : g.values) v = static_cast<float>(rng.UniformDouble() - 0.5);
  }
  return batch;
}

std::vector<float>& Table() {
  static auto* table = new std::vector<float>(static_cast<size_t>(kRows * kDim), 0.01f);
  return *table;
}

mechanisms::SecureRandomGenerator& Rng() {
  static auto* rng = mechanisms::SecureRandomGenerator::Create().value().release();
  return *rng;
}

SparseDpSgdOptions Options() {
  SparseDpSgdOptions o;
  o.learning_rate = 0.1;
  o.clip_norm = 1.0;
  o.selection_clip_norm = 1.0;
  o.second_clip_norm = 1.0;
  o.noise_multiplier = 1.0;
  o.sampling_rate = 0.001;
  o.expected_batch_size = kBatch;
  return o;
}

void RunSparse(benchmark::State& state, int64_t num_rows, std::vector<float>& table) {
  const std::vector<SparseRowGradient> batch = MakeBatch(num_rows);
  auto sgd = SparseDpSgd::Create(Options(), num_rows, kDim,
                                 ExponentialTopKSelector::Create(kSelected, 1.0, 1.0).value())
                 .value();
  for (auto _ : state) {
    auto stats = sgd.Step(batch, absl::MakeSpan(table), Rng());
    if (!stats.ok()) state.SkipWithError("step failed");
    benchmark::DoNotOptimize(table.data());
  }
}

void BM_SparseDpSgdStep(benchmark::State& state) { RunSparse(state, kRows, Table()); }
BENCHMARK(BM_SparseDpSgdStep)->Unit(benchmark::kMillisecond);

void BM_SparseDpSgdStepRows(benchmark::State& state) {
  std::vector<float> table(static_cast<size_t>(state.range(0) * kDim), 0.01f);
  RunSparse(state, state.range(0), table);
}
BENCHMARK(BM_SparseDpSgdStepRows)
    ->Arg(100000)
    ->Arg(1000000)
    ->Arg(4000000)
    ->Unit(benchmark::kMillisecond);

void BM_DenseDpSgdStep(benchmark::State& state) {
  const std::vector<SparseRowGradient> batch = MakeBatch(kRows);
  std::vector<float>& table = Table();
  std::vector<float> gradient(table.size());
  const SparseDpSgdOptions o = Options();
  for (auto _ : state) {
    std::memset(gradient.data(), 0, gradient.size() * sizeof(float));
    for (const SparseRowGradient& g : batch) {
      double squared = 0;
      for (float v : g.values) squared += static_cast<double>(v) * v;
      const float factor = static_cast<float>(ClipFactor(std::sqrt(squared), o.clip_norm));
      for (size_t i = 0; i < g.rows.size(); ++i) {
        float* out = gradient.data() + g.rows[i] * kDim;
        const float* in = g.values.data() + i * kDim;
        for (int64_t j = 0; j < kDim; ++j) out[j] += factor * in[j];
      }
    }
    mechanisms::AddGaussian(Rng(), o.noise_multiplier * o.clip_norm, gradient.data(),
                            gradient.size());
    const float scale = static_cast<float>(o.learning_rate / o.expected_batch_size);
    for (size_t i = 0; i < table.size(); ++i) table[i] -= scale * gradient[i];
    benchmark::DoNotOptimize(table.data());
  }
}
BENCHMARK(BM_DenseDpSgdStep)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dpkit::optim::sparse

BENCHMARK_MAIN();
