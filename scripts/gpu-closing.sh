#!/usr/bin/env bash
# The second session's closing GPU run, after scripts/gpu-bench.sh: the GPU test program at full length,
# compute-sanitizer memcheck, racecheck and synccheck, and samples of the allocation, compaction and
# planning benchmarks. Output goes to $OUT (default out/); pass the commit as $1.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-build.sh "${1:-}"
{
  echo "== gpu tests, 2000 operations"
  VRAMKIT_GPU_PROPERTY_OPS=2000 ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tail -2
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
  echo "== planning"
  ./build-gpu/bench/vramkit_plan_bench 2>&1
} 2>&1 | tee "$out/run.txt"
