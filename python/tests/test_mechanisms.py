"""Samplers and selection: the same goodness-of-fit tests as the C++ ones
(mechanisms/*_test.cc), with seeds fixed through dpkit.testing and stated false-failure
probabilities (see statistics.py). The secure generator is tested too (unseeded, with
the same false-failure probability per test)."""

import math
import threading

import numpy as np
import pytest

import dpkit
from dpkit.testing import SeededGenerator
from goodness_of_fit import chi_square_p_value, chi_square_sf, dkw_threshold, ks_statistic

P_FAIL = 1e-6  # false-failure probability of each statistical assertion
N = 200_000

erf = np.vectorize(math.erf)


def normal_cdf(stddev):
    return lambda x: 0.5 * (1 + erf(np.asarray(x, dtype=float) / (stddev * math.sqrt(2))))


def laplace_cdf(scale):
    def cdf(x):
        x = np.asarray(x, dtype=float)
        return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / scale),
                        1 - 0.5 * np.exp(-np.maximum(x, 0) / scale))
    return cdf


def discrete_pmf(log_weight, radius):
    """Normalised PMF on [-radius, radius] from an unnormalised log weight."""
    support = np.arange(-radius, radius + 1)
    w = np.exp(np.array([log_weight(int(k)) for k in support]))
    return support, w / w.sum()


def discrete_cdf(support, pmf):
    cumulative = np.cumsum(pmf)

    def cdf(x):
        idx = np.searchsorted(support, np.asarray(x), side="right") - 1
        return np.where(idx < 0, 0.0, cumulative[np.clip(idx, 0, len(cumulative) - 1)])
    return cdf


def test_chi_square_survival_function_matches_closed_forms():
    # dof 2: exp(-x/2); dof 1: erfc(sqrt(x/2)); dof 3 at its median 2.365974 ~ 0.5.
    assert chi_square_sf(3.0, 2) == pytest.approx(math.exp(-1.5), rel=1e-14)
    assert chi_square_sf(3.0, 1) == pytest.approx(math.erfc(math.sqrt(1.5)), rel=1e-14)
    assert chi_square_sf(2.365973884375338, 3) == pytest.approx(0.5, rel=1e-9)
    assert chi_square_sf(18.307038053275146, 10) == pytest.approx(0.05, rel=1e-9)


@pytest.mark.parametrize("rng", [SeededGenerator(20240101), None], ids=["seeded", "secure"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gaussian_passes_ks(rng, dtype):
    samples = dpkit.mechanisms.gaussian(2.5, N, dtype=dtype, rng=rng)
    assert samples.dtype == dtype and samples.shape == (N,)
    assert ks_statistic(samples.astype(np.float64), normal_cdf(2.5)) < dkw_threshold(N, P_FAIL)


@pytest.mark.parametrize("rng", [SeededGenerator(7), None], ids=["seeded", "secure"])
def test_laplace_passes_ks(rng):
    samples = dpkit.mechanisms.laplace(0.75, N, rng=rng)
    assert ks_statistic(samples, laplace_cdf(0.75)) < dkw_threshold(N, P_FAIL)


@pytest.mark.parametrize("sigma", [0.8, 4.5])
def test_discrete_gaussian_passes_ks_and_chi_square(sigma):
    n = 50_000
    samples = dpkit.mechanisms.discrete_gaussian(sigma, n, rng=SeededGenerator(11))
    assert samples.dtype == np.int64
    support, pmf = discrete_pmf(lambda k: -k * k / (2 * sigma * sigma), int(40 * sigma) + 2)
    assert ks_statistic(samples, discrete_cdf(support, pmf)) < dkw_threshold(n, P_FAIL)
    counts = np.array([np.count_nonzero(samples == k) for k in support])
    assert counts.sum() == n
    assert chi_square_p_value(counts, pmf) > P_FAIL


@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_discrete_laplace_passes_ks_and_chi_square(scale):
    n = 50_000
    samples = dpkit.mechanisms.discrete_laplace(scale, n, rng=SeededGenerator(12))
    support, pmf = discrete_pmf(lambda k: -abs(k) / scale, int(60 * scale) + 2)
    assert ks_statistic(samples, discrete_cdf(support, pmf)) < dkw_threshold(n, P_FAIL)
    counts = np.array([np.count_nonzero(samples == k) for k in support])
    assert chi_square_p_value(counts, pmf) > P_FAIL


def test_secure_discrete_gaussian_passes_chi_square():
    n = 20_000
    samples = dpkit.mechanisms.discrete_gaussian(2.0, n)
    support, pmf = discrete_pmf(lambda k: -k * k / 8.0, 90)
    counts = np.array([np.count_nonzero(samples == k) for k in support])
    assert chi_square_p_value(counts, pmf) > P_FAIL


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_mechanism_passes_chi_square(monotonic):
    scores = np.array([0.0, 1.0, 2.0, 3.0, 3.5])
    epsilon = 1.2
    probabilities = dpkit.mechanisms.exponential_probabilities(scores, epsilon,
                                                               monotonic=monotonic)
    factor = epsilon if monotonic else epsilon / 2  # McSherry & Talwar 2007
    expected = np.exp(factor * scores) / np.exp(factor * scores).sum()
    np.testing.assert_allclose(probabilities, expected, rtol=1e-12)
    rng = SeededGenerator(99)
    n = 40_000
    picks = [dpkit.mechanisms.exponential_mechanism(scores, epsilon, monotonic=monotonic,
                                                    rng=rng) for _ in range(n)]
    counts = np.bincount(picks, minlength=len(scores))
    assert chi_square_p_value(counts, probabilities) > P_FAIL


def test_report_noisy_max_and_permute_and_flip_prefer_the_clear_winner():
    # With scores 0 and 1000 and epsilon 1, choosing index 0 needs Laplace(2) noise
    # beyond 1000 (probability < e^-500) or an exponential-mechanism weight e^-500.
    scores = [0.0, 1000.0]
    rng = SeededGenerator(5)
    for select in (dpkit.mechanisms.report_noisy_max, dpkit.mechanisms.permute_and_flip):
        assert all(select(scores, 1.0, rng=rng) == 1 for _ in range(100))


def test_report_noisy_max_matches_its_closed_form_on_two_candidates():
    # Two candidates, scores 0 and 1, Laplace(b = 2/eps) noise on each: P(pick 1) =
    # P(X1 - X0 > -1) with X1 - X0 the difference of two Laplaces, whose CDF is
    # F(t) = 1 - (1/2) e^{-t/b} (1 + t/(2b)) for t >= 0 (Kotz, Kozubowski, Podgorski 2001).
    epsilon = 1.0
    b = 2 / epsilon
    p_one = 1 - 0.5 * math.exp(-1 / b) * (1 + 1 / (2 * b))
    rng = SeededGenerator(321)
    n = 40_000
    picks = [dpkit.mechanisms.report_noisy_max([0.0, 1.0], epsilon, rng=rng) for _ in range(n)]
    counts = np.bincount(picks, minlength=2)
    assert chi_square_p_value(counts, [1 - p_one, p_one]) > P_FAIL


def test_seeded_generators_reproduce_and_secure_ones_do_not():
    a = dpkit.mechanisms.gaussian(1.0, 1000, rng=SeededGenerator(3))
    b = dpkit.mechanisms.gaussian(1.0, 1000, rng=SeededGenerator(3))
    np.testing.assert_array_equal(a, b)
    c = dpkit.mechanisms.gaussian(1.0, 1000)
    d = dpkit.mechanisms.gaussian(1.0, 1000)
    assert not np.array_equal(c, d)


def test_production_module_carries_no_seeded_generator():
    # The seeded generator lives in the test-only extension _dpkit_testing; _dpkit binds
    # only the abstract base, which Python cannot instantiate or subclass into a generator.
    from dpkit._native import native
    assert not any("seed" in name.lower() for name in dir(native))
    assert type(SeededGenerator(1)).__module__.endswith("_dpkit_testing")
    with pytest.raises(TypeError, match="No constructor"):
        native.RandomGenerator()

    class Fake(native.RandomGenerator):
        pass
    with pytest.raises(TypeError, match="No constructor"):
        Fake()


def test_fill_writes_in_place_and_keeps_the_shape():
    out = np.zeros((3, 4), dtype=np.float32)
    assert dpkit.mechanisms.fill_gaussian(out, 1.0) is out
    assert np.count_nonzero(out) == 12


def test_secure_samplers_run_in_parallel_threads():
    # The secure path releases the GIL and uses one generator per thread.
    results = [None] * 4

    def work(i):
        results[i] = dpkit.mechanisms.gaussian(1.0, 100_000)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert ks_statistic(results[i], normal_cdf(1.0)) < dkw_threshold(100_000, P_FAIL)
    assert not np.array_equal(results[0], results[1])
