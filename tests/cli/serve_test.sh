#!/usr/bin/env bash
# bazel test //tests/cli:serve_files_test and :serve_load_test — see serve_test.py.
set -euo pipefail
exec python3 "$(dirname "$0")/serve_test.py" "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/dpkit" "$@"
