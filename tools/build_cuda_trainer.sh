#!/usr/bin/env bash
# Builds `dpkit train` against a CUDA LibTorch with the system compiler, for machines that
# have a CUDA LibTorch but no Bazel (e.g. a GPU box with PyTorch installed, no network).
#
# Usage (from the repository root):
#   tools/build_cuda_trainer.sh [LIBTORCH_DIR] [OUT_BINARY]
#     LIBTORCH_DIR  a LibTorch with include/ and lib/ (default: the `torch` package of
#                   python3, i.e. $(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))'))
#     OUT_BINARY    default: $BUILD_DIR/dpkit-train (BUILD_DIR defaults to build-cuda; objects go
#                   to $BUILD_DIR/obj and are rebuilt only when their source is newer)
# Then:
#   build-cuda/dpkit-train train mnist --device=cuda --output_dir=/tmp/run
#
# The binary holds only the `train` command (tools/train_command.cc and its dependencies).
# Needs g++ (C++17) and the header/library packages dpkit uses everywhere: Abseil
# (libabsl-dev), nlohmann-json, Boost.Math, Eigen, OpenSSL (libcrypto), zlib. The compiler
# ABI flag is taken from the LibTorch build (torch wheels since 2.x use the C++11 ABI).
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH=${1:-$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')}
BUILD_DIR=${BUILD_DIR:-build-cuda}
OUT=${2:-$BUILD_DIR/dpkit-train}
[ -d "$TORCH/include" ] && [ -d "$TORCH/lib" ] || { echo "no include/ and lib/ under $TORCH" >&2; exit 2; }
for h in absl/status/status.h nlohmann/json.hpp boost/math/special_functions/erf.hpp openssl/evp.h zlib.h; do
  if ! echo "#include <$h>" | g++ -std=c++17 -x c++ -fsyntax-only -I/usr/include/eigen3 - 2>/dev/null; then
    echo "missing header <$h>: install libabsl-dev nlohmann-json3-dev libboost-math-dev libssl-dev zlib1g-dev" >&2
    exit 2
  fi
done
ABI=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || echo 1)
CUDA_LIBS=""
# Several processes (models/engine/distributed.cc): c10d's Gloo process group always, its
# NCCL process group with a CUDA LibTorch. ProcessGroupGloo.hpp needs the gloo headers: the
# LibTorch's own include/gloo, else Debian's libgloo-dev (/usr/include/gloo).
C10D_DEFINES="-DUSE_C10D_GLOO"
if [ -e "$TORCH/lib/libtorch_cuda.so" ]; then
  CUDA_LIBS="-ltorch_cuda -lc10_cuda"
  C10D_DEFINES="$C10D_DEFINES -DUSE_C10D_NCCL -DDPKIT_WITH_NCCL"
fi
if [ ! -e "$TORCH/include/gloo/algorithm.h" ] && [ ! -e /usr/include/gloo/algorithm.h ]; then
  echo "missing gloo headers: install libgloo-dev (or use a LibTorch that ships include/gloo)" >&2
  exit 2
fi
# tools/dpkit_main.cc plus the sources of //tools:train_command and its dependencies, listed
# in tools/cuda_trainer_sources.txt (//tests/lint:cuda_trainer_sources_test keeps it in step
# with the Bazel graph).
mapfile -t SOURCES < <(grep -vE '^[[:space:]]*(#|$)' tools/cuda_trainer_sources.txt)
# dpkit's headers are included as "dpkit/<package>/<file>" (Bazel's include_prefix, see
# dpkit.bzl); a copy of them under $BUILD_DIR/include/dpkit/ gives the compiler the same paths.
INCLUDE_DIR=$BUILD_DIR/include
rm -rf "$INCLUDE_DIR/dpkit"
mkdir -p "$INCLUDE_DIR/dpkit"
find accounting base mechanisms models optim tools -name '*.h' -exec cp --parents -t "$INCLUDE_DIR/dpkit" {} +
ABSL_LIBS=$(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so 2>/dev/null | sed -E 's|.*/lib(absl_[a-z0-9_]+)\.so|-l\1|' | tr '\n' ' ')
mkdir -p "$(dirname "$OUT")" "$BUILD_DIR/obj"
objs=()
for src in "${SOURCES[@]}"; do
  obj=$BUILD_DIR/obj/$(echo "$src" | tr '/' '_').o
  if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ]; then
    echo "compiling $src"
    g++ -std=c++17 -O2 -fPIC -D_GLIBCXX_USE_CXX11_ABI="$ABI" -DDPKIT_WITH_CUDA $C10D_DEFINES \
      -I"$INCLUDE_DIR" -I/usr/include/eigen3 -isystem "$TORCH/include" \
      -isystem "$TORCH/include/torch/csrc/api/include" -c "$src" -o "$obj" &
  fi
  objs+=("$obj")
  # Two compiles at a time: LibTorch translation units need ~1.5 GB each.
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-2}" ]; do wait -n; done
done
wait
g++ -o "$OUT" "${objs[@]}" -L"$TORCH/lib" -Wl,-rpath,"$TORCH/lib" -Wl,--no-as-needed \
  -ltorch $CUDA_LIBS -ltorch_cpu -lc10 -Wl,--as-needed $ABSL_LIBS -lcrypto -lz -ldl -pthread
echo "built $OUT (LibTorch: $TORCH, CUDA libs: ${CUDA_LIBS:-none})"
