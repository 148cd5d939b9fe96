#!/usr/bin/env python3
"""The README's result figures, produced from the current build (issue 15, item 6).

Figures live in marked blocks, `<!-- figures:NAME -->...<!-- /figures -->` (inline or over
several lines), and only the script writes them:

  python3 tools/dev/readme_figures.py --write   # regenerate every block of README.md
  python3 tools/dev/readme_figures.py --check   # exit 1 if a block is not what the build gives

Deterministic blocks (the certified ε intervals and the reproduced tables, from `dpkit
reproduce --format=json`) are regenerated and compared exactly by --check, which
//tests/lint:readme_figures_test runs. Measured blocks (timings, memory, the main job) vary
from run to run: --write measures them (`dpkit epsilon` here, the main job from the
main_job.json that tools/main writes), --check only verifies that they have the shape this
script writes (numbers are not compared). Upper bounds are rounded up and lower bounds
down at the printed precision; values labelled approximate are rounded to nearest.
"""

import argparse
import datetime
import decimal
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

BLOCK = re.compile(r"<!-- figures:([a-z0-9_]+) -->(.*?)<!-- /figures -->", re.DOTALL)
STAMP = "written by `tools/dev/readme_figures.py --write`"
TABLE1_ROW2 = ["--dataset_size=60000", "--batch_size=256", "--noise_multiplier=1.1",
               "--epochs=60", "--delta=1e-5"]
SETTING_NAMES = {"adult": "Adult", "imdb": "IMDb", "movielens": "MovieLens 1M"}
MAIN_JOB_DIR = "out/mnist-table1-row1"


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- number formatting ---------------------------------------------------------------

def _quantize(value, digits, rounding):
    # Decimal(float) is the float's exact value, so the rounding direction is exact too.
    exponent = decimal.Decimal(1).scaleb(-digits)
    return str(decimal.Decimal(value).quantize(exponent, rounding=rounding))


def up(value, digits):
    """A certified upper bound at `digits` decimals: the printed number is >= value."""
    return _quantize(value, digits, decimal.ROUND_CEILING)


def down(value, digits):
    """A certified lower bound at `digits` decimals: the printed number is <= value."""
    return _quantize(value, digits, decimal.ROUND_FLOOR)


def nearest(value, digits):
    """An approximate value (labelled so), rounded to nearest."""
    return _quantize(value, digits, decimal.ROUND_HALF_EVEN)


def delta_text(delta):
    """1e-05 -> 1e-5, as the README writes δ."""
    return re.sub(r"e-0*(\d)", r"e-\1", "%g" % delta)


def interval(bounds, digits):
    return "[%s, %s]" % (down(bounds["lower"], digits), up(bounds["upper"], digits))


# --- deterministic blocks ------------------------------------------------------------

class Dpkit:
    """Runs the dpkit binary, caching each command's JSON."""

    def __init__(self, binary):
        self.binary = binary
        self._cache = {}

    def json(self, *args):
        if args not in self._cache:
            out = subprocess.run([self.binary, *args, "--format=json"], check=False,
                                 stdout=subprocess.PIPE, text=True)
            # reproduce exits 1 when a value disagrees with the paper; the table shows it.
            if out.returncode not in (0, 1) or not out.stdout:
                raise SystemExit("dpkit %s failed (exit %d)" % (" ".join(args), out.returncode))
            self._cache[args] = json.loads(out.stdout)
        return self._cache[args]


def paper_dpkit(column, digits, rounding):
    return "%.2f / %s" % (column["paper"], rounding(column["dpkit"], digits))


def table1(dpkit):
    rows = dpkit.json("reproduce", "gdp-table1")["rows"]
    lines = ["| σ | epochs | μ paper / dpkit | ε_CLT paper / dpkit (approx.) | ε_MA paper / dpkit "
             "| certified ε_PLD [lower, upper] |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %g | %g | %s | %s | %s | %s |" % (
            r["sigma"], r["epochs"], paper_dpkit(r["mu"], 4, nearest),
            paper_dpkit(r["epsilon_clt"], 4, nearest), paper_dpkit(r["epsilon_ma"], 4, up),
            interval(r["epsilon_pld"], 4)))
    return "\n" + "\n".join(lines) + "\n"


def table1_row2(dpkit):
    row = dpkit.json("reproduce", "gdp-table1")["rows"][1]
    if (row["sigma"], row["epochs"]) != (1.1, 60):
        raise SystemExit("gdp-table1's second row is not σ 1.1, 60 epochs")
    return "ε ∈ %s" % interval(row["epsilon_pld"], 6)


def gdp_experiments(dpkit):
    rows = dpkit.json("reproduce", "gdp-experiments")["rows"]
    lines = ["| setting (σ, p, epochs, δ) | μ paper / dpkit | ε_CLT paper / dpkit (approx.) "
             "| ε_MA paper / dpkit | certified ε_PLD [lower, upper] | σ̃ from PLD (approx.) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        tilde = r["sigma_tilde_pld"]
        low, high = nearest(tilde["lower"], 3), nearest(tilde["upper"], 3)
        lines.append("| %s (%g, %d/%d, %g, %s) | %s | %s | %s | %s | %s |" % (
            SETTING_NAMES.get(r["setting"], r["setting"]), r["sigma"], r["batch_size"],
            r["dataset_size"], r["epochs"], delta_text(r["delta"]), paper_dpkit(r["mu"], 4, nearest),
            paper_dpkit(r["epsilon_clt"], 4, nearest), paper_dpkit(r["epsilon_ma"], 4, up),
            interval(r["epsilon_pld"], 4), low if low == high else "%s–%s" % (low, high)))
    return "\n" + "\n".join(lines) + "\n"


# --- measured blocks -----------------------------------------------------------------

def run_measured(argv):
    """(wall seconds, peak RSS in MB) of one process, through GNU time: a child forked from
    Python would report Python's own resident size (Linux keeps the peak across exec)."""
    if not os.path.exists("/usr/bin/time"):
        raise SystemExit("measuring needs /usr/bin/time (Debian package `time`)")
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        start = time.monotonic()
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", report.name, *argv], check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.monotonic() - start
        return wall, int(report.read().split()[-1]) / 1024.0


def machine():
    load = os.getloadavg()[0]
    return "%s UTC, %d cores, load average %.1f" % (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        os.cpu_count(), load)


TIMINGS_HEAD = ("| command (Table 1 row 2: `%s`) | wall, median (range) of {runs} | peak RSS |\n"
                "|---|---|---|\n" % " ".join(TABLE1_ROW2))
TIMINGS_ROW = "| `{command}` | {median} s ({low}–{high}) | {rss} MB |\n"
TIMINGS_FOOT = "\n" + STAMP + " ({machine}).\n"


def accounting_timings(dpkit, runs=5):
    cases = [("dpkit epsilon --accountant=rdp", ["epsilon", *TABLE1_ROW2, "--accountant=rdp"]),
             ("dpkit epsilon --accountant=pld", ["epsilon", *TABLE1_ROW2, "--accountant=pld"]),
             ("dpkit --help", ["--help"])]
    where = machine()
    text = "\n" + TIMINGS_HEAD.format(runs=runs)
    for command, args in cases:
        samples = [run_measured([dpkit.binary, *args]) for _ in range(runs)]
        walls = sorted(s[0] for s in samples)
        text += TIMINGS_ROW.format(command=command, median="%.3f" % statistics.median(walls),
                                   low="%.3f" % walls[0], high="%.3f" % walls[-1],
                                   rss="%.1f" % max(s[1] for s in samples))
    return text + TIMINGS_FOOT.format(machine=where)


def accounting_timings_shape(text):
    body = re.escape(TIMINGS_HEAD).replace(r"\{runs\}", r"\d+")
    row = re.escape(TIMINGS_ROW)
    for field in ("command", "median", "low", "high", "rss"):
        row = row.replace(re.escape("{%s}" % field), r"[^|]+")
    foot = re.escape(TIMINGS_FOOT).replace(re.escape("{machine}"), r"[^()]+")
    return re.fullmatch(r"\n" + body + "(?:" + row + ")+" + foot, text) is not None


MAIN_JOB = ("the main job (`bash tools/main`, row 1; {stamp} from its `{path}`: {date}, {cores} "
            "cores, load average {load}) trained "
            "its {epochs} epochs in {train} s ({per_epoch} s per epoch, evaluation and per-epoch "
            "accounting included; the whole command {command} s, set-up and build included) to "
            "{accuracy} % test accuracy, with certified ε ≤ {eps_upper} (PLD; lower bound "
            "{eps_lower}; RDP {eps_rdp}, rounded outward) at δ = {delta}")


def main_job(dpkit, root):
    path = os.path.join(MAIN_JOB_DIR, "main_job.json")
    with open(os.path.join(root, path)) as fh:
        job = json.load(fh)
    with open(os.path.join(root, MAIN_JOB_DIR, "metrics.jsonl")) as fh:
        epochs = [json.loads(line) for line in fh if line.strip()]
    report = dpkit.json("ledger", os.path.join(root, MAIN_JOB_DIR, "ledger.jsonl"),
                        "--delta=%r" % epochs[-1]["delta"])
    train = sum(e["seconds"] for e in epochs)
    return MAIN_JOB.format(
        stamp=STAMP, path=path, date=job["date"], cores=job["cores"],
        load="%.1f" % job["load_average"], epochs=len(epochs), train="%.1f" % train,
        per_epoch="%.1f" % (train / len(epochs)), command="%.1f" % job["command_seconds"],
        accuracy="%.2f" % (100 * epochs[-1]["test_accuracy"]),
        eps_upper=up(report["pld"]["epsilon_upper"], 4),
        eps_lower=down(report["pld"]["epsilon_lower"], 4), eps_rdp=up(report["rdp"]["epsilon"], 4),
        delta=delta_text(epochs[-1]["delta"]))


def main_job_shape(text):
    pattern = re.escape(MAIN_JOB)
    for field in re.findall(r"\{(\w+)\}", MAIN_JOB):
        pattern = pattern.replace(re.escape("{%s}" % field), r".+?", 1)
    return re.fullmatch(pattern, text) is not None


DISTRIBUTED_JSON = "out/distributed_benchmark.json"
DISTRIBUTED = ("`//benchmarks:distributed_benchmark` ({stamp} from its `--benchmark_format=json` "
               "output `{path}`: {date}, {cores} cores, load average {load}), MNIST CNN DP-SGD "
               "steps of batch 256, mean of {steps} steps after 3 untimed ones: 1 process × 2 "
               "threads {one} ms per step, 2 processes × 1 thread {two} ms per step (efficiency "
               "{efficiency}); {bytes} bytes all-reduced per rank per step")


def distributed_benchmark(dpkit, root):
    """From the JSON that `distributed_benchmark --benchmark_format=json
    --benchmark_out=out/distributed_benchmark.json` writes (run it on an idle machine)."""
    with open(os.path.join(root, DISTRIBUTED_JSON)) as fh:
        run = json.load(fh)
    rows = {b["name"].split("/")[0]: b for b in run["benchmarks"]}
    one, two = rows["BM_OneProcessTwoThreads"], rows["BM_TwoProcessesOneThread"]
    return DISTRIBUTED.format(
        stamp=STAMP, path=DISTRIBUTED_JSON, date=run["context"]["date"][:16],
        cores=run["context"]["num_cpus"], load="%.1f" % run["context"]["load_avg"][0],
        steps=two["iterations"], one="%.1f" % one["real_time"], two="%.1f" % two["real_time"],
        efficiency="%.2f" % two["efficiency"],
        bytes="{:,}".format(int(two["all_reduce_bytes_per_step"])))


def distributed_benchmark_shape(text):
    pattern = re.escape(DISTRIBUTED)
    for field in re.findall(r"\{(\w+)\}", DISTRIBUTED):
        pattern = pattern.replace(re.escape("{%s}" % field), r".+?", 1)
    return re.fullmatch(pattern, text) is not None


DETERMINISTIC = {"table1": table1, "table1_row2": table1_row2,
                 "gdp_experiments": gdp_experiments}
MEASURED = {"accounting_timings": (lambda dpkit, root: accounting_timings(dpkit),
                                   accounting_timings_shape),
            "main_job": (main_job, main_job_shape),
            "distributed_benchmark": (distributed_benchmark, distributed_benchmark_shape)}


def process(text, dpkit, root, write, only=None):
    """Returns (new text, problems). Unknown block names are problems. With `only`, --write
    measures only the measured blocks named there (the others are checked)."""
    problems = []

    def replace(m):
        name, body = m.group(1), m.group(2)
        if name in DETERMINISTIC:
            new = DETERMINISTIC[name](dpkit)
            if not write and new != body:
                problems.append("figures:%s is stale:\n--- README\n%s\n--- current build\n%s"
                                % (name, body, new))
        elif name in MEASURED:
            measure, shape = MEASURED[name]
            new = body
            if write and (not only or name in only):
                try:
                    new = measure(dpkit, root)
                except FileNotFoundError as missing:
                    print("figures:%s kept (%s; run bash tools/main first)" % (name, missing))
            if not shape(new):
                problems.append("figures:%s was not written by this script:\n%s" % (name, new))
        else:
            problems.append("unknown figures block %r" % name)
            new = body
        return "<!-- figures:%s -->%s<!-- /figures -->" % (name, new)

    return BLOCK.sub(replace, text), problems


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the blocks in place")
    mode.add_argument("--check", action="store_true", help="exit 1 if a block is stale")
    parser.add_argument("--readme", action="append",
                        help="file with figures blocks (repeatable; default: README.md)")
    parser.add_argument("--only", action="append",
                        help="--write: re-measure only this measured block (repeatable)")
    parser.add_argument("--dpkit", default=None, help="default: bazel-bin/tools/dpkit")
    args = parser.parse_args(argv)
    root = repo_root()
    dpkit = Dpkit(args.dpkit or os.path.join(root, "bazel-bin", "tools", "dpkit"))
    failed = False
    for readme in args.readme or [os.path.join(root, "README.md")]:
        with open(readme, encoding="utf-8") as fh:
            text = fh.read()
        blocks = BLOCK.findall(text)
        new, problems = process(text, dpkit, root, args.write, args.only)
        for p in problems:
            print("%s: %s" % (readme, p))
        failed = failed or bool(problems)
        if args.write and new != text:
            with open(readme, "w", encoding="utf-8") as fh:
                fh.write(new)
        print("%s: %d figures block(s) %s" % (readme, len(blocks),
                                              "written" if args.write else "checked"))
        if not blocks:
            print("%s: no figures blocks" % readme)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
