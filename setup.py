"""pip install . — the Python module `dpkit` (python/README.md).

The extension is built by Bazel, exactly as the tests build it (//python:_dpkit.so:
pybind11 over //accounting and //mechanisms, no LibTorch), and copied into the package;
the rest of the package is the pure-Python layer in python/dpkit/. Offline, with Debian's
packages (tools/setup):

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation .

Environment: BAZEL (default "bazel"), DPKIT_BAZEL_DISK_CACHE (default
~/.cache/dpkit-bazel-disk, the cache tools/test shares). The headers are those of the
Python running this script (DPKIT_PYTHON, see third_party/python_repositories.bzl).
"""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class BazelBuildExt(build_ext):
    """Builds //python:_dpkit.so with Bazel and copies it to where setuptools expects
    the extension (dpkit/_dpkit.<abi>.so in the build directory)."""

    def build_extension(self, ext):
        bazel = os.environ.get("BAZEL", "bazel")
        cache = os.environ.get("DPKIT_BAZEL_DISK_CACHE",
                               os.path.expanduser("~/.cache/dpkit-bazel-disk"))
        env = dict(os.environ, DPKIT_PYTHON=os.environ.get("DPKIT_PYTHON", sys.executable))
        subprocess.check_call([bazel, "build", f"--disk_cache={cache}", "--color=no",
                               "--curses=no", "//python:_dpkit.so"], cwd=ROOT, env=env)
        bazel_bin = subprocess.check_output([bazel, "info", "bazel-bin"], cwd=ROOT, env=env,
                                            text=True).strip()
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(bazel_bin, "python", "_dpkit.so"), target)


setup(
    name="dpkit",
    version="0.1.0",
    description="Certified differential-privacy accounting and secure mechanisms "
                "(Python binding of dpkit's C++ core)",
    python_requires=">=3.9",
    package_dir={"": "python"},
    packages=["dpkit"],
    package_data={"dpkit": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("dpkit._dpkit", sources=[])],
    cmdclass={"build_ext": BazelBuildExt},
    # NumPy (python3-numpy) is needed by dpkit.mechanisms only, and is not declared so
    # that an offline install never tries to download it.
    options={"build": {"build_base": os.path.join("python", "build")}},
    zip_safe=False,
)
