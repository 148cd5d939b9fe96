#!/bin/bash
# emar for Bazel (see emscripten_env.sh).
set -euo pipefail
source "$(dirname "$0")/emscripten_env.sh"
exec emar "$@"
