#include "dpkit/accounting/internal/pld_directions.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "dpkit/accounting/internal/pld_component_pmfs.h"
#include "dpkit/accounting/internal/pld_discrete_gaussian.h"
#include "dpkit/accounting/internal/pld_replace_one.h"
#include "dpkit/accounting/internal/pld_sampled_composition.h"

namespace dpkit::accounting::pld_internal {
namespace {

// The PMFs of a Poisson-sampled composition: its inner composition's components are
// built in the same direction on the same grid (recursively), then sampled as a whole.
Result<void> BuildSampledComposition(const Mechanism& m, Direction dir, double h, ld tail,
                                     Pmf* upper, Pmf* lower) {
  Result<Event> inner = Event::FromJsonString(m.inner);
  if (!inner.ok()) return inner.error_value();
  std::map<Mechanism, double> flat;
  DPKIT_RETURN_IF_ERROR(Flatten(*inner, 1.0, 1.0, &flat));
  Prepared in;
  in.h = h;
  in.tail = tail;
  in.flat.assign(flat.begin(), flat.end());
  in.symmetric = true;
  auto built = BuildDirection(&in, dir);  // the inner laws of the same direction
  if (!built.ok()) return built.error_value();
  return BuildSampledCompositionPmfs(m, dir, h, tail, InnerComposition{in.flat, **built},
                                     upper, lower);
}

Result<void> BuildComponent(const Mechanism& m, double count, Direction dir, double h,
                            ld tail, ComponentPmfs* c);

// The PMFs of sampling without replacement under replace-one adjacency: the remove
// direction of the Poisson-sampled base at the same rate, symmetrized (pld_replace_one.cc);
// the same PMFs serve both directions.
Result<void> BuildWithoutReplacement(const Mechanism& m, double count, double h, ld tail,
                                     ComponentPmfs* c) {
  Result<Event> inner = Event::FromJsonString(m.inner);
  if (!inner.ok()) return inner.error_value();
  std::map<Mechanism, double> flat;
  DPKIT_RETURN_IF_ERROR(Flatten(*inner, 1.0, m.sampling_rate, &flat));
  if (flat.size() != 1) {
    return Error{"internal error: a without-replacement base is not one mechanism"};
  }
  ComponentPmfs poisson;
  DPKIT_RETURN_IF_ERROR(
      BuildComponent(flat.begin()->first, count, Direction::kRemove, h, tail, &poisson));
  SymmetrizeRemovePmfs(poisson, h, c);
  return OkResult();
}

// The component PMFs of one mechanism in one direction.
Result<void> BuildComponent(const Mechanism& m, double count, Direction dir, double h,
                            ld tail, ComponentPmfs* c) {
  if (m.base == Base::kRandomizedResponse) {
    BuildRandomizedResponsePmfs(m, h, &c->upper, &c->lower);
  } else if (m.base == Base::kBoundedRange) {
    // eps-BR implies eps-DP (the loss range [t - eps, t] contains 0), so randomized
    // response with eps dominates it (Kairouz, Oh, Viswanath 2015, Thm. 2.1): upper.
    // Randomized response with eps/2 has losses +-eps/2, so it is itself eps-BR: its
    // PLD is dominated by the worst case of the class, a valid lower bound.
    Pmf unused;
    BuildRandomizedResponsePmfs({Base::kRandomizedResponse, m.parameter, 1.0, 0.0}, h,
                                &c->upper, &unused);
    BuildRandomizedResponsePmfs({Base::kRandomizedResponse, m.parameter / 2, 1.0, 0.0}, h,
                                &unused, &c->lower);
  } else if (m.base == Base::kWithoutReplacement) {
    DPKIT_RETURN_IF_ERROR(BuildWithoutReplacement(m, count, h, tail, c));
  } else if (m.base == Base::kSampledComposition) {
    DPKIT_RETURN_IF_ERROR(BuildSampledComposition(m, dir, h, tail, &c->upper, &c->lower));
  } else if (m.base == Base::kDiscreteGaussian) {
    const DiscreteGaussianTails dg(m.parameter);
    ContinuousPmfOptions options;
    options.dg = &dg;
    options.lower_alt = &c->lower_alt;
    DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(m, dir, h, tail, &c->upper, &c->lower, options));
    // Sparse atoms (D/s^2 >= h; s <= 1e5 bounds the enumeration): the optimistic PMF
    // from the enumerated atoms (see BuildLatticeLowerPmf).
    const double spacing = static_cast<double>(m.sensitivity) / (m.parameter * m.parameter);
    if (spacing >= h && m.parameter <= 1e5) {
      DPKIT_RETURN_IF_ERROR(BuildLatticeLowerPmf(m, dg, dir, h, tail, &c->lower));
      c->lower_alt = Pmf();
    }
  } else {
    ContinuousPmfOptions options;
    options.lower_alt = &c->lower_alt;
    options.steps = count;
    DPKIT_RETURN_IF_ERROR(BuildContinuousPmfs(m, dir, h, tail, &c->upper, &c->lower, options));
  }
  return OkResult();
}

}  // namespace

Result<Prepared> Prepare(const Event& event, const GridOptions& options, ld tail_budget) {
  DPKIT_RETURN_IF_ERROR(CheckGridOptions(options));
  std::map<Mechanism, double> flat;
  DPKIT_RETURN_IF_ERROR(Flatten(event, 1.0, 1.0, &flat));
  double total = 0;
  for (const auto& [m, count] : flat) total += count;
  if (!(total <= 1e15)) return Error{"the event has more than 1e15 compositions"};
  Prepared out;
  out.h = ChooseInterval(flat, options);
  out.flat.assign(flat.begin(), flat.end());
  out.symmetric = true;
  bool replace_one = false, poisson = false;
  for (const auto& [m, count] : flat) {
    if (m.base == Base::kWithoutReplacement) {
      replace_one = true;  // symmetric (pld_replace_one.cc)
    } else if (m.base != Base::kRandomizedResponse && m.sampling_rate < 1) {
      out.symmetric = false;
      poisson = true;
    }
  }
  if (replace_one && poisson) {
    return Error{"the pld accountant cannot compose sampled_without_replacement events "
                 "(replace-one adjacency) with poisson_sampled ones (add/remove adjacency; use "
                 "--accountant=rdp)"};
  }
  out.tail = std::max<ld>(tail_budget / std::max(total, 1.0), 1e-300_ld);
  return out;
}

Result<std::vector<ComponentPmfs>*> BuildDirection(Prepared* p, Direction dir) {
  std::vector<ComponentPmfs>* out = dir == Direction::kRemove ? &p->remove : &p->add;
  if (!out->empty()) return out;
  for (const auto& [m, count] : p->flat) {
    ComponentPmfs c;
    c.count = count;
    DPKIT_RETURN_IF_ERROR(BuildComponent(m, count, dir, p->h, p->tail, &c));
    FillLogs(&c.upper);
    FillLogs(&c.lower);
    // lower_alt's logs are filled only if it is composed (CertifiedBoundsOnGrid).
    out->push_back(std::move(c));
  }
  return out;
}

}  // namespace dpkit::accounting::pld_internal
