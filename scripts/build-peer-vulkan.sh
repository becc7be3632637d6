#!/usr/bin/env bash
# Builds the peer of icl's Vulkan backend: llama.cpp's ggml-vulkan and its `llama-bench`, from the llama.cpp
# source that ships inside the llama-cpp-python sdist on PyPI (pip is only the transport; version and archive
# hash pinned below). scripts/device-kit.sh puts the result into the kit when it is there; device-check.sh
# then benchmarks it beside icl on the same GGUF files (issue 37, item 1).
#   build-peer/dl/       the sdist, checked against its SHA-256
#   build-peer/src/      its vendor/llama.cpp, unpacked
#   build-peer/build/    the CMake build (Release, GGML_VULKAN=ON, GGML_NATIVE=OFF: the kit runs on other CPUs;
#                        static libraries, so llama-bench is one binary; only the target llama-bench is built)
#   build-peer/bin/llama-bench, build-peer/VERSION   what device-kit.sh takes
# Idempotent: does nothing when build-peer/bin/llama-bench exists and VERSION names the pinned sdist.
# Slow: ggml-vulkan compiles a few hundred shader variants with glslc, and ggml-vulkan.cpp is one large file.
# Needs (Debian): spirv-headers, libvulkan-dev, cmake, g++, python3-pip, apt-get (spirv-headers is not needed by
# icl's own build, so scripts/setup.sh does not install it: apt-get install spirv-headers).
# glslc and the Vulkan headers: this llama.cpp needs Vulkan headers of 1.3.261 or later (vk::LayerSettingEXT),
# and its shader variants for cooperative matrices (tensor cores), integer dot products and bf16 are built only
# when glslc knows those GLSL extensions. Debian 12's libvulkan-dev (1.3.239) and glslc (shaderc 2023.2) have
# neither, so unless the machine's own do (ICL_PEER_TOOLS=system forces them, =debian13 forces the others),
# Debian 13's glslc and libvulkan-dev are fetched with apt-get (a private sources list and state under
# build-peer/apt/; the archive's signed index checks them) and unpacked into build-peer/tools/: the headers
# are only included, and glslc runs through Debian 13's own dynamic loader and libraries from that folder, so
# nothing of Debian 13 is installed and the binary built links the build machine's glibc as before.
# Usage: scripts/build-peer-vulkan.sh [--force] [PEER_DIR]   (default build-peer; jobs: $ICL_JOBS, default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
force=0
[ "${1:-}" = "--force" ] && { force=1; shift; }
peer=${1:-build-peer}
jobs=${ICL_JOBS:-2}
PYTHON=${PYTHON:-python3}

# ---- pin ----
PKG=llama-cpp-python
VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SDIST_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

die() { echo "build-peer-vulkan: $*" >&2; exit 1; }
say() { echo "build-peer-vulkan: $*" >&2; }

if [ $force = 0 ] && [ -x "$peer/bin/llama-bench" ] && grep -qx "sdist: $PKG $VERSION sha256 $SDIST_SHA" "$peer/VERSION" 2>/dev/null; then
  say "$peer/bin/llama-bench is built from $PKG $VERSION (--force rebuilds)"
  exit 0
fi

for tool in cmake g++ sha256sum tar; do
  command -v $tool >/dev/null || die "$tool missing (Debian: apt-get install spirv-headers cmake g++)"
done
compgen -G '/usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake' >/dev/null ||
  compgen -G '/usr/lib/*/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake' >/dev/null || die "SPIRV-Headers' CMake package missing (Debian: apt-get install spirv-headers)"
[ -f /usr/include/vulkan/vulkan.h ] || die "the Vulkan headers are missing (Debian: apt-get install libvulkan-dev)"

mkdir -p "$peer/dl"
peer=$(cd "$peer" && pwd)
if ! [ -f "$peer/dl/$SDIST" ] || [ "$(sha256sum "$peer/dl/$SDIST" | cut -d' ' -f1)" != "$SDIST_SHA" ]; then
  rm -f "$peer/dl/$SDIST"
  say "pip download $PKG==$VERSION (the sdist, about 73 MiB)"
  "$PYTHON" -m pip download -q --no-binary :all: --no-deps "$PKG==$VERSION" -d "$peer/dl" ||
    die "pip download --no-binary :all: --no-deps $PKG==$VERSION failed"
fi
got=$(sha256sum "$peer/dl/$SDIST" | cut -d' ' -f1)
[ "$got" = "$SDIST_SHA" ] || die "$peer/dl/$SDIST: sha256 $got, expected $SDIST_SHA"

# ---- glslc and the Vulkan headers (see the head of this file) ----
TOOLS_SUITE=trixie
TOOLS_DEBS=(glslc libshaderc1 libvulkan-dev libc6 libgcc-s1 libstdc++6)
tools_mode=${ICL_PEER_TOOLS:-auto}
glslc_knows_coopmat() { # glslc
  printf '#version 450\n#extension GL_KHR_cooperative_matrix : require\nvoid main() {}\n' > "$peer/coopmat-test.comp"
  "$1" -o /dev/null -fshader-stage=compute --target-env=vulkan1.3 "$peer/coopmat-test.comp" >/dev/null 2>&1
}
if [ "$tools_mode" = auto ]; then
  tools_mode=debian13
  if command -v glslc >/dev/null && glslc_knows_coopmat glslc &&
     grep -qs LayerSettingEXT /usr/include/vulkan/vulkan_structs.hpp; then tools_mode=system; fi
fi
case "$tools_mode" in
  system)
    command -v glslc >/dev/null || die "glslc missing (Debian: apt-get install glslc)"
    GLSLC=$(command -v glslc) VK_INCLUDE=/usr/include ;;
  debian13)
    tools=$peer/tools
    if ! [ -x "$tools/bin/glslc" ] || ! [ -f "$tools/usr/include/vulkan/vulkan.hpp" ]; then
      say "fetching Debian 13 ($TOOLS_SUITE)'s ${TOOLS_DEBS[*]} with apt-get into $tools (not installed)"
      rm -rf "$peer/apt" "$tools"
      mkdir -p "$peer/apt/lists/partial" "$peer/apt/cache/archives/partial" "$peer/apt/debs" "$tools/bin"
      echo "deb http://deb.debian.org/debian $TOOLS_SUITE main" > "$peer/apt/sources.list"
      apt_o=(-o Dir::Etc::SourceList="$peer/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o Dir::State::Lists="$peer/apt/lists" -o Dir::Cache="$peer/apt/cache"
             -o APT::Architecture=amd64 -o APT::Architectures=amd64)
      apt-get "${apt_o[@]}" update -qq || die "apt-get update of $TOOLS_SUITE failed (needs the Debian mirror)"
      (cd "$peer/apt/debs" && apt-get "${apt_o[@]}" download -qq "${TOOLS_DEBS[@]}" 2>&1 | grep -v 'unsandboxed' >&2) || true
      for d in "${TOOLS_DEBS[@]}"; do
        compgen -G "$peer/apt/debs/${d}_*.deb" >/dev/null || die "apt-get download $d from $TOOLS_SUITE failed"
      done
      for f in "$peer"/apt/debs/*.deb; do dpkg -x "$f" "$tools"; done
      cat > "$tools/bin/glslc" <<EOF
#!/bin/sh
# Debian 13's glslc, run by Debian 13's dynamic loader with its own libraries (scripts/build-peer-vulkan.sh)
exec "$tools/usr/lib64/ld-linux-x86-64.so.2" --library-path "$tools/usr/lib/x86_64-linux-gnu" "$tools/usr/bin/glslc" "\$@"
EOF
      chmod +x "$tools/bin/glslc"
      (cd "$peer/apt/debs" && ls) > "$tools/DEBS"
    fi
    GLSLC=$tools/bin/glslc VK_INCLUDE=$tools/usr/include ;;
  *) die "ICL_PEER_TOOLS=$tools_mode: expected auto, system or debian13" ;;
esac
"$GLSLC" --version >/dev/null 2>&1 || die "$GLSLC does not run"
say "glslc: $GLSLC ($("$GLSLC" --version | head -1)); Vulkan headers: $VK_INCLUDE"

src=$peer/src/llama.cpp
if ! [ -f "$src/ggml/src/ggml-vulkan/CMakeLists.txt" ]; then
  rm -rf "$peer/src"
  mkdir -p "$peer/src"
  say "unpacking vendor/llama.cpp of $SDIST"
  tar -C "$peer/src" -xzf "$peer/dl/$SDIST" --strip-components=2 "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
ggml_version=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' "$src/ggml/CMakeLists.txt" | paste -sd.)

t0=$(date +%s)
# LLAMA_BUILD_TOOLS: llama-bench lives in tools/; nothing else of it is built (--target llama-bench).
cmake -S "$src" -B "$peer/build" -DCMAKE_BUILD_TYPE=Release \
  -DVulkan_GLSLC_EXECUTABLE="$GLSLC" -DVulkan_INCLUDE_DIR="$VK_INCLUDE" \
  -DGGML_VULKAN=ON -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT="$PKG-$VERSION" \
  > "$peer/configure.log" 2>&1 || { tail -30 "$peer/configure.log" >&2; die "cmake configure failed ($peer/configure.log)"; }
grep -E 'GL_[A-Z_a-z0-9]+ (not )?supported by glslc' "$peer/configure.log" | sed 's/^-- /build-peer-vulkan: /' >&2 || true
say "building llama-bench with $jobs jobs (ggml-vulkan's shaders take long)"
nice cmake --build "$peer/build" --target llama-bench -j "$jobs" > "$peer/build.log" 2>&1 ||
  { tail -30 "$peer/build.log" >&2; die "build failed ($peer/build.log)"; }
bin=$(find "$peer/build" -name llama-bench -type f -perm -u+x | head -1)
[ -n "$bin" ] || die "no llama-bench under $peer/build"
mkdir -p "$peer/bin"
cp "$bin" "$peer/bin/llama-bench"
{
  echo "sdist: $PKG $VERSION sha256 $SDIST_SHA"
  echo "llama.cpp: vendor/llama.cpp of that sdist, ggml $ggml_version"
  echo "glslc: $("$GLSLC" --version | head -1) ($tools_mode)$([ "$tools_mode" = debian13 ] && echo ", from $(tr '\n' ' ' < "$tools/DEBS")")"
  echo "vulkan headers: VK_HEADER_VERSION $(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\).*/\1/p' "$VK_INCLUDE/vulkan/vulkan_core.h")"
  grep -E 'GL_[A-Z_a-z0-9]+ (not )?supported by glslc' "$peer/configure.log" | sed 's/^-- /glslc: /' | paste -sd';' -
  echo "flags: Release GGML_VULKAN=ON GGML_NATIVE=OFF GGML_OPENMP=OFF BUILD_SHARED_LIBS=OFF"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release; echo "$PRETTY_NAME") in $(( $(date +%s) - t0 )) s, $jobs jobs"
} > "$peer/VERSION"
say "$peer/bin/llama-bench ($(stat -c %s "$peer/bin/llama-bench" | awk '{printf "%.1f MiB", $1 / 1048576}')) in $(( $(date +%s) - t0 )) s"
