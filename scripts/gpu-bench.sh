#!/usr/bin/env bash
# A GPU run: build, the GPU test program with each move kernel, the allocation and compaction
# benchmarks (compaction with each move kernel), compute-sanitizer memcheck with each kernel, then
# CUDA trace replay with verification. Output goes to $OUT (default out/); pass the commit as $1 (the machine's copy
# may lack .git).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-build.sh "${1:-}"
{
  for kernel in block warp; do
    echo "== gpu tests, $kernel kernel"
    VRAMKIT_MOVE_KERNEL=$kernel VRAMKIT_GPU_PROPERTY_OPS=${GPU_OPS:-500} ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tail -2
  done
  for kernel in block warp; do
    echo "== compaction, $kernel kernel"
    VRAMKIT_MOVE_KERNEL=$kernel ./build-gpu/bench/vramkit_compaction_bench --json "$out/compaction_$kernel.json" 2>&1
  done
  ./build-gpu/bench/vramkit_alloc_bench --json "$out/alloc.json" 2>&1
  for kernel in warp block; do
    echo "== memcheck, $kernel kernel"
    VRAMKIT_MOVE_KERNEL=$kernel VRAMKIT_GPU_PROPERTY_OPS=100 timeout 100 compute-sanitizer --tool memcheck \
      --error-exitcode 9 ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tail -3
  done
  replay=./build-gpu/tools/replay/vramkit-replay
  for trace in ${REPLAY_TRACES:-image_pipeline}; do
    peak=$("$replay" ".traces/$trace.csv" --capacity 1099511627776 --policy none | python3 -c "import json,sys; print(json.load(sys.stdin)['peak_live_bytes'])")
    capacity=$(python3 -c "import math; print(math.ceil($peak*1.02/2**20)*2**20)")
    "$replay" ".traces/$trace.csv" --device cuda --verify --policy on-failure --capacity "$capacity" | \
      python3 -c "import json,sys; d=json.load(sys.stdin); print('replay', '$trace', 'verified', d['verified'], 'failed', d['failed_requests'], 'moved_ratio', d['moved_ratio'], 'compactions', d['compactions'], 'seconds', d['seconds'])"
  done
} 2>&1 | tee "$out/run.txt"
