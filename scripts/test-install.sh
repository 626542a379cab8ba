#!/usr/bin/env bash
# Installs a built vramkit into a temporary prefix, then configures, builds and runs the downstream
# project tests/consumer against it (find_package(vramkit)).
# Usage: scripts/test-install.sh [build-dir]   (default: build). Extra CMake arguments for the consumer
# (a CMAKE_PREFIX_PATH for the dependencies, say) come from $VRAMKIT_CONSUMER_CMAKE_ARGS.
set -euo pipefail
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$(cd "${1:-build}" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/vramkit-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
# The dependencies are found where vramkit's build found them.
prefix_path="$work/prefix"
parent_prefix="$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
[[ -n "$parent_prefix" ]] && prefix_path="$prefix_path;$parent_prefix"
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
# shellcheck disable=SC2086
cmake -S "$source_dir/tests/consumer" -B "$work/consumer" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix_path" ${VRAMKIT_CONSUMER_CMAKE_ARGS:-} > "$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/consumer/vramkit_consumer"
