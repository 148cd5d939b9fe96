#!/usr/bin/env bash
# 1. The checkout is migrated: tools/dev/migrate_includes.py --check finds nothing.
# 2. The check fails on an un-prefixed include and on a raw cc_library (a planted git
#    checkout), the migration fixes both, and a second migration changes nothing.
set -euo pipefail
script="$(readlink -f "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/dev/migrate_includes.py")"
root="$(dirname "$(dirname "$(dirname "${script}")")")"
echo "checking ${root}"
python3 "${script}" --check --root "${root}"

planted="${TEST_TMPDIR}/planted"
rm -rf "${planted}"
mkdir -p "${planted}/accounting" "${planted}/examples/consumer/accounting"
git -C "${planted}" init -q
printf '#include "accounting/pld.h"\n#include "absl/status/status.h"\n' > "${planted}/accounting/a.cc"
printf '# A package.\ncc_library(\n    name = "a",\n    srcs = ["a.cc"],\n)\n' > "${planted}/accounting/BUILD"
# A consumer workspace's own accounting/ package is not dpkit's: left alone.
printf '#include "accounting/budget.h"\n' > "${planted}/examples/consumer/accounting/b.cc"
if python3 "${script}" --check --root "${planted}"; then
  echo "FAIL: --check accepted an un-prefixed include and a raw cc_library"; exit 1
fi
python3 "${script}" --root "${planted}"
grep -qx '#include "dpkit/accounting/pld.h"' "${planted}/accounting/a.cc"
grep -qx '#include "absl/status/status.h"' "${planted}/accounting/a.cc"
grep -qx '#include "accounting/budget.h"' "${planted}/examples/consumer/accounting/b.cc"
grep -qx 'load("//:dpkit.bzl", "dpkit_cc_library")' "${planted}/accounting/BUILD"
grep -qx 'dpkit_cc_library(' "${planted}/accounting/BUILD"
python3 "${script}" --check --root "${planted}"
before="$(cat "${planted}/accounting/a.cc" "${planted}/accounting/BUILD")"
python3 "${script}" --root "${planted}" | grep -qx 'migrate_includes: 0 of 2 file(s) changed'
[ "${before}" = "$(cat "${planted}/accounting/a.cc" "${planted}/accounting/BUILD")" ]
echo "PASS"
