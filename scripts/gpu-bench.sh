#!/usr/bin/env bash
# A short GPU run: build, the GPU test program, the allocation and compaction benchmarks, and
# trace replay on the CUDA device with verification. Output goes to $OUT (default out/).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-out}"; mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
git log -1 --format=%H 2>/dev/null | tee "$out/commit.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DVRAMKIT_TRACES_DIR="$PWD/.traces" -DVRAMKIT_BUILD_SAMPLES=OFF \
  >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -40; exit 1; }
VRAMKIT_GPU_PROPERTY_OPS=${GPU_OPS:-1000} ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
./build-gpu/bench/vramkit_alloc_bench --json "$out/alloc.json" >"$out/alloc_bench.txt" 2>&1; cat "$out/alloc_bench.txt"
./build-gpu/bench/vramkit_compaction_bench --json "$out/compaction.json" >"$out/compaction_bench.txt" 2>&1
cat "$out/compaction_bench.txt"
replay=./build-gpu/tools/replay/vramkit-replay
for trace in resnet_train image_pipeline; do
  peak=$("$replay" ".traces/$trace.csv" --capacity 1099511627776 --policy none | python3 -c "import json,sys; print(json.load(sys.stdin)['peak_live_bytes'])")
  capacity=$(python3 -c "import math; print(math.ceil($peak*1.02/2**20)*2**20)")
  "$replay" ".traces/$trace.csv" --device cuda --verify --policy on-failure --capacity "$capacity" | tee -a "$out/replay_cuda.txt"
done
