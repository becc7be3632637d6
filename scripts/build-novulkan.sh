#!/usr/bin/env bash
# Builds the CPU-only variant (-DICL_VULKAN=OFF) into build-novk/ (or $1) and runs its cheap tests. As root, it
# runs in a private mount namespace where the Vulkan headers, loader, drivers and glslangValidator are hidden, so
# the build shows it needs none of them; otherwise it only configures without Vulkan.
# Usage: scripts/build-novulkan.sh [dir] [ctest arguments...]   (default: -L 'unit|ops|model|gguf|tok' -LE heavy)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-novk}
shift || true
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(-L 'unit|ops|model|gguf|tok' -LE heavy)
run() {
  scripts/build.sh "$dir" -DICL_VULKAN=OFF
  if ldd "$dir/icl" | grep -q libvulkan; then echo "build-novulkan: $dir/icl links libvulkan" >&2; exit 1; fi
  "$dir/icl" devices && { echo "build-novulkan: icl devices should fail without Vulkan" >&2; exit 1; }
  (cd "$dir" && ctest -j"$(nproc)" --output-on-failure --timeout 1500 "${tests[@]}")
}
if [ "${ICL_HIDDEN:-}" = 1 ]; then run; exit; fi
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  # hide: bind an empty folder over the headers and drivers, /dev/null (not executable) over the tools/libraries
  exec unshare -m bash -c '
    set -e
    empty=$(mktemp -d)
    for d in /usr/include/vulkan /usr/share/vulkan /etc/vulkan; do [ -d $d ] && mount --bind "$empty" $d; done
    for f in /usr/bin/glslangValidator /usr/bin/glslang /usr/lib/*/libvulkan.so*; do
      [ -e $f ] && mount --bind /dev/null $f; done
    if glslangValidator --version >/dev/null 2>&1 || [ -e /usr/include/vulkan/vulkan.h ]; then
      echo "build-novulkan: could not hide the Vulkan packages" >&2; exit 1; fi
    echo "build-novulkan: Vulkan headers, loader, drivers and glslang hidden"
    ICL_HIDDEN=1 exec "$0" "$@"' "$0" "$dir" "${tests[@]}"
fi
echo "build-novulkan: not root or no unshare: building with -DICL_VULKAN=OFF without hiding the packages"
run
