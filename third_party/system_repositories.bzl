"""Repository rules that expose Debian's -dev packages to an offline Bazel 4 build.

Headers are symlinked one top-level directory at a time (never all of /usr/include),
so that a cross build with em++ sees only the libraries it was given and not glibc.
"""

def _system_headers_impl(ctx):
    for src, dst in ctx.attr.symlinks.items():
        if not ctx.path(src).exists:
            fail("%s not found: run tools/setup to install the Debian packages" % src)
        ctx.symlink(src, dst)
    ctx.symlink(ctx.attr.build_file, "BUILD.bazel")

system_headers = repository_rule(
    implementation = _system_headers_impl,
    attrs = {
        "symlinks": attr.string_dict(doc = "absolute path -> path inside the repository"),
        "build_file": attr.label(allow_single_file = True),
    },
    local = True,
)

def _system_absl_impl(ctx):
    root = "/usr/include/absl"
    if not ctx.path(root).exists:
        fail("%s not found: run tools/setup (libabsl-dev)" % root)

    # Mirror the header tree file by file, so that real BUILD files can be written
    # into the packages without touching /usr/include.
    found = ctx.execute(["find", root, "-type", "f", "-name", "*.h*"])
    if found.return_code != 0:
        fail("cannot list %s: %s" % (root, found.stderr))
    for f in found.stdout.splitlines():
        ctx.symlink(f, "absl" + f[len(root):])
    ctx.symlink(ctx.attr.root_build_file, "BUILD.bazel")
    for build_file, pkg in ctx.attr.package_build_files.items():
        ctx.symlink(build_file, pkg + "/BUILD.bazel")

system_absl = repository_rule(
    implementation = _system_absl_impl,
    attrs = {
        "root_build_file": attr.label(allow_single_file = True),
        "package_build_files": attr.label_keyed_string_dict(
            allow_files = True,
            doc = "BUILD file -> the absl package it describes",
        ),
    },
    local = True,
)

def _libtorch_impl(ctx):
    # --config=cuda: DPKIT_LIBTORCH names a LibTorch distribution (include/, lib/),
    # e.g. the one inside a CUDA PyTorch wheel. Otherwise Debian's CPU LibTorch.
    home = ctx.os.environ.get("DPKIT_LIBTORCH", "")
    if home:
        ctx.symlink(home + "/include", "include")
        ctx.symlink(home + "/lib", "lib")
        ctx.template("BUILD.bazel", ctx.attr.cuda_build_file, {"%{LIB}": home + "/lib"})
    else:
        api = "/usr/include/torch/csrc/api/include"
        if not ctx.path(api).exists:
            fail("%s not found: run tools/setup (libtorch-dev)" % api)
        ctx.symlink(api + "/torch", "api/torch")
        ctx.file("BUILD.bazel", ctx.read(ctx.attr.cpu_build_file))

libtorch_repository = repository_rule(
    implementation = _libtorch_impl,
    attrs = {
        "cpu_build_file": attr.label(allow_single_file = True),
        "cuda_build_file": attr.label(allow_single_file = True),
    },
    environ = ["DPKIT_LIBTORCH"],
    local = True,
)
