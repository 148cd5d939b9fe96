"""The GIL is released during long computations: while another thread runs one, the
main thread keeps running Python (it wakes from 1 ms sleeps many times). The control
shows that the measurement detects a call that holds the GIL."""

import threading
import time

import dpkit


def wakeups_during(fn):
    """How often the main thread woke while fn ran in another thread: wakeups are counted
    between the worker's own timestamps just before and after fn, so the thread's start-up
    and teardown, which a loaded machine can stretch over several 1 ms sleeps, do not count
    (a CI run on two busy cores saw 5 wakeups around a call that holds the GIL)."""
    marks = {}
    stamps = []

    def run():
        marks["in"] = time.monotonic()
        fn()
        marks["out"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    while thread.is_alive():
        time.sleep(0.001)
        stamps.append(time.monotonic())
    thread.join()
    return sum(1 for t in stamps if marks["in"] <= t <= marks["out"])


def test_measurement_detects_a_call_that_holds_the_gil():
    # sum() over a range runs in C without releasing the GIL (about 0.3 s of CPU).
    assert wakeups_during(lambda: sum(range(30_000_000))) <= 3


def test_pld_accounting_releases_the_gil():
    # Table 1 row 2 at tolerance 1e-5: about 0.17 s of CPU inside accounting::PldEpsilon.
    step = dpkit.PoissonSampledDpEvent(256 / 60000, dpkit.GaussianDpEvent(1.1))
    accountant = dpkit.PLDAccountant(epsilon_tolerance=1e-5).compose(step, 14063)
    assert wakeups_during(lambda: accountant.get_epsilon(1e-5)) >= 20


def test_calibration_releases_the_gil():
    assert wakeups_during(lambda: dpkit.calibrate_noise_multiplier(
        2.0, 1e-5, 256 / 60000, 14063, accountant="rdp")) >= 20
