#!/usr/bin/env bash
# Re-records tests/golden/expected/ from the current //tools:dpkit (see golden.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build --disk_cache="${HOME}/.cache/dpkit-bazel-disk" //tools:dpkit
python3 tests/golden/golden.py record --dpkit bazel-bin/tools/dpkit
