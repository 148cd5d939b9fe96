"""Reproducible randomness for tests and examples ONLY.

Every sampler in :mod:`dpkit.mechanisms` draws from the calling thread's secure
generator (ChaCha20 keyed from the operating system, mechanisms/random.h) unless given
``rng=``. The only generator that can be given is this module's :class:`SeededGenerator`
(xoshiro256** seeded through SplitMix64, Blackman & Vigna 2018): its output is
predictable from the seed, so noise drawn with it protects nothing. It exists so that
statistical tests can fix their seed and state their false-failure probability.
"""

from dpkit._native import native

SeededGenerator = native.SeededGeneratorForTesting

__all__ = ["SeededGenerator"]
