"""Published figures of other accountants, reproduced through the Python API with the
same assertions and tolerances as the C++ tests that check them (accounting/pld_test.cc,
rdp_test.cc): Google dp_accounting's PLD examples, Microsoft's PRV accountant, and
TensorFlow Privacy's compute_dp_sgd_privacy examples."""

import math

import pytest

import dpkit


def dp_sgd(q, sigma, steps):
    return dpkit.SelfComposedDpEvent(
        dpkit.PoissonSampledDpEvent(q, dpkit.GaussianDpEvent(sigma)), steps)


def test_google_gaussian_composition():
    # dp_accounting: delta(1) = 0.126936 for three Gaussians with sigma = sqrt(3), printed
    # to 6 digits: the certified bounds bracket it up to that rounding.
    accountant = dpkit.PLDAccountant().compose(dpkit.GaussianDpEvent(math.sqrt(3.0)), 3)
    lower, upper = accountant.get_delta_bounds(1.0)
    assert lower <= 0.126936 + 5e-7
    assert upper >= 0.126936 - 5e-7
    assert upper == pytest.approx(0.126936, abs=1e-5)


def test_google_poisson_sampled_gaussian():
    # dp_accounting's published 0.15594 is its own pessimistic estimate (5 digits).
    event = dpkit.PoissonSampledDpEvent(0.2, dpkit.GaussianDpEvent(0.5))
    lower, upper = dpkit.PLDAccountant().compose(event, 3).get_delta_bounds(1.0)
    assert lower <= 0.15594 + 5e-6
    assert upper == pytest.approx(0.15594, abs=2e-5)


@pytest.mark.parametrize("sigma, q, steps, prv", [
    (1.5, 0.05, 1000, 6.209969), (2.0, 0.001, 20000, 0.305838), (3.0, 0.05, 50000, 24.942006)])
def test_prv_accountant_upper_bounds_are_consistent(sigma, q, steps, prv):
    # Gopi, Lee, Wutschitz 2021 at delta = 1e-6, computed with eps_error = 0.01: the exact
    # epsilon lies in [prv - 0.02, prv] by PRV's own claim (see accounting/pld_test.cc).
    eps_error = 0.01
    lower, upper = dpkit.PLDAccountant().compose(dp_sgd(q, sigma, steps)).get_epsilon_bounds(1e-6)
    assert prv >= lower
    assert upper <= prv
    assert upper >= prv - 2 * eps_error
    assert prv - eps_error == pytest.approx(upper, abs=1e-3)
    if 0.01 * prv > eps_error:
        assert prv <= upper * 1.01


@pytest.mark.parametrize("n, b, sigma, epochs, delta, improved, classic", [
    (60000, 150, 1.3, 15, 1e-5, 0.7242234026, 0.9418705672),
    (100000, 100, 1.0, 30, 1e-7, 1.4154988495, 1.7092873370)])
def test_tensorflow_privacy_published_examples(n, b, sigma, epochs, delta, improved, classic):
    # TF Privacy's orders; its figures are printed to 10 decimals (tolerance 1e-9).
    event = dp_sgd(b / n, sigma, epochs * n // b)
    orders = dpkit.tf_privacy_orders()
    for conversion, published in (("improved", improved), ("classic", classic)):
        accountant = dpkit.RDPAccountant(orders=orders, conversion=conversion).compose(event)
        assert accountant.get_epsilon(delta) == pytest.approx(published, abs=1e-9)
