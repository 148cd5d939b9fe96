#!/bin/bash
# em++ for Bazel: compiles and links C/C++ to WebAssembly (see emscripten_env.sh).
#
# Two Bazel adaptations:
#  * Compile: Emscripten's system headers live in its cache (an absolute path outside the
#    execroot), which Bazel's include checker would reject; they are dropped from the
#    dependency file (.d). Project and @boost/@eigen/@nlohmann_json headers stay checked.
#  * Link: Emscripten writes NAME.js and NAME.wasm, but a cc_binary has one output; when
#    the output ends in ".emtar", both files are linked into a temporary directory and
#    packed into that tar (web/BUILD unpacks it).
set -euo pipefail
source "$(dirname "$0")/emscripten_env.sh"

args=("$@")
depfile=""
output=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    -MF) depfile="${args[$((i + 1))]}" ;;
    -o) output="${args[$((i + 1))]}" ;;
  esac
done

if [[ "${output}" == *.emtar ]]; then
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/dpkit-emlink.XXXXXX")"
  trap 'rm -rf "${tmp}"' EXIT
  name="$(basename "${output}" .emtar)"
  for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = "-o" ]; then args[$((i + 1))]="${tmp}/${name}.js"; fi
  done
  em++ "${args[@]}"
  tar --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "${output}" -C "${tmp}" \
    "${name}.js" "${name}.wasm"
  exit 0
fi

em++ "${args[@]}"

if [ -n "${depfile}" ] && [ -f "${depfile}" ]; then
  awk '{ for (i = 1; i <= NF; i++) {
           if ($i == "\\" || substr($i, 1, 1) == "/") continue;
           out = out (out == "" ? "" : " ") $i } }
       END { print out }' "${depfile}" > "${depfile}.tmp"
  mv "${depfile}.tmp" "${depfile}"
fi
