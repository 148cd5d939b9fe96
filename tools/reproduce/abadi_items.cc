// Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang 2016, "Deep learning with
// differential privacy", Sec. 3.1: epsilon against epochs for the moments accountant and
// for the strong composition theorem (q = 0.01, sigma = 4, delta = 1e-5; at T = 10^4
// steps the paper prints eps ~ 1.26 and eps ~ 9.34).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpkit/accounting/event.h"
#include "dpkit/accounting/pld.h"
#include "dpkit/accounting/rdp.h"
#include "dpkit/accounting/strong_composition.h"
#include "dpkit/base/status.h"
#include "dpkit/tools/reproduce/items.h"

namespace dpkit::tools::reproduce {
namespace {

using nlohmann::json;

constexpr double kQ = 0.01, kSigma = 4, kDelta = 1e-5;
constexpr int64_t kStepsPerEpoch = 100;  // 1 / q
constexpr double kPaperMa = 1.26, kPaperStrong = 9.34;
// eps_MA printed to 2 decimals.
constexpr double kTwoDecimals = 0.005 + 1e-9;
// The paper does not say how it split delta between the steps and the composition's
// slack, nor which Gaussian constant it used; the reconstruction below (Dwork & Roth's
// constant, the best split) gives 9.353 and the even split 9.355: 0.02 (0.2%) covers
// that freedom and nothing more (a factor-2 amplification, log(1 + q(e^e0 - 1)) or the
// KOV theorem each move the value by more than 4).
constexpr double kStrongTolerance = 0.02;

// Abadi et al.'s strong-composition construction as the paper describes it (Sec. 3.1):
// each lot's Gaussian step is (e0, d0)-DP with sigma = sqrt(2 ln(1.25/d0)) / e0
// (Dwork & Roth 2014, Thm. A.1), the sampled step is (q e0, q d0)-DP ("(O(q eps), q
// delta)", the constant taken as 1), and T steps compose by Dwork, Rothblum, Vadhan
// 2010, Thm. III.3 with slack d', T q d0 + d' = delta (best split on a grid of 999).
// NOT a bound: Thm. A.1 needs e0 < 1 (here e0 ~ 1.46) and q e0 understates the
// amplification log(1 + q (e^e0 - 1)); reproduced to show where 9.34 comes from.
double PaperStrongComposition(int64_t steps) {
  double best = INFINITY;
  for (int i = 1; i < 1000; ++i) {
    const double slack = kDelta * i / 1000.0;
    const double d0 = (kDelta - slack) / (static_cast<double>(steps) * kQ);
    const double e = kQ * std::sqrt(2 * std::log(1.25 / d0)) / kSigma;
    const double k = static_cast<double>(steps);
    best = std::fmin(best, e * std::sqrt(2 * k * std::log(1 / slack)) + k * e * std::expm1(e));
  }
  return best;
}

}  // namespace

absl::StatusOr<ItemResult> AbadiComposition() {
  const std::vector<double> tf_orders = accounting::TfPrivacyOrders();
  ASSIGN_OR_RETURN(accounting::Event gaussian, accounting::Event::Gaussian(kSigma));
  ASSIGN_OR_RETURN(accounting::Event step, accounting::Event::PoissonSampled(kQ, gaussian));
  ASSIGN_OR_RETURN(std::vector<double> step_rdp, accounting::ComputeRdp(step, tf_orders));
  ItemResult result;
  result.table.columns = {"epochs", "steps", "MA", "strong comp. as the paper (not a bound)",
                          "strong comp. certified: advanced", "optimal (KOV)",
                          "PLD certified [lower, upper]"};
  result.figure = Figure{"Abadi et al. 2016: epsilon against epochs, q 0.01, sigma 4, delta 1e-5",
                         "epochs", "epsilon", false, false, {}};
  result.figure.legend = LegendCorner::kTopLeft;
  Series ma{"moments accountant", {}, {}, false, true};
  Series paper{"strong composition as in the paper (not a bound)", {}, {}, true, true};
  Series advanced{"strong composition, certified (DRV)", {}, {}, false, true};
  Series optimal{"strong composition, certified (KOV optimal)", {}, {}, false, true};
  Series pld{"PLD certified (dpkit)", {}, {}, false, true};
  double ma_at_end = 0, paper_at_end = 0;
  for (int epochs : {1, 2, 5, 10, 20, 40, 70, 100}) {
    const int64_t steps = epochs * kStepsPerEpoch;
    std::vector<double> rdp(step_rdp);
    for (double& r : rdp) r *= static_cast<double>(steps);
    ASSIGN_OR_RETURN(accounting::RdpEpsilon eps_ma,
                     accounting::RdpToEpsilon(tf_orders, rdp, kDelta,
                                              accounting::RdpConversion::kClassic));
    const double eps_paper = PaperStrongComposition(steps);
    ASSIGN_OR_RETURN(accounting::StrongCompositionBound drv,
                     accounting::StrongCompositionDpSgd(
                         kQ, kSigma, steps, kDelta, accounting::StrongCompositionTheorem::kAdvanced));
    ASSIGN_OR_RETURN(accounting::StrongCompositionBound kov,
                     accounting::StrongCompositionDpSgd(
                         kQ, kSigma, steps, kDelta, accounting::StrongCompositionTheorem::kOptimal));
    ASSIGN_OR_RETURN(accounting::Event event, accounting::DpSgdEvent(kQ, kSigma, steps));
    ASSIGN_OR_RETURN(accounting::EpsilonBounds exact, accounting::PldEpsilon(event, kDelta));
    for (auto [series, value] :
         {std::pair{&ma, eps_ma.epsilon}, std::pair{&paper, eps_paper},
          std::pair{&advanced, drv.epsilon}, std::pair{&optimal, kov.epsilon},
          std::pair{&pld, exact.epsilon_upper}}) {
      series->x.push_back(epochs);
      series->y.push_back(value);
    }
    result.table.rows.push_back(
        {absl::StrCat(epochs), absl::StrCat(steps), FixedUp(eps_ma.epsilon, 4),
         Fixed(eps_paper, 4), FixedUp(drv.epsilon, 4), FixedUp(kov.epsilon, 4),
         absl::StrCat("[", FixedDown(exact.epsilon_lower, 4), ", ",
                      FixedUp(exact.epsilon_upper, 4), "]")});
    result.table.json_rows.push_back(
        {{"epochs", epochs},
         {"steps", steps},
         {"epsilon_ma", eps_ma.epsilon},
         {"epsilon_strong_paper", {{"dpkit", eps_paper}, {"bound", false}}},
         {"epsilon_strong_advanced", drv.epsilon},
         {"epsilon_strong_optimal", kov.epsilon},
         {"epsilon_pld", {{"upper", exact.epsilon_upper}, {"lower", exact.epsilon_lower}}}});
    ma_at_end = eps_ma.epsilon;
    paper_at_end = eps_paper;
  }
  const bool ma_ok = std::abs(ma_at_end - kPaperMa) <= kTwoDecimals;
  const bool strong_ok = std::abs(paper_at_end - kPaperStrong) <= kStrongTolerance;
  result.agrees = ma_ok && strong_ok;
  result.table.json_rows.push_back(
      {{"paper_check", "T = 10000"},
       {"epsilon_ma", {{"paper", kPaperMa}, {"dpkit", ma_at_end}, {"agrees", ma_ok}}},
       {"epsilon_strong", {{"paper", kPaperStrong}, {"dpkit", paper_at_end},
                           {"tolerance", kStrongTolerance}, {"agrees", strong_ok}}}});
  result.notes = absl::StrFormat(
      "At T = 10^4 (100 epochs) the paper prints eps ~ %.2f (moments accountant) and ~ %.2f "
      "(strong composition); dpkit: %s (%s, 2 decimals) and %.4f (%s, within %.2f: the "
      "paper states neither its split of delta nor its constants). MA: RDP at TF Privacy's "
      "orders, classic conversion (certified). 'As the paper': Dwork & Roth's Gaussian "
      "constant, amplification to q e0 and Dwork-Rothblum-Vadhan composition, which is NOT "
      "a bound (Thm. A.1 needs e0 < 1, and q e0 understates the amplification). The "
      "certified strong composition (accounting/strong_composition.h: exact Gaussian delta, "
      "amplification log(1 + q(e^e0 - 1)), DRV or Kairouz-Oh-Viswanath optimal composition) "
      "is larger still; the PLD column is dpkit's certified interval on the exact epsilon.",
      kPaperMa, kPaperStrong, FixedUp(ma_at_end, 4), ma_ok ? "agrees" : "DISAGREES", paper_at_end,
      strong_ok ? "agrees" : "DISAGREES", kStrongTolerance);
  result.figure.series = {std::move(ma), std::move(paper), std::move(advanced), std::move(optimal),
                          std::move(pld)};
  return result;
}

}  // namespace dpkit::tools::reproduce
