"""Repository rule that exposes the system Python's C headers and Debian's pybind11.

The interpreter is /usr/bin/python3 (Debian's), or DPKIT_PYTHON when set; its include
directory is asked from the interpreter itself (sysconfig), so that the extension module
is compiled against the headers of the Python that will import it. Only two directories
are symlinked (never all of /usr/include), as in system_repositories.bzl.
"""

def _system_python_impl(ctx):
    python = ctx.os.environ.get("DPKIT_PYTHON", "/usr/bin/python3")
    found = ctx.execute([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
    if found.return_code != 0:
        fail("cannot run %s: %s (run tools/setup: python3-dev)" % (python, found.stderr))
    include = found.stdout.strip()
    if not ctx.path(include + "/Python.h").exists:
        fail("%s/Python.h not found: run tools/setup (python3-dev)" % include)
    pybind11 = "/usr/include/pybind11"
    if not ctx.path(pybind11 + "/pybind11.h").exists:
        fail("%s not found: run tools/setup (pybind11-dev)" % pybind11)
    ctx.symlink(include, "python")
    ctx.symlink(pybind11, "pybind11")
    ctx.symlink(ctx.attr.build_file, "BUILD.bazel")

system_python = repository_rule(
    implementation = _system_python_impl,
    attrs = {"build_file": attr.label(allow_single_file = True)},
    environ = ["DPKIT_PYTHON"],
    local = True,
)
