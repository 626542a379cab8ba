#!/usr/bin/env bash
# Builds the host tests with sanitizers and runs them (CUDA sources are compiled as usual):
#   build-asan: -fsanitize=address,undefined, every host test
#   build-tsan: -fsanitize=thread, the [threads] tests
# Usage: scripts/sanitize.sh [address|thread]   (both when no argument)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
kinds=("${@:-address thread}")
read -r -a kinds <<<"${kinds[*]}"
configure() {  # build dir, sanitizer
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAMKIT_SANITIZE="$2" \
    -DVRAMKIT_BUILD_SAMPLES=OFF -DVRAMKIT_BUILD_TOOLS=OFF ${VRAMKIT_CMAKE_ARGS:-} >/dev/null
  cmake --build "$1" -j"$(nproc)" --target vramkit_tests
}
for kind in "${kinds[@]}"; do
  case "$kind" in
    address)
      configure build-asan address
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ./build-asan/tests/vramkit_tests 2>&1 | tee build-asan/tests.log
      # g++'s UBSan reports some checks (nonnull arguments) without stopping: any report fails the run.
      if grep -q "runtime error:" build-asan/tests.log; then
        echo "sanitize.sh: UndefinedBehaviorSanitizer reported errors (build-asan/tests.log)" >&2
        exit 1
      fi
      ;;
    thread)
      configure build-tsan thread
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ./build-tsan/tests/vramkit_tests "[threads]"
      ;;
    *) echo "sanitize.sh: unknown sanitizer '$kind' (address or thread)" >&2; exit 2 ;;
  esac
done
