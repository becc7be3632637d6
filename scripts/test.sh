#!/usr/bin/env bash
# The whole test suite: release build + ctest, AddressSanitizer/UBSan build + ctest, the CPU-only build
# (-DICL_VULKAN=OFF, scripts/build-novulkan.sh) + its cheap tests, and the fuzzers (GGUF, Lua, tokenizer).
# Usage: scripts/test.sh [--quick]   (--quick: release build and ctest only)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)
start=$(date +%s)

scripts/fetch-models.sh all

echo "== release build + tests"
scripts/build.sh build
(cd build && ctest -j"$jobs" --output-on-failure --timeout 1500)

if [ "$quick" = 0 ]; then
  echo "== ASan + UBSan build + tests"
  scripts/build.sh build-asan -DICL_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  # the Vulkan loader and driver keep allocations until exit: leaks there are not ours
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest -j"$jobs" --output-on-failure --timeout 2400 -LE heavy)

  echo "== CPU-only build (-DICL_VULKAN=OFF, Vulkan packages hidden when root) + its cheap tests"
  scripts/build-novulkan.sh build-novk

  echo "== fuzzers: GGUF reader, Lua API, tokenizers (60 s each)"
  scripts/fuzz.sh 60 gguf lua tokenizer
fi
echo "test.sh: all passed in $(( $(date +%s) - start )) s"
