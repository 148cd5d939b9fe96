"""Shared fixtures: where the C++ library's reference outputs come from.

The accountants' numbers are compared with the `dpkit` command line's JSON, exactly:
  * tests/golden/expected/NAME.json — the CLI's recorded JSON for the golden cases
    (checked bit for bit against the current CLI by //tests/golden:golden_test);
  * otherwise the CLI itself, run on the same arguments (DPKIT_CLI, or
    bazel-bin/tools/dpkit in a source checkout; the Bazel test passes //tools:dpkit).
A case with neither fails. The CLI is always run where a test needs fresh output
(ledgers written by the test itself: test_opacus.py).
"""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _existing(path):
    return path if path is not None and path.exists() else None


GOLDEN = _existing(pathlib.Path(os.environ.get("DPKIT_GOLDEN", ROOT / "tests" / "golden")))
CLI = _existing(pathlib.Path(os.environ["DPKIT_CLI"]) if "DPKIT_CLI" in os.environ
                else ROOT / "bazel-bin" / "tools" / "dpkit")


def references(name, args):
    """The reference JSON objects for one golden case (at least one, else the test fails)."""
    found = []
    if GOLDEN is not None:
        found.append(("golden", json.loads((GOLDEN / "expected" / f"{name}.json").read_text())))
    elif CLI is not None:
        proc = subprocess.run([str(CLI)] + args, cwd=GOLDEN or ROOT, capture_output=True,
                              text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr
        found.append(("cli", json.loads(proc.stdout)))
    assert found, "neither tests/golden nor the dpkit CLI is available (set DPKIT_GOLDEN/DPKIT_CLI)"
    return found


def golden_ledger(name):
    """Path of a ledger file of tests/golden/ledgers."""
    assert GOLDEN is not None, "tests/golden is not available (set DPKIT_GOLDEN)"
    return GOLDEN / "ledgers" / name


@pytest.fixture
def cli():
    """The dpkit CLI, or skip (the Bazel test and tools/test always provide it)."""
    if CLI is None:
        pytest.skip("the dpkit CLI is not built (bazel build //tools:dpkit or set DPKIT_CLI)")
    return str(CLI)
