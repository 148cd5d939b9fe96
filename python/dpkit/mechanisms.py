"""Secure noise samplers filling NumPy arrays, and private selection over a score array.

Noise comes from the calling thread's secure generator (ChaCha20 keyed with 256 bits
from getrandom(2), with fast key erasure; mechanisms/random.h) and the GIL is released
while it is drawn. ``rng=`` accepts only a :class:`dpkit.testing.SeededGenerator`, for
reproducible tests (then the GIL is held: a generator serves one thread at a time).

Samplers (mechanisms/):
  * ``gaussian`` — N(0, stddev^2), 256-layer Ziggurat (Marsaglia & Tsang 2000; Doornik
    2005 layout). Floating-point noise, as DP-SGD uses it.
  * ``laplace`` — density exp(-|x|/b) / (2b), by inversion.
  * ``discrete_gaussian`` / ``discrete_laplace`` — exact samplers on the integers
    (Canonne, Kamath, Steinke 2020, Algorithms 1-3) in exact rational arithmetic.
Selection (mechanisms/selection.h), each epsilon-DP for scores of sensitivity Delta:
  * ``exponential_mechanism`` — P(i) proportional to exp(eps u_i / (2 Delta)) (McSherry &
    Talwar 2007) by the Gumbel-max trick; also eps-bounded-range (account it as
    ``BoundedRangeDpEvent(eps)``).
  * ``permute_and_flip`` — McKenna & Sheldon 2020 (``EpsilonDeltaDpEvent(eps)``).
  * ``report_noisy_max`` — Laplace(2 Delta / eps) noise (Dwork & Roth 2014, Sec. 3.3;
    ``EpsilonDeltaDpEvent(eps)``).
  With ``monotonic=True`` (all scores move the same way between neighbours, e.g.
  counts) the factor 2 is dropped (McSherry & Talwar 2007, Thm. 6).
"""

from __future__ import annotations

from typing import Any, Sequence, Tuple, Union

import numpy as np

from dpkit._native import native
from dpkit.events import _as_float

Shape = Union[int, Sequence[int], Tuple[int, ...]]


def _generator(rng: Any) -> Any:
    # native.RandomGenerator cannot be instantiated: its only subclass is dpkit.testing's.
    if rng is None or isinstance(rng, native.RandomGenerator):
        return rng
    raise TypeError("rng must be None (the secure generator) or a "
                    f"dpkit.testing.SeededGenerator, got {type(rng).__name__}")


def fill_gaussian(out: np.ndarray, stddev: float, *, rng: Any = None) -> np.ndarray:
    """Fills the writable C-contiguous float64 or float32 array ``out`` with i.i.d.
    N(0, stddev^2) samples (stddev finite, > 0); returns ``out``."""
    native.fill_gaussian(out, _as_float("stddev", stddev), _generator(rng))
    return out


def fill_laplace(out: np.ndarray, scale: float, *, rng: Any = None) -> np.ndarray:
    """Fills the float64 array ``out`` with i.i.d. Lap(scale) samples; returns it."""
    native.fill_laplace(out, _as_float("scale", scale), _generator(rng))
    return out


def fill_discrete_gaussian(out: np.ndarray, sigma: float, *, rng: Any = None) -> np.ndarray:
    """Fills the int64 array ``out`` with exact discrete Gaussian samples,
    P(x) proportional to exp(-x^2 / (2 sigma^2)), sigma in (0, 2^40]; returns it."""
    native.fill_discrete_gaussian(out, _as_float("sigma", sigma), _generator(rng))
    return out


def fill_discrete_laplace(out: np.ndarray, scale: float, *, rng: Any = None) -> np.ndarray:
    """Fills the int64 array ``out`` with exact discrete Laplace samples,
    P(x) proportional to exp(-|x| / scale), scale in (0, 2^50]; returns it."""
    native.fill_discrete_laplace(out, _as_float("scale", scale), _generator(rng))
    return out


def gaussian(stddev: float, size: Shape = 1, *, dtype: Any = np.float64,
             rng: Any = None) -> np.ndarray:
    """A new array of shape ``size`` (float64 or float32) of N(0, stddev^2) samples."""
    return fill_gaussian(np.empty(size, dtype=dtype), stddev, rng=rng)


def laplace(scale: float, size: Shape = 1, *, rng: Any = None) -> np.ndarray:
    """A new float64 array of shape ``size`` of Lap(scale) samples."""
    return fill_laplace(np.empty(size, dtype=np.float64), scale, rng=rng)


def discrete_gaussian(sigma: float, size: Shape = 1, *, rng: Any = None) -> np.ndarray:
    """A new int64 array of shape ``size`` of discrete Gaussian samples."""
    return fill_discrete_gaussian(np.empty(size, dtype=np.int64), sigma, rng=rng)


def discrete_laplace(scale: float, size: Shape = 1, *, rng: Any = None) -> np.ndarray:
    """A new int64 array of shape ``size`` of discrete Laplace samples."""
    return fill_discrete_laplace(np.empty(size, dtype=np.int64), scale, rng=rng)


def _select(method: str, scores: Any, epsilon: float, sensitivity: float, monotonic: bool,
            rng: Any) -> int:
    return native.select(np.asarray(scores, dtype=np.float64), _as_float("epsilon", epsilon),
                         _as_float("sensitivity", sensitivity), method, bool(monotonic),
                         _generator(rng))


def exponential_mechanism(scores: Any, epsilon: float, sensitivity: float = 1.0, *,
                          monotonic: bool = False, rng: Any = None) -> int:
    """Index chosen with probability proportional to exp(epsilon u_i / (2 sensitivity))
    from a 1-D array of finite scores; epsilon-DP and epsilon-bounded-range."""
    return _select("exponential", scores, epsilon, sensitivity, monotonic, rng)


def permute_and_flip(scores: Any, epsilon: float, sensitivity: float = 1.0, *,
                     monotonic: bool = False, rng: Any = None) -> int:
    """Index chosen by permute-and-flip (McKenna & Sheldon 2020); epsilon-DP."""
    return _select("permute_and_flip", scores, epsilon, sensitivity, monotonic, rng)


def report_noisy_max(scores: Any, epsilon: float, sensitivity: float = 1.0, *,
                     monotonic: bool = False, rng: Any = None) -> int:
    """argmax of scores + Laplace(2 sensitivity / epsilon) noise; epsilon-DP."""
    return _select("report_noisy_max", scores, epsilon, sensitivity, monotonic, rng)


def exponential_probabilities(scores: Any, epsilon: float, sensitivity: float = 1.0, *,
                              monotonic: bool = False) -> np.ndarray:
    """The exponential mechanism's selection probabilities (a stable softmax)."""
    return np.asarray(native.exponential_probabilities(
        np.asarray(scores, dtype=np.float64), _as_float("epsilon", epsilon),
        _as_float("sensitivity", sensitivity), bool(monotonic)))


__all__ = [
    "gaussian", "laplace", "discrete_gaussian", "discrete_laplace", "fill_gaussian",
    "fill_laplace", "fill_discrete_gaussian", "fill_discrete_laplace",
    "exponential_mechanism", "permute_and_flip", "report_noisy_max",
    "exponential_probabilities",
]
