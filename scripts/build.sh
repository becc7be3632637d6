#!/usr/bin/env bash
# Configures and builds icl into build/ (or $1). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
# the cooperative-matrix glslang scripts/setup.sh installs, unless the arguments name one
coop=()
glslang=.cache/glslang-venv/bin/glslangValidator
if [ -x "$glslang" ] && [[ " $* " != *" -DICL_GLSLANG_COOPMAT="* ]]; then coop=(-DICL_GLSLANG_COOPMAT="$PWD/$glslang"); fi
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DICL_WERROR=ON "${coop[@]}" "$@" > "$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j"$(nproc)"
echo "build: $dir/icl"
