// Bu, Dong, Long, Su 2020, "Deep learning with Gaussian differential privacy": Figs. 2-3
// and the general CLT for heterogeneous compositions.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/fdp.h"
#include "dpkit/accounting/gdp.h"
#include "dpkit/accounting/gdp_composition.h"
#include "dpkit/accounting/gdp_general_clt.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/rdp.h"
#include "dpkit/accounting/report.h"
#include "dpkit/accounting/report_rounding.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/reproduce/items.h"

namespace dpkit::tools::reproduce {
namespace {

using nlohmann::json;

constexpr double kBatch = 256;
constexpr double kDelta = 1e-5;
// Printed to 2 decimals: |dpkit - paper| <= 0.005 (plus 1e-9 for the binary rounding of
// the paper's decimal), as `dpkit reproduce gdp-table1`; eps_MA within 1% (issue 2).
constexpr double kTwoDecimals = 0.005 + 1e-9;
constexpr double kMaRelative = 0.01;
// A percentage printed with one decimal: within 0.05 percentage points.
constexpr double kOneDecimalPercent = 0.0005 + 1e-9;
// The figure's lowest delta.
constexpr double kDeltaFloor = 1e-12;
// PLD at a 10x coarser grid than its default: both bounds stay certified, the interval
// is wider (still far narrower than the gaps the figure shows), and 10 delta curves take
// seconds instead of minutes.
const accounting::PldOptions kPldOptions = [] {
  accounting::PldOptions options;
  options.epsilon_tolerance = 1e-3;
  return options;
}();

// One MNIST row of Bu et al.'s Table 1, as printed.
struct MnistSetting {
  double sigma, epochs, epsilon_clt, epsilon_ma;
};

int64_t MnistSteps(double epochs) {
  return static_cast<int64_t>(std::ceil(epochs * kMnistSize / kBatch));
}

// The moments accountant as Bu et al. (TF Privacy then) ran it: RDP at TF Privacy's old
// orders, classic conversion (Mironov 2017, Prop. 3).
absl::StatusOr<std::vector<double>> MomentsAccountantRdp(const accounting::Event& event) {
  ASSIGN_OR_RETURN(std::vector<double> rdp,
                   accounting::ComputeRdp(event, accounting::TfPrivacyOrders()));
  return rdp;
}

// Tradeoff curve sampled at 201 type I errors (uniform, plus 1e-4..1e-2 near 0).
std::vector<double> AlphaGrid() {
  std::vector<double> alpha = {0, 1e-4, 3e-4, 1e-3, 3e-3};
  for (int i = 1; i <= 200; ++i) alpha.push_back(i / 200.0);
  return alpha;
}

Series CurveSeries(const std::string& name, const accounting::TradeoffCurve& curve,
                   bool dashed) {
  Series s{name, AlphaGrid(), {}, dashed};
  for (double a : s.x) s.y.push_back(accounting::EvaluateTradeoff(curve, a));
  return s;
}

}  // namespace

absl::StatusOr<ItemResult> BuFig2() {
  const MnistSetting settings[] = {{0.7, 45, 5.07, 7.10}, {1.1, 60, 2.32, 3.01}};
  const double q = kBatch / kMnistSize;
  ItemResult result;
  result.table.columns = {"setting", "epsilon", "delta CLT (approx.)", "delta MA",
                          "delta PLD certified [lower, upper]"};
  result.figure = Figure{"Bu et al. 2020, Fig. 2: delta against epsilon, MNIST (p = 256/60000)",
                         "epsilon", "delta", false, true, {}};
  result.figure.y_min = kDeltaFloor;
  result.figure.legend = LegendCorner::kBottomLeft;
  std::string checks;
  for (const MnistSetting& s : settings) {
    const int64_t steps = MnistSteps(s.epochs);
    ASSIGN_OR_RETURN(accounting::Event event, accounting::DpSgdEvent(q, s.sigma, steps));
    ASSIGN_OR_RETURN(double mu, accounting::CltMu(q, s.sigma, steps));
    ASSIGN_OR_RETURN(std::vector<double> ma_rdp, MomentsAccountantRdp(event));
    const std::string name = absl::StrFormat("sigma %g, %g epochs", s.sigma, s.epochs);
    Series clt{absl::StrCat(name, ": CLT (approx.)"), {}, {}, true};
    Series ma{absl::StrCat(name, ": MA"), {}, {}};
    Series pld{absl::StrCat(name, ": PLD certified"), {}, {}};
    for (int i = 1; i <= 20; ++i) {
      const double epsilon = 0.5 * i;
      ASSIGN_OR_RETURN(double d_clt, accounting::GdpDelta(mu, epsilon));
      ASSIGN_OR_RETURN(accounting::RdpDelta d_ma,
                       accounting::RdpToDelta(accounting::TfPrivacyOrders(), ma_rdp, epsilon,
                                              accounting::RdpConversion::kClassic));
      for (auto [series, value] : {std::pair{&clt, d_clt}, std::pair{&ma, d_ma.delta}}) {
        series->x.push_back(epsilon);
        series->y.push_back(value);
      }
      if (i % 2 != 0) continue;  // PLD and the table: integer epsilons
      // delta(eps) does not increase with eps: once the certified upper bound is below the
      // figure's floor, it bounds every larger eps too (lower bound 0), and the costly
      // tiny-delta PLD queries are skipped.
      accounting::DeltaBounds d_pld{pld.y.empty() ? 1.0 : pld.y.back(), 0, 0};
      if (d_pld.delta_upper >= kDeltaFloor) {
        ASSIGN_OR_RETURN(d_pld, accounting::PldDelta(event, epsilon, kPldOptions));
      }
      pld.x.push_back(epsilon);
      pld.y.push_back(d_pld.delta_upper);
      result.table.rows.push_back(
          {name, absl::StrFormat("%g", epsilon), absl::StrFormat("%.3g", d_clt),
           accounting::FormatUpperBound(d_ma.delta, 3),
           absl::StrCat("[", accounting::FormatLowerBound(d_pld.delta_lower, 3), ", ",
                        accounting::FormatUpperBound(d_pld.delta_upper, 3), "]")});
      result.table.json_rows.push_back({{"sigma", s.sigma},
                                        {"epochs", s.epochs},
                                        {"steps", steps},
                                        {"epsilon", epsilon},
                                        {"delta_clt", {{"dpkit", d_clt}, {"approximate", true}}},
                                        {"delta_ma", d_ma.delta},
                                        {"delta_pld", {{"upper", d_pld.delta_upper},
                                                       {"lower", d_pld.delta_lower},
                                                       {"certified", true}}}});
    }
    // The curves cross delta = 1e-5 at Table 1's printed epsilons (the figure's link to
    // the printed numbers).
    ASSIGN_OR_RETURN(double eps_clt, accounting::GdpEpsilon(mu, kDelta));
    ASSIGN_OR_RETURN(accounting::RdpEpsilon eps_ma,
                     accounting::RdpToEpsilon(accounting::TfPrivacyOrders(), ma_rdp, kDelta,
                                              accounting::RdpConversion::kClassic));
    const bool clt_ok = std::abs(eps_clt - s.epsilon_clt) <= kTwoDecimals;
    const bool ma_ok = std::abs(eps_ma.epsilon - s.epsilon_ma) <= kMaRelative * s.epsilon_ma;
    result.agrees = result.agrees && clt_ok && ma_ok;
    absl::StrAppendFormat(&checks,
                          "- %s: the CLT curve crosses delta = 1e-5 at epsilon %.4f (paper, "
                          "Table 1: %.2f, %s); the MA curve at %.4f (paper: %.2f, %s).\n",
                          name, eps_clt, s.epsilon_clt, clt_ok ? "agrees" : "DISAGREES",
                          eps_ma.epsilon, s.epsilon_ma, ma_ok ? "agrees within 1%" : "DISAGREES");
    result.figure.series.push_back(std::move(clt));
    result.figure.series.push_back(std::move(ma));
    result.figure.series.push_back(std::move(pld));
    result.table.json_rows.push_back({{"sigma", s.sigma},
                                      {"epochs", s.epochs},
                                      {"epsilon_clt_at_1e-5", {{"paper", s.epsilon_clt},
                                                               {"dpkit", eps_clt},
                                                               {"approximate", true},
                                                               {"agrees", clt_ok}}},
                                      {"epsilon_ma_at_1e-5", {{"paper", s.epsilon_ma},
                                                              {"dpkit", eps_ma.epsilon},
                                                              {"agrees", ma_ok}}}});
  }
  result.notes = absl::StrCat(
      "delta CLT: delta of mu_CLT-GDP (Bu et al. eqs. 3.1-3.2), an APPROXIMATION, not a bound "
      "(drawn dashed). delta MA: the moments accountant as the paper ran it (RDP at TF "
      "Privacy's old orders, classic conversion): a certified but loose bound. delta PLD: "
      "dpkit's certified interval [lower, upper] on the exact delta (once the upper bound is "
      "below 1e-12, the next rows repeat it with lower bound 0: delta does not increase with "
      "epsilon); the curve is the upper bound.\n\n",
      checks);
  return result;
}

absl::StatusOr<ItemResult> BuFig3() {
  // Bu et al. 2020, Fig. 3: MNIST, sigma 1.1, 60 epochs (Table 1, row 2).
  const double q = kBatch / kMnistSize, sigma = 1.1;
  const int64_t steps = MnistSteps(60);
  const double paper_clt_error = 0.776, paper_ma_error = 0.094, paper_eps_ma = 3.01;
  ASSIGN_OR_RETURN(accounting::Event event, accounting::DpSgdEvent(q, sigma, steps));
  ASSIGN_OR_RETURN(double mu, accounting::CltMu(q, sigma, steps));
  ASSIGN_OR_RETURN(std::vector<double> ma_rdp, MomentsAccountantRdp(event));
  ASSIGN_OR_RETURN(accounting::RdpEpsilon eps_ma,
                   accounting::RdpToEpsilon(accounting::TfPrivacyOrders(), ma_rdp, kDelta,
                                            accounting::RdpConversion::kClassic));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve gaussian, accounting::GaussianTradeoffCurve(mu, 2000));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve ma,
                   accounting::ApproxDpTradeoffCurve(eps_ma.epsilon, kDelta));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve pld, accounting::PldTradeoffCurve(event));
  const accounting::PrivacyReport report =
      accounting::ComputeReport(event, accounting::ReportQuantity::kEpsilon, kDelta, {});
  if (report.pld.state != accounting::SlotState::kComputed ||
      !report.pld.value.min_error_lower || !report.pld.value.min_error_upper) {
    return absl::InternalError(absl::StrCat("pld: ", report.pld.message));
  }
  // Bu et al. 2020, Sec. 5: min type I + II error of G_mu is 2 Phi(-mu/2); of f_{eps,delta}
  // it is 2 (1 - delta) / (1 + e^eps) (DRS 2019, Prop. 2.5, at the kink).
  // The paper's 77.6% is 2 Phi(-mu/2) at mu = 0.57 as Table 1 prints it (77.56%); at the
  // unrounded mu_CLT of 14063 steps (0.5736) it is 77.43%. Both are shown; the printed
  // one is compared.
  const double paper_mu = 0.57;
  const double clt_error_printed_mu = std::erfc(paper_mu / 2 / std::sqrt(2.0));
  const double clt_error = std::erfc(mu / 2 / std::sqrt(2.0));
  const double ma_error = 2 * (1 - kDelta) / (1 + std::exp(eps_ma.epsilon));
  const double pld_lower = *report.pld.value.min_error_lower;
  const double pld_upper = *report.pld.value.min_error_upper;
  const bool clt_ok = std::abs(clt_error_printed_mu - paper_clt_error) <= kOneDecimalPercent;
  const bool ma_ok = std::abs(ma_error - paper_ma_error) <= kOneDecimalPercent;
  const bool eps_ok = std::abs(eps_ma.epsilon - paper_eps_ma) <= kMaRelative * paper_eps_ma;
  ItemResult result;
  result.agrees = clt_ok && ma_ok && eps_ok;
  result.table.columns = {"quantity", "paper", "dpkit", "certified (PLD) beside it"};
  const std::string pld_interval = absl::StrCat("[", FixedDown(100 * pld_lower, 1), "%, ",
                                                FixedUp(100 * pld_upper, 1), "%]");
  result.table.rows = {
      {"min type I + II error, CLT at Table 1's mu = 0.57 (approx.)", "77.6%",
       Fixed(100 * clt_error_printed_mu, 2) + "%", pld_interval},
      {"min type I + II error, CLT at the unrounded mu = " + Fixed(mu, 4) + " (approx.)", "-",
       Fixed(100 * clt_error, 2) + "%", pld_interval},
      {"min type I + II error, MA (eps, 1e-5)-DP", "9.4%", FixedDown(100 * ma_error, 2) + "%",
       pld_interval},
      {"epsilon of the moments accountant at delta 1e-5", "3.01", FixedUp(eps_ma.epsilon, 4),
       "-"}};
  result.table.json_rows = json::array(
      {{{"quantity", "min_error_clt"}, {"paper", paper_clt_error},
        {"dpkit", clt_error_printed_mu}, {"mu", paper_mu}, {"approximate", true},
        {"agrees", clt_ok}},
       {{"quantity", "min_error_clt_unrounded_mu"}, {"dpkit", clt_error}, {"mu", mu},
        {"approximate", true}},
       {{"quantity", "min_error_ma"}, {"paper", paper_ma_error}, {"dpkit", ma_error},
        {"epsilon_ma", eps_ma.epsilon}, {"agrees", ma_ok}},
       {{"quantity", "epsilon_ma"}, {"paper", paper_eps_ma}, {"dpkit", eps_ma.epsilon},
        {"agrees", eps_ok}},
       {{"quantity", "min_error_pld"}, {"lower", pld_lower}, {"upper", pld_upper},
        {"certified", true}}});
  result.notes =
      "MNIST, p = 256/60000, sigma 1.1, 60 epochs (14063 steps), delta 1e-5. The paper's "
      "77.6% is the CLT's 2 Phi(-mu/2) at mu = 0.57, Table 1's rounded value. The CLT curve "
      "G_mu is an APPROXIMATION (dashed); the moments accountant's curve is f_{eps,1e-5} "
      "(Dong, Roth, Su 2019, Prop. 2.5), certified but loose; the PLD curve is dpkit's "
      "certified lower envelope of the exact NoisySGD tradeoff curve, whose minimum error "
      "lies in the certified interval in the last column. Agreement: percentages within the "
      "printed decimal (0.05 points), epsilon_MA within 1%.";
  result.figure = Figure{"Bu et al. 2020, Fig. 3: tradeoff curves, MNIST sigma 1.1, 60 epochs",
                         "type I error", "type II error", false, false, {}};
  result.figure.series = {CurveSeries("exact NoisySGD (PLD, certified)", pld, false),
                          CurveSeries("moments accountant (eps, 1e-5)", ma, false),
                          CurveSeries("CLT G_mu (approx.)", gaussian, true)};
  return result;
}

absl::StatusOr<ItemResult> BuGeneralClt() {
  // A heterogeneous run on MNIST: three phases with their own batch size and noise.
  struct Phase {
    double batch, sigma, epochs;
  };
  const Phase phases[] = {{256, 1.1, 30}, {512, 0.9, 10}, {1024, 0.8, 5}};
  std::vector<accounting::Event> events;
  ItemResult result;
  result.table.columns = {"phase / run", "p", "sigma", "steps", "mu eq. 3.1 (approx.)",
                          "mu general CLT (approx.)", "eps CLT (approx.)",
                          "eps PLD certified [lower, upper]"};
  for (const Phase& phase : phases) {
    const double q = phase.batch / kMnistSize;
    const int64_t steps = static_cast<int64_t>(std::ceil(phase.epochs / q));
    ASSIGN_OR_RETURN(accounting::Event event, accounting::DpSgdEvent(q, phase.sigma, steps));
    ASSIGN_OR_RETURN(double mu, accounting::CltMu(q, phase.sigma, steps));
    ASSIGN_OR_RETURN(accounting::GeneralClt general, accounting::GeneralCltMu(event));
    events.push_back(event);
    result.table.rows.push_back({absl::StrFormat("batch %g, %g epochs", phase.batch, phase.epochs),
                                 absl::StrFormat("%.5f", q), absl::StrFormat("%g", phase.sigma),
                                 absl::StrCat(steps), Fixed(mu, 4), Fixed(general.mu, 4), "-",
                                 "-"});
    result.table.json_rows.push_back({{"phase", result.table.rows.back()[0]},
                                      {"sampling_rate", q},
                                      {"sigma", phase.sigma},
                                      {"steps", steps},
                                      {"mu_eq_3_1", mu},
                                      {"mu_general_clt", general.mu},
                                      {"approximate", true}});
  }
  ASSIGN_OR_RETURN(accounting::Event run, accounting::Event::Composed(events));
  ASSIGN_OR_RETURN(accounting::GdpComposition sum, accounting::GdpMuOfEvent(run));
  ASSIGN_OR_RETURN(accounting::GeneralClt general, accounting::GeneralCltMu(run));
  ASSIGN_OR_RETURN(double eps_sum, accounting::GdpEpsilon(sum.mu, kDelta));
  ASSIGN_OR_RETURN(double eps_general, accounting::GdpEpsilon(general.mu, kDelta));
  ASSIGN_OR_RETURN(accounting::EpsilonBounds pld, accounting::PldEpsilon(run, kDelta));
  const std::string pld_text =
      absl::StrCat("[", FixedDown(pld.epsilon_lower, 4), ", ", FixedUp(pld.epsilon_upper, 4), "]");
  result.table.rows.push_back({"whole run: eq. 3.1 per phase, summed in quadrature", "-", "-",
                               "-", Fixed(sum.mu, 4), "-", Fixed(eps_sum, 4), pld_text});
  result.table.rows.push_back({"whole run: general CLT (DRS 2019, Thms. 3.4-3.5)", "-", "-", "-",
                               "-", Fixed(general.mu, 4), Fixed(eps_general, 4), pld_text});
  result.table.json_rows.push_back({{"run", "composed"},
                                    {"mu_eq_3_1", sum.mu},
                                    {"mu_general_clt", general.mu},
                                    {"epsilon_eq_3_1", eps_sum},
                                    {"epsilon_general_clt", eps_general},
                                    {"approximate", true},
                                    {"delta", kDelta},
                                    {"epsilon_pld", {{"upper", pld.epsilon_upper},
                                                     {"lower", pld.epsilon_lower},
                                                     {"certified", true}}}});
  result.notes =
      "The paper prints no number for a heterogeneous composition: the check is against "
      "independent computations (tools/reproduce/bu_general_clt_test.cc). Both mu columns "
      "are CLT APPROXIMATIONS: eq. 3.1 per phase (Bu et al.'s closed form, the CLT's limit) "
      "and the general CLT mu = 2K/s from the functionals kl, kappa2 of each step's tradeoff "
      "function (Dong, Roth, Su 2019, Thm. 3.4; computed by quadrature, the less private "
      "direction). The certified PLD interval on the exact epsilon is beside them.";
  ASSIGN_OR_RETURN(accounting::TradeoffCurve g_general,
                   accounting::GaussianTradeoffCurve(general.mu, 2000));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve g_sum, accounting::GaussianTradeoffCurve(sum.mu, 2000));
  ASSIGN_OR_RETURN(accounting::TradeoffCurve exact, accounting::PldTradeoffCurve(run));
  result.figure = Figure{"Bu et al. 2020, general CLT: a 3-phase MNIST schedule", "type I error",
                         "type II error", false, false, {}};
  result.figure.series = {CurveSeries("exact (PLD, certified)", exact, false),
                          CurveSeries("general CLT G_mu (approx.)", g_general, true),
                          CurveSeries("eq. 3.1 per phase G_mu (approx.)", g_sum, true)};
  return result;
}

}  // namespace dpkit::tools::reproduce
