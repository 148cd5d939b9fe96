"""Every accountant's numbers equal the C++ library's (the dpkit CLI's JSON), exactly.

Cases: the six Table 1 rows of Abadi et al. 2016 (MNIST, q = 256/60000) and row 2 at
delta = 1e-12, the PRV paper's case (Gopi et al. 2021: q = 1e-3, sigma = 2, T = 20000,
delta = 1e-6), TF Privacy's conversions (improved / classic) on row 2, q = 1 and large
epsilon corners, delta at epsilon, the three calibrations and the golden ledgers; and
dpkit.report (accounting/report.h) equals the CLI's whole JSON object. Names
are those of tests/golden/cases.txt. Floats are compared with ==: same library, same
inputs, same bits.
"""

import json
import math

import pytest

import dpkit
from conftest import golden_ledger, references

EPSILON_CASES = {
    "table1_row1": "--dataset_size=60000 --batch_size=256 --noise_multiplier=1.3 --epochs=15 --delta=1e-5",
    "table1_row2": "--dataset_size=60000 --batch_size=256 --noise_multiplier=1.1 --epochs=60 --delta=1e-5",
    "table1_row3": "--dataset_size=60000 --batch_size=256 --noise_multiplier=0.7 --epochs=45 --delta=1e-5",
    "table1_row4": "--dataset_size=60000 --batch_size=256 --noise_multiplier=0.6 --epochs=62 --delta=1e-5",
    "table1_row5": "--dataset_size=60000 --batch_size=256 --noise_multiplier=0.55 --epochs=68 --delta=1e-5",
    "table1_row6": "--dataset_size=60000 --batch_size=256 --noise_multiplier=0.5 --epochs=100 --delta=1e-5",
    "table1_row2_delta1e-12": "--dataset_size=60000 --batch_size=256 --noise_multiplier=1.1 --epochs=60 --delta=1e-12",
    "prv_case_delta1e-6": "--sampling_rate=0.001 --noise_multiplier=2 --steps=20000 --delta=1e-6",
    "small_q_1e-4": "--sampling_rate=0.0001 --noise_multiplier=1 --steps=10000 --delta=1e-5",
    "large_eps_q0.1": "--sampling_rate=0.1 --noise_multiplier=0.6 --steps=1000 --delta=1e-5",
    "q1_sigma1_T1000": "--sampling_rate=1 --noise_multiplier=1 --steps=1000 --delta=1e-5",
    "rdp_improved_row2": "--dataset_size=60000 --batch_size=256 --noise_multiplier=1.1 --epochs=60 --delta=1e-5 --accountant=rdp --rdp_conversion=improved",
    "rdp_classic_row2": "--dataset_size=60000 --batch_size=256 --noise_multiplier=1.1 --epochs=60 --delta=1e-5 --accountant=rdp --rdp_conversion=classic",
    "pld_tolerance_1e-3_row1": "--dataset_size=60000 --batch_size=256 --noise_multiplier=1.3 --epochs=15 --delta=1e-5 --accountant=pld --epsilon_tolerance=1e-3",
    "gdp_row3": "--dataset_size=60000 --batch_size=256 --noise_multiplier=0.7 --epochs=45 --delta=1e-5 --accountant=gdp",
}

DELTA_CASES = {
    "delta_row2_eps2": "--dataset_size=60000 --batch_size=256 --noise_multiplier=1.1 --epochs=60 --epsilon=2",
    "delta_q0.01": "--sampling_rate=0.01 --noise_multiplier=1 --steps=1000 --epsilon=0.5",
    "delta_q1": "--sampling_rate=1 --noise_multiplier=1 --steps=10 --epsilon=10",
}

CALIBRATE_CASES = {
    "calibrate_sigma_pld": "--dataset_size=60000 --batch_size=256 --epochs=60 --target_epsilon=2 --delta=1e-5",
    "calibrate_sigma_rdp": "--dataset_size=60000 --batch_size=256 --epochs=60 --target_epsilon=2 --delta=1e-5 --accountant=rdp",
    "calibrate_sigma_gdp": "--dataset_size=60000 --batch_size=256 --epochs=60 --target_epsilon=2 --delta=1e-5 --accountant=gdp",
    "calibrate_steps_pld": "--solve_for=steps --sampling_rate=0.01 --noise_multiplier=1 --target_epsilon=2 --delta=1e-5",
    "calibrate_rate_rdp": "--solve_for=sampling_rate --noise_multiplier=1 --steps=1000 --target_epsilon=2 --delta=1e-5 --accountant=rdp",
}

LEDGER_CASES = {
    "ledger_discrete_gaussian": ("discrete_gaussian.jsonl", "--delta=1e-6"),
    "ledger_bounded_range": ("bounded_range.jsonl", "--delta=1e-5"),
    "ledger_laplace_counts": ("laplace_counts.jsonl", "--delta=1e-6"),
    "ledger_dp_sgd_then_pca": ("dp_sgd_then_pca.jsonl", "--delta=1e-5"),
    "ledger_dp_sgd_then_pca_delta": ("dp_sgd_then_pca.jsonl", "--epsilon=1"),
    "ledger_pure_and_approx": ("pure_and_approx.jsonl", "--delta=1e-6"),
    "ledger_without_replacement": ("without_replacement.jsonl", "--delta=1e-5"),
}


def tolerance_of(args):
    for arg in args.split():
        if arg.startswith("--epsilon_tolerance="):
            return float(arg.split("=", 1)[1])
    return 1e-4


def conversion_of(args):
    for arg in args.split():
        if arg.startswith("--rdp_conversion="):
            return arg.split("=", 1)[1]
    return "optimal"


def accountants_of(args):
    for arg in args.split():
        if arg.startswith("--accountant="):
            return (arg.split("=", 1)[1],)
    return ("rdp", "pld", "gdp")


def check_report(ref, event, args):
    """dpkit.report gives the CLI's JSON object itself (without "input"), key for key."""
    expected = {key: value for key, value in ref.items() if key != "input"}
    fixed = ({"delta": ref["input"]["delta"]} if "delta" in ref["input"]
             else {"epsilon": ref["input"]["epsilon"]})
    assert dpkit.report(event, accountants=accountants_of(args),
                        rdp_conversion=conversion_of(args),
                        epsilon_tolerance=tolerance_of(args), **fixed) == expected


def dp_sgd(inputs):
    step = dpkit.PoissonSampledDpEvent(inputs["sampling_rate"],
                                       dpkit.GaussianDpEvent(inputs["noise_multiplier"]))
    return dpkit.SelfComposedDpEvent(step, inputs["steps"])


def check_epsilon(ref, event, delta, args):
    """Compares every accountant object of an epsilon report with the Python API."""
    checked = 0
    if "pld" in ref and "not_applicable" in ref["pld"]:
        with pytest.raises(ValueError) as error:
            dpkit.PLDAccountant().compose(event).get_epsilon(delta)
        assert str(error.value) == ref["pld"]["not_applicable"]
        checked += 1
    elif "pld" in ref:
        pld = dpkit.PLDAccountant(epsilon_tolerance=tolerance_of(args)).compose(event)
        lower, upper = pld.get_epsilon_bounds(delta)
        assert upper == ref["pld"]["epsilon_upper"] == pld.get_epsilon(delta)
        assert lower == ref["pld"]["epsilon_lower"]
        assert pld.discretization_interval_used(delta) == ref["pld"]["discretization_interval"]
        # min type I + type II error = 1 - delta(0) (Dong, Roth, Su 2019, Prop. 2.12).
        tv_lower, tv_upper = pld.get_delta_bounds(0.0)
        assert 1 - tv_upper == ref["pld"]["min_error_lower"]
        assert 1 - tv_lower == ref["pld"]["min_error_upper"]
        checked += 1
    if "rdp" in ref:
        rdp = dpkit.RDPAccountant(conversion=conversion_of(args)).compose(event)
        if "not_applicable" in ref["rdp"]:
            with pytest.raises(ValueError) as error:
                rdp.get_epsilon(delta)
            assert str(error.value) == ref["rdp"]["not_applicable"]
        else:
            assert ref["rdp"]["conversion"] == conversion_of(args)
            eps, order = rdp.get_epsilon_and_optimal_order(delta)
            assert (eps, order) == (ref["rdp"]["epsilon"], ref["rdp"]["order"])
            assert rdp.get_min_error_lower() == ref["rdp"]["min_error_lower"]
        checked += 1
    if "gdp" in ref:
        gdp = dpkit.GDPAccountant().compose(event)
        if "not_applicable" in ref["gdp"]:
            with pytest.raises(ValueError) as error:
                gdp.get_epsilon(delta)
            assert str(error.value) == ref["gdp"]["not_applicable"]
        else:
            assert gdp.get_mu() == ref["gdp"]["mu"]
            assert gdp.get_epsilon(delta) == ref["gdp"]["epsilon"]
            assert gdp.approximate == ref["gdp"]["approximate"]
            assert math.erfc(gdp.get_mu() / (2 * math.sqrt(2.0))) == ref["gdp"]["min_error"]
        checked += 1
    assert checked > 0


def check_delta(ref, event, epsilon):
    pld = dpkit.PLDAccountant().compose(event)
    lower, upper = pld.get_delta_bounds(epsilon)
    assert (lower, upper) == (ref["pld"]["delta_lower"], ref["pld"]["delta_upper"])
    assert pld.get_delta(epsilon) == ref["pld"]["delta"]
    rdp = dpkit.RDPAccountant().compose(event)
    assert rdp.get_delta_and_optimal_order(epsilon) == (ref["rdp"]["delta"], ref["rdp"]["order"])
    gdp = dpkit.GDPAccountant().compose(event)
    assert (gdp.get_mu(), gdp.get_delta(epsilon)) == (ref["gdp"]["mu"], ref["gdp"]["delta"])


@pytest.mark.parametrize("name", sorted(EPSILON_CASES))
def test_epsilon_equals_cli(name):
    args = EPSILON_CASES[name]
    for source, ref in references(name, ["epsilon"] + args.split() + ["--format=json"]):
        inputs = ref["input"]
        # The step-by-step composition dp_accounting users write gives the same tree.
        step = dpkit.PoissonSampledDpEvent(inputs["sampling_rate"],
                                           dpkit.GaussianDpEvent(inputs["noise_multiplier"]))
        assert dpkit.PLDAccountant().compose(step, inputs["steps"]).ledger == dp_sgd(inputs)
        check_epsilon(ref, dp_sgd(inputs), inputs["delta"], args), source
        check_report(ref, dp_sgd(inputs), args)


@pytest.mark.parametrize("name", sorted(DELTA_CASES))
def test_delta_equals_cli(name):
    for _, ref in references(name, ["delta"] + DELTA_CASES[name].split() + ["--format=json"]):
        check_delta(ref, dp_sgd(ref["input"]), ref["input"]["epsilon"])
        check_report(ref, dp_sgd(ref["input"]), DELTA_CASES[name])


@pytest.mark.parametrize("name", sorted(LEDGER_CASES))
def test_ledger_equals_cli(name):
    file, args = LEDGER_CASES[name]
    path = golden_ledger(file)
    for _, ref in references(name, ["ledger", f"ledgers/{file}", args, "--format=json"]):
        ledger = dpkit.read_ledger(path)
        assert ledger.entries == ref["input"]["entries"]
        assert json.loads(ledger.event.to_json()) == ref["input"]["event"]
        if "delta" in ref["input"]:
            check_epsilon(ref, ledger.event, ref["input"]["delta"], args)
        else:
            check_delta(ref, ledger.event, ref["input"]["epsilon"])
        check_report(ref, ledger.event, args)


@pytest.mark.parametrize("name", sorted(CALIBRATE_CASES))
def test_calibration_equals_cli(name):
    args = CALIBRATE_CASES[name]
    for _, ref in references(name, ["calibrate"] + args.split() + ["--format=json"]):
        accountant = ref["accountant"]
        if ref["solve_for"] == "noise_multiplier":
            result = dpkit.calibrate_noise_multiplier(
                2.0, ref["delta"], ref["sampling_rate"], ref["steps"], accountant=accountant)
            assert tuple(result) == (ref["noise_multiplier"], ref["epsilon"])
        elif ref["solve_for"] == "steps":
            result = dpkit.calibrate_steps(2.0, ref["delta"], ref["sampling_rate"],
                                           ref["noise_multiplier"], accountant=accountant)
            assert tuple(result) == (ref["steps"], ref["epsilon"])
        else:
            result = dpkit.calibrate_sampling_rate(2.0, ref["delta"], ref["noise_multiplier"],
                                                   steps=1000, accountant=accountant)
            assert tuple(result) == (ref["sampling_rate"], ref["steps"], ref["epsilon"])
