#!/usr/bin/env bash
# On the GPU machine (offline, packages carried in .deps/): build, the GPU test program plain and
# under compute-sanitizer, the benchmarks, and the PyTorch comparison. Logs go to ${OUT:-out}/.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-out}"; mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DCMAKE_CUDA_ARCHITECTURES=90 ${VRAMKIT_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -40; exit 1; }
if [ "${SKIP_CTEST:-0}" != 1 ]; then
  echo "== ctest"; ctest --test-dir build-gpu --output-on-failure -j8 2>&1 | tee "$out/ctest.log" | tail -4
fi
echo "== GPU tests"; ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tee "$out/gpu_tests.log" | tail -2
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer $tool"
  VRAMKIT_GPU_PROPERTY_OPS="${SANITIZER_PROPERTY_OPS:-400}" timeout 240 compute-sanitizer --tool "$tool" \
    --error-exitcode 9 ./build-gpu/tests/gpu/vramkit_gpu_tests ${SANITIZER_FILTER:-} >"$out/sanitizer_$tool.log" 2>&1
  echo "exit $?"; tail -3 "$out/sanitizer_$tool.log"
done
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  echo "== benchmarks"
  ./build-gpu/bench/vramkit_alloc_bench --json "$out/alloc.json" 2>&1 | tee "$out/alloc_bench.txt"
  ./build-gpu/bench/vramkit_alloc_bench --device host --quick 2>&1 | head -12 | tee "$out/alloc_bench_host.txt"
  ./build-gpu/bench/vramkit_compaction_bench --json "$out/compaction.json" 2>&1 | tee "$out/compaction_bench.txt"
fi
if [ "${SKIP_TORCH:-0}" != 1 ]; then
  echo "== PyTorch"
  timeout 300 python3 samples/pytorch/train_resnet.py --compare --lib build-gpu/lib/pytorch/libvramkit_torch.so \
    --steps "${TORCH_STEPS:-20}" --batch 32 --tolerance "${TORCH_TOLERANCE:-1e-3}" 2>&1 | tee "$out/torch.txt" | tail -30
fi
