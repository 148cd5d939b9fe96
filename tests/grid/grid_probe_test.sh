#!/usr/bin/env bash
# bazel test //tests/grid:grid_probe_test — see grid_probe.py (the CI grid, sharded by q).
set -euo pipefail
exec python3 "$(dirname "$0")/grid_probe.py" \
  --dpkit "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/dpkit" --grid=ci --jobs=2 "$@"
