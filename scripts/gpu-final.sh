#!/usr/bin/env bash
# The session's last GPU run, ordered by priority so a cut-off run still returns the most: build,
# GPU tests, the PyTorch comparison, benchmarks, then compute-sanitizer. Everything goes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-out}"; mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
git log -1 --format=%H 2>/dev/null | tee "$out/commit.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DVRAMKIT_TRACES_DIR="$PWD/.traces" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -40; exit 1; }
ctest --test-dir build-gpu -R "image_ops|install" --output-on-failure 2>&1 | tail -3 | tee "$out/ctest.txt"
VRAMKIT_GPU_PROPERTY_OPS=2000 ./build-gpu/tests/gpu/vramkit_gpu_tests 2>&1 | tail -3 | tee "$out/gpu_tests.txt"
timeout 150 python3 samples/pytorch/train_resnet.py --compare --lib build-gpu/lib/pytorch/libvramkit_torch.so \
  --steps 20 --batch 32 --tolerance 1e-3 >"$out/torch.txt" 2>&1; echo "torch exit $?"; tail -25 "$out/torch.txt"
./build-gpu/bench/vramkit_alloc_bench --json "$out/alloc.json" >"$out/alloc_bench.txt" 2>&1; cat "$out/alloc_bench.txt"
./build-gpu/bench/vramkit_alloc_bench --device host --quick 2>&1 | head -12 >"$out/alloc_bench_host.txt"; head -10 "$out/alloc_bench_host.txt"
./build-gpu/bench/vramkit_compaction_bench --json "$out/compaction.json" >"$out/compaction_bench.txt" 2>&1; cat "$out/compaction_bench.txt"
VRAMKIT_GPU_PROPERTY_OPS=200 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
  ./build-gpu/tests/gpu/vramkit_gpu_tests >"$out/memcheck.txt" 2>&1; echo "memcheck exit $?"; tail -3 "$out/memcheck.txt"
for tool in racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 ./build-gpu/tests/gpu/vramkit_gpu_tests '~*random*' \
    >"$out/$tool.txt" 2>&1; echo "$tool exit $?"; tail -3 "$out/$tool.txt"
done
