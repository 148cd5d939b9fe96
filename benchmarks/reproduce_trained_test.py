#!/usr/bin/env python3
"""Tests of reproduce_trained.py, the summariser of the trained reproduce items, on run
folders written here (the trainings themselves take hours): the published tables are its
output, so its arithmetic and its selection rules are checked against values computed
independently below, and every certified epsilon it prints must be rounded up.
"""
import json
import os
import sys
import tempfile
import unittest
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reproduce_trained  # noqa: E402


def write_run(runs, name, lines):
    os.makedirs(os.path.join(runs, name))
    with open(os.path.join(runs, name, "metrics.jsonl"), "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def epoch_line(epoch, accuracy, epsilon):
    return {"epoch": epoch, "test_accuracy": accuracy,
            "epsilon": {"headline": {"accountant": "pld", "certified": True,
                                     "epsilon": epsilon}}}


def read_item(out, name):
    with open(os.path.join(out, name + ".json")) as f:
        doc = json.load(f)
    with open(os.path.join(out, name + ".md")) as f:
        md = f.read()
    return doc, md


class RoundingTest(unittest.TestCase):
    def test_upper_bounds_round_up_from_the_exact_binary_value(self):
        up = reproduce_trained.up
        self.assertEqual(up(0.3, 3), "0.300")        # the double just below 0.3
        self.assertEqual(up(0.1 + 0.2, 3), "0.301")  # the double just above 0.3
        self.assertEqual(up(0.4999, 3), "0.500")
        self.assertEqual(up(28.047421281185915, 4), "28.0475")
        self.assertEqual(up(8.0, 3), "8.000")
        self.assertEqual(up(None, 3), "-")
        for value in (0.8645, 2.38177, 1e-7, 15.716912, 7.99424):
            for decimals in (3, 4):
                printed = Fraction(up(value, decimals))
                self.assertGreaterEqual(printed, Fraction(value))
                self.assertLess(printed - Fraction(value), Fraction(1, 10 ** decimals))


class MnistTable1Test(unittest.TestCase):
    def test_mean_and_sample_sd_over_the_complete_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            runs, out = os.path.join(tmp, "runs"), os.path.join(tmp, "out")
            accuracies = [0.9501, 0.9433, 0.9612]
            epsilons = [0.86451234, 0.86447, 0.8645]
            for seed, (acc, eps) in enumerate(zip(accuracies, epsilons), start=1):
                write_run(runs, f"row1-seed{seed}",
                          [epoch_line(e, acc - 0.01 * (15 - e), eps) for e in range(1, 16)])
            # A run that stopped early is not averaged in.
            write_run(runs, "row1-seed4", [epoch_line(e, 0.5, 0.9) for e in range(1, 10)])
            reproduce_trained.mnist_table1(runs, out)
            doc, md = read_item(out, "bu-table1-accuracy")
            row = doc["rows"][0]
            values = [100 * a for a in accuracies]
            mean = sum(values) / 3
            sd = (sum((v - mean) ** 2 for v in values) / 2) ** 0.5
            self.assertEqual(len(row["accuracies"]), 3)
            self.assertAlmostEqual(row["mean"], mean, places=12)
            self.assertAlmostEqual(row["sd"], sd, places=12)
            self.assertEqual(row["epsilon_certified"], max(epsilons))
            self.assertIn(f"| 1 | 1.3 | 15 | 0.25 | 1.5 | 95.0 | {mean:.2f} ± {sd:.2f} | 3 | "
                          "0.8646 |", md)
            # Rows without runs are listed with a dash.
            self.assertIn("| 6 | 0.5 | 100 | 0.25 | 1.5 | 98.0 | - | 0 | - |", md)


class AbadiPcaTest(unittest.TestCase):
    def test_the_last_epoch_within_the_papers_epsilon_is_reported(self):
        with tempfile.TemporaryDirectory() as tmp:
            runs, out = os.path.join(tmp, "runs"), os.path.join(tmp, "out")
            # Epsilon grows past the paper's 0.5 after epoch 3 (0.49999 rounds up to 0.500).
            eps = [0.3, 0.45, 0.49999, 0.50001, 0.6]
            acc = [0.80, 0.85, 0.8984, 0.91, 0.92]
            write_run(runs, "large-seed1",
                      [epoch_line(e + 1, a, x) for e, (a, x) in enumerate(zip(acc, eps))])
            # Never within the paper's 2: no accuracy is claimed for it.
            write_run(runs, "medium-seed1", [epoch_line(1, 0.9, 2.0000001)])
            reproduce_trained.abadi_pca(runs, out)
            doc, md = read_item(out, "abadi-pca")
            large = [r for r in doc["rows"] if r["noise"] == "large"][0]
            self.assertEqual(large["epoch"], 3)
            self.assertEqual(large["epsilon_certified"], 0.49999)
            self.assertAlmostEqual(large["accuracy"], 89.84, places=9)
            self.assertIn("| large | 8 | 16 | 0.5 | 0.500 | 90 | 89.84 | 3 |", md)
            medium = [r for r in doc["rows"] if r["noise"] == "medium"][0]
            self.assertIsNone(medium["epoch"])
            self.assertIn("| medium | 4 | 7 | 2 | - | 95 | - | - |", md)


if __name__ == "__main__":
    unittest.main()
