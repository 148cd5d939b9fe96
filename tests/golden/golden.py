#!/usr/bin/env python3
"""Golden outputs of dpkit's accounting commands (issue 14: no behaviour change).

  golden.py check  --dpkit PATH   runs every case of cases.txt and compares its JSON with
                                  expected/NAME.json: every recorded value must be present
                                  and identical (numbers as IEEE doubles, bit for bit);
                                  keys the command added since are listed, not failed.
  golden.py record --dpkit PATH   rewrites expected/ from the current binary; review the
                                  diff (git diff tests/golden) and name every changed value
                                  in the commit message.

Under `bazel test` the cases are split over the test's shards.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cases():
    with open(os.path.join(HERE, "cases.txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, args = (part.strip() for part in line.split("|", 1))
            yield name, shlex.split(args)


def run(dpkit, args):
    proc = subprocess.run([dpkit] + args, cwd=HERE, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[:400]}")
    return proc.stdout


def compare(expected, actual, path, errors, added):
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            errors.append(f"{path}: expected an object, got {json.dumps(actual)[:80]}")
            return
        for key, value in expected.items():
            if key not in actual:
                errors.append(f"{path}.{key}: missing (was {json.dumps(value)[:80]})")
            else:
                compare(value, actual[key], f"{path}.{key}", errors, added)
        added.extend(f"{path}.{k}" for k in actual if k not in expected)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            errors.append(f"{path}: expected a list of {len(expected)}")
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, f"{path}[{i}]", errors, added)
    else:
        # bool is an int in Python: compare types too, and floats exactly.
        if type(expected) is not type(actual) and not (
                isinstance(expected, (int, float)) and isinstance(actual, (int, float))
                and not isinstance(expected, bool) and not isinstance(actual, bool)):
            errors.append(f"{path}: {json.dumps(expected)} -> {json.dumps(actual)[:80]}")
        elif expected != actual:
            errors.append(f"{path}: {expected!r} -> {actual!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["check", "record"])
    parser.add_argument("--dpkit", required=True)
    opts = parser.parse_args()
    dpkit = os.path.abspath(opts.dpkit)
    shards = int(os.environ.get("TEST_TOTAL_SHARDS", "1"))
    index = int(os.environ.get("TEST_SHARD_INDEX", "0"))
    if "TEST_SHARD_STATUS_FILE" in os.environ:
        open(os.environ["TEST_SHARD_STATUS_FILE"], "w").close()
    failed = checked = 0
    for i, (name, args) in enumerate(cases()):
        if i % shards != index:
            continue
        path = os.path.join(HERE, "expected", name + ".json")
        try:
            out = run(dpkit, args)
            actual = json.loads(out)
        except Exception as e:  # a failing command is a failing case
            print(f"FAIL {name}: {e}")
            failed += 1
            continue
        if opts.mode == "record":
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(out)
            os.replace(tmp, path)
            print(f"recorded {name}")
            continue
        with open(path) as f:
            expected = json.load(f)
        errors, added = [], []
        compare(expected, actual, name, errors, added)
        checked += 1
        if errors:
            failed += 1
            print(f"FAIL {name}:\n  " + "\n  ".join(errors[:20]))
        else:
            print(f"ok   {name}" + (f" (added: {', '.join(added[:6])})" if added else ""))
    print(f"golden: {checked - failed if opts.mode == 'check' else 0} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
