#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer for SECONDS (default 60).
# Builds build-fuzz (clang, -DICL_FUZZ=ON, ASan+UBSan, coverage on the whole core), writes a seed corpus
# (small files from icl's own writer plus vocabulary files under 4 MiB), and exits non-zero on a crash.
# Env: JOBS (make parallelism, default 2), MAX_LEN (default: the largest seed). Crash inputs land in build-fuzz/crash-*.
set -euo pipefail

SECS=${1:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-fuzz"
MAX_SEED=$((4 * 1024 * 1024))

if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (run scripts/setup.sh)" >&2
  exit 1
fi
if ! clang -print-file-name=libclang_rt.fuzzer-x86_64.a | grep -q /; then
  echo "fuzz: libFuzzer runtime missing: install libclang-rt-14-dev (scripts/setup.sh)" >&2
  exit 1
fi

# fuzzer-no-link instruments every library source, not just the target, so libFuzzer sees
# coverage inside the reader.
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER=clang -DICL_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
make -C "$BUILD" -j"${JOBS:-2}" fuzz_gguf >/dev/null

# Seeds: the writer's own small files (built without the fuzzing runtime) and small real files.
SEEDS="$BUILD/seeds-gguf"
CORPUS="$BUILD/corpus-gguf"
mkdir -p "$SEEDS" "$CORPUS"
clang -std=c11 -O1 -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT/src" "$ROOT/tests/fuzz/make_seeds.c" \
  "$ROOT/src/gguf_read.c" "$ROOT/src/gguf_write.c" "$ROOT/src/types.c" "$ROOT/src/error.c" -o "$BUILD/make_seeds"
"$BUILD/make_seeds" "$SEEDS"
for f in "$ROOT"/../shared/tokenizer-tests/*.gguf "$ROOT"/models/*.gguf; do
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt "$MAX_SEED" ] && cp -f "$f" "$SEEDS/"
done

# max_len: the largest seed, so that real vocabularies are mutated whole (MAX_LEN=4096 trades that
# for ~100x more executions per second on the structure of small files).
MAXLEN=${MAX_LEN:-$(stat -c %s "$SEEDS"/* | sort -n | tail -1)}
echo "fuzz: $SECS s, $(ls "$SEEDS" | wc -l) seeds, max_len $MAXLEN"
cd "$BUILD"
./fuzz_gguf -max_total_time="$SECS" -max_len="$MAXLEN" -rss_limit_mb=2048 -timeout=10 \
  -dict="$ROOT/tests/fuzz/gguf.dict" -artifact_prefix="$BUILD/crash-" -print_final_stats=1 \
  "$CORPUS" "$SEEDS"
