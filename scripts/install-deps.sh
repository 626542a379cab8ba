#!/usr/bin/env bash
# Installs the Debian packages vramkit builds with, if any is missing. Needs root (or sudo).
# The CUDA toolkit (nvcc 12.8+/13) is expected to be installed already.
set -euo pipefail
# clang and libclang-rt-14-dev: the libFuzzer build (scripts/fuzz.sh).
packages=(cmake ninja-build g++ catch2 libmsgsl-dev nlohmann-json3-dev libstb-dev clang libclang-rt-14-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "vramkit: installing ${missing[*]}" >&2
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "vramkit: nvcc not found; install the CUDA toolkit (12.8 or newer) first" >&2
  exit 1
fi
