"""The accounting report (accounting/report.h): every accountant's answer for one event,
as ``dpkit epsilon`` / ``dpkit delta`` / ``dpkit ledger --format=json`` print it (without
their "input" object), and the same report as text.

Accountants: "rdp" (certified upper bound; with ``min_errors`` a certified lower bound on
the smallest type I + type II error), "pld" (certified upper AND lower bounds; with
``min_errors`` the smallest error 1 - delta(0) as a certified interval) and "gdp" (mu of
the event tree; APPROXIMATE whenever the CLT of Bu et al. 2020, eq. 3.1 entered mu, and
labelled ``"approximate": true``). "headline" names the smallest certified upper bound;
an approximate GDP value never heads a report. An accountant that cannot handle the event
reports ``{"not_applicable": "<why>"}``; non-finite bounds are ``None`` with
``"infinite": True``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional, Sequence, Tuple

from dpkit._native import native
from dpkit.events import _as_float, from_dp_accounting

ACCOUNTANTS = ("rdp", "pld", "gdp")
MIN_DELTA = 1e-300  # the command line's smallest delta


def _run(event: Any, delta: Optional[float], epsilon: Optional[float],
         accountants: Sequence[str], rdp_conversion: str, epsilon_tolerance: float,
         min_errors: bool) -> Tuple[str, str]:
    if (delta is None) == (epsilon is None):
        raise ValueError("give exactly one of delta (report epsilon) or epsilon (report delta)")
    if delta is not None:
        quantity, fixed = "epsilon", _as_float("delta", delta)
        if not MIN_DELTA <= fixed < 1:
            raise ValueError(f"delta must be in [1e-300, 1), got {fixed!r}")
    else:
        quantity, fixed = "delta", _as_float("epsilon", epsilon)
        if not (math.isfinite(fixed) and fixed >= 0):
            raise ValueError(f"epsilon must be finite and >= 0, got {fixed!r}")
    chosen = set(accountants)
    unknown = chosen - set(ACCOUNTANTS)
    if unknown or not chosen:
        raise ValueError(f"accountants must be a non-empty subset of {', '.join(ACCOUNTANTS)}; "
                         f"got {sorted(unknown) or 'none'}")
    tolerance = _as_float("epsilon_tolerance", epsilon_tolerance)
    # The PLD options, checked by the library itself (a pure epsilon = 0 event is instant).
    native.pld_delta(native.Event.pure_dp(0.0), 0.0, tolerance, 0.0)
    built = from_dp_accounting(event)._native
    return native.report(built, quantity, fixed, "rdp" in chosen, "pld" in chosen,
                         "gdp" in chosen, rdp_conversion, tolerance, bool(min_errors))


def report(event: Any, delta: Optional[float] = None, *, epsilon: Optional[float] = None,
           accountants: Sequence[str] = ACCOUNTANTS, rdp_conversion: str = "optimal",
           epsilon_tolerance: float = 1e-4, min_errors: bool = True) -> Dict[str, Any]:
    """The report of ``event`` (a dpkit or dp_accounting event) as a dict: epsilon at
    ``delta`` (in [1e-300, 1)), or delta at ``epsilon=`` (finite, >= 0). The same JSON
    as the command line's, e.g. ``report(e, 1e-5)["pld"]["epsilon_upper"]``."""
    text_json, _ = _run(event, delta, epsilon, accountants, rdp_conversion,
                        epsilon_tolerance, min_errors)
    return json.loads(text_json)


def report_text(event: Any, delta: Optional[float] = None, *,
                epsilon: Optional[float] = None, accountants: Sequence[str] = ACCOUNTANTS,
                rdp_conversion: str = "optimal", epsilon_tolerance: float = 1e-4,
                min_errors: bool = True) -> str:
    """The same report as text, as the command line prints it: the headline first, then
    one line per accountant (bounds rounded outward to 7 significant digits)."""
    _, text = _run(event, delta, epsilon, accountants, rdp_conversion, epsilon_tolerance,
                   min_errors)
    return text


__all__ = ["report", "report_text", "ACCOUNTANTS"]
