#!/usr/bin/env python3
"""The PLD peer table of benchmarks/README.md: dpkit's certified interval and CPU times from
benchmarks/pld_cases_benchmark (run here), beside the peers' figures of issue 16.

The peers' figures are quoted, not measured here: issue 16 measured Google's dp_accounting
(PLD, "pessimistic" epsilon on its grid 1e-5, the tightness of dpkit's interval, and on its
default grid 1e-4) and the PRV accountant (+-0.01 absolute) on the 2-core development machine
on 2026-11-25, one process per computation. dpkit's columns are the benchmark's CPU times:
`BM_PldCase` (epsilon alone) and `BM_PldReport` (the `dpkit epsilon --accountant=pld`
computation with the minimum-error interval, without the process start-up, the figure the
issue's dpkit column measured).

  bazel build //benchmarks:pld_cases_benchmark
  python3 benchmarks/pld_peer_table.py [--binary PATH] [--min_time SECONDS] [--repetitions N]

runs the benchmark with the `dpkit` binary's allocator settings (GLIBC_TUNABLES, see
DPKIT_TUNABLES) and takes the median of N repetitions (3), then
prints the Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Case index of pld_cases_benchmark -> (label, dp_accounting grid 1e-5, dp_accounting grid
# 1e-4, PRV, dpkit's command in issue 16), CPU seconds; None where the issue has no figure.
PEERS = {
    0: ("Table 1 row 2: q 256/60000, σ 1.1, T 14063", "3.24 s", "0.29 s", "0.97 s", "0.30 s"),
    1: ("Table 1 row 6: σ 0.5, T 23438", "16.0 s", "1.29 s", "9.3 s", "1.30 s"),
    2: ("q 1e-3, σ 1.5, T 1e6", "0.85 s", "0.085 s (0.18 % loose)", "11.7 s", "0.59 s"),
    3: ("q 1e-4, σ 0.8, T 1e5", "3.32 s", "0.30 s (2.2 % loose)", "2.25 s",
        "29.4 s, 0.98 GB"),
    4: ("q 1e-3, σ 2, T 20000, δ 1e-6", "0.13 s", "0.017 s (0.31 % loose)", "0.59 s",
        "0.18 s"),
    5: ("q 0.1, σ 0.6, T 1000", "17.1 s", "1.42 s", "4.7 s", "0.065 s"),
    6: ("Table 1 row 1: σ 1.3, T 3516", None, None, None, None),
    8: ("Table 1 row 3: σ 0.7, T 10547", None, None, None, None),
    9: ("Table 1 row 4: σ 0.6, T 14532", None, None, None, None),
    10: ("Table 1 row 5: σ 0.55, T 15938", None, None, None, None),
}
# dp_accounting's time at its 1e-5 grid in seconds, for the speed-up column.
DPA_1E5 = {0: 3.24, 1: 16.0, 2: 0.85, 3: 3.32, 4: 0.13, 5: 17.1}


# The allocator settings of the `dpkit` command (transparent huge pages, tools/dpkit_launcher.cc;
# malloc's mmap threshold fixed at 32 MiB and trimming above 1 GiB, tools/dpkit_main.cc), so
# that the benchmark measures what the command costs; a run without them pays the first
# touches of every page.
DPKIT_TUNABLES = ("glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:"
                  "glibc.malloc.trim_threshold=1073741824")


def run_benchmark(binary, min_time, repetitions):
    cmd = [binary, "--benchmark_filter=^BM_Pld(Case|Report)/", "--benchmark_format=json",
           "--benchmark_min_time=%s" % min_time, "--benchmark_repetitions=%d" % repetitions]
    env = dict(os.environ, GLIBC_TUNABLES=DPKIT_TUNABLES)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise RuntimeError("benchmark failed: " + proc.stderr[-500:])
    results = {}
    for b in json.loads(proc.stdout)["benchmarks"]:
        # The median of the repetitions (the first of a process also pays its heap's growth).
        if repetitions > 1 and b.get("aggregate_name") != "median":
            continue
        kind, index = b["name"].split("/")[:2]
        results[(kind, int(index.split("_")[0]))] = b
    return results


def seconds(b):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
    return b["cpu_time"] * scale


def table(results):
    lines = ["| case (δ 1e-5 unless said) | dpkit certified [lower, upper] (gap) | dpkit ε alone "
             "| dpkit command (report) | vs dp_accounting 1e-5 | dp_accounting grid 1e-5 "
             "| dp_accounting grid 1e-4 | PRV | dpkit in issue 16 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for index, (label, dpa5, dpa4, prv, before) in PEERS.items():
        case = results.get(("BM_PldCase", index))
        report = results.get(("BM_PldReport", index))
        if case is None or report is None:
            continue
        interval = "[%.5f, %.5f] (%.3f %%)" % (case["eps_lower"], case["eps_upper"],
                                                case["gap_pct"])
        speedup = ("%.1f×" % (DPA_1E5[index] / seconds(report))) if index in DPA_1E5 else "–"
        lines.append("| %s | %s | %.3f s | %.3f s | %s | %s | %s | %s | %s |" % (
            label, interval, seconds(case), seconds(report), speedup, dpa5 or "–",
            dpa4 or "–", prv or "–", before or "–"))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary",
                        default=os.path.join(ROOT, "bazel-bin", "benchmarks",
                                             "pld_cases_benchmark"))
    parser.add_argument("--min_time", default="0.2")
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    print(table(run_benchmark(args.binary, args.min_time, args.repetitions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
