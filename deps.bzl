"""Everything a WORKSPACE needs to build dpkit's targets, offline: dpkit's own and a consumer's.

In another workspace (see examples/consumer/ and the README's "Use dpkit from your Bazel
workspace"):

    local_repository(name = "dpkit", path = "/path/to/dpkit")
    load("@dpkit//:deps.bzl", "dpkit_dependencies")
    dpkit_dependencies()

Every dependency is a Debian package installed by dpkit's tools/setup; nothing is
downloaded. A repository the WORKSPACE already defined before the call (e.g. its own
Abseil) is kept. Repositories are only set up when a target needs them: depending on
@dpkit//accounting:pld touches neither LibTorch nor Python.
"""

load(
    "//third_party:python_repositories.bzl",
    "system_python",
)
load(
    "//third_party:system_repositories.bzl",
    "libtorch_repository",
    "system_absl",
    "system_headers",
)

def _directory_repository_impl(ctx):
    # A local_repository needs a path, which a macro cannot compute for a file of another
    # repository; the directory holding `marker` is linked entry by entry instead.
    directory = ctx.path(ctx.attr.marker).dirname
    for entry in directory.readdir():
        ctx.symlink(entry, entry.basename)

_directory_repository = repository_rule(
    implementation = _directory_repository_impl,
    attrs = {"marker": attr.label(allow_single_file = True, doc = "a file in the directory")},
    local = True,
)

def _absl_packages():
    packages = ["base", "container", "flags", "random", "status", "strings",
                "synchronization", "time", "types"]
    return {Label("//third_party/absl:%s.BUILD" % p): "absl/" + p for p in packages}

def _maybe(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def dpkit_dependencies():
    """Defines the repositories dpkit's targets use (the labels resolve inside @dpkit)."""

    # Stand-ins for the rule repositories Bazel 4.2.3's built-in tools load (rules_cc,
    # rules_java, remote_coverage_tools would otherwise be downloaded).
    _maybe(_directory_repository, "rules_cc", marker = Label("//third_party/rules_cc:WORKSPACE"))
    _maybe(_directory_repository, "rules_java", marker = Label("//third_party/rules_java:WORKSPACE"))
    _maybe(
        _directory_repository,
        "remote_coverage_tools",
        marker = Label("//third_party/remote_coverage_tools:WORKSPACE"),
    )

    _maybe(
        system_absl,
        "com_google_absl",
        package_build_files = _absl_packages(),
        root_build_file = Label("//third_party/absl:root.BUILD"),
    )
    _maybe(
        system_headers,
        "eigen",
        build_file = Label("//third_party:eigen.BUILD"),
        symlinks = {
            "/usr/include/eigen3/Eigen": "Eigen",
            "/usr/include/eigen3/unsupported": "unsupported",
        },
    )
    _maybe(
        system_headers,
        "boost",
        build_file = Label("//third_party:boost.BUILD"),
        symlinks = {"/usr/include/boost": "boost"},
    )
    _maybe(
        system_headers,
        "nlohmann_json",
        build_file = Label("//third_party:nlohmann_json.BUILD"),
        symlinks = {"/usr/include/nlohmann": "nlohmann"},
    )
    _maybe(
        system_headers,
        "com_google_googletest",
        build_file = Label("//third_party:gtest.BUILD"),
        symlinks = {
            "/usr/include/gtest": "gtest",
            "/usr/include/gmock": "gmock",
        },
    )
    _maybe(
        system_headers,
        "com_github_google_benchmark",
        build_file = Label("//third_party:benchmark.BUILD"),
        symlinks = {"/usr/include/benchmark": "benchmark"},
    )
    _maybe(
        system_headers,
        "openssl",
        build_file = Label("//third_party:openssl.BUILD"),
        symlinks = {"/usr/include/openssl": "openssl"},
    )
    # cpp-httplib 0.11 (Debian's libcpp-httplib-dev) for `dpkit serve`, with the zlib and
    # Brotli headers its Debian build's macros pull in.
    _maybe(
        system_headers,
        "cpp_httplib",
        build_file = Label("//third_party:cpp_httplib.BUILD"),
        symlinks = {
            "/usr/include/httplib.h": "httplib.h",
            "/usr/include/zlib.h": "zlib.h",
            "/usr/include/zconf.h": "zconf.h",
            "/usr/include/brotli": "brotli",
        },
    )
    _maybe(
        libtorch_repository,
        "libtorch",
        cpu_build_file = Label("//third_party:libtorch_cpu.BUILD"),
        cuda_build_file = Label("//third_party:libtorch_cuda.BUILD"),
    )

    # The system Python's headers and pybind11, for the Python module (python/).
    _maybe(
        system_python,
        "python_system",
        build_file = Label("//third_party:python.BUILD"),
    )
