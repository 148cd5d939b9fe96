"""A C++ toolchain that compiles to WebAssembly with Debian's Emscripten (em++).

Selected by `bazel build --config=wasm` (see .bazelrc): --crosstool_top points at
//web/toolchain:emscripten_suite and --cpu=wasm picks the toolchain below. The tools are
wrapper scripts (emcc.sh, emar.sh) that give Emscripten a writable cache.
"""

load(
    "@bazel_tools//tools/cpp:cc_toolchain_config_lib.bzl",
    "feature",
    "flag_group",
    "flag_set",
    "tool_path",
)
load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "ACTION_NAMES")

_COMPILE_ACTIONS = [
    ACTION_NAMES.c_compile,
    ACTION_NAMES.cpp_compile,
    ACTION_NAMES.cpp_header_parsing,
    ACTION_NAMES.cpp_module_compile,
]

_LINK_ACTIONS = [
    ACTION_NAMES.cpp_link_executable,
    ACTION_NAMES.cpp_link_dynamic_library,
    ACTION_NAMES.cpp_link_nodeps_dynamic_library,
]

def _impl(ctx):
    tool_paths = [
        tool_path(name = "gcc", path = "emcc.sh"),
        tool_path(name = "ld", path = "emcc.sh"),
        tool_path(name = "ar", path = "emar.sh"),
        # Not used for WebAssembly; Bazel requires a path for each.
        tool_path(name = "cpp", path = "/bin/false"),
        tool_path(name = "gcov", path = "/bin/false"),
        tool_path(name = "nm", path = "/bin/false"),
        tool_path(name = "objdump", path = "/bin/false"),
        tool_path(name = "strip", path = "/bin/false"),
    ]
    default_compile_flags = feature(
        name = "default_compile_flags",
        enabled = True,
        flag_sets = [flag_set(
            actions = _COMPILE_ACTIONS,
            flag_groups = [flag_group(flags = [
                # Reproducible builds: no build time in the objects.
                "-Wno-builtin-macro-redefined",
                "-D__DATE__=\"redacted\"",
                "-D__TIMESTAMP__=\"redacted\"",
                "-D__TIME__=\"redacted\"",
                "-no-canonical-prefixes",
                # The browser build is a release build: no assert() (Eigen's index checks
                # in the PLD's FFT loops cost a factor ~2 in WebAssembly).
                "-DNDEBUG",
            ])],
        )],
    )
    default_link_flags = feature(
        name = "default_link_flags",
        enabled = True,
        flag_sets = [flag_set(
            actions = _LINK_ACTIONS,
            flag_groups = [flag_group(flags = ["-sALLOW_MEMORY_GROWTH=1"])],
        )],
    )
    return cc_common.create_cc_toolchain_config_info(
        ctx = ctx,
        features = [default_compile_flags, default_link_flags],
        cxx_builtin_include_directories = [],
        toolchain_identifier = "emscripten-wasm",
        host_system_name = "x86_64-unknown-linux-gnu",
        target_system_name = "wasm32-unknown-emscripten",
        target_cpu = "wasm",
        target_libc = "musl",
        compiler = "emscripten",
        abi_version = "emscripten",
        abi_libc_version = "musl",
        tool_paths = tool_paths,
    )

emscripten_cc_toolchain_config = rule(
    implementation = _impl,
    attrs = {},
    provides = [CcToolchainConfigInfo],
)
