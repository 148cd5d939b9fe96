"""Events: what happened to the data, with the names and fields of dp_accounting.

Each class mirrors the dp_accounting class of the same name (``GaussianDpEvent``,
``PoissonSampledDpEvent``, ...), so code written for Google's dp_accounting reads the
same; dpkit adds ``DiscreteGaussianDpEvent`` and ``BoundedRangeDpEvent``. An event is a
frozen dataclass validated at construction by the C++ library (accounting/event.h): an
invalid event raises ``ValueError`` with the library's one-line message, e.g.
``noise_multiplier must be finite and > 0, got -1``. Noise parameters are in units of the
query's sensitivity, as in dp_accounting.

Events from dp_accounting itself are converted by :func:`from_dp_accounting` (duck-typed
on the class names and attributes, so dpkit does not depend on dp_accounting), and back
by :func:`to_dp_accounting`.
"""

from __future__ import annotations

import dataclasses
import numbers
import operator
from typing import Any, Iterable, List, Optional

from dpkit._native import native

# Nesting limit of event trees: that of the C++ JSON parser (accounting::kMaxEventDepth).
MAX_EVENT_DEPTH = 256


def _as_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got bool")
    try:
        result = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if not -(2**63) <= result < 2**63:
        raise ValueError(f"{name} must fit in a 64-bit integer, got {result}")
    return result


class DpEvent:
    """Base class of dpkit's events. ``to_json()`` gives the JSON form of
    accounting/event.h (the form of ledger files and the ``dpkit`` command line)."""

    __slots__ = ()
    _native: Any
    _depth: int

    def to_json(self) -> str:
        """Compact JSON text of accounting/event.h; doubles round-trip exactly."""
        return self._native.to_json()

    def _set_native(self, built: Any, depth: int) -> None:
        if depth > MAX_EVENT_DEPTH:
            raise ValueError(f"event nesting must be at most {MAX_EVENT_DEPTH} levels deep")
        object.__setattr__(self, "_native", built)
        object.__setattr__(self, "_depth", depth)


def _hidden() -> Any:
    return dataclasses.field(init=False, repr=False, compare=False, default=None)


@dataclasses.dataclass(frozen=True)
class GaussianDpEvent(DpEvent):
    """Gaussian noise N(0, (noise_multiplier * C)^2) on a query of L2 sensitivity C."""

    noise_multiplier: float
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        z = _as_float("noise_multiplier", self.noise_multiplier)
        object.__setattr__(self, "noise_multiplier", z)
        self._set_native(native.Event.gaussian(z), 1)


@dataclasses.dataclass(frozen=True)
class LaplaceDpEvent(DpEvent):
    """Laplace noise Lap(noise_multiplier * C) on a query of L1 sensitivity C."""

    noise_multiplier: float
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        b = _as_float("noise_multiplier", self.noise_multiplier)
        object.__setattr__(self, "noise_multiplier", b)
        self._set_native(native.Event.laplace(b), 1)


@dataclasses.dataclass(frozen=True)
class DiscreteGaussianDpEvent(DpEvent):
    """Discrete Gaussian noise N_Z(0, sigma^2) on an integer query of integer L2
    sensitivity (Canonne, Kamath, Steinke 2020); both in the query's own units."""

    sigma: float
    sensitivity: int = 1
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        sigma = _as_float("sigma", self.sigma)
        sensitivity = _as_int("sensitivity", self.sensitivity)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "sensitivity", sensitivity)
        self._set_native(native.Event.discrete_gaussian(sigma, sensitivity), 1)


@dataclasses.dataclass(frozen=True)
class BoundedRangeDpEvent(DpEvent):
    """Any epsilon-bounded-range mechanism (Durfee & Rogers 2019), e.g. the exponential
    mechanism with P(i) proportional to exp(epsilon u_i / (2 Delta))."""

    epsilon: float
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        eps = _as_float("epsilon", self.epsilon)
        object.__setattr__(self, "epsilon", eps)
        self._set_native(native.Event.bounded_range(eps), 1)


@dataclasses.dataclass(frozen=True)
class EpsilonDeltaDpEvent(DpEvent):
    """Any (epsilon, delta)-DP mechanism; delta = 0 is pure epsilon-DP."""

    epsilon: float
    delta: float = 0.0
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        eps = _as_float("epsilon", self.epsilon)
        delta = _as_float("delta", self.delta)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)
        built = native.Event.pure_dp(eps) if delta == 0 else native.Event.approx_dp(eps, delta)
        self._set_native(built, 1)


@dataclasses.dataclass(frozen=True)
class PoissonSampledDpEvent(DpEvent):
    """``event`` run on a Poisson sample: each record enters independently with
    probability ``sampling_probability`` in (0, 1]."""

    sampling_probability: float
    event: DpEvent
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        q = _as_float("sampling_probability", self.sampling_probability)
        inner = from_dp_accounting(self.event)
        object.__setattr__(self, "sampling_probability", q)
        object.__setattr__(self, "event", inner)
        self._set_native(native.Event.poisson_sampled(q, inner._native), inner._depth + 1)


@dataclasses.dataclass(frozen=True)
class SampledWithoutReplacementDpEvent(DpEvent):
    """``event`` run on a uniformly random subset of ``sample_size`` of the
    ``source_dataset_size`` records."""

    source_dataset_size: int
    sample_size: int
    event: DpEvent
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        n = _as_int("source_dataset_size", self.source_dataset_size)
        m = _as_int("sample_size", self.sample_size)
        inner = from_dp_accounting(self.event)
        object.__setattr__(self, "source_dataset_size", n)
        object.__setattr__(self, "sample_size", m)
        object.__setattr__(self, "event", inner)
        built = native.Event.sampled_without_replacement(n, m, inner._native)
        self._set_native(built, inner._depth + 1)


@dataclasses.dataclass(frozen=True)
class SelfComposedDpEvent(DpEvent):
    """``event`` run ``count`` >= 1 times (adaptively)."""

    event: DpEvent
    count: int
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        inner = from_dp_accounting(self.event)
        count = _as_int("count", self.count)
        object.__setattr__(self, "event", inner)
        object.__setattr__(self, "count", count)
        self._set_native(native.Event.self_composed(inner._native, count), inner._depth + 1)


@dataclasses.dataclass(frozen=True)
class ComposedDpEvent(DpEvent):
    """The ``events`` (a non-empty list) run one after another, adaptively."""

    events: List[DpEvent]
    _native: Any = _hidden()
    _depth: int = _hidden()

    def __post_init__(self) -> None:
        if isinstance(self.events, (str, bytes)) or not isinstance(self.events, Iterable):
            raise TypeError(f"events must be a list of events, got {type(self.events).__name__}")
        events = [from_dp_accounting(e) for e in self.events]
        object.__setattr__(self, "events", events)
        depth = 1 + max((e._depth for e in events), default=0)
        self._set_native(native.Event.composed([e._native for e in events]), depth)


# dp_accounting class name -> how to build the dpkit event from its attributes.
_FROM_DP_ACCOUNTING = {
    "GaussianDpEvent": lambda e: GaussianDpEvent(e.noise_multiplier),
    "LaplaceDpEvent": lambda e: LaplaceDpEvent(e.noise_multiplier),
    "DiscreteGaussianDpEvent": lambda e: DiscreteGaussianDpEvent(e.sigma, e.sensitivity),
    "BoundedRangeDpEvent": lambda e: BoundedRangeDpEvent(e.epsilon),
    "EpsilonDeltaDpEvent": lambda e: EpsilonDeltaDpEvent(e.epsilon, e.delta),
    "PoissonSampledDpEvent": lambda e: PoissonSampledDpEvent(e.sampling_probability, e.event),
    "SampledWithoutReplacementDpEvent": lambda e: SampledWithoutReplacementDpEvent(
        e.source_dataset_size, e.sample_size, e.event),
    "SelfComposedDpEvent": lambda e: SelfComposedDpEvent(e.event, e.count),
    "ComposedDpEvent": lambda e: ComposedDpEvent(list(e.events)),
}


def from_dp_accounting(event: Any) -> DpEvent:
    """The dpkit event equal to ``event``: a dpkit event is returned as it is; an object
    of a dp_accounting event class (or any object with the same class name and
    attributes) is converted, recursively. Raises ValueError for other classes (e.g.
    dp_accounting's SampledWithReplacementDpEvent, which dpkit does not account)."""
    if isinstance(event, DpEvent):
        return event
    build = _FROM_DP_ACCOUNTING.get(type(event).__name__)
    if build is None:
        raise ValueError(f"cannot convert {type(event).__name__} to a dpkit event; "
                         f"supported: {', '.join(sorted(_FROM_DP_ACCOUNTING))}")
    return build(event)


def to_dp_accounting(event: DpEvent, module: Optional[Any] = None) -> Any:
    """The dp_accounting event equal to ``event`` (``module`` defaults to the installed
    ``dp_accounting``; any module with the same classes will do). dp_accounting has no
    class for the discrete Gaussian or bounded range: those raise ValueError."""
    if module is None:
        import dp_accounting as module  # noqa: PLC0415 (optional dependency)
    name = type(event).__name__
    cls = getattr(module, name, None)
    if cls is None:
        raise ValueError(f"{getattr(module, '__name__', module)} has no {name}")
    if isinstance(event, (PoissonSampledDpEvent, SampledWithoutReplacementDpEvent,
                          SelfComposedDpEvent)):
        fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)
                  if f.init}
        fields["event"] = to_dp_accounting(event.event, module)
        return cls(**fields)
    if isinstance(event, ComposedDpEvent):
        return cls(events=[to_dp_accounting(e, module) for e in event.events])
    if not isinstance(event, DpEvent):
        raise ValueError(f"not a dpkit event: {name}")
    return cls(**{f.name: getattr(event, f.name) for f in dataclasses.fields(event) if f.init})


def from_native(built: Any) -> DpEvent:
    """The dpkit event of a C++ event (``_dpkit.Event``), e.g. one read from a ledger.
    The result keeps ``built`` itself for accounting, so a parsed tree is accounted (and
    written back by ``to_json``) exactly as parsed, even where two C++ kinds share a
    Python class (approx_dp with delta 0 and pure_dp are both EpsilonDeltaDpEvent)."""
    event = _from_native_fields(built)
    object.__setattr__(event, "_native", built)
    return event


def _from_native_fields(built: Any) -> DpEvent:
    kind = built.kind
    children = built.children
    if kind == "gaussian":
        return GaussianDpEvent(built.noise_multiplier)
    if kind == "laplace":
        return LaplaceDpEvent(built.scale)
    if kind == "discrete_gaussian":
        return DiscreteGaussianDpEvent(built.sigma, built.sensitivity)
    if kind == "bounded_range":
        return BoundedRangeDpEvent(built.epsilon)
    if kind in ("pure_dp", "approx_dp"):
        return EpsilonDeltaDpEvent(built.epsilon, built.delta)
    if kind == "poisson_sampled":
        return PoissonSampledDpEvent(built.sampling_rate, from_native(children[0]))
    if kind == "sampled_without_replacement":
        return SampledWithoutReplacementDpEvent(built.population, built.sample_size,
                                                from_native(children[0]))
    if kind == "self_composed":
        return SelfComposedDpEvent(from_native(children[0]), built.count)
    if kind == "composed":
        return ComposedDpEvent([from_native(c) for c in children])
    raise ValueError(f"unknown event kind {kind!r}")


def event_from_json(text: str) -> DpEvent:
    """Parses the JSON form of accounting/event.h (as written by ``DpEvent.to_json``,
    ledger files and ``dpkit ... --format=json``); the library's validation applies."""
    return from_native(native.Event.from_json(text))


__all__ = [
    "DpEvent", "GaussianDpEvent", "LaplaceDpEvent", "DiscreteGaussianDpEvent",
    "BoundedRangeDpEvent", "EpsilonDeltaDpEvent", "PoissonSampledDpEvent",
    "SampledWithoutReplacementDpEvent", "SelfComposedDpEvent", "ComposedDpEvent",
    "from_dp_accounting", "to_dp_accounting", "event_from_json", "MAX_EVENT_DEPTH",
]
