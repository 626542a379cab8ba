#!/usr/bin/env bash
# The second session's closing GPU run, after scripts/gpu-bench.sh: the GPU test program at full length,
# compute-sanitizer memcheck, racecheck and synccheck, and samples of the allocation, compaction and
# planning benchmarks. Output goes to $OUT (default out/); pass the commit as $1.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-out}"; mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
echo "${1:-$(git log -1 --format=%H 2>/dev/null)}" | tee "$out/commit.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DVRAMKIT_TRACES_DIR="$PWD/.traces" -DVRAMKIT_BUILD_SAMPLES=OFF \
  >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -40; exit 1; }
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
