#!/usr/bin/env bash
# Fuzzes icl with libFuzzer for SECONDS (default 60) per target: the GGUF reader (gguf), the Lua binding (lua:
# Lua snippets against tensors, a tiny model, graph, metrics, json and tensor files) and the tokenizers (tokenizer).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default targets: gguf lua tokenizer)
# Builds build-fuzz (clang, -DICL_FUZZ=ON, ASan+UBSan, coverage on the whole core), writes seed corpora, and exits
# non-zero on a crash. Env: JOBS (make parallelism, default 2), MAX_LEN (gguf: default the largest seed).
# Crash inputs land in build-fuzz/crash-<target>-*; corpora grow in build-fuzz/corpus-<target>.
set -euo pipefail

SECS=${1:-60}
shift || true
TARGETS=${*:-gguf lua tokenizer}
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
for t in $TARGETS; do make -C "$BUILD" -j"${JOBS:-2}" "fuzz_$t" >/dev/null; done

# size of a file, following symbolic links (a linked model measures as itself, not as the link)
size_of() { stat -L -c %s "$1"; }

seeds_gguf() { # the writer's own small files (built without the fuzzing runtime) and small vocabulary files
  clang -std=c11 -O1 -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT/src/base" -I"$ROOT/src/core" \
    "$ROOT/tests/fuzz/make_seeds.c" "$ROOT"/src/core/{gguf_read,gguf_write,file_read,file_tmp,sigbus_guard}.c \
    "$ROOT"/src/base/{types,error}.c -lpthread -o "$BUILD/make_seeds"
  "$BUILD/make_seeds" "$1"
  # vocabulary-only files; never whole models (they are hundreds of MiB: far too slow to mutate)
  for f in "$ROOT"/tests/fixtures/tokenizer/*.gguf; do
    [ -f "$f" ] && [ "$(size_of "$f")" -lt "$MAX_SEED" ] && cp -fL "$f" "$1/"
  done
  return 0
}

seeds_lua() { # the Lua tests and the fuzzer's own snippets (model, files, hostile tables)
  cp -fL "$ROOT"/tests/lua/*.lua "$ROOT"/tests/fuzz/lua/*.lua "$1/"
}

seeds_tokenizer() { # the conformance inputs, one string per seed, behind a mode byte for each tokenizer kind
  local n=0
  for f in "$ROOT"/tests/fixtures/tokenizer/*.inp; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    printf '\000' | cat - "$f" >"$1/bpe-$n"
    printf '\001' | cat - "$f" >"$1/spm-$n"
    printf '\006' | cat - "$f" >"$1/special-$n"
  done
}

run_target() { # run_target NAME
  local t=$1 seeds="$BUILD/seeds-$1" corpus="$BUILD/corpus-$1" extra=() leaks=1
  mkdir -p "$seeds" "$corpus"
  "seeds_$t" "$seeds"
  case $t in
  gguf) extra=(-max_len="${MAX_LEN:-$(for f in "$seeds"/*; do size_of "$f"; done | sort -n | tail -1)}"
               -dict="$ROOT/tests/fuzz/gguf.dict") ;;
  lua) extra=(-max_len=16384 -dict="$ROOT/tests/fuzz/lua.dict")
       leaks=0 ;; # a Lua error raised mid-conversion may strand a malloc'd buffer: memory errors are the target
  tokenizer) extra=(-max_len=4096) ;;
  esac
  echo "fuzz $t: $SECS s, $(ls "$seeds" | wc -l) seeds"
  (cd "$BUILD" && ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=$leaks ICL_SOURCE_DIR="$ROOT" \
    "./fuzz_$t" -max_total_time="$SECS" -rss_limit_mb=4096 -malloc_limit_mb=4096 -timeout=30 "${extra[@]}" \
    -artifact_prefix="$BUILD/crash-$t-" -print_final_stats=1 "$corpus" "$seeds")
}

for t in $TARGETS; do run_target "$t"; done
