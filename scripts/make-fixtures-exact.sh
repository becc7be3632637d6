#!/usr/bin/env bash
# make-fixtures-exact.sh [smollm2|gemma3|all] [make-fixtures-exact.py options...]   (default: all)
#
# Records the exact float64 reference fixtures in tests/fixtures/<model>/exact/
# with scripts/make-fixtures-exact.py: the model's forward pass written in
# numpy float64 from the GGUF weights (dequantized with gguf-py), fed the
# token ids of the llama.cpp fixtures tests/fixtures/<model>/<prompt>.json
# (so those must exist: scripts/make-fixtures.sh). Also prints how the
# llama.cpp fixtures (quantized and f32 variants) compare with the exact ones.
# Creates a virtual environment (default .cache/exact-venv, git-ignored) with
# pinned numpy and gguf from PyPI (wheels only, nothing compiled) and fetches
# the models with scripts/fetch-models.sh. About 2.5 (SmolLM2) and 4.5 (Gemma)
# minutes on 2 cores; Gemma peaks near 9 GB of memory. icl's tests never run this.
#
# Needs: python3 with venv (Debian: python3-venv).
# Environment: ICL_EXACT_VENV (venv path), ICL_MODELS_DIR (as for fetch-models.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${ICL_EXACT_VENV:-$ROOT/.cache/exact-venv}
MODELS_DIR=${ICL_MODELS_DIR:-$ROOT/models}
NUMPY_VERSION=2.4.6
GGUF_VERSION=0.19.0

die() { echo "make-fixtures-exact: error: $*" >&2; exit 1; }
say() { echo "make-fixtures-exact: $*" >&2; }

what=all
case "${1:-}" in
  smollm2|gemma3|all) what=$1; shift ;;
  -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

venv_ok() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$NUMPY_VERSION" "$GGUF_VERSION" <<'EOF' 2>/dev/null
import sys, numpy, gguf
from importlib.metadata import version
sys.exit(0 if (numpy.__version__, version("gguf")) == tuple(sys.argv[1:3]) else 1)
EOF
}

if ! venv_ok; then
  command -v python3 >/dev/null 2>&1 || die "python3 not found"
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtual environment $VENV"
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  fi
  say "installing numpy==$NUMPY_VERSION gguf==$GGUF_VERSION"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-cache-dir --only-binary=:all: \
      "numpy==$NUMPY_VERSION" "gguf==$GGUF_VERSION" \
    || die "pip install failed (PyPI reachable?)"
  venv_ok || die "numpy $NUMPY_VERSION / gguf $GGUF_VERSION still not importable from $VENV"
fi

run_model() { # name file
  local name=$1 file=$2; shift 2
  local fixdir=$ROOT/tests/fixtures/$name
  [ -f "$fixdir/chat.json" ] || die "no llama.cpp fixtures in $fixdir (run scripts/make-fixtures.sh $name)"
  "$ROOT/scripts/fetch-models.sh" "$name" >/dev/null
  say "recording $name exact fixtures"
  "$VENV/bin/python" "$ROOT/scripts/make-fixtures-exact.py" \
    "$MODELS_DIR/$file" "$fixdir" "$fixdir/exact" "$@"
}

if [ "$what" = smollm2 ] || [ "$what" = all ]; then
  run_model smollm2 SmolLM2-135M-Instruct-Q4_1.gguf "$@"
fi
if [ "$what" = gemma3 ] || [ "$what" = all ]; then
  run_model gemma3 gemma-3-270m-Q4_K_M.gguf "$@"
fi
du -b "$ROOT"/tests/fixtures/*/exact/*.json >&2 2>/dev/null || true
