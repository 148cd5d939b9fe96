#!/usr/bin/env bash
# //python:python_test: runs the pytest suite with Debian's python3 on the built module.
# Runfiles: python/dpkit/ (the package), python/_dpkit.so, tools/dpkit (the CLI) and
# tests/golden/ (the CLI's recorded JSON and the ledgers).
set -euo pipefail
RUNFILES="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export PYTHONPATH="${RUNFILES}/python"
export DPKIT_CLI="${RUNFILES}/tools/dpkit"
export DPKIT_GOLDEN="${RUNFILES}/tests/golden"
export PYTHONDONTWRITEBYTECODE=1
cd "${TEST_TMPDIR}"
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider --rootdir="${RUNFILES}/python/tests" \
  "${RUNFILES}/python/tests"
