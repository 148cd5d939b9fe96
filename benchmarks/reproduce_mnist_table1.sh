#!/usr/bin/env bash
# Bu et al. 2020, Table 1 rows 1-3 on MNIST with `dpkit train mnist` (not run by CI: hours
# on a CPU). Batch 256 (Poisson), delta 1e-5, NoisySGD:
#   row 1: lr 0.25, C 1.5, sigma 1.3, 15 epochs -> paper 95.0 %
#   row 2: lr 0.15, C 1.0, sigma 1.1, 60 epochs -> paper 96.6 %
#   row 3: lr 0.25, C 1.5, sigma 0.7, 45 epochs -> paper 97.0 %
# Usage: benchmarks/reproduce_mnist_table1.sh [ROWS...]   (default: 1 2 3)
# Writes /tmp/dpkit-table1/row<N>/{ledger.jsonl,metrics.jsonl,...} and prints one JSON
# line per epoch (test_accuracy, epsilon). Set DPKIT=path/to/dpkit to use another binary.
set -euo pipefail
cd "$(dirname "$0")/.."
DPKIT=${DPKIT:-bazel-bin/tools/dpkit}
[ -x "$DPKIT" ] || bazel build //tools:dpkit
OUT=${OUT:-/tmp/dpkit-table1}
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(1 2 3)
for row in "${rows[@]}"; do
  case $row in
    1) args=(--learning_rate=0.25 --clip_norm=1.5 --noise_multiplier=1.3 --epochs=15) ;;
    2) args=(--learning_rate=0.15 --clip_norm=1.0 --noise_multiplier=1.1 --epochs=60) ;;
    3) args=(--learning_rate=0.25 --clip_norm=1.5 --noise_multiplier=0.7 --epochs=45) ;;
    *) echo "unknown row $row (1, 2 or 3)" >&2; exit 2 ;;
  esac
  echo "== Bu et al. 2020 Table 1 row $row: ${args[*]}"
  "$DPKIT" train mnist --batch_size=256 --delta=1e-5 --format=json \
    --output_dir="$OUT/row$row" "${args[@]}"
done
