#!/bin/bash
# Runs an example binary; fails if it fails or prints no epsilon.
set -euo pipefail
output="$("$1")"
echo "$output"
grep -q "epsilon <= " <<<"$output"
