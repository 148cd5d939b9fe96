#!/usr/bin/env bash
# Builds and tests the browser calculator: the WebAssembly bundle (--config=wasm), the
# dpkit command (reference numbers and `dpkit serve`), then
#   1. the native test of the C++/JS boundary (bazel test //web:calculator_bindings_test),
#   2. the WebAssembly module alone in Node (node --test web/tests/wasm_module.test.js),
#   3. the page end to end in headless Chromium (node --test web/tests/browser.test.js),
#   4. the .wasm size gate (benchmarks/gate/web.json).
# Screenshots and timings go to $DPKIT_WEB_TEST_OUTPUT (default out/web-tests/).
# The last line is "N passed, N failed" over the four suites. Usage: web/tests/run_tests.sh
set -uo pipefail
cd "$(dirname "$0")/../.."

BAZEL_FLAGS=(--color=no --curses=no --show_progress_rate_limit=60)
if [ -n "${DPKIT_BAZEL_DISK_CACHE:-${HOME:+${HOME}/.cache/dpkit-bazel-disk}}" ]; then
  BAZEL_FLAGS+=(--disk_cache="${DPKIT_BAZEL_DISK_CACHE:-${HOME}/.cache/dpkit-bazel-disk}")
fi

echo "== web: building the calculator (--config=wasm) and dpkit"
start=$(date +%s)
bazel build "${BAZEL_FLAGS[@]}" --config=wasm //web:calculator || {
  echo "web: the WebAssembly build failed"; echo "0 passed, 1 failed"; exit 1; }
bazel build "${BAZEL_FLAGS[@]}" //tools:dpkit || {
  echo "web: building dpkit failed"; echo "0 passed, 1 failed"; exit 1; }
echo "web: builds took $(( $(date +%s) - start )) s"

DPKIT_CALCULATOR_DIR="$(bazel info --config=wasm bazel-bin 2>/dev/null)/web/calculator"
DPKIT_BIN="$(bazel info bazel-bin 2>/dev/null)/tools/dpkit"
export DPKIT_CALCULATOR_DIR DPKIT_BIN
export DPKIT_WEB_TEST_OUTPUT="${DPKIT_WEB_TEST_OUTPUT:-${PWD}/out/web-tests}"
mkdir -p "${DPKIT_WEB_TEST_OUTPUT}"
echo "web: bundle ${DPKIT_CALCULATOR_DIR} ($(stat -c %s "${DPKIT_CALCULATOR_DIR}/calculator.wasm") bytes of .wasm)"

passed=0
failed=0
run_suite() {
  local name="$1"; shift
  echo "== web: ${name}"
  if "$@"; then
    passed=$((passed + 1)); echo "web: ${name}: PASS"
  else
    failed=$((failed + 1)); echo "web: ${name}: FAIL"
  fi
}

run_suite "native boundary test" \
  bazel test "${BAZEL_FLAGS[@]}" //web:calculator_bindings_test
run_suite "WebAssembly module in Node" node --test web/tests/wasm_module.test.js
run_suite "page in headless Chromium" node --test web/tests/browser.test.js
run_suite ".wasm size gate" python3 benchmarks/gate.py --only '^web_'
echo "web: screenshots and timings in ${DPKIT_WEB_TEST_OUTPUT}"
echo "${passed} passed, ${failed} failed"
[ "${failed}" -eq 0 ]
