#include <vector>

#include "dpkit/tools/reproduce/item.h"
#include "dpkit/tools/reproduce/items.h"

namespace dpkit::tools::reproduce {

const std::vector<Item>& Items() {
  static const std::vector<Item>* const kItems = new std::vector<Item>{
      {"bu-fig2", "Bu, Dong, Long, Su 2020, Fig. 2",
       "delta against epsilon on MNIST: the CLT curve (dashed, an approximation) lies below "
       "dpkit's certified PLD curve, the moments accountant's far above it.",
       &BuFig2},
      {"bu-fig3", "Bu, Dong, Long, Su 2020, Fig. 3",
       "tradeoff curves at sigma 1.1, 60 epochs: the CLT claims a 77.6% minimum error, the "
       "moments accountant's (eps, delta) only 9.4%; the exact curve (certified) is close to "
       "the CLT's.",
       &BuFig3},
      {"bu-general-clt", "Bu, Dong, Long, Su 2020, general CLT (heterogeneous composition)",
       "a three-phase schedule: the general CLT's and eq. 3.1's G_mu (both approximate) "
       "beside the certified exact curve.",
       &BuGeneralClt},
      {"asoodeh-iterations", "Asoodeh, Liao, Calmon, Kosut, Sankar 2020: maximum iterations",
       "how many DP-SGD steps fit in (eps, 1e-5) under the classic, improved and optimal "
       "RDP conversions: the optimal one allows the most.",
       &AsoodehIterations},
      {"asoodeh-region", "Asoodeh et al. 2020: RDP -> f-DP region",
       "the tradeoff regions RDP certifies (optimal, improved, classic) below the exact "
       "curve: the optimal region is the closest.",
       &AsoodehRegion},
      {"abadi-composition", "Abadi et al. 2016, Sec. 3.1: moments accountant vs strong "
       "composition",
       "epsilon against epochs: the moments accountant (1.26 at 100 epochs) against strong "
       "composition (9.34 as the paper computes it; larger when certified).",
       &AbadiComposition},
  };
  return *kItems;
}

}  // namespace dpkit::tools::reproduce
