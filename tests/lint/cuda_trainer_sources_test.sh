#!/usr/bin/env bash
# tools/build_cuda_trainer.sh compiles `dpkit train` without Bazel (GPU machines have none),
# from the list in tools/cuda_trainer_sources.txt. That list must be tools/dpkit_main.cc plus
# the .cc sources of //tools:train_command's dependencies, which genquery computed at build
# time ($1). A list that has fallen behind fails here instead of at link time on a GPU.
# Usage: cuda_trainer_sources_test.sh QUERY_OUTPUT SOURCES_TXT
set -euo pipefail
query=$1 list=$2
want=$( { grep -E '^//[^:]*:.*\.cc$' "$query" | sed -E 's|^//||; s|^:||; s|:|/|'; echo tools/dpkit_main.cc; } | sort -u)
have=$(grep -vE '^\s*(#|$)' "$list" | sort -u)
if [ "$want" != "$have" ]; then
  echo "tools/cuda_trainer_sources.txt differs from the sources of //tools:train_command:" >&2
  diff <(echo "$have") <(echo "$want") | sed 's/^</  listed, not a source:/; s/^>/  missing:/' | grep -v '^[0-9]' >&2
  echo "Regenerate: bazel build //tests/lint:train_command_sources and list its //*.cc lines" \
       "(as package/file) plus tools/dpkit_main.cc in tools/cuda_trainer_sources.txt." >&2
  exit 1
fi
echo "tools/cuda_trainer_sources.txt: $(echo "$have" | wc -l) sources, as //tools:train_command's"
