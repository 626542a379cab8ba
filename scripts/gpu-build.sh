# Sourced by the GPU run scripts (gpu-bench.sh, gpu-closing.sh): records the commit ($1, since the
# GPU machine's copy of the tree may lack .git) and the GPU into $out, then configures and builds
# build-gpu (Release, sm_90, packages from .deps/, traces from .traces/). Exits on a failed build.
out="${OUT:-out}"; mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
echo "${1:-$(git log -1 --format=%H 2>/dev/null)}" | tee "$out/commit.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DVRAMKIT_TRACES_DIR="$PWD/.traces" -DVRAMKIT_BUILD_SAMPLES=OFF \
  >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -40; exit 1; }
