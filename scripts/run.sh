#!/usr/bin/env bash
# Installs what is missing, builds vramkit and runs the main job: the image pipeline sample, on the
# CUDA device when a GPU is present, else on the host device (it says which).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${VRAMKIT_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
if [ -x build/samples/image_pipeline/image_pipeline ]; then
  mkdir -p out
  ./build/samples/image_pipeline/image_pipeline --output out "$@"
else
  ./build/samples/quickstart/quickstart "$@"
fi
