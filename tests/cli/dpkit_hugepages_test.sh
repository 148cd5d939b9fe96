#!/usr/bin/env bash
# `dpkit` is a static launcher that execs dpkit_accounting with glibc.malloc.hugetlb=1 in
# GLIBC_TUNABLES (transparent huge pages for the heap, tools/dpkit_launcher.cc). Checks: the
# running accounting process carries the tunable (read from /proc/PID/environ, which shows
# the environment after exec), appended to a GLIBC_TUNABLES the user set; DPKIT_NO_HUGEPAGES
# leaves the environment alone; the output is identical either way (bit for bit: huge pages
# change no arithmetic); bad input still exits 2 with its one-line error.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
dpkit="${root}/tools/dpkit"
# Table 1 row 6 (PLD, about a second of CPU): long enough to read the environment.
args=(epsilon --sampling_rate=0.004266666666666667 --noise_multiplier=0.5 --steps=23438
      --delta=1e-5 --accountant=pld --format=json)
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

# Runs dpkit in the background with the given environment and prints the environment of
# its process once it has exec'ed (NUL-separated entries one per line; glibc splits
# GLIBC_TUNABLES in place at start-up, so a second tunable shows as a line of its own); its
# output goes to $1.
environ_of_run() {
  local out="$1"; shift
  env "$@" "${dpkit}" "${args[@]}" > "${out}" &
  local pid=$! seen="" now i
  for i in $(seq 1 400); do
    # The first reads may still be the shell's fork or the launcher: wait for the
    # accounting binary.
    if [[ "$( { readlink "/proc/${pid}/exe"; } 2>/dev/null || true)" == *dpkit_accounting ]]; then
      now="$( { tr '\0' '\n' < "/proc/${pid}/environ"; } 2>/dev/null || true)"
      [[ -n "${now}" ]] && seen="${now}"
      [[ "${seen}" == *hugetlb* ]] && break
    fi
    sleep 0.005
  done
  wait "${pid}"
  echo "${seen}"
}

with="$(environ_of_run "${tmp}/with.json" -u GLIBC_TUNABLES -u DPKIT_NO_HUGEPAGES)"
echo "default run: $(grep -i tunables <<< "${with}" || true)"
if ! grep -qx 'GLIBC_TUNABLES=glibc.malloc.hugetlb=1' <<< "${with}"; then
  echo "FAIL: dpkit did not exec dpkit_accounting with glibc.malloc.hugetlb=1"; exit 1
fi
kept="$(environ_of_run "${tmp}/kept.json" -u DPKIT_NO_HUGEPAGES \
        GLIBC_TUNABLES=glibc.malloc.check=0)"
echo "user tunables: $(grep -E 'TUNABLES|^glibc' <<< "${kept}" || true)"
if ! grep -q '^GLIBC_TUNABLES=glibc.malloc.check=0' <<< "${kept}" ||
   ! grep -q 'glibc.malloc.hugetlb=1' <<< "${kept}"; then
  echo "FAIL: the user's GLIBC_TUNABLES were not kept beside glibc.malloc.hugetlb=1"; exit 1
fi
without="$(environ_of_run "${tmp}/without.json" -u GLIBC_TUNABLES DPKIT_NO_HUGEPAGES=1)"
if grep -q 'hugetlb' <<< "${without}"; then
  echo "FAIL: DPKIT_NO_HUGEPAGES=1 still added the tunable"; exit 1
fi
if ! grep -q '^DPKIT_NO_HUGEPAGES=1' <<< "${without}"; then
  echo "FAIL: the environment of the DPKIT_NO_HUGEPAGES=1 run was not read"; exit 1
fi
echo "DPKIT_NO_HUGEPAGES=1: no tunable added"
for f in kept without; do
  if ! cmp -s "${tmp}/with.json" "${tmp}/${f}.json"; then
    echo "FAIL: output differs between the default run and the ${f} run"
    diff "${tmp}/with.json" "${tmp}/${f}.json" || true
    exit 1
  fi
done
grep -q '"epsilon_upper"' "${tmp}/with.json" || { echo "FAIL: no epsilon in the output"; exit 1; }

set +e
err="$(env -u DPKIT_NO_HUGEPAGES "${dpkit}" epsilon --sampling_rate=2 --noise_multiplier=1 \
       --steps=10 --delta=1e-5 2>&1 >/dev/null)"
code=$?
set -e
echo "bad input: exit ${code}: ${err}"
if [[ "${code}" != 2 || "$(wc -l <<< "${err}")" != 1 || "${err}" != *sampling_rate* ]]; then
  echo "FAIL: bad input through the launcher did not exit 2 with a one-line error"; exit 1
fi
echo "PASS"
