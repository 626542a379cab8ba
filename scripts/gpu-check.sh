#!/usr/bin/env bash
# On the GPU machine (offline, packages carried in .deps/): build, run every test, the GPU tests
# under compute-sanitizer, and the benchmarks. Logs and JSON go to ${OUT:-out}/.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-out}"; mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DCMAKE_CUDA_ARCHITECTURES=90 ${VRAMKIT_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -40; exit 1; }
echo "== ctest"; ctest --test-dir build-gpu --output-on-failure -j8 2>&1 | tee "$out/ctest.log" | tail -15
echo "== GPU tests"; ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tee "$out/gpu_tests.log" | tail -5
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool"
  timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 ./build-gpu/tests/gpu/vramkit_gpu_tests ${SANITIZER_FILTER:-} \
    >"$out/sanitizer_$tool.log" 2>&1; echo "exit $?"; tail -4 "$out/sanitizer_$tool.log"
done
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  echo "== benchmarks"
  ./build-gpu/bench/vramkit_alloc_bench --json "$out/alloc.json" 2>&1 | tee "$out/alloc_bench.txt"
  ./build-gpu/bench/vramkit_compaction_bench --json "$out/compaction.json" 2>&1 | tee "$out/compaction_bench.txt"
  ./build-gpu/bench/vramkit_plan_bench 2>&1 | tee "$out/plan_bench.txt" | tail -8
fi
