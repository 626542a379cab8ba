#!/usr/bin/env bash
# Builds the libFuzzer target (clang, -fsanitize=fuzzer,address,undefined) in build-fuzz and runs it
# for the given number of seconds (default 60) from the seed corpus in tests/fuzz/corpus. New inputs
# go to build-fuzz/corpus; a crash leaves its input in build-fuzz/ (crash-*) and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DVRAMKIT_FUZZ=ON -DVRAMKIT_BUILD_TESTS=OFF -DVRAMKIT_BUILD_SAMPLES=OFF -DVRAMKIT_BUILD_TOOLS=OFF \
  ${VRAMKIT_CMAKE_ARGS:-} >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target vramkit_pool_fuzz
mkdir -p build-fuzz/corpus
cd build-fuzz
status=0
./tests/fuzz/vramkit_pool_fuzz corpus ../tests/fuzz/corpus -max_total_time="$seconds" -max_len=512 \
  -print_final_stats=1 >fuzz.log 2>&1 || status=$?
grep -E "^#[0-9]+ +DONE|^stat::(number_of_executed_units|average_exec_per_sec)|^pool_fuzz:|runtime error|^==.*ERROR|^SUMMARY" fuzz.log || true
if [ "$status" -ne 0 ]; then
  echo "fuzz.sh: the fuzzer failed (exit $status); see build-fuzz/fuzz.log and build-fuzz/crash-*" >&2
fi
exit "$status"
