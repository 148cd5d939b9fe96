"""Reproducible randomness for tests and examples ONLY.

Every sampler in :mod:`dpkit.mechanisms` draws from the calling thread's secure
generator (ChaCha20 keyed from the operating system, mechanisms/random.h) unless given
``rng=``. The only generator that can be given is this module's :class:`SeededGenerator`
(xoshiro256** seeded through SplitMix64, Blackman & Vigna 2018): its output is
predictable from the seed, so noise drawn with it protects nothing. It exists so that
statistical tests can fix their seed and state their false-failure probability.

The generator lives in its own test-only extension, ``_dpkit_testing``
(//python:_dpkit_testing.so), never in the production module ``_dpkit``: it is found on
PYTHONPATH in a source checkout (``bazel-bin/python``), and an installed package
(``pip install .``) has no dpkit.testing.
"""

from dpkit._native import native  # first: _dpkit registers the RandomGenerator base class

try:
    from dpkit import _dpkit_testing as _testing  # type: ignore[attr-defined]
except ImportError:  # source checkout: bazel-bin/python on PYTHONPATH
    import _dpkit_testing as _testing  # type: ignore[no-redef]

if not issubclass(_testing.SeededGeneratorForTesting, native.RandomGenerator):
    raise ImportError("_dpkit_testing was not built against this _dpkit")

SeededGenerator = _testing.SeededGeneratorForTesting

__all__ = ["SeededGenerator"]
