"""Bad inputs raise ValueError with the C++ library's one-line message (never a crash);
wrong types raise TypeError."""

import math

import numpy as np
import pytest

import dpkit

GAUSSIAN = dpkit.GaussianDpEvent(1.0)


@pytest.mark.parametrize("build, message", [
    (lambda: dpkit.GaussianDpEvent(-1), "noise_multiplier must be finite and > 0, got -1"),
    (lambda: dpkit.GaussianDpEvent(math.nan), "noise_multiplier must be finite and > 0, got nan"),
    (lambda: dpkit.LaplaceDpEvent(0), "scale must be finite and > 0, got 0"),
    (lambda: dpkit.PoissonSampledDpEvent(1.5, GAUSSIAN), "sampling_rate must be in (0, 1], got 1.5"),
    (lambda: dpkit.SelfComposedDpEvent(GAUSSIAN, 0), "count must be >= 1, got 0"),
    (lambda: dpkit.EpsilonDeltaDpEvent(1.0, 2.0), "delta must be in [0, 1], got 2"),
    (lambda: dpkit.EpsilonDeltaDpEvent(-1.0), "epsilon must be finite and >= 0, got -1"),
    (lambda: dpkit.SelfComposedDpEvent(GAUSSIAN, 2**70),
     "count must fit in a 64-bit integer, got 1180591620717411303424"),
])
def test_invalid_events_raise_the_library_message(build, message):
    with pytest.raises(ValueError) as error:
        build()
    assert str(error.value) == message


def test_invalid_composites_raise_value_errors():
    with pytest.raises(ValueError):
        dpkit.ComposedDpEvent([])
    with pytest.raises(ValueError):
        dpkit.SampledWithoutReplacementDpEvent(10, 11, GAUSSIAN)
    with pytest.raises(ValueError):
        dpkit.DiscreteGaussianDpEvent(1.0, 0)


def test_wrong_types_raise_type_errors():
    with pytest.raises(TypeError):
        dpkit.GaussianDpEvent("1.0")
    with pytest.raises(TypeError):
        dpkit.SelfComposedDpEvent(GAUSSIAN, 2.5)
    with pytest.raises(TypeError):
        dpkit.ComposedDpEvent(GAUSSIAN)
    with pytest.raises(ValueError):
        dpkit.PLDAccountant().compose(object())


def test_accountant_options_are_validated_at_construction():
    with pytest.raises(ValueError) as error:
        dpkit.PLDAccountant(epsilon_tolerance=1.0)
    assert str(error.value) == "epsilon_tolerance must be in [1e-7, 0.1], got 1"
    with pytest.raises(ValueError):
        dpkit.PLDAccountant(discretization_interval=-1)
    with pytest.raises(ValueError):
        dpkit.RDPAccountant(orders=[0.5])
    with pytest.raises(ValueError) as error:
        dpkit.RDPAccountant(conversion="bogus")
    assert str(error.value) == "conversion must be one of optimal, improved, classic; got 'bogus'"


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, math.nan, math.inf])
def test_out_of_range_delta_raises_value_error(delta):
    accountant = dpkit.PLDAccountant().compose(GAUSSIAN)
    with pytest.raises(ValueError):
        accountant.get_epsilon(delta)
    with pytest.raises(ValueError):
        dpkit.RDPAccountant().compose(GAUSSIAN).get_epsilon(delta)


def test_count_below_one_is_rejected_by_compose():
    with pytest.raises(ValueError, match="count must be >= 1, got 0"):
        dpkit.PLDAccountant().compose(GAUSSIAN, 0)


def test_gdp_rejects_events_it_cannot_account():
    with pytest.raises(ValueError) as error:
        dpkit.GDPAccountant().compose(dpkit.LaplaceDpEvent(1.0)).get_epsilon(1e-5)
    assert str(error.value) == (
        "GDP accounts only Gaussian and Poisson-subsampled Gaussian events, not laplace")


def test_calibration_errors_are_value_errors():
    with pytest.raises(ValueError):
        dpkit.calibrate_noise_multiplier(-1.0, 1e-5, 0.01, 100)
    with pytest.raises(ValueError, match="accountant must be one of pld, rdp, gdp"):
        dpkit.calibrate_noise_multiplier(1.0, 1e-5, 0.01, 100, accountant="prv")
    with pytest.raises(ValueError, match="give exactly one of steps"):
        dpkit.calibrate_sampling_rate(1.0, 1e-5, 1.0)


def test_ledger_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(ValueError):
        dpkit.read_ledger(tmp_path / "missing.jsonl")
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type":"event","event":{"type":"gaussian","noise_multiplier":1}}\n'
                    '{"type":"sampel"}\n')
    with pytest.raises(ValueError) as error:
        dpkit.read_ledger(path)
    assert str(error.value).startswith(f"{path} line 2: ")


def test_mechanism_errors_are_value_errors():
    with pytest.raises(ValueError, match="stddev must be finite and > 0, got -1"):
        dpkit.mechanisms.gaussian(-1.0, 10)
    with pytest.raises(ValueError, match=r"sigma must be finite and in \(0, 2\^40\], got 0"):
        dpkit.mechanisms.discrete_gaussian(0.0, 10)
    with pytest.raises(ValueError):
        dpkit.mechanisms.discrete_laplace(math.inf, 10)
    with pytest.raises(ValueError):
        dpkit.mechanisms.exponential_mechanism([], 1.0)
    with pytest.raises(ValueError, match="scores must be finite"):
        dpkit.mechanisms.exponential_mechanism([1.0, math.nan], 1.0)
    with pytest.raises(ValueError, match="scores must be a 1-D array"):
        dpkit.mechanisms.report_noisy_max(np.zeros((2, 2)), 1.0)
    with pytest.raises(ValueError, match="epsilon must be finite and > 0"):
        dpkit.mechanisms.permute_and_flip([1.0, 2.0], 0.0)
    with pytest.raises(ValueError, match="out must be a writable C-contiguous"):
        dpkit.mechanisms.fill_gaussian(np.zeros(10, dtype=np.int32), 1.0)
    with pytest.raises(ValueError, match="out must be a writable C-contiguous"):
        dpkit.mechanisms.fill_laplace(np.zeros((4, 4))[:, 1], 1.0)
    read_only = np.zeros(3)
    read_only.flags.writeable = False
    with pytest.raises(ValueError):
        dpkit.mechanisms.fill_gaussian(read_only, 1.0)
    with pytest.raises(TypeError, match="rng must be None"):
        dpkit.mechanisms.gaussian(1.0, 3, rng=np.random.default_rng(0))


def test_report_inputs_are_validated():
    with pytest.raises(ValueError, match="give exactly one of delta"):
        dpkit.report(GAUSSIAN)
    with pytest.raises(ValueError, match="give exactly one of delta"):
        dpkit.report(GAUSSIAN, 1e-5, epsilon=1.0)
    with pytest.raises(ValueError, match=r"delta must be in \[1e-300, 1\), got 0.0"):
        dpkit.report(GAUSSIAN, 0.0)
    with pytest.raises(ValueError, match="epsilon must be finite and >= 0"):
        dpkit.report(GAUSSIAN, epsilon=math.inf)
    with pytest.raises(ValueError, match="accountants must be a non-empty subset"):
        dpkit.report(GAUSSIAN, 1e-5, accountants=("prv",))
    with pytest.raises(ValueError) as error:
        dpkit.report(GAUSSIAN, 1e-5, rdp_conversion="bogus")
    assert str(error.value) == "rdp_conversion must be one of optimal|improved|classic, got 'bogus'"
    with pytest.raises(ValueError, match="epsilon_tolerance must be in"):
        dpkit.report_text(GAUSSIAN, 1e-5, epsilon_tolerance=0.5)


def test_report_marks_what_an_accountant_cannot_do():
    result = dpkit.report(dpkit.LaplaceDpEvent(1.0), 1e-5)
    assert result["gdp"] == {"not_applicable":
                             "GDP accounts only Gaussian and Poisson-subsampled Gaussian "
                             "events, not laplace"}
    assert result["headline"]["accountant"] in ("pld", "rdp")
    assert "headline: epsilon <=" in dpkit.report_text(dpkit.LaplaceDpEvent(1.0), 1e-5)
