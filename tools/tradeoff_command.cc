// `dpkit tradeoff`: the tradeoff curves (type II error β as a function of type I error
// α, Dong, Roth, Su 2019) of DP-SGD, as CSV or a self-contained SVG plot:
//   pld        certified lower envelope from the pessimistic PLD (//accounting:fdp)
//   rdp        certified lower envelope implied by the RDP curve (Asoodeh et al. 2021)
//   approx_dp  f_{ε,δ} at the certified PLD ε for --delta (certified)
//   gdp_clt    G_μ with μ_CLT of Bu et al. 2020, eq. (3.1): APPROXIMATE (exact μ = √T/σ
//              when --sampling_rate is 1)
// Every certified curve lies below the true one: any test has β >= curve(α).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/fdp.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/report_rounding.h"
#include "dpkit/base/files.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/accounting_report.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/common_flags.h"

ABSL_FLAG(std::string, output, "",
          "tradeoff: write to this file (via a temporary file and rename) instead of stdout");
ABSL_FLAG(int64_t, points, 101, "tradeoff: number of alpha values per curve, in [2, 100001]");

namespace dpkit::tools {
namespace {

struct Curve {
  std::string name;   // CSV key
  std::string label;  // legend
  std::string color;
  std::vector<double> beta;  // at the common alphas
  double min_error;  // min over alpha of alpha + beta
  bool approximate;  // the CLT curve: its minimum is no bound
};

// How a curve is drawn in the SVG. Curves may coincide (G_mu over the PLD curve at large
// T), so each has its own dash pattern, and wider ones are drawn first: a curve drawn
// later is thinner and lies on top, and the certified PLD curve is drawn last.
struct CurveStyle {
  const char* dash;  // stroke-dasharray ("none": solid)
  double width;
  double opacity;
  int layer;  // drawing order: lower first
};

CurveStyle StyleOf(const std::string& name) {
  if (name == "gdp_clt") return {"10 5", 5, 0.55, 0};
  if (name == "approx_dp") return {"3 3", 3.5, 0.9, 1};
  if (name == "rdp") return {"9 3 2 3", 2.5, 1, 2};
  return {"none", 1.5, 1, 3};  // pld
}

// Index of the sampled alpha with the smallest alpha + beta: where the curve's minimum
// alpha+beta is marked (the legend states the minimum over all alpha).
size_t MinimumIndex(const std::vector<double>& alphas, const std::vector<double>& beta) {
  size_t best = 0;
  for (size_t i = 1; i < alphas.size(); ++i) {
    if (alphas[i] + beta[i] < alphas[best] + beta[best]) best = i;
  }
  return best;
}

std::string Csv(const std::vector<double>& alphas, const std::vector<Curve>& curves) {
  std::string out = "curve,alpha,beta\n";
  for (const Curve& c : curves) {
    for (size_t i = 0; i < alphas.size(); ++i) {
      absl::StrAppend(&out, c.name, ",", FormatNumber(alphas[i]), ",", FormatNumber(c.beta[i]),
                      "\n");
    }
  }
  return out;
}

std::string Svg(const std::vector<double>& alphas, const std::vector<Curve>& curves,
                const std::string& title) {
  // Plot area: [left, left + size] x [top, top + size], α right, β up.
  const double left = 70, top = 50, size = 500, width = 920, height = 620;
  auto x = [&](double a) { return FormatNumber(std::round((left + size * a) * 100) / 100); };
  auto y = [&](double b) {
    return FormatNumber(std::round((top + size * (1 - b)) * 100) / 100);
  };
  std::string s = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width, "\" height=\"", height,
      "\" viewBox=\"0 0 ", width, " ", height, "\" font-family=\"sans-serif\" font-size=\"13\">\n",
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      "<text x=\"", left, "\" y=\"28\" font-size=\"15\">", title, "</text>\n");
  // Grid, ticks and axes.
  for (int i = 0; i <= 5; ++i) {
    const double t = i / 5.0;
    absl::StrAppend(&s, "<line x1=\"", x(t), "\" y1=\"", y(0), "\" x2=\"", x(t), "\" y2=\"", y(1),
                    "\" stroke=\"#e5e5e5\"/>\n", "<line x1=\"", x(0), "\" y1=\"", y(t),
                    "\" x2=\"", x(1), "\" y2=\"", y(t), "\" stroke=\"#e5e5e5\"/>\n");
    absl::StrAppend(&s, "<text x=\"", x(t), "\" y=\"", top + size + 20,
                    "\" text-anchor=\"middle\">", FormatNumber(t), "</text>\n", "<text x=\"",
                    left - 8, "\" y=\"", y(t), "\" text-anchor=\"end\" dy=\"4\">",
                    FormatNumber(t), "</text>\n");
  }
  absl::StrAppend(&s, "<rect x=\"", left, "\" y=\"", top, "\" width=\"", size, "\" height=\"",
                  size, "\" fill=\"none\" stroke=\"black\"/>\n");
  absl::StrAppend(&s, "<text x=\"", left + size / 2, "\" y=\"", top + size + 42,
                  "\" text-anchor=\"middle\">type I error \u03b1</text>\n",
                  "<text transform=\"translate(22,", top + size / 2,
                  ") rotate(-90)\" text-anchor=\"middle\">type II error \u03b2</text>\n");
  // Perfect privacy: β = 1 − α.
  absl::StrAppend(&s, "<line x1=\"", x(0), "\" y1=\"", y(1), "\" x2=\"", x(1), "\" y2=\"", y(0),
                  "\" stroke=\"#999999\" stroke-dasharray=\"4 4\"/>\n");
  std::vector<const Curve*> drawn;
  for (const Curve& c : curves) drawn.push_back(&c);
  std::stable_sort(drawn.begin(), drawn.end(), [](const Curve* a, const Curve* b) {
    return StyleOf(a->name).layer < StyleOf(b->name).layer;
  });
  for (const Curve* c : drawn) {
    const CurveStyle style = StyleOf(c->name);
    absl::StrAppend(&s, "<polyline class=\"curve-", c->name, "\" fill=\"none\" stroke=\"",
                    c->color, "\" stroke-width=\"", FormatNumber(style.width),
                    "\" stroke-dasharray=\"", style.dash, "\" stroke-opacity=\"",
                    FormatNumber(style.opacity), "\" points=\"");
    for (size_t i = 0; i < alphas.size(); ++i) {
      absl::StrAppend(&s, i == 0 ? "" : " ", x(alphas[i]), ",", y(c->beta[i]));
    }
    absl::StrAppend(&s, "\"/>\n");
  }
  // The minimum alpha+beta point of each curve, on top of all curves.
  for (const Curve* c : drawn) {
    const size_t i = MinimumIndex(alphas, c->beta);
    absl::StrAppend(&s, "<circle class=\"min-", c->name, "\" cx=\"", x(alphas[i]), "\" cy=\"",
                    y(c->beta[i]), "\" r=\"", FormatNumber(3 + StyleOf(c->name).layer),
                    "\" fill=\"", c->approximate ? "white" : c->color, "\" stroke=\"", c->color,
                    "\" stroke-width=\"1.5\"><title>", c->label, ": min \u03b1+\u03b2 at \u03b1 = ",
                    FormatNumber(alphas[i]), "</title></circle>\n");
  }
  // Legend.
  double ly = top + 10;
  for (const Curve& c : curves) {
    const CurveStyle style = StyleOf(c.name);
    absl::StrAppend(&s, "<line x1=\"", left + size + 15, "\" y1=\"", ly, "\" x2=\"",
                    left + size + 40, "\" y2=\"", ly, "\" stroke=\"", c.color,
                    "\" stroke-width=\"", FormatNumber(style.width), "\" stroke-dasharray=\"",
                    style.dash, "\" stroke-opacity=\"", FormatNumber(style.opacity), "\"/>\n",
                    "<text x=\"", left + size + 46, "\" y=\"", ly,
                    "\" dy=\"4\">", c.label, "</text>\n", "<text x=\"", left + size + 46,
                    "\" y=\"", ly + 16, "\" dy=\"4\" font-size=\"11\" fill=\"#555555\">",
                    // A certified curve's minimum error is a lower bound, printed rounded
                    // down; the CLT curve's is an approximation.
                    c.approximate
                        ? "min \u03b1+\u03b2 \u2248 " +
                              accounting::FormatRounded(c.min_error, 4,
                                                        accounting::Rounding::kNearest)
                        : "min \u03b1+\u03b2 \u2265 " + accounting::FormatLowerBound(c.min_error, 4),
                    "</text>\n");
    ly += 42;
  }
  absl::StrAppend(&s, "<text x=\"", left + size + 15, "\" y=\"", ly, "\" font-size=\"11\" ",
                  "fill=\"#555555\">grey dashed: \u03b2 = 1 \u2212 \u03b1 (perfect privacy)</text>\n");
  absl::StrAppend(&s, "<text x=\"", left + size + 15, "\" y=\"", ly + 16, "\" font-size=\"11\" ",
                  "fill=\"#555555\">dots: each curve's min \u03b1+\u03b2 point</text>\n");
  absl::StrAppend(&s, "</svg>\n");
  return s;
}

// The PLD accountant's smallest delta (as accounting::ReportOptions::min_pld_delta).
constexpr double kMinPldDelta = 1e-100;

// mu of the Gaussian curve: exact sqrt(T)/sigma without subsampling (Dong, Roth, Su 2019,
// Cor. 3.3), mu_CLT of Bu et al. 2020, eq. (3.1), otherwise.
absl::StatusOr<double> GaussianCurveMu(const DpSgdParameters& params) {
  double mu = 0;
  if (params.sampling_rate < 1) {
    accounting::Result<double> clt_mu =
        accounting::CltMu(params.sampling_rate, params.noise_multiplier, params.steps);
    // Its message names the parameter ("noise_multiplier 1e-320 is too small: ..."): a flag.
    if (!clt_mu.ok()) return absl::InvalidArgumentError("--" + clt_mu.error());
    mu = *clt_mu;
  } else {
    mu = std::sqrt(static_cast<double>(params.steps)) / params.noise_multiplier;
  }
  if (!std::isfinite(mu)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--noise_multiplier ", FormatNumber(params.noise_multiplier),
        " is far too small: the Gaussian curve's mu overflows a double"));
  }
  return mu;
}

// --format of tradeoff: a table or a plot (no text report).
FlagSpec TradeoffFormatFlag() { return FlagSpec("format", "csv", {"csv", "svg"}); }

absl::Status RunTradeoff(const CommandContext& context) {
  if (!context.args.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", Abbreviate(context.args[0]), "' (all inputs are flags)"));
  }
  const std::string format = absl::GetFlag(FLAGS_format);
  if (absl::Status s = CheckOneOf("format", format, TradeoffFormatFlag().choices); !s.ok()) return s;
  const int64_t points = absl::GetFlag(FLAGS_points);
  if (!(points >= 2 && points <= 100001)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--points must be an integer in [2, 100001], got ", points));
  }
  const std::string output = absl::GetFlag(FLAGS_output);
  if (FlagGiven("output") && output.empty()) {
    return absl::InvalidArgumentError("--output must be a file name, got an empty string");
  }
  absl::StatusOr<DpSgdParameters> params = DpSgdParametersFromFlags();
  if (!params.ok()) return params.status();
  const double delta = absl::GetFlag(FLAGS_delta);
  // The PLD accountant's range of delta (the approx_dp curve is at PLD's epsilon).
  if (absl::Status s = CheckDelta("delta", delta, kMinPldDelta); !s.ok()) return s;
  WarnIfDeltaNotBelowInverseDatasetSize(delta);

  ASSIGN_OR_RETURN(const accounting::Event event,
                   accounting::DpSgdEvent(params->sampling_rate, params->noise_multiplier,
                                          params->steps));
  // mu first: it refuses noise far too small in microseconds, before the PLD curves.
  ASSIGN_OR_RETURN(const double mu, GaussianCurveMu(*params));
  ASSIGN_OR_RETURN(const accounting::TradeoffCurve pld, accounting::PldTradeoffCurve(event));
  ASSIGN_OR_RETURN(const accounting::TradeoffCurve rdp,
                   accounting::RdpTradeoffCurveForEvent(event));
  ASSIGN_OR_RETURN(const accounting::EpsilonBounds eps, accounting::PldEpsilon(event, delta));
  const bool clt = params->sampling_rate < 1;
  std::vector<double> alphas(static_cast<size_t>(points));
  for (int64_t i = 0; i < points; ++i) {
    alphas[static_cast<size_t>(i)] = static_cast<double>(i) / static_cast<double>(points - 1);
  }
  std::vector<Curve> curves;
  auto sample = [&](const accounting::TradeoffCurve& c) {
    std::vector<double> beta;
    for (double a : alphas) beta.push_back(accounting::EvaluateTradeoff(c, a));
    return beta;
  };
  curves.push_back({"pld", "PLD (certified)", "#1f77b4", sample(pld),
                    accounting::MinimumErrorSum(pld), false});
  curves.push_back({"rdp", "RDP-implied (certified)", "#2ca02c", sample(rdp),
                    accounting::MinimumErrorSum(rdp), false});
  std::string approx_label = "f(\u03b5,\u03b4) at PLD \u03b5";
  if (std::isfinite(eps.epsilon_upper)) {
    auto f = accounting::ApproxDpTradeoffCurve(eps.epsilon_upper, delta);
    RETURN_IF_ERROR(f);
    curves.push_back({"approx_dp",
                      absl::StrCat("f(\u03b5,\u03b4), \u03b5 = ",
                                   accounting::FormatUpperBound(eps.epsilon_upper, 5),
                                   " (certified)"),
                      "#ff7f0e", sample(*f), accounting::MinimumErrorSum(*f), false});
  }
  std::vector<double> gdp;
  for (double a : alphas) gdp.push_back(accounting::GaussianTradeoff(mu, a));
  curves.push_back({"gdp_clt",
                    clt ? absl::StrCat("G\u03bc CLT, \u03bc = ",
                                       accounting::FormatRounded(
                                           mu, 5, accounting::Rounding::kNearest),
                                       " (APPROXIMATE)")
                        : absl::StrCat("G\u03bc, \u03bc = ", FormatNumber(mu), " (exact)"),
                    "#d62728", gdp, std::erfc(mu / (2 * std::sqrt(2.0))), clt});
  for (const Curve& c : curves) {
    for (double b : c.beta) {
      if (!(b >= 0 && b <= 1)) {
        return absl::InternalError(absl::StrCat("curve ", c.name, " has a value outside [0, 1]"));
      }
    }
  }

  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.6g", params->sampling_rate);
  const std::string title = absl::StrCat(
      "DP-SGD tradeoff: q = ", rate,
      ", \u03c3 = ", FormatNumber(params->noise_multiplier), ", T = ", params->steps,
      ", \u03b4 = ", FormatNumber(delta));
  const std::string text = format == "csv" ? Csv(alphas, curves) : Svg(alphas, curves, title);
  if (output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return absl::OkStatus();
  }
  // base/files.h: atomic for regular files and through symlinks; a special file (e.g.
  // /dev/stdout) is written into, never replaced; write errors (/dev/full) are reported.
  absl::Status written = base::WriteFileAtomically(output, text);
  if (!written.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--output cannot be written: ", written.message()));
  }
  return absl::OkStatus();
}

}  // namespace

DPKIT_REGISTER_COMMAND((Command{
    "tradeoff", "tradeoff curves (type II vs type I error) of DP-SGD as CSV or SVG",
    "Example: dpkit tradeoff --dataset_size=60000 --batch_size=256 --noise_multiplier=1.1 "
    "--epochs=60 --format=svg --output=tradeoff.svg\n"
    "Curves: pld and rdp (certified lower envelopes: every test has beta >= curve), "
    "approx_dp (f_{eps,delta} at the certified PLD epsilon for --delta), gdp_clt (G_mu with "
    "mu_CLT of Bu et al. 2020: an APPROXIMATION). CSV columns: curve,alpha,beta.",
    {"sampling_rate", "dataset_size", "batch_size", "noise_multiplier", "steps", "epochs",
     "delta", TradeoffFormatFlag(), "output", "points"},
    &RunTradeoff}));

}  // namespace dpkit::tools
