"""An accountant with Opacus' interface, backed by dpkit's certified PLD accountant.

Opacus (https://opacus.ai) accounts DP-SGD through an accountant object with the
interface of ``opacus.accountants.IAccountant``: ``step(noise_multiplier=,
sample_rate=)`` after every optimizer step, ``get_epsilon(delta)``, ``history`` (a list
of (noise_multiplier, sample_rate, num_steps) runs), ``__len__``, ``mechanism()``,
``get_optimizer_hook_fn(sample_rate)`` and ``state_dict()`` / ``load_state_dict()`` for
checkpoints. :class:`OpacusPLDAccountant` implements that interface in pure Python (it
does not import Opacus or PyTorch) and accounts the history with dpkit's PLD, so
``get_epsilon`` is a CERTIFIED upper bound. With Opacus::

    engine = opacus.PrivacyEngine()
    engine.accountant = dpkit.opacus.OpacusPLDAccountant()
    model, optimizer, loader = engine.make_private(...)   # attaches the accountant's hook
    ...
    engine.get_epsilon(delta=1e-5)

The history is accounted exactly as ``dpkit ledger`` accounts a ledger: each run of k
identical steps is ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)),
k)``, the runs composed in order, so both report the same epsilon bit for bit.
(Opacus' ``make_private_with_epsilon`` calibrates with its own accountants by name; use
:func:`dpkit.calibrate_noise_multiplier` for a certified calibration instead.)
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, List, Optional, Tuple

from dpkit._native import native
from dpkit.events import _as_float

MECHANISM = "dpkit_pld"


class OpacusPLDAccountant:
    """Opacus-interface accountant over dpkit's certified PLD (see the module doc)."""

    def __init__(self, epsilon_tolerance: float = 1e-4) -> None:
        self.history: List[Tuple[float, float, int]] = []
        self.epsilon_tolerance = _as_float("epsilon_tolerance", epsilon_tolerance)
        native.pld_delta(native.Event.pure_dp(0.0), 0.0, self.epsilon_tolerance, 0.0)

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Records one DP-SGD step; consecutive identical steps share a history entry,
        as in Opacus' own accountants."""
        z = _as_float("noise_multiplier", noise_multiplier)
        q = _as_float("sample_rate", sample_rate)
        native.dp_sgd_event(q, z, 1)  # validates, with the library's message
        if self.history and self.history[-1][0] == z and self.history[-1][1] == q:
            self.history[-1] = (z, q, self.history[-1][2] + 1)
        else:
            self.history.append((z, q, 1))

    def get_epsilon_bounds(self, delta: float) -> Tuple[float, float]:
        """(lower, upper) certified bounds on epsilon at delta; (0, 0) before any step."""
        upper, lower, _ = self._bounds(delta)
        return (lower, upper)

    def get_epsilon(self, delta: float, **kwargs: Any) -> float:
        """Certified upper bound on epsilon at delta (other Opacus keyword arguments,
        such as ``eps_error``, are accepted and ignored: the bound is certified)."""
        del kwargs
        return self._bounds(delta)[0]

    def __len__(self) -> int:
        return len(self.history)

    @classmethod
    def mechanism(cls) -> str:
        return MECHANISM

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """The hook Opacus' PrivacyEngine attaches to the DPOptimizer's step."""

        def hook_fn(optim: Any) -> None:
            self.step(noise_multiplier=optim.noise_multiplier,
                      sample_rate=sample_rate * optim.accumulated_iterations)

        return hook_fn

    def state_dict(self, destination: Optional[Any] = None) -> Any:
        """The history and the mechanism name, as Opacus' accountants checkpoint them."""
        if destination is None:
            destination = OrderedDict()
        destination["history"] = list(self.history)
        destination["mechanism"] = MECHANISM
        return destination

    def load_state_dict(self, state_dict: Any) -> None:
        """Restores a state_dict() (ValueError for a missing key or another mechanism)."""
        if not state_dict:
            raise ValueError("state dict is either None or empty and hence cannot be "
                             "loaded into Privacy Accountant.")
        for key in ("history", "mechanism"):
            if key not in state_dict:
                raise ValueError(f"state_dict does not have the key `{key}`. Cannot be "
                                 "loaded into Privacy Accountant.")
        if state_dict["mechanism"] != MECHANISM:
            raise ValueError(f"state_dict of mechanism {state_dict['mechanism']!r} cannot "
                             f"be loaded into an accountant of mechanism {MECHANISM!r}")
        history = [(float(z), float(q), int(n)) for z, q, n in state_dict["history"]]
        for z, q, n in history:
            native.dp_sgd_event(q, z, n)  # validates every entry
        self.history = history

    def _bounds(self, delta: float) -> Tuple[float, float, float]:
        delta = _as_float("delta", delta)
        if not self.history:
            return (0.0, 0.0, 0.0)
        runs = [native.dp_sgd_event(q, z, n) for z, q, n in self.history]
        built = runs[0] if len(runs) == 1 else native.Event.composed(runs)
        return native.pld_epsilon(built, delta, self.epsilon_tolerance, 0.0)


__all__ = ["OpacusPLDAccountant", "MECHANISM"]
