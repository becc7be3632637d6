#!/usr/bin/env bash
# bench-peers.sh [--quick] [--no-vulkan]: icl (CPU backend in exact and fast precision, and the Vulkan backend)
# against llama.cpp (CPU, through llama-cpp-python built natively from PyPI) on SmolLM2-135M Q4_1 and Gemma 3 270M,
# in one run on this machine: prefill 128 and 512 tokens, decode 128 tokens, a 1400-token forward with all-position
# logits (tokens/s); prints a table with ratios icl / llama.cpp and, for the CPU backend, each row's fraction of the
# ceiling that bounds it (prefill and forward: the f32 FMA peak in exact precision, the int8-dot peak for the
# matmuls in fast; decode: the read bandwidth). The ceilings are measured by `icl bench cpu` three times at the
# start (the median of each is given to every `icl bench model` run, so all rows are fractions of the same figures)
# and once at the end, to show their drift.
# docs/performance.md keeps the latest table.
#   --quick      one repetition instead of three
#   --no-vulkan  skip the Vulkan backend (on lavapipe it is slow)
#   --no-peer    skip llama.cpp (no venv needed): icl's rows only, e.g. for a before/after comparison
#   ICL_BASE=<icl binary>: also runs each icl row with that (older) build right after the new one, same ceilings,
#                and prints a second table, new against base (a change must leave no row slower)
#   --park       instead: the park_grid forward (16 walks x 1400 tokens, all-position logits, park_grid's residual
#                capture; model load excluded) in icl and in PyTorch + transformers (f32, from the same GGUF),
#                seconds and ratios; installs torch into ICL_TORCH_VENV (default .cache/torch-venv; about 5.6 GB,
#                PyPI's Linux torch wheel pulls the CUDA libraries even for CPU use) the first time
# Environment: ICL_BENCH_VENV (default .cache/bench-venv), ICL_THREADS (default: nproc).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
reps=3 vulkan=1 park=0 peer=1
BASE=${ICL_BASE:-}
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "bench-peers: ICL_BASE=$BASE is not an executable" >&2; exit 2; }
for a in "$@"; do
  case "$a" in
    --quick) reps=1 ;;
    --no-vulkan) vulkan=0 ;;
    --park) park=1 ;;
    --no-peer) peer=0 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-peers: unknown option $a" >&2; exit 2 ;;
  esac
done
threads=${ICL_THREADS:-$(nproc)}
VENV=${ICL_BENCH_VENV:-$ROOT/.cache/bench-venv}
LLAMA_CPP_PYTHON_VERSION=0.3.36

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b+0 > 0 && a != "nan") printf "%.2f", a/b; else print "-" }'; }

if [ "$park" = 1 ]; then
  TVENV=${ICL_TORCH_VENV:-$ROOT/.cache/torch-venv}
  if ! [ -x "$TVENV/bin/python" ] || ! "$TVENV/bin/python" -c "import torch, transformers, gguf, accelerate" 2>/dev/null; then
    echo "bench-peers: installing torch and transformers into $TVENV (about 5.6 GB, a few minutes)" >&2
    python3 -m venv "$TVENV"
    "$TVENV/bin/pip" install -q torch==2.15.0 transformers==5.25.0 gguf==0.19.0 accelerate==1.16.0
  fi
  scripts/fetch-models.sh all >&2
  [ -x build/icl ] || scripts/build.sh >&2
  ids=$(mktemp); trap 'rm -f "$ids"' EXIT
  echo
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), threads $threads"
  echo "park_grid forward: 16 walks x 1400 words (+BOS), one forward each from an empty context, the residual capture"
  echo "of park_grid, model load excluded; seconds, and ratio = transformers / icl. icl: CPU backend; 'all' = logits"
  echo "of every position (what transformers computes), 'reduced' = park_grid's own reduced logits."
  printf "%-8s %12s %10s %6s %10s %6s %10s %6s %10s %6s  %s\n" model transformers "exact all" ratio "exact red" ratio \
    "fast all" ratio "fast red" ratio "load average after"
  for entry in "smollm2:models/SmolLM2-135M-Instruct-Q4_1.gguf" "gemma3:models/gemma-3-270m-Q4_K_M.gguf"; do
    name=${entry%%:*} path=${entry#*:}
    declare -A P=()
    for prec in exact fast; do
      echo "bench-peers: $name: icl ($prec precision)" >&2
      out=$(ICL_THREADS=$threads build/icl script scripts/bench-park-forward.lua "$path" "$ids" 16 1400 $prec)
      P[$prec,all]=$(awk '$1 == "park_forward_all_s" {print $2}' <<<"$out")
      P[$prec,red]=$(awk '$1 == "park_forward_reduced_s" {print $2}' <<<"$out")
      layer=$(awk '$1 == "park_forward_layer" {print $2}' <<<"$out")
    done
    echo "bench-peers: $name: PyTorch + transformers" >&2
    json=$("$TVENV/bin/python" scripts/bench_park_torch.py "$path" "$ids" "$threads" "$layer" 2>/dev/null | tail -1)
    t=$(python3 -c "import json,sys; print('%.1f' % json.loads(sys.argv[1])['park_forward_s'])" "$json")
    printf "%-8s %12s" "$name" "$t"
    for k in exact,all exact,red fast,all fast,red; do printf " %10.1f %6s" "${P[$k]}" "$(ratio "$t" "${P[$k]}")"; done
    printf "  %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)"
  done
  echo "versions: $json" | sed 's/"park_forward_s": [0-9.]*, //'
  exit 0
fi

# The peer is built for what this machine lets a process run, not for what CPUID lists: on a Sapphire Rapids VM whose
# kernel does not grant the AMX tile state, a native build dies with SIGILL at its first tilezero. The probe
# (scripts/peer-cpu-flags.c over src/cpu/cpu_features.c, icl's own decision) says "native" when that is safe, else
# the GGML options of the usable instructions. A venv built with other options is rebuilt.
if [ "$peer" = 1 ]; then
probe=$(mktemp)
cc -O1 -Isrc/cpu -o "$probe" scripts/peer-cpu-flags.c src/cpu/cpu_features.c
ggml_flags=$("$probe")
rm -f "$probe"
[ "$ggml_flags" = native ] && ggml_flags="-DGGML_NATIVE=ON"
if ! [ -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null ||
   [ "$(cat "$VENV/.icl-ggml-flags" 2>/dev/null)" != "$ggml_flags" ]; then
  echo "bench-peers: building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION into $VENV with $ggml_flags" \
    "(about 10 minutes)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) CMAKE_ARGS="$ggml_flags -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    "$VENV/bin/pip" install -q --force-reinstall --no-cache-dir "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
  echo "$ggml_flags" >"$VENV/.icl-ggml-flags"
fi
fi
scripts/fetch-models.sh all >&2
[ -x build/icl ] || scripts/build.sh >&2

# This VM's ceilings move 15-40% between measurements minutes apart while the rows move less, and a single
# start-up reading once came out at twice any other (the read stream at 56-63 GB/s against 34-37): the fractions
# use the median of three measurements at the start, and a fourth at the end says how far they drifted.
measure_ceil() {
  ICL_THREADS=$threads build/icl bench cpu |
    awk '/^f32 FMA peak/{f=$4} /^int8 dot-product peak/{i=$4} /^read bandwidth/{r=$4} END{print f "," i "," r}'
}
median_ceil() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN{ split(a, x, ","); split(b, y, ","); split(c, z, ",")
  for (i = 1; i <= 3; i++) { p = x[i] + 0; q = y[i] + 0; r = z[i] + 0
    m = (p <= q) ? ((q <= r) ? q : (p <= r ? r : p)) : ((p <= r) ? p : (q <= r ? r : q))
    printf "%s%s", (i > 1 ? "," : ""), m }
  print "" }'; }
echo "bench-peers: this machine's ceilings (icl bench cpu, three times)" >&2
ceil_a=$(measure_ceil) ceil_b=$(measure_ceil) ceil_c=$(measure_ceil)
ceil=$(median_ceil "$ceil_a" "$ceil_b" "$ceil_c")
declare -A R failed_peer
run_icl() { # model backend precision [binary]: "key tokens/s" lines, and "key_roof percent" from the roofline lines
  ICL_THREADS=$threads "${4:-build/icl}" bench model -m "$1" --backend "$2" --reps "$reps" --precision "$3" --ceilings "$ceil" |
    awk '/^[a-z]/{k=""} /^prefill 128 /{k="prefill_128"; print k, $NF} /^prefill 512 /{k="prefill_512"; print k, $NF}
         /^decode 128/{k="decode_128"; print k, $NF} /^forward 1400/{k="forward_1400_all_logits"; print k, $NF}
         /^  roofline:/ && k != "" {for (i = 1; i <= NF; i++) if ($i == "=") print k "_roof", $(i + 1)}'
}
models=("smollm2:models/SmolLM2-135M-Instruct-Q4_1.gguf" "gemma3:models/gemma-3-270m-Q4_K_M.gguf")
for entry in "${models[@]}"; do
  name=${entry%%:*} path=${entry#*:}
  # a peer that fails (a signal, an error) is a row saying so, not the end of the script
  if [ "$peer" = 0 ]; then
    failed_peer[$name]="not run (--no-peer)"
  elif echo "bench-peers: $name: llama.cpp" >&2 &&
       json=$("$VENV/bin/python" scripts/bench_llamacpp.py "$path" "$threads" "$reps"); then
    for k in prefill_128 prefill_512 decode_128 forward_1400_all_logits; do
      R[$name,llama,$k]=$(python3 -c "import json,sys; print('%.1f' % json.loads(sys.argv[1])['$k'])" "$json")
    done
  else
    rc=$?
    why="exit $rc"
    [ "$rc" -gt 128 ] && why="signal $((rc - 128))$([ "$rc" -eq 132 ] && echo ' SIGILL')"
    echo "bench-peers: $name: llama.cpp failed ($why); its rows say so" >&2
    failed_peer[$name]="failed ($why)"
  fi
  runs=("cpu:exact" "cpu:fast")
  [ "$vulkan" = 1 ] && runs+=("vulkan:fast")
  for r in "${runs[@]}"; do
    be=${r%%:*} prec=${r#*:} col=$be
    [ "$be" = cpu ] && col=$prec
    echo "bench-peers: $name: icl $be ($prec precision)" >&2
    while read -r k v; do R[$name,$col,$k]=$v; done < <(run_icl "$path" "$be" "$prec")
    if [ -n "$BASE" ]; then
      echo "bench-peers: $name: base $BASE $be ($prec precision)" >&2
      while read -r k v; do R[$name,base_$col,$k]=$v; done < <(run_icl "$path" "$be" "$prec" "$BASE")
    fi
  done
done

echo "bench-peers: this machine's ceilings again, after the rows" >&2
ceil_end=$(measure_ceil)

echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), threads $threads, best of $reps, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "roofline: the CPU row's fraction of its bounding ceiling (prefill, forward: f32 FMA peak (exact), int8-dot peak for matmuls (fast); decode: read bandwidth)"
echo "ceilings ($threads threads; f32 FMA, int8 dot, read in GFLOP/s, GOP/s, GB/s): ${ceil//,/, }, the median of three" \
  "measurements at the start (${ceil_a//,/, }; ${ceil_b//,/, }; ${ceil_c//,/, }); at the end: ${ceil_end//,/, }"
awk -v c="$ceil" -v e="$ceil_end" 'BEGIN{ split(c, x, ","); split(e, y, ","); split("f32 FMA,int8 dot,read", n, ",")
  for (i = 1; i <= 3; i++) if (y[i] > 1.05 * x[i])
    printf "note: the %s ceiling measured %.0f%% higher at the end: fractions against it may be overstated by as much\n",
      n[i], 100 * (y[i] / x[i] - 1) }'
printf "%-8s %-30s %10s %10s %6s %10s %6s %8s %8s %10s %6s\n" model measure "llama.cpp" "icl exact" ratio "icl fast" ratio \
  "roof ex" "roof fa" "icl vulkan" ratio
for entry in "${models[@]}"; do
  name=${entry%%:*}
  for k in prefill_128 prefill_512 decode_128 forward_1400_all_logits; do
    l=${R[$name,llama,$k]:-nan} e=${R[$name,exact,$k]:-nan} f=${R[$name,fast,$k]:-nan} v=${R[$name,vulkan,$k]:-nan}
    printf "%-8s %-30s %10s %10s %6s %10s %6s %8s %8s %10s %6s\n" "$name" "$k (tok/s)" "$([ "$peer" = 1 ] && echo "${l/nan/failed}" || echo -)" "$e" \
      "$(ratio "$e" "$l")" "$f" "$(ratio "$f" "$l")" "${R[$name,exact,${k}_roof]:--}" "${R[$name,fast,${k}_roof]:--}" "$v" \
      "$(ratio "$v" "$l")"
  done
  [ -n "${failed_peer[$name]:-}" ] && echo "$name: llama.cpp ${failed_peer[$name]}"
done
if [ -n "$BASE" ]; then
  echo
  echo "new (build/icl) against base ($BASE), tok/s, each base row run right after the new one"
  printf "%-8s %-30s %10s %10s %6s %10s %10s %6s %10s %10s %6s\n" model measure "exact" base ratio "fast" base ratio \
    "vulkan" base ratio
  for entry in "${models[@]}"; do
    name=${entry%%:*}
    for k in prefill_128 prefill_512 decode_128 forward_1400_all_logits; do
      printf "%-8s %-30s" "$name" "$k"
      for c in exact fast vulkan; do
        n=${R[$name,$c,$k]:-nan} b=${R[$name,base_$c,$k]:-nan}
        printf " %10s %10s %6s" "$n" "$b" "$(ratio "$n" "$b")"
      done
      echo
    done
  done
fi
[ "$peer" = 1 ] && [ -n "${failed_peer[*]:-}" ] && exit 1
exit 0
