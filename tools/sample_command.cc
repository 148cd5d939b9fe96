// `dpkit sample MECHANISM`: prints noise samples (or exponential-mechanism choices)
// from the secure generator, one per line, so that anyone can check a mechanism's
// distribution with their own tools.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dpkit/mechanisms/discrete.h"
#include "dpkit/mechanisms/gaussian.h"
#include "dpkit/mechanisms/laplace.h"
#include "dpkit/mechanisms/random.h"
#include "dpkit/mechanisms/selection.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/common_flags.h"

ABSL_FLAG(double, stddev, 0.0, "sample gaussian: standard deviation > 0");
ABSL_FLAG(double, scale, 0.0, "sample laplace / discrete-laplace: scale b > 0");
ABSL_FLAG(double, sigma, 0.0, "sample discrete-gaussian: sigma in (0, 2^40]");
ABSL_FLAG(int64_t, count, 1, "sample: number of samples to print (1 to 1e9)");
ABSL_FLAG(std::string, scores, "", "sample exponential: comma-separated finite scores");
ABSL_FLAG(double, sensitivity, 1.0, "sample exponential: score sensitivity > 0");

namespace dpkit::tools {
namespace {

using mechanisms::RandomGenerator;

const std::vector<std::string> kMechanisms = {"gaussian", "laplace", "discrete-gaussian",
                                              "discrete-laplace", "exponential"};

// Flags each mechanism reads (besides --count).
std::vector<std::string> FlagsOf(const std::string& mechanism) {
  if (mechanism == "gaussian") return {"stddev"};
  if (mechanism == "laplace" || mechanism == "discrete-laplace") return {"scale"};
  if (mechanism == "discrete-gaussian") return {"sigma"};
  return {"scores", "epsilon", "sensitivity"};
}

// Buffered line output: one value per line.
class LineWriter {
 public:
  ~LineWriter() { Flush(); }
  void Add(const std::string& line) {
    buffer_ += line;
    buffer_ += '\n';
    if (buffer_.size() > (1 << 16)) Flush();
  }
  void Flush() {
    std::fwrite(buffer_.data(), 1, buffer_.size(), stdout);
    buffer_.clear();
  }

 private:
  std::string buffer_;
};

absl::StatusOr<std::vector<double>> ParseScores(const std::string& text) {
  std::vector<double> scores;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double value = 0;
    if (!absl::SimpleAtod(part, &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--scores must be a comma-separated list of finite numbers, got '", part, "'"));
    }
    scores.push_back(value);
  }
  return scores;
}

// Every parameter flag of `mechanism` is given (--sensitivity is optional) and no other.
absl::Status CheckMechanismFlags(const std::string& mechanism) {
  const std::vector<std::string> used = FlagsOf(mechanism);
  for (const std::string flag : {"stddev", "scale", "sigma", "scores", "epsilon",
                                 "sensitivity"}) {
    const bool is_used = std::find(used.begin(), used.end(), flag) != used.end();
    if (FlagGiven(flag) && !is_used) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " does not apply to 'dpkit sample ", mechanism, "'"));
    }
    if (!FlagGiven(flag) && is_used && flag != "sensitivity") {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " is required for 'dpkit sample ", mechanism, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status RunSample(const CommandContext& context) {
  if (context.args.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected one mechanism (", absl::StrJoin(kMechanisms, ", "), "), got ",
        context.args.size(), " arguments"));
  }
  const std::string mechanism = context.args[0];
  if (std::find(kMechanisms.begin(), kMechanisms.end(), mechanism) == kMechanisms.end()) {
    return absl::InvalidArgumentError(absl::StrCat("mechanism must be one of ",
                                                   absl::StrJoin(kMechanisms, ", "),
                                                   "; got '", mechanism, "'"));
  }
  RETURN_IF_ERROR(CheckMechanismFlags(mechanism));
  const int64_t count = absl::GetFlag(FLAGS_count);
  if (count < 1 || count > 1000000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--count must be an integer in [1, 1000000000], got ", count));
  }

  // Validate every parameter before touching the generator.
  std::unique_ptr<mechanisms::DiscreteGaussianSampler> discrete_gaussian;
  std::unique_ptr<mechanisms::DiscreteLaplaceSampler> discrete_laplace;
  std::unique_ptr<mechanisms::PrivateSelection> selection;
  std::vector<double> scores;
  // A sample is at most ~40 stddevs (Gaussian) or ~45 scales (Laplace: b log(1/u) with u
  // >= 2^-64) from 0, so the largest accepted noise, 1e300, can never print as inf.
  constexpr double kMaxNoise = 1e300;
  if (mechanism == "gaussian") {
    if (auto s = CheckPositiveAtMost("stddev", absl::GetFlag(FLAGS_stddev), kMaxNoise);
        !s.ok()) {
      return s;
    }
  } else if (mechanism == "laplace") {
    if (auto s = CheckPositiveAtMost("scale", absl::GetFlag(FLAGS_scale), kMaxNoise); !s.ok()) {
      return s;
    }
  } else if (mechanism == "discrete-gaussian") {
    auto sampler = mechanisms::DiscreteGaussianSampler::Create(absl::GetFlag(FLAGS_sigma));
    if (!sampler.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", sampler.status().message()));
    }
    discrete_gaussian = std::make_unique<mechanisms::DiscreteGaussianSampler>(*sampler);
  } else if (mechanism == "discrete-laplace") {
    auto sampler = mechanisms::DiscreteLaplaceSampler::Create(absl::GetFlag(FLAGS_scale));
    if (!sampler.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", sampler.status().message()));
    }
    discrete_laplace = std::make_unique<mechanisms::DiscreteLaplaceSampler>(*sampler);
  } else {
    auto parsed = ParseScores(absl::GetFlag(FLAGS_scores));
    if (!parsed.ok()) return parsed.status();
    scores = *std::move(parsed);
    if (auto s = CheckFinitePositive("epsilon", absl::GetFlag(FLAGS_epsilon)); !s.ok()) return s;
    if (auto s = CheckFinitePositive("sensitivity", absl::GetFlag(FLAGS_sensitivity)); !s.ok()) {
      return s;
    }
    auto created = mechanisms::PrivateSelection::Create(
        absl::GetFlag(FLAGS_epsilon), absl::GetFlag(FLAGS_sensitivity),
        mechanisms::SelectionSampler::kExponentialGumbel);
    if (!created.ok()) return absl::InvalidArgumentError(created.status().message());
    selection = std::make_unique<mechanisms::PrivateSelection>(*created);
  }

  auto rng_or = mechanisms::SecureRandomGenerator::Create();
  if (!rng_or.ok()) return absl::InternalError(rng_or.status().message());  // exit 1
  RandomGenerator& rng = **rng_or;
  LineWriter out;
  constexpr int64_t kChunk = 4096;
  std::vector<double> values(kChunk);
  for (int64_t done = 0; done < count;) {
    const int64_t m = std::min(kChunk, count - done);
    if (mechanism == "gaussian") {
      mechanisms::FillGaussian(rng, absl::GetFlag(FLAGS_stddev), values.data(), m);
      for (int64_t i = 0; i < m; ++i) out.Add(FormatNumber(values[i]));
    } else if (mechanism == "laplace") {
      mechanisms::FillLaplace(rng, absl::GetFlag(FLAGS_scale), values.data(), m);
      for (int64_t i = 0; i < m; ++i) out.Add(FormatNumber(values[i]));
    } else if (discrete_gaussian) {
      for (int64_t i = 0; i < m; ++i) out.Add(absl::StrCat(discrete_gaussian->Sample(rng)));
    } else if (discrete_laplace) {
      for (int64_t i = 0; i < m; ++i) out.Add(absl::StrCat(discrete_laplace->Sample(rng)));
    } else {
      for (int64_t i = 0; i < m; ++i) {
        auto index = selection->Select(absl::MakeConstSpan(scores), rng);
        if (!index.ok()) return index.status();
        out.Add(absl::StrCat(*index));
      }
    }
    done += m;
  }
  return absl::OkStatus();
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "sample", "print samples of a noise distribution or mechanism, one per line",
    "Mechanisms: gaussian --stddev=S | laplace --scale=B | discrete-gaussian --sigma=S |\n"
    "discrete-laplace --scale=B | exponential --scores=1,2,3 --epsilon=E [--sensitivity=D]\n"
    "(prints the chosen index i, drawn with P(i) proportional to exp(E u_i / (2 D))).\n"
    "All samples come from the secure generator (ChaCha20 keyed by getrandom). Example:\n"
    "  dpkit sample gaussian --stddev=1.5 --count=1000",
    {"stddev", "scale", "sigma", "count", "scores", "epsilon", "sensitivity"},
    &RunSample}));

}  // namespace dpkit::tools
