"""Accountants with dp_accounting's shape: ``compose(event, count=1)`` returns the
accountant, ``get_epsilon(target_delta)`` and ``get_delta(target_epsilon)`` account
everything composed so far.

* :class:`PLDAccountant` — dpkit's privacy loss distribution accountant (accounting/pld.h):
  every number is a CERTIFIED bound. ``get_epsilon`` returns the certified upper bound;
  ``get_epsilon_bounds`` returns (lower, upper), both certified, so the exact epsilon
  lies between them (Doroshenko et al. 2022 discretisation with explicit error bounds).
* :class:`RDPAccountant` — Rényi DP (Mironov 2017; Mironov, Talwar, Zhang 2019),
  certified upper bounds, converted to (epsilon, delta) by the optimal conversion of
  Asoodeh et al. 2021 (default, as ``dpkit epsilon --accountant=rdp``), the improved
  one of Balle et al. 2020, Thm. 21 (TF Privacy's) or the classic Mironov 2017, Prop. 3.
* :class:`GDPAccountant` — Gaussian DP composition (Dong, Roth, Su 2019) with the
  central limit theorem of Bu et al. 2020 (eq. 3.1) for subsampled steps: APPROXIMATE,
  not an upper bound, whenever ``approximate`` is True.

Adjacent compositions of the same event are merged (``compose(e)`` twice is
``SelfComposedDpEvent(e, 2)``), so a training loop that composes one step at a time costs
no more than composing all steps at once, and builds the same tree as ``dpkit ledger``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, TypeVar

from dpkit._native import native
from dpkit.events import (ComposedDpEvent, DpEvent, SelfComposedDpEvent, _as_float,
                          _as_int, from_dp_accounting)


_Accountant = TypeVar("_Accountant", bound="_ComposingAccountant")


class _ComposingAccountant:
    """The composed events of an accountant: a list of (event, count) runs."""

    def __init__(self) -> None:
        self._runs: List[List[Any]] = []  # [dpkit event, count]
        self._cache: Dict[Tuple[Any, ...], Any] = {}  # results since the last compose

    def compose(self: _Accountant, event: Any, count: int = 1) -> _Accountant:
        """Adds ``count`` >= 1 runs of ``event`` (a dpkit or dp_accounting event);
        returns the accountant, as dp_accounting's ``compose`` does."""
        count = _as_int("count", count)
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        if type(event).__name__ == "NoOpDpEvent":
            return self
        event = from_dp_accounting(event)
        self._cache.clear()
        if self._runs and self._runs[-1][0] == event:
            self._runs[-1][1] += count
        else:
            self._runs.append([event, count])
        return self

    def supports(self, event: Any) -> bool:
        """Whether ``event`` can be composed (the dp_accounting method of the same name);
        whether it can be accounted shows when epsilon is asked for."""
        try:
            from_dp_accounting(event)
        except (ValueError, TypeError):
            return type(event).__name__ == "NoOpDpEvent"
        return True

    @property
    def ledger(self) -> Optional[DpEvent]:
        """Everything composed so far as one event (None before the first compose)."""
        parts = [e if c == 1 else SelfComposedDpEvent(e, c) for e, c in self._runs]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else ComposedDpEvent(parts)

    def _native_event(self) -> Any:
        parts = [e._native if c == 1 else native.Event.self_composed(e._native, c)
                 for e, c in self._runs]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else native.Event.composed(parts)


class PLDAccountant(_ComposingAccountant):
    """Certified privacy loss distribution accountant (accounting/pld.h).

    ``epsilon_tolerance`` (in [1e-7, 0.1]) sets the loss grid so that the upper bound
    exceeds the exact epsilon by roughly this relative amount; ``discretization_interval``
    (0: automatic, else in [1e-7, 1]) fixes the grid instead. Both bounds are certified
    whatever the setting. Adjacency: add/remove, both directions bounded.
    """

    def __init__(self, epsilon_tolerance: float = 1e-4,
                 discretization_interval: float = 0.0) -> None:
        super().__init__()
        self.epsilon_tolerance = _as_float("epsilon_tolerance", epsilon_tolerance)
        self.discretization_interval = _as_float("discretization_interval",
                                                 discretization_interval)
        # Validates the options with the library's own check and message (a pure
        # epsilon = 0 event costs microseconds).
        native.pld_delta(native.Event.pure_dp(0.0), 0.0, self.epsilon_tolerance,
                         self.discretization_interval)

    def get_epsilon_bounds(self, target_delta: float) -> Tuple[float, float]:
        """(lower, upper): certified bounds on the smallest epsilon with
        delta(epsilon) <= target_delta (in [1e-200, 1)). upper is inf only when no finite
        epsilon reaches target_delta. (0.0, 0.0) before anything is composed."""
        upper, lower, _ = self._epsilon(target_delta)
        return (lower, upper)

    def get_epsilon(self, target_delta: float) -> float:
        """The certified upper bound on epsilon at target_delta."""
        return self._epsilon(target_delta)[0]

    def get_delta_bounds(self, target_epsilon: float) -> Tuple[float, float]:
        """(lower, upper): certified bounds on delta(target_epsilon), epsilon finite >= 0."""
        upper, lower, _ = self._delta(target_epsilon)
        return (lower, upper)

    def get_delta(self, target_epsilon: float) -> float:
        """The certified upper bound on delta at target_epsilon."""
        return self._delta(target_epsilon)[0]

    def discretization_interval_used(self, target_delta: float) -> float:
        """The loss grid spacing that ``get_epsilon(target_delta)`` uses."""
        return self._epsilon(target_delta)[2]

    def _epsilon(self, delta: Any) -> Tuple[float, float, float]:
        return self._cached("epsilon", _as_float("target_delta", delta), native.pld_epsilon)

    def _delta(self, epsilon: Any) -> Tuple[float, float, float]:
        return self._cached("delta", _as_float("target_epsilon", epsilon), native.pld_delta)

    def _cached(self, kind: str, value: float, compute: Any) -> Tuple[float, float, float]:
        # get_epsilon, get_epsilon_bounds and discretization_interval_used at the same
        # delta share one computation (until the next compose).
        key = (kind, value, self.epsilon_tolerance, self.discretization_interval)
        if key not in self._cache:
            built = self._native_event()
            self._cache[key] = ((0.0, 0.0, 0.0) if built is None else
                                compute(built, value, key[2], key[3]))
        return self._cache[key]


def default_rdp_orders() -> List[float]:
    """dpkit's default RDP orders (accounting/rdp.h): fractional orders near 1, 2..6 in
    quarter steps, 7..64, and larger orders up to 20000."""
    return native.default_rdp_orders()


def tf_privacy_orders() -> List[float]:
    """The orders TF Privacy's compute_dp_sgd_privacy used: 1.1..10.9 and 12..63."""
    return native.tf_privacy_orders()


class RDPAccountant(_ComposingAccountant):
    """Rényi DP accountant (accounting/rdp.h); certified upper bounds.

    ``orders``: the Rényi orders (finite, > 1; default :func:`default_rdp_orders`).
    ``conversion``: "optimal" (Asoodeh et al. 2021, the smallest delta consistent with all
    orders; the default of ``dpkit epsilon --accountant=rdp``), "improved" (Balle et al.
    2020, Thm. 21; what TF Privacy prints) or "classic" (Mironov 2017, Prop. 3).
    ApproxDp events (EpsilonDeltaDpEvent with delta > 0) have no RDP bound: ValueError.
    """

    def __init__(self, orders: Optional[Sequence[float]] = None,
                 conversion: str = "optimal") -> None:
        super().__init__()
        self.orders = (default_rdp_orders() if orders is None
                       else [_as_float("orders", o) for o in orders])
        self.conversion = conversion
        # Validates orders and conversion with the library's checks and messages.
        probe = native.compute_rdp(native.Event.pure_dp(0.0), self.orders)
        native.rdp_to_delta(self.orders, probe, 0.0, conversion)

    def get_rdp(self) -> List[float]:
        """The RDP curve of everything composed, one value per order (+inf allowed)."""
        built = self._native_event()
        if built is None:
            return [0.0] * len(self.orders)
        return native.compute_rdp(built, self.orders)

    def get_epsilon_and_optimal_order(self, target_delta: float) -> Tuple[float, float]:
        """(epsilon, order): the certified epsilon at target_delta in (0, 1) and the
        order that attains it (or binds, for the optimal conversion)."""
        delta = _as_float("target_delta", target_delta)
        return native.rdp_to_epsilon(self.orders, self.get_rdp(), delta, self.conversion)

    def get_epsilon(self, target_delta: float) -> float:
        """Certified upper bound on epsilon at target_delta in (0, 1)."""
        return self.get_epsilon_and_optimal_order(target_delta)[0]

    def get_min_error_lower(self) -> float:
        """Certified lower bound on the smallest type I + type II error of any test of
        "record in" vs "record out" (Bu et al. 2020, Sec. 5), from the RDP-implied
        tradeoff curve (Asoodeh et al. 2021; accounting/fdp.h)."""
        return native.rdp_min_error_lower(self.orders, self.get_rdp())

    def get_delta_and_optimal_order(self, target_epsilon: float) -> Tuple[float, float]:
        """(delta, order) at target_epsilon (finite, >= 0)."""
        epsilon = _as_float("target_epsilon", target_epsilon)
        return native.rdp_to_delta(self.orders, self.get_rdp(), epsilon, self.conversion)

    def get_delta(self, target_epsilon: float) -> float:
        """Certified upper bound on delta at target_epsilon (finite, >= 0)."""
        return self.get_delta_and_optimal_order(target_epsilon)[0]


class GDPAccountant(_ComposingAccountant):
    """Gaussian DP (Dong, Roth, Su 2019): mu's add in quadrature. A Gaussian event is
    exactly (1/z)-GDP; a Poisson-subsampled Gaussian step contributes the central limit
    theorem term of Bu et al. 2020, eq. (3.1), which is an APPROXIMATION that can
    under-report epsilon: ``approximate`` is then True and the numbers are not bounds.
    Only Gaussian and Poisson-subsampled Gaussian events (composed) are supported.
    The same composition as ``dpkit epsilon --accountant=gdp``.
    """

    def get_mu(self) -> float:
        """mu of everything composed (0 before the first compose)."""
        return self._mu()[0]

    @property
    def approximate(self) -> bool:
        """True when mu comes from the CLT approximation (not an upper bound)."""
        return self._mu()[1]

    def get_epsilon(self, target_delta: float) -> float:
        """epsilon at target_delta in (0, 1) for mu-GDP (Bu et al. 2020, eq. 3.2 inverted);
        approximate when ``approximate`` is True."""
        delta = _as_float("target_delta", target_delta)
        mu = self.get_mu()
        return 0.0 if mu == 0 else native.gdp_epsilon(mu, delta)

    def get_delta(self, target_epsilon: float) -> float:
        """delta at target_epsilon (finite, >= 0) for mu-GDP (Bu et al. 2020, eq. 3.2)."""
        epsilon = _as_float("target_epsilon", target_epsilon)
        mu = self.get_mu()
        return 0.0 if mu == 0 else native.gdp_delta(mu, epsilon)

    def _mu(self) -> Tuple[float, bool]:
        built = self._native_event()
        return (0.0, False) if built is None else native.gdp_mu_of_event(built)


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of a mu-GDP mechanism (Bu et al. 2020, eq. 3.2; Dong, Roth, Su
    2019, Cor. 2.13). Exact for a mechanism that IS mu-GDP."""
    return native.gdp_delta(_as_float("mu", mu), _as_float("epsilon", epsilon))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon with gdp_delta(mu, epsilon) <= delta (on the safe side)."""
    return native.gdp_epsilon(_as_float("mu", mu), _as_float("delta", delta))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest mu whose mu-GDP implies (epsilon, delta)-DP (Bu et al. 2020, eq. 3.3)."""
    return native.gdp_mu(_as_float("epsilon", epsilon), _as_float("delta", delta))


def clt_mu_approximate(sampling_rate: float, noise_multiplier: float, steps: int) -> float:
    """APPROXIMATE: mu_CLT = p sqrt(T (e^{1/sigma^2} - 1)) of DP-SGD (Bu et al. 2020,
    eq. 3.1). A central-limit approximation, NOT an upper bound."""
    return native.clt_mu(_as_float("sampling_rate", sampling_rate),
                         _as_float("noise_multiplier", noise_multiplier),
                         _as_int("steps", steps))


def clt_epsilon_approximate(sampling_rate: float, noise_multiplier: float, steps: int,
                            delta: float) -> float:
    """APPROXIMATE: epsilon at delta of DP-SGD by the CLT (Bu et al. 2020, eqs. 3.1-3.2),
    composed step by step as ``dpkit epsilon --accountant=gdp``. NOT an upper bound."""
    from dpkit.events import GaussianDpEvent, PoissonSampledDpEvent  # noqa: PLC0415
    step = PoissonSampledDpEvent(sampling_rate, GaussianDpEvent(noise_multiplier))
    return GDPAccountant().compose(step, steps).get_epsilon(delta)


def clt_noise_multiplier_approximate(epsilon: float, delta: float, sampling_rate: float,
                                     steps: int) -> float:
    """APPROXIMATE: the noise multiplier whose mu_CLT is gdp_mu(epsilon, delta) (Bu et
    al. 2020, eqs. 3.3-3.4). NOT a guarantee."""
    return native.clt_noise_multiplier(_as_float("epsilon", epsilon),
                                       _as_float("delta", delta),
                                       _as_float("sampling_rate", sampling_rate),
                                       _as_int("steps", steps))


__all__ = [
    "PLDAccountant", "RDPAccountant", "GDPAccountant", "default_rdp_orders",
    "tf_privacy_orders", "gdp_delta", "gdp_epsilon", "gdp_mu", "clt_mu_approximate",
    "clt_epsilon_approximate", "clt_noise_multiplier_approximate",
]
