"""Goodness-of-fit helpers for the sampler tests (the counterparts of
mechanisms/statistics_testing.h), in the standard library only.

* Kolmogorov-Smirnov with the Dvoretzky-Kiefer-Wolfowitz bound (Massart 1990):
  P(sup_x |F_n(x) - F(x)| > t) <= 2 exp(-2 n t^2) for ANY distribution F (for a
  discontinuous F the bound is conservative), so a threshold t = sqrt(log(2/p) / (2n))
  fails a correct sampler with probability at most p, for every n.
* Pearson's chi-square with the exact chi-square survival function for integer degrees
  of freedom (closed forms in exp and erfc); its false-failure probability p holds
  asymptotically (all expected bin counts are kept >= 20 by merging the tails).
"""

import math

import numpy as np


def dkw_threshold(n, false_failure_probability):
    return math.sqrt(math.log(2 / false_failure_probability) / (2 * n))


def ks_statistic(samples, cdf):
    """sup_x |F_n(x) - F(x)| of the samples against a CDF (vectorised callable);
    for integer samples the supremum over the atoms (both sides of each jump)."""
    x = np.sort(np.asarray(samples))
    n = len(x)
    values, first = np.unique(x, return_index=True)
    last = np.append(first[1:], n)  # F_n just after each distinct value: last / n
    f = cdf(values)
    f_before = cdf_left(values, cdf, x.dtype)
    return max(np.max(np.abs(last / n - f)), np.max(np.abs(first / n - f_before)))


def cdf_left(values, cdf, dtype):
    """F(x-): for integer samples F(x - 1), for continuous ones F(x)."""
    if np.issubdtype(dtype, np.integer):
        return cdf(values - 1)
    return cdf(values)


def chi_square_sf(statistic, dof):
    """P(X > statistic) for X ~ chi-square(dof), dof a positive integer (closed forms:
    Abramowitz & Stegun 26.4.4 / 26.4.5)."""
    x = statistic / 2
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, dof // 2):
            term *= x / i
            total += term
        return math.exp(-x) * total
    total = math.erfc(math.sqrt(x))
    term = math.sqrt(x) / math.gamma(1.5)  # x^(1/2) / Gamma(3/2)
    for i in range(1, (dof + 1) // 2):
        total += math.exp(-x) * term
        term *= x / (i + 0.5)
    return total


def chi_square_p_value(counts, probabilities, min_expected=20):
    """Pearson's test of observed counts against probabilities over the same bins; bins
    with expected count below min_expected are merged (from the ends inwards)."""
    counts = np.asarray(counts, dtype=float)
    probabilities = np.asarray(probabilities, dtype=float)
    n = counts.sum()
    merged_counts, merged_expected = [], []
    acc_c = acc_e = 0.0
    for c, p in zip(counts, probabilities):
        acc_c += c
        acc_e += n * p
        if acc_e >= min_expected:
            merged_counts.append(acc_c)
            merged_expected.append(acc_e)
            acc_c = acc_e = 0.0
    if acc_e > 0 or acc_c > 0:
        merged_counts[-1] += acc_c
        merged_expected[-1] += acc_e
    c = np.array(merged_counts)
    e = np.array(merged_expected)
    statistic = float(np.sum((c - e) ** 2 / e))
    return chi_square_sf(statistic, len(c) - 1)
