#!/usr/bin/env python3
"""Trend charts of the tracked benchmark figures (see benchmarks/README.md, "History").

Reads benchmarks/history.csv (commit, date, figure, value; one row per change of a figure,
written by `gate.py --record`) and writes one SVG line chart per figure to
benchmarks/trend/<figure>.svg (values in row order, one point per recorded change, the
x axis labelled with the commits), plus benchmarks/trend/index.md listing them. Run by
`gate.py --record` after it appends to the history; standalone:

  python3 benchmarks/trend.py [--history PATH] [--out DIR]

Plain text SVG, no plotting library: the output is deterministic (same history, same
bytes), so the charts are reviewable in diffs.
"""
import argparse
import csv
import html
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HISTORY = os.path.join(ROOT, "benchmarks", "history.csv")
OUT = os.path.join(ROOT, "benchmarks", "trend")

WIDTH, HEIGHT = 560, 240
LEFT, RIGHT, TOP, BOTTOM = 90, 20, 30, 60


def read_history(path):
    """{figure: [(commit, date, value), ...]} in file order."""
    series = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                value = float(row["value"])
            except (KeyError, ValueError):
                continue
            series.setdefault(row["figure"], []).append((row["commit"], row["date"], value))
    return series


def format_number(v):
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return "%.4gM" % (v / 1e6)
    if abs(v) >= 1e3:
        return "%.4gk" % (v / 1e3)
    return "%.4g" % v


def svg_chart(figure, points):
    """One chart: the values of `points` against their order, y axis from 0."""
    values = [p[2] for p in points]
    top = max(values) * 1.1 if max(values) > 0 else 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = len(points)

    def x(i):
        return LEFT + (plot_w * (i + 0.5) / n)

    def y(v):
        return TOP + plot_h * (1 - v / top)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">'
           % (WIDTH, HEIGHT, WIDTH, HEIGHT),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18" font-size="13">%s</text>' % (LEFT, html.escape(figure))]
    for k in range(5):  # horizontal grid lines and y labels
        v = top * k / 4
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                   % (LEFT, WIDTH - RIGHT, y(v), y(v)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (LEFT - 6, y(v) + 4, format_number(v)))
    out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="black"/>'
               % (LEFT, WIDTH - RIGHT, TOP + plot_h, TOP + plot_h))
    if n > 1:
        path = " ".join("%.1f,%.1f" % (x(i), y(v)) for i, v in enumerate(values))
        out.append('<polyline points="%s" fill="none" stroke="#1f77b4" stroke-width="2"/>'
                   % path)
    for i, (commit, date, v) in enumerate(points):
        out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="#1f77b4"><title>%s %s: %s'
                   '</title></circle>' % (x(i), y(v), html.escape(commit), html.escape(date),
                                          format_number(v)))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (x(i), TOP + plot_h + 16, html.escape(commit[:7])))
        out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#666">%s</text>'
                   % (x(i), TOP + plot_h + 30, html.escape(date)))
    out.append('<text x="%d" y="%d" fill="#666">last: %s</text>'
               % (LEFT, HEIGHT - 8, format_number(values[-1])))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def file_name(figure):
    return re.sub(r"[^A-Za-z0-9._-]", "_", figure) + ".svg"


def write_charts(history, out_dir):
    series = read_history(history)
    os.makedirs(out_dir, exist_ok=True)
    lines = ["# Trend of the tracked benchmark figures",
             "",
             "Drawn by `benchmarks/trend.py` from `benchmarks/history.csv` (one point per "
             "recorded change).",
             ""]
    for figure in sorted(series):
        name = file_name(figure)
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(svg_chart(figure, series[figure]))
        lines.append("![%s](%s)" % (figure, name))
    with open(os.path.join(out_dir, "index.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return sorted(series)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", default=HISTORY)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    if not os.path.exists(args.history):
        print("no history at " + args.history)
        return 1
    figures = write_charts(args.history, args.out)
    print("trend: %d charts in %s" % (len(figures), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
