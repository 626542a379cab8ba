#!/usr/bin/env bash
# The closing GPU run of a session: the GPU test program at full length (and shorter with each move
# kernel forced), compute-sanitizer memcheck, racecheck and synccheck, and samples of the allocation,
# compaction (with the CUPTI timeline probe) and planning benchmarks. Output goes to $OUT (default
# out/); pass the commit as $1.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-build.sh "${1:-}"
{
  echo "== gpu tests, 2000 operations"
  VRAMKIT_GPU_PROPERTY_OPS=2000 ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tail -2
  for kernel in block warp; do  # the automatic choice runs both; each forced for every size
    echo "== gpu tests, $kernel kernel forced, 500 operations"
    VRAMKIT_MOVE_KERNEL=$kernel VRAMKIT_GPU_PROPERTY_OPS=500 ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tail -2
  done
  echo "== memcheck"
  VRAMKIT_GPU_PROPERTY_OPS=100 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
    ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tail -3
  for tool in racecheck synccheck; do
    echo "== $tool"
    timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 ./build-gpu/tests/gpu/vramkit_gpu_tests '~*random*' 2>&1 | tail -3
  done
  for sample in 1 2; do
    echo "== allocation, sample $sample"
    ./build-gpu/bench/vramkit_alloc_bench --json "$out/alloc_$sample.json" 2>&1
  done
  echo "== compaction"
  ./build-gpu/bench/vramkit_compaction_bench --json "$out/compaction.json" 2>&1
  if [ -x ./build-gpu/bench/vramkit_compaction_timeline ]; then
    echo "== compaction timeline, layout (a), one pool compacted 4 times"
    ./build-gpu/bench/vramkit_compaction_timeline --layout a --repeats 3 2>&1 | tee "$out/timeline.txt" | grep -E "^run|summary"
    echo "== compaction timeline, layout (b), planned first"
    ./build-gpu/bench/vramkit_compaction_timeline --layout b --parts never --repeats 3 2>&1 | tee "$out/timeline_b.txt" | grep -E "^run|summary"
  fi
  echo "== planning"
  ./build-gpu/bench/vramkit_plan_bench 2>&1
} 2>&1 | tee "$out/run.txt"
