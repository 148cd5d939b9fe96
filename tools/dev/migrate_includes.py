#!/usr/bin/env python3
"""Puts dpkit's sources on the `dpkit/` include prefix and its BUILD files on //:dpkit.bzl.

Idempotent: run it after any merge; files already migrated are left byte for byte alone.

  python3 tools/dev/migrate_includes.py            # rewrite the working tree, list changed files
  python3 tools/dev/migrate_includes.py --check    # change nothing; exit 1 and list what is left

What it rewrites (in every file git tracks or would track, outside third_party/,
examples/consumer/ and node_modules/):
  * C++ sources and headers: `#include "accounting/pld.h"` -> `#include "dpkit/accounting/pld.h"`
    for every dpkit top-level directory (accounting, base, benchmarks, mechanisms, models,
    optim, python, tests, tools, web, and any other top-level directory holding a BUILD file);
  * Markdown: the same include lines inside code examples;
  * BUILD files: cc_library / cc_binary / cc_test -> dpkit_cc_library / dpkit_cc_binary /
    dpkit_cc_test, with `load("//:dpkit.bzl", ...)` naming the macros and the DPKIT_*
    constants the file uses, placed
    after the file's leading comments (Bazel wants loads before any other statement).
The same rules are what --check (and //tests/lint:include_prefix_test) enforces.
"""

import argparse
import os
import re
import subprocess
import sys

# Directories that are not dpkit code: stand-ins and BUILD files for other repositories, the
# example consumer workspace (which has its own `accounting/` package on purpose), npm's tree.
# dpkit's own examples/ (outside examples/consumer/) are migrated like the rest.
EXCLUDED_TOP = {"third_party", "node_modules", "out", "build-cuda"}
EXCLUDED_PREFIXES = ("examples/consumer/",)
# dpkit's top-level packages (issue 15); top-level directories with a BUILD file are added.
KNOWN_TOP = {"accounting", "base", "benchmarks", "mechanisms", "models", "optim", "python",
             "tests", "tools", "web"}
CPP_EXTENSIONS = (".h", ".hh", ".hpp", ".inc", ".cc", ".cpp", ".cxx", ".cu", ".cuh")
MACROS = {"cc_library": "dpkit_cc_library", "cc_binary": "dpkit_cc_binary",
          "cc_test": "dpkit_cc_test"}
MACRO_FILE = "//:dpkit.bzl"

# A rule call at the start of a line (BUILD files call rules at top level, unindented).
RAW_RULE = re.compile(r"^(cc_library|cc_binary|cc_test)(\s*\()", re.MULTILINE)
USED_MACRO = re.compile(r"^(dpkit_cc_library|dpkit_cc_binary|dpkit_cc_test)\s*\(", re.MULTILINE)
# Constants that //:dpkit.bzl defines (e.g. DPKIT_PLD_COPTS): loaded where a BUILD file uses
# one as a name (not inside a string or a comment).
def _bzl_constants():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "dpkit.bzl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return sorted(set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*=", fh.read(), re.MULTILINE)))


_CONSTANTS = _bzl_constants()
USED_CONSTANT = re.compile(r'(?<![\w"])(' + "|".join(_CONSTANTS) + r')(?![\w"])') \
    if _CONSTANTS else None
MACRO_LOAD = re.compile(r'^load\(\s*"' + re.escape(MACRO_FILE) + r'"[^)]*\)\n', re.MULTILINE)


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def list_files(root):
    """Tracked files plus untracked ones git does not ignore, relative to root."""
    out = subprocess.check_output(
        ["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "-z"])
    files = sorted({f for f in out.decode().split("\0") if f})
    return [f for f in files if f.split("/")[0] not in EXCLUDED_TOP
            and not f.startswith(EXCLUDED_PREFIXES)
            and os.path.isfile(os.path.join(root, f))
            and not os.path.islink(os.path.join(root, f))]


def dpkit_top_dirs(root, files):
    tops = set(KNOWN_TOP)
    for f in files:
        parts = f.split("/")
        if len(parts) > 1 and parts[-1] in ("BUILD", "BUILD.bazel"):
            tops.add(parts[0])
    return sorted(t for t in tops if t not in EXCLUDED_TOP)


def include_pattern(tops):
    """`#include "<top>/...` for a dpkit top-level directory (group 1: up to the quote)."""
    return re.compile(r'^(\s*#\s*include\s+")((?:' + "|".join(map(re.escape, tops)) + r')/)',
                      re.MULTILINE)


def is_build_file(path):
    return os.path.basename(path) in ("BUILD", "BUILD.bazel")


def migrate_source(text, pattern):
    return pattern.sub(r"\1dpkit/\2", text)


def insert_load(text, names):
    """Adds or updates the load of //:dpkit.bzl so that it names exactly `names`."""
    line = "load(%s)\n" % ", ".join(['"%s"' % MACRO_FILE] + ['"%s"' % n for n in names])
    if MACRO_LOAD.search(text):
        return MACRO_LOAD.sub(lambda _: line, text, count=1)
    lines = text.splitlines(keepends=True)
    at = 0
    while at < len(lines) and (lines[at].startswith("#") or not lines[at].strip()):
        at += 1
    # Keep the file's leading comment block above the load, separated by one blank line.
    head = lines[:at]
    while head and not head[-1].strip():
        head.pop()
    body = lines[at:]
    sep = ["\n"] if head else []
    rest = ["\n"] if body and not body[0].startswith("load(") else []
    return "".join(head + sep + [line] + rest + body)


def migrate_build(text):
    text = RAW_RULE.sub(lambda m: MACROS[m.group(1)] + m.group(2), text)
    code = re.sub(r"#.*", "", MACRO_LOAD.sub("", text))
    used = set(USED_MACRO.findall(text))
    if USED_CONSTANT is not None:
        used |= set(USED_CONSTANT.findall(code))
    if not used:
        return text
    return insert_load(text, sorted(used))


def problems(root, files, tops):
    """What --check reports: files the migration would still change."""
    pattern = include_pattern(tops)
    found = []
    for f in files:
        path = os.path.join(root, f)
        if f.endswith(CPP_EXTENSIONS) or f.endswith(".md"):
            with open(path, encoding="utf-8", errors="surrogateescape") as fh:
                text = fh.read()
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append("%s:%d: un-prefixed include of %s..." % (f, line, m.group(2)))
        elif is_build_file(f):
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for m in RAW_RULE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append("%s:%d: raw %s (use %s from %s)" %
                             (f, line, m.group(1), MACROS[m.group(1)], MACRO_FILE))
            if migrate_build(text) != text and not RAW_RULE.search(text):
                found.append("%s: load of %s does not name the macros used" % (f, MACRO_FILE))
    return found


def migrate(root, files, tops):
    pattern = include_pattern(tops)
    changed = []
    for f in files:
        if f.endswith(CPP_EXTENSIONS) or f.endswith(".md"):
            rewrite = lambda text: migrate_source(text, pattern)
        elif is_build_file(f):
            rewrite = migrate_build
        else:
            continue
        path = os.path.join(root, f)
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            text = fh.read()
        new = rewrite(text)
        if new != text:
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.write(new)
            changed.append(f)
    return changed


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if any file still needs the migration")
    parser.add_argument("--root", default=None,
                        help="the dpkit checkout (default: the one holding this script)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root or repo_root())
    files = list_files(root)
    tops = dpkit_top_dirs(root, files)
    if args.check:
        found = problems(root, files, tops)
        for line in found:
            print(line)
        print("migrate_includes --check: %d file(s) scanned, %d problem(s)%s" %
              (len(files), len(found),
               "; fix with: python3 tools/dev/migrate_includes.py" if found else ""))
        return 1 if found else 0
    changed = migrate(root, files, tops)
    for f in changed:
        print(f)
    print("migrate_includes: %d of %d file(s) changed" % (len(changed), len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
