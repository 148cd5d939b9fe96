#!/usr/bin/env bash
# Bu et al. 2020, Fig. 4 (not run by CI: 4-6 s per epoch on 2 cores, 40 min for one seed on
# 2026-11-29; results in docs/results/trained/bu-fig4.*).
# The figure's caption (HDSR 2020 / PMC7695347): MNIST, NoisySGD, p = 256/60000, eta = 0.15,
# R = 1.5, delta = 1e-5; one run per noise level, same (eps, delta) claimed for both:
#   top:    sigma = 1.3 (moments accountant) vs sigma~ = 1.06 (CLT): (1.34, 1e-5) at epoch 20
#   bottom: sigma = 0.7 (moments accountant) vs sigma~ = 0.638 (CLT): (8.68, 1e-5) at epoch 70
# dpkit trains three runs per panel: the paper's sigma, the paper's sigma~ (whose claim rests on
# the CLT, an approximation: its certified epsilon is printed beside it), and sigma~_pld, the
# smallest noise whose CERTIFIED epsilon (PLD upper bound) is at most the paper's epsilon
# (`dpkit calibrate --accountant=pld`): the less noise a certified analysis allows for the
# same claim.
# Usage: benchmarks/reproduce_bu_fig4.sh [top|bottom ...]   (default: top bottom)
#   SEEDS="1" (default) runs each noise level once per seed; OUT=/tmp/dpkit-fig4.
# Writes $OUT/fig4-<panel>-<label>-seed<S>/ and $OUT/results/bu-fig4.{md,json,csv,svg}.
set -euo pipefail
cd "${BUILD_WORKSPACE_DIRECTORY:-$(dirname "$0")/..}"  # bazel run sets the former
DPKIT=${DPKIT:-bazel-bin/tools/dpkit}
[ -x "$DPKIT" ] || bazel build //tools:dpkit
OUT=${OUT:-/tmp/dpkit-fig4}
SEEDS=${SEEDS:-1}
panels=("$@")
[ ${#panels[@]} -gt 0 ] || panels=(top bottom)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
mkdir -p "$OUT"
common=(--batch_size=256 --delta=1e-5 --learning_rate=0.15 --clip_norm=1.5 --format=json)
for panel in "${panels[@]}"; do
  case $panel in
    top) sigma=1.3 sigma_clt=1.06 epochs=20 paper_eps=1.34 ;;
    bottom) sigma=0.7 sigma_clt=0.638 epochs=70 paper_eps=8.68 ;;
    *) echo "unknown panel $panel (top or bottom)" >&2; exit 2 ;;
  esac
  sigma_pld=$("$DPKIT" calibrate --dataset_size=60000 --batch_size=256 --epochs="$epochs" \
    --delta=1e-5 --target_epsilon="$paper_eps" --accountant=pld --format=json |
    python3 -c 'import json,sys; print(repr(json.load(sys.stdin)["noise_multiplier"]))')
  for seed in $SEEDS; do
    for label in sigma sigma_clt sigma_pld; do
      noise=${!label}
      dir="$OUT/fig4-$panel-$label-seed$seed"
      echo "== Bu et al. 2020 Fig. 4 ($panel): $label = $noise, $epochs epochs, seed $seed"
      start=$(date +%s)
      "$DPKIT" train mnist "${common[@]}" --epochs="$epochs" --noise_multiplier="$noise" \
        --seed="$seed" --overwrite --output_dir="$dir"
      printf '{"panel": "%s", "label": "%s", "sigma": %s, "paper_epsilon": %s}\n' \
        "$panel" "$label" "$noise" "$paper_eps" > "$dir/fig4.json"
      echo "== $panel $label seed $seed: $(( $(date +%s) - start )) s"
    done
  done
done
python3 benchmarks/reproduce_trained.py bu-fig4 "$OUT" "$OUT/results"
echo "== wrote $OUT/results/bu-fig4.md"
