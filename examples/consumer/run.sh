#!/usr/bin/env bash
# Builds and runs the example consumer workspace (a separate Bazel workspace that depends
# on dpkit through local_repository + dpkit_dependencies(), without a .bazelrc), then checks
# that it printed the certified interval dpkit's golden test records for Table 1 row 2
# (tests/golden/expected/table1_row2.json, pld.epsilon_lower / epsilon_upper), exactly.
# Usage: examples/consumer/run.sh   (tools/test runs it)
set -euo pipefail
cd "$(dirname "$0")"

# The disk cache every dpkit checkout on this machine shares; no convenience links inside
# the dpkit tree ('/' disables them); the server stops after a minute idle. The sandbox
# choice only silences Debian's Bazel 4, whose linux-sandbox prints a debug trace into every
# action's output (dpkit's .bazelrc does the same); the build needs no flag.
BAZEL_STARTUP=(--max_idle_secs=60)
BAZEL_FLAGS=(--disk_cache="${DPKIT_BAZEL_DISK_CACHE:-${HOME}/.cache/dpkit-bazel-disk}"
             --symlink_prefix=/ --spawn_strategy=processwrapper-sandbox --color=no --curses=no --show_progress_rate_limit=60)

echo "== consumer example: bazel build //:table1_row2 (in examples/consumer)"
bazel "${BAZEL_STARTUP[@]}" build "${BAZEL_FLAGS[@]}" //:table1_row2
bin="$(bazel "${BAZEL_STARTUP[@]}" info "${BAZEL_FLAGS[@]}" bazel-bin)/table1_row2"
out="$("$bin")"
echo "$out"

python3 - "$out" ../../tests/golden/expected/table1_row2.json <<'PY'
import json, re, sys
printed, golden = sys.argv[1], json.load(open(sys.argv[2]))["pld"]
m = re.match(r"epsilon in \[(\S+), (\S+)\] at delta 1e-05\nfits a budget of \(3, 1e-05\): yes$", printed)
if not m:
    sys.exit("consumer example: unexpected output:\n" + printed)
lower, upper = float(m.group(1)), float(m.group(2))
if (lower, upper) != (golden["epsilon_lower"], golden["epsilon_upper"]):
    sys.exit("consumer example: [%r, %r] differs from the golden [%r, %r]" %
             (lower, upper, golden["epsilon_lower"], golden["epsilon_upper"]))
print("consumer example: OK, the interval equals tests/golden/expected/table1_row2.json")
PY
