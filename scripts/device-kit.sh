#!/usr/bin/env bash
# Builds icl and the Vulkan test binaries and gathers a relocatable bundle (git-ignored) that runs on a bare
# x86-64 Linux machine with glibc >= this one's and a Vulkan driver, and nothing else:
#   kit/bin/        icl and the test binaries, stripped, RPATH $ORIGIN/../lib
#   kit/lib/        every non-glibc shared library they load (ldd), the Vulkan loader, the Khronos
#                   validation layer; BLAS/LAPACK are the reference builds (OpenBLAS alone is 36 MB)
#   kit/lib/fallback/  libraries GPU drivers load too (libstdc++, libgcc_s, zlib, expat, X11/xcb, glvnd's
#                   libGLdispatch, libGLX, libEGL, libGL, libGLESv2, libOpenGL): one copy per process, and a driver built against a newer one fails with
#                   ours, so device-check.sh uses these only where the machine has none
#   kit/share/vulkan/explicit_layer.d/  the validation layer's manifest, library_path made relative
#   kit/debs/       Debian's glvnd and Vulkan loader packages, for device-check.sh --install-glvnd
#   kit/device-check.sh  the runner (scripts/device-check.sh); kit/README.md (docs/gpu.md);
#   kit/bench-head-ablation.lua (device-check.sh --ablation)
#   kit/bin/llama-bench, kit/PEER-VERSION  the peer, llama.cpp's Vulkan backend (issue 37), when
#                   scripts/build-peer-vulkan.sh has built it into $ICL_KIT_PEER (default build-peer/); without
#                   it the kit is built all the same and device-check.sh skips the peer's step
# and kit.tar.gz, the same compressed (what travels to a lent GPU machine). No models: the check writes its own.
# Usage: scripts/device-kit.sh [--no-build] [KIT_DIR]   (default kit; build tree: $ICL_KIT_BUILD or build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_first=1
[ "${1:-}" = "--no-build" ] && { build_first=0; shift; }
kit=${1:-kit}
build=${ICL_KIT_BUILD:-build}
peer=${ICL_KIT_PEER:-build-peer}
multiarch=/usr/lib/x86_64-linux-gnu
BINS=(icl test_vk_device test_backend_ops test_vk_matmul test_vk_big test_forward_tiny test_vk_fusion test_vk_fusion_hooks
      test_vk_counts test_attn_nan test_vk_intdot test_vk_coopmat)
# glibc's own libraries: the target's must be used, never a copy
GLIBC='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libmvec)\.so'
# shared with GPU drivers (Mesa, NVIDIA): the machine's copy wins where there is one
FALLBACK='^(libstdc\+\+|libgcc_s|libz|libzstd|libexpat|libX[A-Za-z0-9]*|libxcb[a-z0-9-]*|libbsd|libmd|libdrm[a-z_]*|libffi|libwayland-[a-z]*|libGLdispatch|libGLX|libEGL|libGL|libGLESv2|libOpenGL)\.so'

for tool in patchelf ldd strip gzip; do
  command -v $tool >/dev/null || { echo "device-kit: $tool missing (scripts/setup.sh installs it)" >&2; exit 2; }
done

# Portable code: never tuned for this CPU (the build machine is not the target).
[ $build_first = 0 ] || scripts/build.sh "$build" -DICL_NATIVE=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
grep -q 'ICL_NATIVE:BOOL=ON' "$build/CMakeCache.txt" && { echo "device-kit: $build is built with -march=native" >&2; exit 2; }

rm -rf "$kit" kit.tar.gz
mkdir -p "$kit/bin" "$kit/lib/fallback" "$kit/share/vulkan/explicit_layer.d"
for b in "${BINS[@]}"; do
  strip --strip-unneeded -o "$kit/bin/$b" "$build/$b"
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$kit/bin/$b"
done
# The peer: one static binary (ggml and llama linked in, the SPIR-V of its shaders inside); it loads only the
# Vulkan loader, libstdc++ and libgcc_s beside glibc, which copy_deps below collects like the others'.
if [ -x "$peer/bin/llama-bench" ]; then
  strip --strip-unneeded -o "$kit/bin/llama-bench" "$peer/bin/llama-bench"
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$kit/bin/llama-bench"
  cp "$peer/VERSION" "$kit/PEER-VERSION"
  BINS+=(llama-bench)
  echo "device-kit: with the peer $peer/bin/llama-bench ($(head -1 "$peer/VERSION"))"
else
  echo "device-kit: no peer ($peer/bin/llama-bench is missing; scripts/build-peer-vulkan.sh builds it): the kit" \
       "is built without llama.cpp, and device-check.sh skips its step"
fi

# Reference BLAS/LAPACK first, so ldd resolves libblas/liblapack to them and not to OpenBLAS.
cp -L "$multiarch/blas/libblas.so.3" "$multiarch/lapack/liblapack.so.3" "$kit/lib/"
layer_json=/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
layer_so=$multiarch/libVkLayer_khronos_validation.so
[ -f "$layer_json" ] && [ -f "$layer_so" ] || { echo "device-kit: vulkan-validationlayers missing" >&2; exit 2; }
cp -L "$layer_so" "$kit/lib/"

# Every library the binaries and the layer load, by soname, from ldd's resolution (transitive).
copy_deps() {
  LD_LIBRARY_PATH="$kit/lib" ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $GLIBC ]] && continue
    [ -e "$kit/lib/$name" ] || cp -L "$path" "$kit/lib/$name"
  done
  if LD_LIBRARY_PATH="$kit/lib" ldd "$1" | grep -q 'not found'; then
    echo "device-kit: $1 has unresolved libraries:" >&2
    LD_LIBRARY_PATH="$kit/lib" ldd "$1" | grep 'not found' >&2
    exit 1
  fi
}
for b in "${BINS[@]}"; do copy_deps "$kit/bin/$b"; done
copy_deps "$kit/lib/libVkLayer_khronos_validation.so"
# glvnd, which no binary links but NVIDIA's Vulkan driver (libGLX_nvidia) needs at instance creation: on
# the lent H200 without it, vk_icdGetInstanceProcAddr gave no vkCreateInstance (VK_ERROR_INCOMPATIBLE_DRIVER).
for l in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libGL.so.1 libGLESv2.so.2 libOpenGL.so.0; do
  [ -e "$multiarch/$l" ] || { echo "device-kit: $multiarch/$l missing (scripts/setup.sh installs glvnd)" >&2; exit 2; }
  cp -L "$multiarch/$l" "$kit/lib/"
done
for f in "$kit"/lib/*.so*; do copy_deps "$f"; done
[ -e "$kit/lib/libvulkan.so.1" ] || { echo "device-kit: the Vulkan loader was not collected" >&2; exit 1; }
for f in "$kit"/lib/*.so*; do
  if [[ $(basename "$f") =~ $FALLBACK ]]; then mv "$f" "$kit/lib/fallback/"; fi
done

# The layer manifest, pointing at the copy (a relative library_path is relative to the manifest).
sed -E 's#"library_path"[[:space:]]*:[[:space:]]*"[^"]*"#"library_path": "../../../lib/libVkLayer_khronos_validation.so"#' \
  "$layer_json" > "$kit/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"

cp scripts/device-check.sh "$kit/device-check.sh"
cp scripts/bench-head-ablation.lua "$kit/bench-head-ablation.lua"
# glvnd and the loader as Debian packages too: unpacked into / (device-check.sh --install-glvnd) they are what
# brought NVIDIA's driver up on the lent H200; the fallback libraries above are the lighter, unverified way.
mkdir -p "$kit/debs"
(cd "$kit/debs" && apt-get download -qq libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libgles2 libopengl0 2>/dev/null) ||
  { echo "device-kit: apt-get download of glvnd's packages failed (needs the Debian mirror)" >&2; exit 1; }
chmod +x "$kit/device-check.sh"
[ -f docs/gpu.md ] && cp docs/gpu.md "$kit/README.md"
{
  echo "icl device kit"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "vulkan loader: $(readlink -f $multiarch/libvulkan.so.1 | sed 's#.*/##')"
  echo "validation layer: $(dpkg-query -W -f='${Version}' vulkan-validationlayers 2>/dev/null || echo unknown)"
  echo "peer: $([ -f "$kit/PEER-VERSION" ] && head -1 "$kit/PEER-VERSION" | sed 's/^sdist: //' || echo none)"
} > "$kit/VERSION"

tar -C "$(dirname "$kit")" -cf - "$(basename "$kit")" | gzip > kit.tar.gz
echo "device-kit: $kit/ $(du -sb "$kit" | awk '{printf "%.1f MiB", $1 / 1048576}') ($(ls "$kit/lib" | wc -l) libraries$(
       [ -f "$kit/bin/llama-bench" ] && stat -c %s "$kit/bin/llama-bench" | awk '{printf "; llama-bench %.1f MiB", $1 / 1048576}'))," \
     "kit.tar.gz $(stat -c %s kit.tar.gz | awk '{printf "%.1f MiB", $1 / 1048576}')"
