#!/usr/bin/env python3
"""Writes one CSV row per grid point from grid_probe.py reports (--report=FILE).

Usage: report_csv.py LABEL=FILE [LABEL=FILE ...] > points.csv
Later files override earlier ones for the same (q, sigma, T, delta); LABEL names the binary
that produced FILE (e.g. its commit) and goes into the row. Every figure in the CSV is read
from dpkit's JSON output as the probe recorded it.
"""
import csv
import json
import sys

COLUMNS = ['q', 'sigma', 'T', 'delta', 'binary', 'exit', 'cpu_s', 'headline_accountant',
           'headline_epsilon', 'pld_epsilon_lower', 'pld_epsilon_upper', 'rdp_epsilon',
           'pld_min_error_lower', 'pld_min_error_upper']


def field(obj, *keys):
    for key in keys:
        if not isinstance(obj, dict) or key not in obj:
            return ''
        obj = obj[key]
    return '%.10g' % obj if isinstance(obj, float) else obj


def main(args):
    if not args or any('=' not in a for a in args):
        sys.exit('usage: report_csv.py LABEL=FILE [LABEL=FILE ...]')
    latest = {}
    for arg in args:
        label, path = arg.split('=', 1)
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                latest[tuple(r['point'])] = (label, r)
    out = csv.writer(sys.stdout, lineterminator='\n')
    out.writerow(COLUMNS)
    for point in sorted(latest):
        label, r = latest[point]
        try:
            o = json.loads(r['out']) if r['out'] else {}
        except ValueError:
            o = {}
        q, sigma, steps, delta = point
        out.writerow(['%g' % q, '%g' % sigma, '%d' % steps, '%g' % delta, label, r['rc'],
                      '%.1f' % r['cpu'], field(o, 'headline', 'accountant'),
                      field(o, 'headline', 'epsilon'), field(o, 'pld', 'epsilon_lower'),
                      field(o, 'pld', 'epsilon_upper'), field(o, 'rdp', 'epsilon'),
                      field(o, 'pld', 'min_error_lower'), field(o, 'pld', 'min_error_upper')])


if __name__ == '__main__':
    main(sys.argv[1:])
