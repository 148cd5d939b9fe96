"""dpkit from Python: certified privacy accounting and secure DP mechanisms.

A thin, typed binding of dpkit's C++ core (accounting/ and mechanisms/; no LibTorch):

* events with dp_accounting's names (:mod:`dpkit.events`), and a converter from
  dp_accounting's own event objects;
* accountants with dp_accounting's shape (:mod:`dpkit.accountants`): the certified
  :class:`PLDAccountant` (``get_epsilon_bounds`` gives both certified bounds), the
  :class:`RDPAccountant`, and the APPROXIMATE :class:`GDPAccountant` (CLT);
* the accounting report of the command line (:func:`report`, :func:`report_text`);
* calibration (:mod:`dpkit.calibration`) and ledger files (:mod:`dpkit.ledger`);
* an Opacus-interface accountant (:mod:`dpkit.opacus`);
* secure samplers and selection mechanisms over NumPy arrays (:mod:`dpkit.mechanisms`,
  imported on first use), with seeded generators only in :mod:`dpkit.testing`.

Errors on bad input are ``ValueError`` with the C++ library's one-line message.

Example (Abadi et al. 2016, Table 1: MNIST, q = 256/60000, sigma = 1.1, 60 epochs)::

    import dpkit
    step = dpkit.PoissonSampledDpEvent(256 / 60000, dpkit.GaussianDpEvent(1.1))
    dpkit.PLDAccountant().compose(step, 14063).get_epsilon_bounds(1e-5)
"""

import importlib
from typing import Any

from dpkit.accountants import (GDPAccountant, PLDAccountant, RDPAccountant,
                               clt_epsilon_approximate, clt_mu_approximate,
                               clt_noise_multiplier_approximate, default_rdp_orders,
                               gdp_delta, gdp_epsilon, gdp_mu, tf_privacy_orders)
from dpkit.calibration import (calibrate_noise_multiplier, calibrate_sampling_rate,
                               calibrate_steps, clt_equivalent_noise_multiplier)
from dpkit.events import (BoundedRangeDpEvent, ComposedDpEvent, DiscreteGaussianDpEvent,
                          DpEvent, EpsilonDeltaDpEvent, GaussianDpEvent, LaplaceDpEvent,
                          PoissonSampledDpEvent, SampledWithoutReplacementDpEvent,
                          SelfComposedDpEvent, event_from_json, from_dp_accounting,
                          to_dp_accounting)
from dpkit.ledger import Ledger, read_ledger
from dpkit.report import report, report_text

__version__ = "0.1.0"

# Imported on first use: dpkit.mechanisms imports NumPy, which `import dpkit` does not
# need (accounting alone starts in a few milliseconds).
_LAZY_MODULES = ("mechanisms", "opacus", "testing")


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        return importlib.import_module(f"dpkit.{name}")
    raise AttributeError(f"module 'dpkit' has no attribute {name!r}")


__all__ = [
    "DpEvent", "GaussianDpEvent", "LaplaceDpEvent", "DiscreteGaussianDpEvent",
    "BoundedRangeDpEvent", "EpsilonDeltaDpEvent", "PoissonSampledDpEvent",
    "SampledWithoutReplacementDpEvent", "SelfComposedDpEvent", "ComposedDpEvent",
    "from_dp_accounting", "to_dp_accounting", "event_from_json",
    "PLDAccountant", "RDPAccountant", "GDPAccountant", "default_rdp_orders",
    "tf_privacy_orders", "gdp_delta", "gdp_epsilon", "gdp_mu", "clt_mu_approximate",
    "clt_epsilon_approximate", "clt_noise_multiplier_approximate",
    "calibrate_noise_multiplier", "calibrate_steps", "calibrate_sampling_rate",
    "clt_equivalent_noise_multiplier", "Ledger", "read_ledger", "report", "report_text",
    "mechanisms", "opacus", "testing",
]
