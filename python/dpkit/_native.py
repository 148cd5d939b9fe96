"""Loads the C++ extension `_dpkit` (built by Bazel as //python:_dpkit.so).

An installed package (``pip install .``) carries it as ``dpkit/_dpkit.so``; in a source
checkout it is found on PYTHONPATH (``bazel-bin/python``), which is how tools/test and the
Bazel test run the suite without installing.
"""

try:
    from dpkit import _dpkit as native  # installed: the module inside the package
except ImportError:  # source checkout: bazel-bin/python on PYTHONPATH
    import _dpkit as native  # type: ignore[no-redef]

__all__ = ["native"]
