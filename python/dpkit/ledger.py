"""Privacy ledger files (accounting/ledger.h; McMahan et al. 2018): the JSON-lines record
that dpkit's trainer writes as it trains, read exactly as ``dpkit ledger FILE`` reads it.

Runs of identical sampling records become
``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), k)`` with the
collapsed noise multiplier z = (sum_i (C_i / s_i)^2)^(-1/2) (McMahan et al. 2018, eq. 1);
event entries are kept. Any accountant can then re-account the run::

    ledger = dpkit.read_ledger("run/ledger.jsonl")
    dpkit.PLDAccountant().compose(ledger.event).get_epsilon_bounds(1e-5)
"""

from __future__ import annotations

import os
from typing import NamedTuple, Union

from dpkit._native import native
from dpkit.events import DpEvent, from_native


class Ledger(NamedTuple):
    event: DpEvent  # everything the ledger records, as one event
    entries: int  # number of entries (lines) read


def read_ledger(path: Union[str, "os.PathLike[str]"]) -> Ledger:
    """Reads a ledger file. ValueError with the library's message, naming the file and
    line (e.g. ``ledger.jsonl line 3: unknown ledger entry type "sampel"``)."""
    built, entries = native.read_ledger(os.fspath(path))
    return Ledger(from_native(built), entries)


__all__ = ["Ledger", "read_ledger"]
