#!/usr/bin/env bash
# Usage: readme_figures_test.sh SCRIPT DPKIT README (Bazel passes the runfiles paths).
# 1. README's figures blocks are current (readme_figures.py --check).
# 2. The check fails on a stale interval and on a hand-edited measured block.
set -euo pipefail
script="$1" dpkit="$2" readme="$3"
python3 "${script}" --check --dpkit "${dpkit}" --readme "${readme}"

stale="${TEST_TMPDIR}/stale.md"
sed -E 's/(figures:table1_row2 -->ε ∈ \[)[0-9.]+/\10.5/' "${readme}" > "${stale}"
! cmp -s "${readme}" "${stale}" || { echo "FAIL: no table1_row2 block to alter"; exit 1; }
if python3 "${script}" --check --dpkit "${dpkit}" --readme "${stale}"; then
  echo "FAIL: --check accepted a stale interval"; exit 1
fi
edited="${TEST_TMPDIR}/edited.md"
sed -E 's/(figures:main_job -->)the main job/\1our main job/' "${readme}" > "${edited}"
! cmp -s "${readme}" "${edited}" || { echo "FAIL: no main_job block to alter"; exit 1; }
if python3 "${script}" --check --dpkit "${dpkit}" --readme "${edited}"; then
  echo "FAIL: --check accepted a measured block the script did not write"; exit 1
fi
echo "PASS"
