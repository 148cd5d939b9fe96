#!/usr/bin/env bash
# bazel test //tests/golden:golden_test — see golden.py.
set -euo pipefail
dir="$(dirname "$0")"
exec python3 "${dir}/golden.py" check --dpkit "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/dpkit"
