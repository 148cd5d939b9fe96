"""The grid probe of issue 21: `dpkit epsilon --accountant=all --format=json` over a
q x sigma x T x delta grid, checking what every certified bound promises.

Usage: grid_probe.py --dpkit PATH [--grid=ci|full] [--jobs=N] [--cpu_limit=30] [--report=FILE]
                     [--shuffle=SEED] [--skip=FILE] [--wall_factor=10] [--points=q,s,T,d;...]

--report appends one JSON line per point as it finishes (a run stopped early keeps what it
measured); --skip reads such a report and leaves out its points (to continue a stopped run);
--shuffle runs the points in a seeded random order (a run stopped early then covers every
axis instead of the first values of q).

Per point:
  - the command exits 0, or 2 with a one-line message (an input refused at parse time);
    never a crash, and never more than --cpu_limit seconds of CPU (wall time is not used:
    CI shares its cores; a point is killed after 10x the limit of wall time);
  - the JSON holds no NaN or Infinity as a number (an infinite bound is null + a label);
  - the headline is the smallest certified upper bound (RDP, PLD, and GDP where it is exact),
    and every certified lower bound (PLD's) is at most every certified upper bound;
  - at q = 1 the composition is exactly the Gaussian mechanism with mu = sqrt(T)/sigma, whose
    epsilon(delta) is in closed form (Balle & Wang 2018, Theorem 8; Dong et al. 2019,
    Corollary 2.13): PLD's lower bound <= exact <= every certified upper bound.
Across points (the true epsilon is nonincreasing in sigma and delta, nondecreasing in q and
T): whenever point a's true epsilon is at most point b's, lower(a) <= headline(b). This is
"monotone within the stated gaps": headline(a) - headline(b) <= headline(a) - lower(a).

Sharding (bazel shard_count): the grid is split by q, so each shard checks monotonicity in
sigma, T and delta over its own q values; the full grid (run by hand) checks all four.
Prints 'N passed, N failed' and exits 1 on any failure.
"""

import argparse
import concurrent.futures
import itertools
import json
import math
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time

GRIDS = {
    # 4 x 6 x 4 x 6 = 576 points: the grid, run by hand.
    "full": {
        "q": [1e-6, 1e-4, 1e-2, 1.0],
        "sigma": [0.3, 0.5, 1.0, 30.0, 50.0, 100.0],
        "steps": [10, 1000, 100000, 10000000],
        "delta": [0.1, 1e-3, 1e-5, 1e-8, 1e-10, 1e-15],
    },
    # 4 x 3 x 2 x 2 = 48 points and 4 more at q = 1, T = 1e5 (issue 21's soundness 2:
    # PLD's lower bound above the closed form), about a minute of CPU per shard of one q;
    # it keeps the inversion of issue 21 (q 1e-4, T 10, delta 1e-15, sigma 30 against 50).
    # T = 1e7 is left to the full grid (tens of seconds of CPU per point), and so is sigma
    # 0.5 at q < 1: q = 1e-6, sigma 0.5, T = 1000, delta 1e-15 takes 24-27 s of CPU and
    # 800 MB (PLD), too near the 30 s limit for CI.
    "ci": {
        "q": [1e-6, 1e-4, 1e-2, 1.0],
        "sigma": [1.0, 30.0, 50.0],
        "steps": [10, 1000],
        "delta": [1e-5, 1e-15],
        "extra": [(1.0, 0.5, 100000, 0.1), (1.0, 0.5, 100000, 1e-5),
                  (1.0, 1.0, 100000, 0.1), (1.0, 1.0, 100000, 1e-5)],
    },
}

RESULTS = {"passed": 0, "failed": 0}


def check(condition, what):
    if condition:
        RESULTS["passed"] += 1
    else:
        RESULTS["failed"] += 1
        print("FAIL: " + what, flush=True)


def log_phi(x):
    """log of the standard normal CDF, accurate in the far lower tail."""
    if x > 0:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2)))
    if x > -30:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2)))
    # Mills-ratio series (Abramowitz & Stegun 26.2.12): Phi(x) = phi(x)/|x| *
    # sum_k (-1)^k (2k-1)!! / x^(2k); at |x| >= 30 eight terms leave < 1e-20 relative.
    series, term = 1.0, 1.0
    for k in range(1, 9):
        term *= -(2 * k - 1) / (x * x)
        series += term
    return -0.5 * x * x - 0.5 * math.log(2 * math.pi) - math.log(-x) + math.log(series)


def gaussian_log_delta(epsilon, mu):
    """log delta(epsilon) of mu-GDP (Balle & Wang 2018, Theorem 8):
    delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    a = log_phi(-epsilon / mu + mu / 2)
    b = epsilon + log_phi(-epsilon / mu - mu / 2)
    if b >= a:
        return -math.inf
    return a + math.log1p(-math.exp(b - a))


def gaussian_epsilon(mu, delta):
    """The exact epsilon of mu-GDP at delta, by bisection (delta(eps) is decreasing)."""
    log_delta = math.log(delta)
    lo, hi = 0.0, 1.0
    if gaussian_log_delta(0.0, mu) <= log_delta:
        return 0.0
    while gaussian_log_delta(hi, mu) > log_delta:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if gaussian_log_delta(mid, mu) > log_delta:
            lo = mid
        else:
            hi = mid
    return hi


def reject_constant(name):
    raise ValueError("non-finite number %s in JSON" % name)


def run_all(dpkit, points, jobs, cpu_limit, report=None, wall_factor=10):
    """Runs every point; measures each child's CPU time with wait4 (RUSAGE of that pid).
    Appends each result to `report` (an open file) as it finishes."""
    results = []

    def one(point):
        q, sigma, steps, delta = point
        args = [dpkit, "epsilon", "--accountant=all", "--format=json",
                "--sampling_rate=%r" % q, "--noise_multiplier=%r" % sigma,
                "--steps=%d" % steps, "--delta=%r" % delta]
        started = time.monotonic()
        read_out, write_out = os.pipe()
        read_err, write_err = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.dup2(write_out, 1)
            os.dup2(write_err, 2)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit + 1, cpu_limit + 2))
            os.execv(dpkit, args)
        os.close(write_out)
        os.close(write_err)
        # A point that blocks without using CPU is killed after wall_factor (10) times the
        # limit of wall time (a shared machine can be that much slower than its CPU time;
        # under a heavier load, rerun such a point with a larger --wall_factor).
        killer = threading.Timer(wall_factor * cpu_limit, os.kill, (pid, signal.SIGKILL))
        killer.start()
        with os.fdopen(read_out, "rb") as out_file, os.fdopen(read_err, "rb") as err_file:
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as reader:
                err_future = reader.submit(err_file.read)
                out = out_file.read()
                err = err_future.result()
        _, status, usage = os.wait4(pid, 0)
        killer.cancel()
        rc = os.waitstatus_to_exitcode(status)
        return {"point": point, "rc": rc, "out": out.decode(), "err": err.decode(),
                "wall": time.monotonic() - started, "cpu": usage.ru_utime + usage.ru_stime}

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(one, points):
            results.append(result)
            print("%s: exit %d, %.1f s CPU, %.1f s wall" %
                  (name(result["point"]), result["rc"], result["cpu"], result["wall"]), flush=True)
            if report is not None:
                report.write(json.dumps(report_line(result)) + "\n")
                report.flush()
    return results


def report_line(result):
    """One report line: the point, its exit code, CPU and wall seconds, its certified
    (lower, headline) bounds, stderr, and the JSON output (to re-check a continued run)."""
    return {"point": result["point"], "rc": result["rc"], "cpu": result["cpu"],
            "wall": result["wall"], "err": result["err"].strip(), "out": result["out"]}


def name(point):
    return "q=%g sigma=%g T=%d delta=%g" % point


def bounds_of(result):
    """(lower, upper) certified bounds of a point; upper None if infinite or refused."""
    report = result.get("json")
    if report is None:
        return None
    lower = 0.0
    pld = report.get("pld", {})
    if isinstance(pld.get("epsilon_lower"), (int, float)):
        lower = pld["epsilon_lower"]
    upper = report["headline"].get("epsilon")
    return lower, upper


def check_point(result, cpu_limit):
    point = result["point"]
    label = name(point)
    rc = result["rc"]
    check(rc in (0, 2), "%s: exit %d (%s)" % (label, rc, result["err"].strip()[:200]))
    check(result["cpu"] <= cpu_limit, "%s: %.1f s of CPU (limit %d)" % (label, result["cpu"], cpu_limit))
    if rc == 2:
        check(result["err"].count("\n") == 1 and len(result["err"]) < 400,
              "%s: a refusal is one short line: %r" % (label, result["err"][:200]))
        return
    if rc != 0:
        return
    try:
        report = json.loads(result["out"], parse_constant=reject_constant)
    except ValueError as error:
        check(False, "%s: output is not finite JSON: %s" % (label, error))
        return
    result["json"] = report
    headline = report["headline"]
    check(headline.get("certified") is True, "%s: the headline is certified" % label)
    uppers = {}
    if isinstance(report.get("rdp", {}).get("epsilon"), (int, float)):
        uppers["rdp"] = report["rdp"]["epsilon"]
    pld = report.get("pld", {})
    if isinstance(pld.get("epsilon_upper"), (int, float)):
        uppers["pld"] = pld["epsilon_upper"]
    gdp = report.get("gdp", {})
    if gdp.get("approximate") is False and isinstance(gdp.get("epsilon"), (int, float)):
        uppers["gdp"] = gdp["epsilon"]  # exact mu-GDP (q = 1): certified
    lower = pld.get("epsilon_lower", 0.0)
    check(isinstance(lower, (int, float)) and lower >= 0, "%s: PLD lower bound %r" % (label, lower))
    eps = headline.get("epsilon")
    if uppers:
        check(eps == min(uppers.values()),
              "%s: headline %r is not the smallest certified upper bound %r" % (label, eps, uppers))
    else:
        check(eps is None and headline.get("infinite") is True,
              "%s: no finite bound, headline %r" % (label, headline))
    for accountant, upper in uppers.items():
        check(lower <= upper, "%s: PLD lower %r above %s's certified upper %r" %
              (label, lower, accountant, upper))
    q, sigma, steps, delta = point
    if q == 1.0:
        mu = math.sqrt(steps) / sigma
        exact = gaussian_epsilon(mu, delta)
        slack = 1e-9 * max(1.0, exact)  # the closed form's own floating-point error
        check(lower <= exact + slack, "%s: PLD lower %r above the exact %r" % (label, lower, exact))
        for accountant, upper in uppers.items():
            check(upper >= exact - slack,
                  "%s: %s upper %r below the exact %r" % (label, accountant, upper, exact))


# Direction in which the true epsilon grows along each axis (+1: grows with the value).
AXES = {0: +1, 1: -1, 2: +1, 3: -1}


def check_monotone(results):
    by_point = {r["point"]: r for r in results if "json" in r}
    for a, b in itertools.permutations(by_point, 2):
        differing = [i for i in range(4) if a[i] != b[i]]
        if len(differing) != 1:
            continue
        axis = differing[0]
        # The true epsilon of a is at most b's when moving a -> b goes the growing way.
        if (b[axis] - a[axis]) * AXES[axis] < 0:
            continue
        lower_a, _ = bounds_of(by_point[a])
        _, upper_b = bounds_of(by_point[b])
        if upper_b is None:
            continue
        check(lower_a <= upper_b,
              "monotone: lower %r at %s above the headline %r at %s" %
              (lower_a, name(a), upper_b, name(b)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dpkit", required=True)
    parser.add_argument("--grid", default="ci", choices=sorted(GRIDS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cpu_limit", type=int, default=30)
    parser.add_argument("--report", default="")
    parser.add_argument("--shuffle", type=int, default=None)
    parser.add_argument("--skip", default="")
    parser.add_argument("--wall_factor", type=float, default=10)
    parser.add_argument("--points", default="", help="q,sigma,T,delta;... instead of a grid")
    args = parser.parse_args()
    grid = GRIDS[args.grid]
    shards = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    index = int(os.environ.get("TEST_SHARD_INDEX", "0"))
    if "TEST_SHARD_STATUS_FILE" in os.environ:
        open(os.environ["TEST_SHARD_STATUS_FILE"], "w").close()
    qs = grid["q"][index::shards]
    points = list(itertools.product(qs, grid["sigma"], grid["steps"], grid["delta"]))
    points += [p for p in grid.get("extra", []) if p[0] in qs]
    earlier = []
    if args.skip:
        with open(args.skip) as f:
            earlier = [json.loads(line) for line in f if line.strip()]
        for r in earlier:
            r["point"] = tuple(r["point"])
        done = {r["point"] for r in earlier}
        points = [p for p in points if p not in done]
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(points)
    started = time.monotonic()
    report = open(args.report, "a") if args.report else None
    if args.points:
        # T may be written as a float (1e+07, as the reports print it) if it is an integer.
        points = [tuple(float(v) if i != 2 else int(float(v)) for i, v in enumerate(p.split(",")))
                  for p in args.points.split(";")]
    results = run_all(args.dpkit, points, args.jobs, args.cpu_limit, report, args.wall_factor)
    results += earlier
    for result in results:
        check_point(result, args.cpu_limit)
    check_monotone(results)
    slowest = max(results, key=lambda r: r["cpu"]) if results else None
    print("grid %s, q in %s: %d points in %.1f s; slowest %s: %.1f s CPU, %.1f s wall" %
          ("(--points)" if args.points else args.grid, qs, len(points), time.monotonic() - started,
           name(slowest["point"]) if slowest else "-", slowest["cpu"] if slowest else 0,
           slowest["wall"] if slowest else 0), flush=True)
    if report is not None:
        report.close()
    print("%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"]))
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
