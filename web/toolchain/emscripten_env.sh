# Sourced by the em++/emar wrappers: gives Emscripten a writable, persistent cache.
#
# Debian's emscripten ships prebuilt system libraries in /usr/share/emscripten/cache
# with FROZEN_CACHE=True, and that directory may be read-only. We point EM_CACHE at a
# per-user cache (DPKIT_EM_CACHE, default ~/.cache/dpkit-emscripten), seed it once with
# symlinks to Debian's prebuilt libraries (so a fresh machine does not rebuild libc/libc++),
# and let Emscripten build any missing library variant into it.
dpkit_home="${HOME:-}"
if [ -z "${dpkit_home}" ]; then
  dpkit_home="$(getent passwd "$(id -u)" | cut -d: -f6)"
fi
export EM_CACHE="${DPKIT_EM_CACHE:-${dpkit_home}/.cache/dpkit-emscripten}"
export EM_FROZEN_CACHE=""
# Emscripten's JS optimizer needs acorn from Debian's node-acorn.
export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:${NODE_PATH}}"
export PYTHONDONTWRITEBYTECODE=1

dpkit_debian_cache=/usr/share/emscripten/cache
if [ ! -e "${EM_CACHE}/.dpkit-seeded" ]; then
  mkdir -p "${EM_CACHE}"
  (
    flock 9
    if [ ! -e "${EM_CACHE}/.dpkit-seeded" ]; then
      if [ "${DPKIT_EM_NO_SEED:-0}" != 1 ] && [ -d "${dpkit_debian_cache}/sysroot" ]; then
        cp -as "${dpkit_debian_cache}/sysroot" "${EM_CACHE}/"
        cp "${dpkit_debian_cache}/sysroot_install.stamp" "${EM_CACHE}/" 2>/dev/null || true
      fi
      touch "${EM_CACHE}/.dpkit-seeded"
    fi
  ) 9>"${EM_CACHE}/.dpkit-seed.lock"
fi
