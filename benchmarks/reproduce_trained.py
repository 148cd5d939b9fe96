#!/usr/bin/env python3
"""Tables and figures of the TRAINED reproduce items (not in `dpkit reproduce all`).

The shell scripts beside this file train the models with `dpkit train` (minutes to hours)
into RUNS; this script reads their metrics.jsonl / summary.json / loss.csv and writes, like
`dpkit reproduce all`, OUT/<item>.md, .json, .csv and .svg:

  reproduce_trained.py mnist-table1 RUNS OUT  # Bu et al. 2020 Table 1: mean accuracy over seeds
  reproduce_trained.py bu-fig4 RUNS OUT       # Bu et al. 2020 Fig. 4: sigma vs sigma~ (CLT, certified)
  reproduce_trained.py abadi-pca RUNS OUT     # Abadi et al. 2016 Sec. 5.1: accuracy vs epsilon
  reproduce_trained.py wide-fig1 RUNS OUT     # Zhang et al. 2021 Fig. 1 + Table 2 (word2vec)

Every epsilon shown is the certified upper bound the trainer printed (PLD, else RDP) for
the run's ledger file, rounded up. Accuracies are measured, so they are compared with the
paper's printed ones, never asserted.
"""

import csv
import decimal
import json
import os
import statistics
import sys

# Bu et al. 2020, Table 1 (MNIST, NoisySGD, batch 256, delta 1e-5): sigma, epochs, lr, C and
# the printed test accuracy (%).
BU_TABLE1 = {
    1: (1.3, 15, 0.25, 1.5, 95.0),
    2: (1.1, 60, 0.15, 1.0, 96.6),
    3: (0.7, 45, 0.25, 1.5, 97.0),
    4: (0.6, 62, 0.25, 1.5, 97.6),
    5: (0.55, 68, 0.25, 1.5, 97.8),
    6: (0.5, 100, 0.25, 1.5, 98.0),
}

# Abadi et al. 2016, Sec. 5.1: (name, sigma, sigma_p, printed epsilon, printed accuracy %).
ABADI_PCA = [
    ("large", 8.0, 16.0, 0.5, 90.0),
    ("medium", 4.0, 7.0, 2.0, 95.0),
    ("small", 2.0, 4.0, 8.0, 97.0),
]

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def headline_epsilon(eps):
    """The smallest certified upper bound of a LedgerEpsilon object (models/training_ledger.h):
    its headline, else the PLD upper bound or the RDP bound."""
    eps = eps or {}
    headline = eps.get("headline") or {}
    if isinstance(headline.get("epsilon"), (int, float)):
        return float(headline["epsilon"])
    bounds = []
    pld, rdp = eps.get("pld") or {}, eps.get("rdp") or {}
    for value in (pld.get("epsilon_upper"), rdp.get("epsilon")):
        if isinstance(value, (int, float)):
            bounds.append(float(value))
    return min(bounds) if bounds else None


def certified_epsilon(metrics_line):
    """The certified upper bound an epoch line of metrics.jsonl reports."""
    return headline_epsilon(metrics_line.get("epsilon"))


def up(value, decimals):
    """An upper bound printed with `decimals` decimals, rounded up from its exact binary
    value (0.1 + 0.2 = 0.30000000000000004 prints as 0.301 at 3 decimals, 0.3 as 0.300)."""
    if value is None:
        return "-"
    exact = decimal.Decimal(value)
    return str(exact.quantize(decimal.Decimal(1).scaleb(-decimals), rounding=decimal.ROUND_CEILING))


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def svg_plot(title, x_label, y_label, series):
    """A line plot: series = [(name, [(x, y), ...])]."""
    width, height, left, right, top, bottom = 640, 400, 70, 170, 40, 50
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    if not xs:
        xs, ys = [0, 1], [0, 1]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 1
    pw, ph = width - left - right, height - top - bottom

    def px(x):
        return left + (x - x0) / (x1 - x0) * pw

    def py(y):
        return top + ph - (y - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>']
    for i in range(5):
        xv, yv = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{px(xv)}" y="{top + ph + 16}" text-anchor="middle">{xv:.3g}</text>')
        out.append(f'<text x="{left - 6}" y="{py(yv) + 4}" text-anchor="end">{yv:.3g}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">{x_label}</text>')
    out.append(f'<text x="16" y="{top + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {top + ph / 2})">{y_label}</text>')
    for k, (name, pts) in enumerate(series):
        color = COLORS[k % len(COLORS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        ly = top + 14 + 18 * k
        out.append(f'<line x1="{left + pw + 10}" y1="{ly}" x2="{left + pw + 30}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 34}" y="{ly + 4}">{name}</text>')
    out.append("</svg>\n")
    return "\n".join(out)


def write_item(out_dir, name, paper, columns, rows, json_rows, notes, csv_header, csv_rows, svg):
    os.makedirs(out_dir, exist_ok=True)
    md = [f"# {name}: {paper}", "", "| " + " | ".join(columns) + " |",
          "|" + "---|" * len(columns)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md += ["", notes, ""]
    write_atomically(os.path.join(out_dir, name + ".md"), "\n".join(md))
    doc = {"name": name, "paper": paper, "columns": columns, "rows": json_rows, "notes": notes}
    write_atomically(os.path.join(out_dir, name + ".json"), json.dumps(doc, indent=2) + "\n")
    tmp = os.path.join(out_dir, name + ".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(csv_header)
        w.writerows(csv_rows)
    os.replace(tmp, os.path.join(out_dir, name + ".csv"))
    write_atomically(os.path.join(out_dir, name + ".svg"), svg)


def run_dirs(runs, prefix):
    if not os.path.isdir(runs):
        return []
    return sorted(d for d in os.listdir(runs)
                  if d.startswith(prefix) and os.path.exists(os.path.join(runs, d, "metrics.jsonl")))


def final(runs, d):
    lines = read_jsonl(os.path.join(runs, d, "metrics.jsonl"))
    return lines[-1] if lines else None


def mean_sd(values):
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def mnist_table1(runs, out_dir):
    rows, json_rows, csv_rows, series = [], [], [], []
    for row, (sigma, epochs, lr, clip, paper) in BU_TABLE1.items():
        dirs = run_dirs(runs, f"row{row}-seed")
        finals = [final(runs, d) for d in dirs]
        finals = [f for f in finals if f and f.get("epoch") == epochs]
        accs = [100 * f["test_accuracy"] for f in finals]
        eps = max((certified_epsilon(f) or 0) for f in finals) if finals else None
        mean, sd = mean_sd(accs)
        rows.append([str(row), f"{sigma:g}", str(epochs), f"{lr:g}", f"{clip:g}",
                     f"{paper:.1f}", "-" if mean is None else f"{mean:.2f} ± {sd:.2f}",
                     str(len(accs)), up(eps, 4)])
        json_rows.append({"row": row, "sigma": sigma, "epochs": epochs, "learning_rate": lr,
                          "clip_norm": clip, "paper_accuracy": paper, "accuracies": accs,
                          "mean": mean, "sd": sd, "epsilon_certified": eps})
        for d in dirs:
            pts = [(m["epoch"], 100 * m["test_accuracy"])
                   for m in read_jsonl(os.path.join(runs, d, "metrics.jsonl"))]
            csv_rows += [[row, d, e, a] for e, a in pts]
            if d.endswith("seed1"):
                series.append((f"row {row} (sigma {sigma:g})", pts))
    notes = ("Mean ± sample standard deviation of the final test accuracy over the runs found "
             "(one per seed; every run draws fresh secure noise and batches). epsilon: the "
             "largest certified bound (PLD upper, else RDP) the runs printed, rounded up. "
             "Rows 1-3's lr and C are TensorFlow Privacy's MNIST tutorial settings (its "
             "tutorials/README.md table, whose 95.0 / 96.6 / 97.0 % the paper's Table 1 prints "
             "for these rows). Rows 4-6 reuse rows 1 and 3's lr 0.25 and C 1.5: an assumption "
             "(the paper's text was not reachable from this machine).")
    write_item(out_dir, "bu-table1-accuracy", "Bu, Dong, Long, Su 2020, Table 1 (accuracy)",
               ["row", "sigma", "epochs", "lr", "C", "paper %", "dpkit % (mean ± sd)", "runs",
                "certified eps"], rows, json_rows, notes, ["row", "run", "epoch", "accuracy"],
               csv_rows, svg_plot("MNIST test accuracy (seed 1 of each row)", "epoch",
                                  "test accuracy (%)", series))


# Bu et al. 2020, Fig. 4 caption: panel -> (sigma, sigma~ of the CLT, epochs, the (eps, 1e-5)
# both were claimed to give at that epoch).
BU_FIG4 = {"top": (1.3, 1.06, 20, 1.34), "bottom": (0.7, 0.638, 70, 8.68)}
FIG4_LABELS = {"sigma": "sigma (paper, moments accountant)",
               "sigma_clt": "sigma~ (paper, CLT: approximate)",
               "sigma_pld": "sigma~_pld (certified PLD)"}


def bu_fig4(runs, out_dir):
    series, rows, json_rows, csv_rows = [], [], [], []
    for panel, (sigma, sigma_clt, epochs, paper_eps) in BU_FIG4.items():
        for label, name in FIG4_LABELS.items():
            for d in run_dirs(runs, f"fig4-{panel}-{label}-seed"):
                lines = read_jsonl(os.path.join(runs, d, "metrics.jsonl"))
                with open(os.path.join(runs, d, "fig4.json")) as f:
                    noise = float(json.load(f)["sigma"])
                pts = [(m["epoch"], 100 * m["test_accuracy"]) for m in lines]
                if d.endswith("seed1"):
                    series.append((f"{panel}: {label} {noise:.4g}", pts))
                csv_rows += [[panel, label, noise, d, m["epoch"], 100 * m["test_accuracy"],
                              certified_epsilon(m)] for m in lines]
                eps = certified_epsilon(lines[-1]) if lines else None
                done = bool(lines) and lines[-1].get("epoch") == epochs
                rows.append([panel, name, f"{noise:.4g}", str(epochs), f"{paper_eps:g}",
                             up(eps, 4), f"{pts[-1][1]:.2f}" if done else "-", d])
                json_rows.append({"panel": panel, "noise": label, "sigma": noise,
                                  "epochs": epochs, "paper_epsilon": paper_eps,
                                  "epsilon_certified": eps, "run": d, "complete": done,
                                  "accuracy": pts[-1][1] if done else None})
    notes = ("Fig. 4's settings (caption: p = 256/60000, eta = 0.15, R = 1.5, delta = 1e-5). "
             "The paper trains with sigma (its moments-accountant epsilon) and with the smaller "
             "sigma~ that the CLT says gives the same epsilon; the CLT is an approximation, and "
             "the certified epsilon column (PLD upper bound of each run's own ledger, rounded up) "
             "shows what each run is provably worth. sigma~_pld is the smallest noise whose "
             "certified epsilon is at most the paper's (dpkit calibrate --accountant=pld): the "
             "accuracy a sound analysis buys at the paper's privacy claim.")
    write_item(out_dir, "bu-fig4", "Bu, Dong, Long, Su 2020, Fig. 4",
               ["panel", "noise", "sigma", "epochs", "paper eps", "certified eps",
                "final accuracy %", "run"], rows, json_rows, notes,
               ["panel", "noise", "sigma", "run", "epoch", "accuracy", "certified_epsilon"],
               csv_rows, svg_plot("MNIST: sigma vs sigma~ (CLT) vs sigma~ (certified)", "epoch",
                                  "test accuracy (%)", series))


def abadi_pca(runs, out_dir):
    rows, json_rows, csv_rows, series = [], [], [], []
    for name, sigma, sigma_p, paper_eps, paper_acc in ABADI_PCA:
        dirs = run_dirs(runs, f"{name}-seed")
        for d in dirs:
            lines = read_jsonl(os.path.join(runs, d, "metrics.jsonl"))
            pts = [(certified_epsilon(m), 100 * m["test_accuracy"]) for m in lines]
            pts = [(e, a) for e, a in pts if e is not None]
            csv_rows += [[name, d, m["epoch"], e, a] for m, (e, a) in zip(lines, pts)]
            if d.endswith("seed1"):
                series.append((f"{name} (sigma {sigma:g}, sigma_p {sigma_p:g})", pts))
            # The accuracy at the paper's privacy level: the last epoch whose certified
            # epsilon is still <= the paper's.
            within = [(m["epoch"], e, a) for m, (e, a) in zip(lines, pts) if e <= paper_eps]
            epoch, eps, acc = within[-1] if within else (None, None, None)
            rows.append([name, f"{sigma:g}", f"{sigma_p:g}", f"{paper_eps:g}", up(eps, 3),
                         f"{paper_acc:.0f}", "-" if acc is None else f"{acc:.2f}",
                         "-" if epoch is None else str(int(epoch))])
            json_rows.append({"noise": name, "sigma": sigma, "sigma_p": sigma_p, "run": d,
                              "paper_epsilon": paper_eps, "epsilon_certified": eps,
                              "paper_accuracy": paper_acc, "accuracy": acc, "epoch": epoch})
    notes = ("DP-PCA (60 dims, sigma_p) + 1,000-unit ReLU MLP, lot 600, C 4 (flat clipping; the "
             "paper clips each layer at 4), lr 0.1 -> 0.052 over 10 epochs (their Sec. 5.1), "
             "delta 1e-5. Each row is the last epoch whose certified epsilon (the whole ledger: the "
             "PCA's Gaussian event and every step; rounded up) is at most the paper's epsilon, "
             "and its test accuracy; the paper's epsilon is the moments accountant's.")
    write_item(out_dir, "abadi-pca", "Abadi et al. 2016, Sec. 5.1 (DP-PCA + MLP on MNIST)",
               ["noise", "sigma", "sigma_p", "paper eps", "dpkit certified eps", "paper acc %",
                "dpkit acc %", "epoch"], rows, json_rows, notes,
               ["noise", "run", "epoch", "epsilon", "accuracy"], csv_rows,
               svg_plot("DP-PCA + MLP: accuracy against certified epsilon", "epsilon",
                        "test accuracy (%)", series))


def wide_fig1(runs, out_dir):
    rows, json_rows, csv_rows, series = [], [], [], []
    for algorithm in ("sgd", "dp-sgd", "dp-sparse-em", "dp-sparse-svt"):
        for repeats in (1, 20):
            d = os.path.join(runs, f"{algorithm}-r{repeats}")
            if not os.path.exists(os.path.join(d, "summary.json")):
                continue
            with open(os.path.join(d, "summary.json")) as f:
                summary = json.load(f)
            with open(os.path.join(d, "loss.csv")) as f:
                loss = list(csv.DictReader(f))
            if repeats == 1:
                pts = [(int(r["epoch"]), float(r["test"])) for r in loss]
                series.append((algorithm, pts))
                csv_rows += [[algorithm, e, v] for e, v in pts]
            audit = summary.get("audit", {})
            certified = headline_epsilon(summary.get("ledger_epsilon"))
            rows.append([algorithm, str(repeats), f"{float(loss[-1]['test']):.3f}",
                         up(certified, 3),
                         f"{audit.get('chi_square', float('nan')):.1f} / "
                         f"{audit.get('p_value', float('nan')):.2g}",
                         f"{audit.get('baseline_chi_square', float('nan')):.1f} / "
                         f"{audit.get('baseline_p_value', float('nan')):.2g}",
                         f"{audit.get('mean_exposure', float('nan')):.2f} / "
                         f"{audit.get('baseline_mean_exposure', float('nan')):.2f}"])
            json_rows.append({"algorithm": algorithm, "repeats": repeats,
                              "test_loss": float(loss[-1]["test"]),
                              "epsilon_certified": certified, "audit": audit})
    notes = ("word2vec CBOW on the Brown corpus (200K / 100K / 200K samples, OOV as UNK), 10 "
             "epochs, z = 1, C1 = C2 = 1, delta 1e-5, 100 canaries inserted `repeats` times "
             "(models/wide/README.md has the flags). chi2 vs uniform and vs the out-of-training "
             "baseline (100 phrases drawn like the canaries, never inserted), and the mean "
             "exposure of canaries / baseline (Carlini et al. 2019). epsilon: the smaller "
             "certified bound of the ledger (PLD upper or RDP), rounded up.")
    write_item(out_dir, "wide-fig1", "Zhang, Mironov & Hejazinia 2021, Fig. 1 and Table 2",
               ["algorithm", "repeats", "test loss", "certified eps", "chi2 / p vs uniform",
                "chi2 / p vs baseline", "exposure canaries / baseline"], rows, json_rows, notes,
               ["algorithm", "epoch", "test_loss"], csv_rows,
               svg_plot("word2vec on Brown: test loss", "epoch", "test loss", series))


def main(argv):
    items = {"mnist-table1": mnist_table1, "bu-fig4": bu_fig4, "abadi-pca": abadi_pca,
             "wide-fig1": wide_fig1}
    if len(argv) != 4 or argv[1] not in items:
        sys.stderr.write(__doc__)
        return 2
    items[argv[1]](argv[2], argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
