#!/usr/bin/env bash
# Bu et al. 2020, Table 1 accuracy on MNIST with `dpkit train mnist`, as the paper reports it:
# the mean over runs (not run by CI: hours on a CPU). Batch 256 (Poisson), delta 1e-5, NoisySGD:
#   row 1: lr 0.25, C 1.5, sigma 1.3,  15 epochs -> paper 95.0 %
#   row 2: lr 0.15, C 1.0, sigma 1.1,  60 epochs -> paper 96.6 %
#   row 3: lr 0.25, C 1.5, sigma 0.7,  45 epochs -> paper 97.0 %
#   row 4: lr 0.25, C 1.5, sigma 0.6,  62 epochs -> paper 97.6 %
#   row 5: lr 0.25, C 1.5, sigma 0.55, 68 epochs -> paper 97.8 %
#   row 6: lr 0.25, C 1.5, sigma 0.5, 100 epochs -> paper 98.0 %
# Rows 1-3 are TensorFlow Privacy's MNIST tutorial settings (tutorials/README.md, "Select
# Parameters": lr 0.25 / 0.15 / 0.25, C 1.5 / 1.0 / 1.5, accuracy 95.0 / 96.6 / 97.0 %, the values
# the paper's Table 1 prints). Rows 4-6 reuse rows 1 and 3's lr and C: an assumption, as the
# paper's text was not reachable here (Fig. 4's caption has C 1.5 with eta 0.15 instead).
# Usage: benchmarks/reproduce_mnist_table1.sh [ROWS...]   (default: 1 2 3 4 5 6)
#   SEEDS="1 2 3" (default) runs each row once per seed (fresh secure noise every run).
# Writes $OUT/row<N>-seed<S>/{ledger.jsonl,metrics.jsonl,...} (OUT=/tmp/dpkit-table1), then
# $RESULTS/bu-table1-accuracy.{md,json,csv,svg} (RESULTS=$OUT/results) with the mean ± sd per
# row beside the paper's number (benchmarks/reproduce_trained.py). Set DPKIT=path/to/dpkit
# to use another binary. Times (2 cores, OMP_WAIT_POLICY=PASSIVE, 2026-11-29, partly beside
# other jobs): row 1 ~2-4 min, row 2 7-14 min, row 3 ~4 min, row 4 ~5 min, row 5 ~5 min,
# row 6 ~9 min per seed: 31-42 min per seed (results: docs/results/trained/bu-table1-accuracy.*,
# three seeds).
set -euo pipefail
cd "${BUILD_WORKSPACE_DIRECTORY:-$(dirname "$0")/..}"  # bazel run sets the former
DPKIT=${DPKIT:-bazel-bin/tools/dpkit}
[ -x "$DPKIT" ] || bazel build //tools:dpkit
OUT=${OUT:-/tmp/dpkit-table1}
RESULTS=${RESULTS:-$OUT/results}
SEEDS=${SEEDS:-1 2 3}
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(1 2 3 4 5 6)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
for row in "${rows[@]}"; do
  case $row in
    1) args=(--learning_rate=0.25 --clip_norm=1.5 --noise_multiplier=1.3 --epochs=15) ;;
    2) args=(--learning_rate=0.15 --clip_norm=1.0 --noise_multiplier=1.1 --epochs=60) ;;
    3) args=(--learning_rate=0.25 --clip_norm=1.5 --noise_multiplier=0.7 --epochs=45) ;;
    4) args=(--learning_rate=0.25 --clip_norm=1.5 --noise_multiplier=0.6 --epochs=62) ;;
    5) args=(--learning_rate=0.25 --clip_norm=1.5 --noise_multiplier=0.55 --epochs=68) ;;
    6) args=(--learning_rate=0.25 --clip_norm=1.5 --noise_multiplier=0.5 --epochs=100) ;;
    *) echo "unknown row $row (1 to 6)" >&2; exit 2 ;;
  esac
  for seed in $SEEDS; do
    echo "== Bu et al. 2020 Table 1 row $row, seed $seed: ${args[*]}"
    start=$(date +%s)
    "$DPKIT" train mnist --batch_size=256 --delta=1e-5 --format=json --seed="$seed" \
      --overwrite --output_dir="$OUT/row$row-seed$seed" "${args[@]}"
    echo "== row $row seed $seed: $(( $(date +%s) - start )) s"
  done
done
python3 benchmarks/reproduce_trained.py mnist-table1 "$OUT" "$RESULTS"
echo "== wrote $RESULTS/bu-table1-accuracy.md"
