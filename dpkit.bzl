"""The C++ rules every dpkit BUILD file uses (instead of cc_library / cc_binary / cc_test).

They make dpkit usable from another Bazel workspace without any flag on the consumer's
side (issue 15, item 5):
  * every library's headers are included as `dpkit/<package>/<file>` (Bazel's
    include_prefix), inside dpkit as well as from a consumer, so that dpkit's `accounting/`
    cannot collide with a consumer's own `accounting/` package;
  * every target compiles itself as C++17 (Bazel 4's default toolchain passes -std=c++0x;
    a later -std wins), so a consumer needs no `build --cxxopt=-std=c++17` line.
Headers listed in the srcs of a binary or test (cc_binary has no include_prefix) are put
in a package-private header library with the prefix, so that they too are included as
`dpkit/...`. The lint test //tests/lint:include_prefix_test keeps BUILD files on these
rules and every include prefixed; tools/dev/migrate_includes.py converts new code.
"""

# The language standard each dpkit target compiles with (also exported for a consumer's own
# targets that include dpkit headers, which use C++17 features).
DPKIT_COPTS = ["-std=c++17"]

# Extra options of the PLD accountant's libraries (accounting:pld and accounting/internal),
# whose loops are most of a PLD computation. Neither changes a value: -O3 adds inlining and
# vectorisation but no FP reassociation (that needs -ffast-math) and no FMA contraction (x86-64's
# baseline has no FMA; WebAssembly's MVP neither), and -fno-math-errno only lets a math call
# skip setting errno (sqrt becomes one instruction, exp and log calls may be shared). Every
# golden output and 20 further settings were byte-identical; q 1e-4, sigma 0.8, T 1e5:
# 2.869 G -> 2.738 G instructions.
DPKIT_PLD_COPTS = ["-O3", "-fno-math-errno"]

# The directory every dpkit header is included under.
DPKIT_INCLUDE_PREFIX = "dpkit"

_HEADER_EXTENSIONS = (".h", ".hh", ".hpp", ".inc")

def _include_prefix():
    """dpkit/<package>: Bazel strips the package path from a header before adding the
    prefix, so the package path is part of the prefix."""
    package = native.package_name()
    return DPKIT_INCLUDE_PREFIX + "/" + package if package else DPKIT_INCLUDE_PREFIX

def _split_headers(srcs):
    """Returns (headers, others) of a srcs list; a select() is left whole in others."""
    if type(srcs) != "list":
        return [], srcs
    headers = [s for s in srcs if s.endswith(_HEADER_EXTENSIONS)]
    others = [s for s in srcs if not s.endswith(_HEADER_EXTENSIONS)]
    return headers, others

def _private_headers(name, srcs, deps, testonly):
    """Moves the headers of a binary's or test's srcs into a prefixed header library.

    Returns the (srcs, deps) the binary or test is then declared with.
    """
    headers, others = _split_headers(srcs)
    if not headers:
        return srcs, deps
    library = "_%s_headers" % name.replace(".", "_")
    native.cc_library(
        name = library,
        hdrs = headers,
        include_prefix = _include_prefix(),
        testonly = testonly,
        visibility = ["//visibility:private"],
        deps = deps,
    )
    return others, deps + [":" + library]

def dpkit_cc_library(name, copts = [], **kwargs):
    """cc_library whose headers are included as dpkit/<package>/<file>, built as C++17."""
    native.cc_library(
        name = name,
        copts = DPKIT_COPTS + copts,
        include_prefix = _include_prefix(),
        **kwargs
    )

def dpkit_cc_binary(name, srcs = [], deps = [], copts = [], **kwargs):
    """cc_binary built as C++17; headers in srcs are included as dpkit/<package>/<file>."""
    srcs, deps = _private_headers(name, srcs, deps, kwargs.get("testonly", False))
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = deps,
        copts = DPKIT_COPTS + copts,
        **kwargs
    )

def dpkit_cc_test(name, srcs = [], deps = [], copts = [], **kwargs):
    """cc_test built as C++17; headers in srcs are included as dpkit/<package>/<file>."""
    srcs, deps = _private_headers(name, srcs, deps, True)
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = deps,
        copts = DPKIT_COPTS + copts,
        **kwargs
    )
