#!/usr/bin/env bash
# Gathers the Debian packages the build needs (headers and CMake packages only) into .deps/, so
# that an offline machine with only the CUDA toolkit can configure with
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=$PWD/.deps/usr
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(catch2 libmsgsl-dev nlohmann-json3-dev libstb-dev)
rm -rf .deps && mkdir -p .deps/debs
(cd .deps/debs && apt-get download "${packages[@]}" >/dev/null)
for deb in .deps/debs/*.deb; do dpkg-deb -x "$deb" .deps; done
# libstb-dev's headers live in /usr/include/stb; nothing else to fix up.
echo "gathered into .deps/: ${packages[*]}"
