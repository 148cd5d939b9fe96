"""Calibration of DP-SGD (Poisson-sampled Gaussian) to a privacy budget
(accounting/calibrate.h), with the same accountants and options as ``dpkit calibrate``.

For "pld" and "rdp" the returned setting, re-accounted, is GUARANTEED to meet the
target (certified upper bounds), and is within 0.1 % of the best such setting
(noise multiplier, sampling rate) or exactly the best (steps). "gdp" uses the CLT
approximation of Bu et al. 2020 (eq. 3.1): APPROXIMATE, no guarantee.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from dpkit._native import native
from dpkit.events import _as_float, _as_int

# Largest step count calibrate_steps searches by default (that of `dpkit calibrate`).
MAX_CALIBRATED_STEPS = 1_000_000_000


class NoiseCalibration(NamedTuple):
    noise_multiplier: float
    epsilon: float  # epsilon of noise_multiplier (<= target)


class StepsCalibration(NamedTuple):
    steps: int  # 0 when even one step exceeds the target
    epsilon: float  # epsilon of `steps` steps (<= target); inf when steps == 0


class SamplingRateCalibration(NamedTuple):
    sampling_rate: float
    steps: int  # T at the returned rate
    epsilon: float  # epsilon of the returned rate (<= target)


def calibrate_noise_multiplier(target_epsilon: float, delta: float, sampling_rate: float,
                               steps: int, accountant: str = "pld",
                               rdp_conversion: str = "optimal",
                               epsilon_tolerance: float = 1e-4) -> NoiseCalibration:
    """The smallest noise multiplier (within 0.1 %) whose epsilon at ``delta`` after
    ``steps`` steps at ``sampling_rate`` is <= ``target_epsilon``, by ``accountant``
    ("pld", "rdp" or "gdp" — the last APPROXIMATE). ValueError when no noise multiplier
    in [1e-3, 1e4] meets the target."""
    z, eps = native.calibrate_noise_multiplier(
        _as_float("target_epsilon", target_epsilon), _as_float("delta", delta),
        _as_float("sampling_rate", sampling_rate), _as_int("steps", steps), accountant,
        rdp_conversion, _as_float("epsilon_tolerance", epsilon_tolerance))
    return NoiseCalibration(z, eps)


def calibrate_steps(target_epsilon: float, delta: float, sampling_rate: float,
                    noise_multiplier: float, max_steps: int = MAX_CALIBRATED_STEPS,
                    accountant: str = "pld", rdp_conversion: str = "optimal",
                    epsilon_tolerance: float = 1e-4) -> StepsCalibration:
    """The largest number of steps T <= max_steps whose epsilon is <= target_epsilon;
    T + 1 steps exceed it unless T == max_steps."""
    steps, eps = native.calibrate_steps(
        _as_float("target_epsilon", target_epsilon), _as_float("delta", delta),
        _as_float("sampling_rate", sampling_rate),
        _as_float("noise_multiplier", noise_multiplier), _as_int("max_steps", max_steps),
        accountant, rdp_conversion, _as_float("epsilon_tolerance", epsilon_tolerance))
    return StepsCalibration(steps, eps)


def calibrate_sampling_rate(target_epsilon: float, delta: float, noise_multiplier: float,
                            steps: Optional[int] = None, epochs: Optional[float] = None,
                            accountant: str = "pld", rdp_conversion: str = "optimal",
                            epsilon_tolerance: float = 1e-4) -> SamplingRateCalibration:
    """The largest Poisson sampling rate q (within 0.1 %) whose epsilon is <=
    target_epsilon, for a fixed number of ``steps`` or for ``epochs`` (then
    T = ceil(epochs / q)); give exactly one of the two."""
    if (steps is None) == (epochs is None):
        raise ValueError("give exactly one of steps (>= 1) or epochs (> 0)")
    fixed_steps = 0 if steps is None else _as_int("steps", steps)
    fixed_epochs = 0.0 if epochs is None else _as_float("epochs", epochs)
    if epochs is not None and not fixed_epochs > 0:
        raise ValueError(f"epochs must be finite and > 0, got {fixed_epochs!r}")
    q, t, eps = native.calibrate_sampling_rate(
        _as_float("target_epsilon", target_epsilon), _as_float("delta", delta),
        _as_float("noise_multiplier", noise_multiplier), fixed_steps, fixed_epochs,
        accountant, rdp_conversion, _as_float("epsilon_tolerance", epsilon_tolerance))
    return SamplingRateCalibration(q, t, eps)


class CltEquivalentNoise(NamedTuple):
    epsilon_upper: float  # certified PLD bounds for (q, sigma, T, delta)
    epsilon_lower: float
    mu: float  # Bu et al. 2020, eq. (3.3) at epsilon_upper
    noise_multiplier: float  # sigma~ at epsilon_upper (lower end)
    noise_multiplier_upper: float  # sigma~ at epsilon_lower (upper end)


def clt_equivalent_noise_multiplier(sampling_rate: float, noise_multiplier: float,
                                    steps: int, delta: float,
                                    epsilon_tolerance: float = 1e-4) -> CltEquivalentNoise:
    """APPROXIMATE (a statement about the CLT, not a guarantee): the noise multiplier
    sigma~ of Bu et al. 2020, eqs. (3.3)-(3.4), with which the CLT would claim the
    certified PLD epsilon of (q, sigma, T) at delta, as an interval."""
    return CltEquivalentNoise(*native.clt_equivalent_noise_multiplier(
        _as_float("sampling_rate", sampling_rate),
        _as_float("noise_multiplier", noise_multiplier), _as_int("steps", steps),
        _as_float("delta", delta), _as_float("epsilon_tolerance", epsilon_tolerance)))


__all__ = [
    "calibrate_noise_multiplier", "calibrate_steps", "calibrate_sampling_rate",
    "clt_equivalent_noise_multiplier", "NoiseCalibration", "StepsCalibration",
    "SamplingRateCalibration", "CltEquivalentNoise", "MAX_CALIBRATED_STEPS",
]
