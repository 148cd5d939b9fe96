#!/usr/bin/env bash
# Keeps the PLD code's arithmetic in its type `ld` (accounting/internal/pld_real.h): fails
# when a PLD source given as an argument has, outside // comments, a long double literal
# (1e-10L: under Emscripten it pulls its expression into software binary128; write
# 1e-10_ld), an LDBL_* constant (use kLdUnit, kLdMin) or the type long double (use ld).
# pld_real.h itself (the alias) and pld_search.h (generic over its type T) are not checked.
set -u
literal='(^|[^A-Za-z0-9_.])([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+[eE][-+]?[0-9]+|0x[0-9a-fA-F.]+[pP][-+]?[0-9]+)([eE][-+]?[0-9]+)?[lL]([^A-Za-z0-9_]|$)'
found=0
checked=0
for file in "$@"; do
  checked=$((checked + 1))
  hits=$(sed 's|//.*$||' "${file}" | grep -nE "${literal}|LDBL_|long double")
  if [ -n "${hits}" ]; then
    echo "${file}: long double in the PLD code (write _ld literals, kLdMin, ld):"
    echo "${hits}"
    found=1
  fi
done
if [ "${checked}" -lt 20 ]; then
  echo "expected the PLD sources as arguments, got ${checked} files"
  exit 1
fi
# The check itself: a line with an L literal must be found.
if ! echo 'x = 1e-10L * y;' | grep -qE "${literal}"; then
  echo "the literal pattern misses 1e-10L"
  exit 1
fi
if echo 'x = 1e-10_ld * y; int64_t{1} << 21; 0x1p62_ld;' | grep -qE "${literal}"; then
  echo "the literal pattern flags an _ld literal"
  exit 1
fi
[ "${found}" -eq 0 ] && echo "${checked} PLD sources use ld only"
exit "${found}"
