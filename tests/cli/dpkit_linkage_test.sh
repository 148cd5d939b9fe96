#!/usr/bin/env bash
# The accounting binary links no LibTorch (issue 15, item 3): none of the shared libraries
# `dpkit_accounting` needs, directly (readelf -d NEEDED) or transitively (ldd), is
# libtorch*, libc10* or another piece of LibTorch; `dpkit train` is a separate binary
# (//tools:dpkit_train). `dpkit` itself is the static launcher (tools/dpkit_launcher.cc):
# no shared library at all. Also checks that the check itself can fail: the training binary
# does link LibTorch.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
launcher="${root}/tools/dpkit"
dpkit="${root}/tools/dpkit_accounting"
train="${root}/tools/dpkit_train"
pattern='libtorch|libc10|libcaffe2|libdnnl|libopencv'

if readelf -d "${launcher}" | grep -q NEEDED; then
  echo "FAIL: the dpkit launcher needs shared libraries:"; readelf -d "${launcher}" | grep NEEDED
  exit 1
fi
if readelf -l "${launcher}" | grep -q INTERP; then
  echo "FAIL: the dpkit launcher is not statically linked (it has a program interpreter)"; exit 1
fi
echo "dpkit (launcher): statically linked"

needed="$(readelf -d "${dpkit}" | awk '/NEEDED/ {print $NF}')"
echo "dpkit NEEDED: $(echo ${needed})"
if grep -Eq "${pattern}" <<< "${needed}"; then
  echo "FAIL: dpkit needs LibTorch directly"; exit 1
fi
all="$(ldd "${dpkit}")"
count="$(echo "${all}" | wc -l)"
echo "dpkit loads ${count} shared libraries"
if grep -Eq "${pattern}" <<< "${all}"; then
  echo "FAIL: dpkit loads LibTorch:"; echo "${all}" | grep -E "${pattern}"; exit 1
fi
# (Here-strings, not pipes: `ldd | grep -q` under pipefail fails when grep stops early.)
train_libraries="$(ldd "${train}")"
if ! grep -Eq 'libtorch|libc10' <<< "${train_libraries}"; then
  echo "FAIL: the pattern finds no LibTorch even in dpkit_train; the check is broken"; exit 1
fi
echo "PASS: dpkit is static, dpkit_accounting links no LibTorch; dpkit_train does"
