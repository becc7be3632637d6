#!/usr/bin/env bash
# make-fixtures.sh [smollm2|gemma3|all] [make-fixtures.py options...]   (default: all)
#
# Re-records the reference fixtures in tests/fixtures/<model>/ from an
# independent implementation (llama.cpp through llama-cpp-python, CPU build).
# Creates a virtual environment (default .cache/fixture-venv, git-ignored),
# installs the pinned packages into it (llama-cpp-python has no PyPI wheel:
# it is compiled from its sdist, about 10 minutes on 2 cores), fetches the
# models with scripts/fetch-models.sh and runs scripts/make-fixtures.py, which
# writes two variants: tests/fixtures/<model>/*.json (the GGUF as shipped) and
# tests/fixtures/<model>/f32/*.json (weights dequantized to F32, F32 KV cache;
# the F32 copy of the model is cached in .cache/f32/). About 15 minutes for
# both models on 2 cores. Format and definitions: docs/fixtures.md.
# The fixtures are committed; icl's tests never run this script or Python.
#
# Needs: python3 with venv (Debian: python3-venv), a C/C++ compiler, cmake.
# Environment: ICL_FIXTURE_VENV (venv path), CMAKE_BUILD_PARALLEL_LEVEL (2),
#              ICL_MODELS_DIR (as for fetch-models.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${ICL_FIXTURE_VENV:-$ROOT/.cache/fixture-venv}
MODELS_DIR=${ICL_MODELS_DIR:-$ROOT/models}
LLAMA_CPP_PYTHON_VERSION=0.3.36
NUMPY_VERSION=2.4.6
GGUF_VERSION=0.19.0
# A portable CPU build (AVX2/FMA/F16C, no -march=native); no llava, tools,
# tests or examples, which the fixtures do not need.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"

die() { echo "make-fixtures: error: $*" >&2; exit 1; }
say() { echo "make-fixtures: $*" >&2; }

what=all
case "${1:-}" in
  smollm2|gemma3|all) what=$1; shift ;;
  -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

venv_ok() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$LLAMA_CPP_PYTHON_VERSION" "$NUMPY_VERSION" "$GGUF_VERSION" <<'EOF' 2>/dev/null
import sys, llama_cpp, numpy
from importlib.metadata import version
have = (llama_cpp.__version__, numpy.__version__, version("gguf"))
sys.exit(0 if have == tuple(sys.argv[1:4]) else 1)
EOF
}

if ! venv_ok; then
  command -v python3 >/dev/null 2>&1 || die "python3 not found"
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtual environment $VENV"
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  fi
  say "installing llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION numpy==$NUMPY_VERSION gguf==$GGUF_VERSION (compiles llama.cpp; be patient)"
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-cache-dir \
      "numpy==$NUMPY_VERSION" "gguf==$GGUF_VERSION" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" \
    || die "pip install failed (PyPI reachable? C/C++ compiler and cmake installed?)"
  venv_ok || die "llama_cpp $LLAMA_CPP_PYTHON_VERSION still not importable from $VENV"
fi

run_model() { # name file
  local name=$1 file=$2; shift 2
  "$ROOT/scripts/fetch-models.sh" "$name" >/dev/null
  say "recording $name fixtures"
  "$VENV/bin/python" "$ROOT/scripts/make-fixtures.py" --name "$name" \
    --f32-cache "$ROOT/.cache/f32" "$MODELS_DIR/$file" "$ROOT/tests/fixtures/$name" "$@"
}

if [ "$what" = smollm2 ] || [ "$what" = all ]; then
  run_model smollm2 SmolLM2-135M-Instruct-Q4_1.gguf "$@"
fi
if [ "$what" = gemma3 ] || [ "$what" = all ]; then
  run_model gemma3 gemma-3-270m-Q4_K_M.gguf "$@"
fi
du -b "$ROOT"/tests/fixtures/*/*.json "$ROOT"/tests/fixtures/*/f32/*.json >&2 2>/dev/null || true
