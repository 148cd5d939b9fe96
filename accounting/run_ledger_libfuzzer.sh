#!/bin/bash
# Builds accounting/ledger_libfuzzer.cc with Debian's clang (libFuzzer, AddressSanitizer,
# UndefinedBehaviorSanitizer) and runs it for a fixed number of inputs from a seed corpus
# of valid ledger lines and events. Usage (from the repository root):
#   accounting/run_ledger_libfuzzer.sh [RUNS]      (default 200000; exit 0 when no crash)
set -euo pipefail
runs="${1:-200000}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# dpkit's headers are included as "dpkit/<package>/<file>" (Bazel's include_prefix, see
# dpkit.bzl): the include directory maps dpkit/ to the checkout.
mkdir "$work/include"
ln -s "$root" "$work/include/dpkit"
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$work/include" "$root/accounting/ledger_libfuzzer.cc" "$root/accounting/ledger.cc" \
  "$root/accounting/event.cc" "$root/accounting/internal/json_parse.cc" \
  "$root/accounting/internal/format.cc" -o "$work/ledger_libfuzzer"
mkdir "$work/corpus"
i=0
while IFS= read -r line; do
  printf '%s\n' "$line" > "$work/corpus/seed$i"
  i=$((i + 1))
done <<'SEEDS'
{"type":"sample","step":0,"sampling_rate":0.01,"queries":[{"clip_norm":1,"noise_stddev":1.1}]}
{"type":"sample","step":7,"sampling_rate":0.5,"queries":[{"clip_norm":0.5,"noise_stddev":2},{"clip_norm":3,"noise_stddev":4}]}
{"type":"event","event":{"type":"self_composed","count":100,"event":{"type":"poisson_sampled","sampling_rate":0.01,"event":{"type":"laplace","scale":2}}}}
{"type":"event","event":{"type":"composed","events":[{"type":"pure_dp","epsilon":0.5},{"type":"approx_dp","epsilon":1,"delta":1e-6},{"type":"bounded_range","epsilon":0.25}]}}
{"type":"event","event":{"type":"sampled_without_replacement","population":60000,"sample_size":256,"event":{"type":"discrete_gaussian","sigma":1500,"sensitivity":1025}}}
{"type":"gaussian","noise_multiplier":1.3}
SEEDS
"$work/ledger_libfuzzer" -runs="$runs" -seed=1 -max_len=4096 "$work/corpus"
