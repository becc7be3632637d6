#!/usr/bin/env bash
# The GPU check, run from a device kit (scripts/device-kit.sh builds one; docs/gpu.md says how to run it):
# icl devices; the Vulkan op tests with validation on (any validation message fails); the tiny-model forward
# and hook suites on Vulkan against the reference; random models in the exact shapes of SmolLM2-135M Q4_1 and
# Gemma 3 270M Q4_K_M benchmarked on the Vulkan and CPU backends (prefill, decode, a forward with all logits,
# a run capturing one layer's attention pattern); ICL_PROFILE=1 per-op GPU times of one prefill and one decode;
# icl bench ops (kernels against this device's bandwidth and FMA ceilings); where the kit carries llama.cpp's
# llama-bench (scripts/build-peer-vulkan.sh), llama.cpp's Vulkan backend on the same GGUF files and the same
# device, beside icl's (pp128, pp512, tg128; --quick pp32, tg8). Every step has a timeout, the
# whole run a deadline; one table on stdout, logs under $OUT (or --out DIR).
# Usage: device-check.sh [--quick] [--cold-cache] [--out DIR] [--budget SECONDS] [--timeout-scale K] [--cpu-threads N] [--only RE]
#                        [--install-glvnd] [--ablation WALKS]
#   --only RE: run only the steps whose names match the extended regex RE (e.g. 'devices|op_')
#   --timeout-scale K: every step's timeout times K (a loaded or slow machine; raise --budget with it)
#   --cold-cache: a fresh Mesa shader cache for this run (lavapipe/RADV/ANV; NVIDIA keeps its own)
#   --install-glvnd: where the machine lacks glvnd (NVIDIA's Vulkan driver needs it), unpack the kit's Debian
#     packages of it into / first (root only; for bare lent machines, not your own: install your distribution's)
#   --ablation WALKS: also time head_ablation.lua's runs (scripts/bench-head-ablation.lua) on both shaped models,
#     Vulkan and CPU, WALKS walks each (16 is the full protocol; a GPU needs ~5 s a walk: raise --budget)
set -uo pipefail
KIT=$(cd "$(dirname "$0")" && pwd)
quick=0 cold=0 glvnd=0 ablation=0 budget=330 out=${OUT:-$PWD/device-check-out} threads= tscale=1 only=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --cold-cache) cold=1; shift ;;
    --install-glvnd) glvnd=1; shift ;;
    --out) out=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --cpu-threads) threads=$2; shift 2 ;;
    --timeout-scale) tscale=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --ablation) ablation=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $ablation =~ ^[0-9]+$ ]] || { echo "device-check: --ablation $ablation: expected a number of walks" >&2; exit 2; }
Q=; [ $quick = 1 ] && Q=--quick
if [ $quick = 1 ]; then TOK=32 DEC=8 REPS=1 PTOK=32 PDEC=8 ALEN=250; else TOK=1400 DEC=128 REPS=2 PTOK=512 PDEC=64 ALEN=1400; fi

# ---- environment: the kit's libraries and layer; the GPU driver is the machine's own ----
nv_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json # where a lent NVIDIA machine keeps it
work=$(mktemp -d "${TMPDIR:-/tmp}/icl-device-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
# kit/lib/fallback holds libraries drivers load too (libstdc++, zlib, X11...): only one copy can be in a
# process and a driver may need a newer one than the kit's, so link in only those the machine lacks.
has_lib() {
  ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$1 " && return 0
  for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 /usr/lib /lib; do
    [ -e "$d/$1" ] && return 0
  done
  return 1
}
if [ $glvnd = 1 ] && ! { has_lib libGLX.so.0 && has_lib libEGL.so.1 && has_lib libGLdispatch.so.0; }; then
  if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null || ! ls "$KIT"/debs/*.deb >/dev/null 2>&1; then
    echo "device-check: --install-glvnd needs root, dpkg and the kit's debs/" >&2
    exit 2
  fi
  for f in "$KIT"/debs/*.deb; do dpkg -x "$f" / || { echo "device-check: unpacking $f failed" >&2; exit 2; }; done
  ldconfig
  echo "device-check: unpacked glvnd and the Vulkan loader into / ($(cd "$KIT/debs" && ls | tr '\n' ' '))" >&2
fi
mkdir -p "$work/lib"
for f in "$KIT"/lib/fallback/*.so*; do
  [ -e "$f" ] && ! has_lib "$(basename "$f")" && ln -s "$f" "$work/lib/"
done
ldp=$KIT/lib
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [ -d $d ] && ldp=$ldp:$d; done
export LD_LIBRARY_PATH=$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$work/lib
export VK_LAYER_PATH=$KIT/share/vulkan/explicit_layer.d
if [ -z "${VK_ICD_FILENAMES:-}${VK_DRIVER_FILES:-}" ] && [ -f $nv_icd ]; then
  export VK_ICD_FILENAMES=$nv_icd VK_DRIVER_FILES=$nv_icd
fi # else the loader searches /usr/share/vulkan/icd.d and /etc/vulkan/icd.d (Mesa RADV, ANV, lavapipe...)
nv_egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json # glvnd's EGL looks in /usr/share only
[ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f $nv_egl ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$nv_egl
[ -n "$threads" ] && export ICL_THREADS=$threads
# Mesa (lavapipe, RADV, ANV) caches compiled shaders on disk (~/.cache/mesa_shader_cache): --cold-cache gives
# the run a fresh one, so it starts cold as on a bare machine whatever earlier runs left, and later steps still
# reuse what earlier ones compiled. On lavapipe the LLVM compiles are most of the CPU time of a cold run.
[ $cold = 1 ] && export MESA_SHADER_CACHE_DIR=$work/shader-cache
export ICL_PROGRESS=0
ICL=$KIT/bin/icl
mkdir -p "$out"
log=$out/device-check.log
: > "$log"
printf "%-26s %-5s %8s %8s  %s\n" step status wall_s cpu_s note > "$out/steps.txt"
start=$(date +%s)
deadline=$((start + budget))
STEPS=() # "name|status|wall seconds|cpu seconds|note"

# children_cpu: sets CPU_NOW to the user+system CPU seconds of every finished child so far (bash's `times`,
# second line). Never call it in $(...): a subshell counts only its own children.
children_cpu() {
  times > "$work/times"
  CPU_NOW=$(tail -1 "$work/times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
                                         printf "%.2f", t }')
}

# run_step NAME TIMEOUT VALIDATE CMD...: runs CMD with a timeout (cut to what is left of the budget), its
# output in $work/NAME.log and appended to $log. VALIDATE=1: any validation message, or no layer, fails it.
run_step() {
  local name=$1 limit=$2 validate=$3 t0 rc status note=
  shift 3
  if [ -n "$only" ] && ! [[ $name =~ ^($only) ]]; then STEPS+=("$name|OFF|0|0|not selected (--only)"); return 1; fi
  local left=$((deadline - $(date +%s)))
  limit=$((limit * tscale))
  if [ $left -lt 10 ]; then
    STEPS+=("$name|SKIP|0|0|budget of ${budget}s spent"); echo "--- $name: skipped, no time left" >> "$log"; return 1
  fi
  [ $limit -gt $left ] && limit=$left
  t0=$(date +%s.%N)
  local c0 cpu
  children_cpu
  c0=$CPU_NOW
  printf '%-26s ' "$name" >&2
  timeout -k 5 "$limit" "$@" > "$work/$name.log" 2>&1
  rc=$?
  local dt
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  children_cpu
  cpu=$(awk -v a="$c0" -v b="$CPU_NOW" 'BEGIN {printf "%.1f", b - a}')
  if [ $rc = 124 ] || [ $rc = 137 ]; then status=FAIL note="timed out after ${limit}s"
  elif [ $rc = 77 ]; then status=SKIP note="skipped by the test (exit 77)"
  elif [ $rc != 0 ]; then status=FAIL note="exit $rc: $(grep -m1 -i -E 'fail|error' "$work/$name.log" | cut -c1-90)"
  else status=PASS
  fi
  if [ "$validate" = 1 ]; then # test_vk_device plants one error to prove the layer reports: not a failure
    local nmsg planted
    nmsg=$(grep -c -E 'icl: vulkan validation (error|warning): ' "$work/$name.log") # vk/instance.c's line, not a count
    planted=$(grep -c 'a validation error is expected next' "$work/$name.log")
    if [ "$nmsg" -lt "$planted" ]; then status=FAIL note="the planted validation error was not reported; $note"
    elif [ "$nmsg" -gt "$planted" ]; then status=FAIL note="$((nmsg - planted)) validation messages; $note"
    elif grep -q 'VK_LAYER_KHRONOS_validation is not installed' "$work/$name.log"; then
      status=FAIL note="validation layer not loaded; $note"
    fi
  fi
  STEPS+=("$name|$status|$dt|$cpu|$note")
  echo "$status ${dt}s (cpu ${cpu}s) $note" >&2
  printf "%-26s %-5s %8s %8s  %s\n" "$name" "$status" "$dt" "$cpu" "$note" >> "$out/steps.txt" # kept if killed
  { echo "--- $name: $status in ${dt}s, cpu ${cpu}s (rc $rc) $note"; echo "\$ $*"; cat "$work/$name.log"; } >> "$log"
  [ $status != FAIL ]
}

echo "device-check: kit $KIT ($(head -2 "$KIT/VERSION" 2>/dev/null | tail -1)), $([ $quick = 1 ] && echo quick || echo full) sizes, budget ${budget}s" >&2
echo "  Mesa shader cache: $([ $cold = 1 ] && echo "fresh for this run (--cold-cache)" || echo "${MESA_SHADER_CACHE_DIR:-the default, ~/.cache} (a warm one saves lavapipe minutes)")" >&2
echo "  VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-(loader default)} VK_LAYER_PATH=$VK_LAYER_PATH" >&2
echo "  from the kit's fallback libraries (the machine lacks them): $(cd "$work/lib" && ls | tr '\n' ' ')" >&2

# ---- 1. devices ----
if ! run_step devices 60 0 "$ICL" devices; then # the loader's own account of what it tried
  { echo "--- VK_LOADER_DEBUG=error,warn,driver icl devices"; VK_LOADER_DEBUG=error,warn,driver timeout 60 "$ICL" devices 2>&1 | head -60; } >> "$log"
fi
# the device's name for the report, also when --only leaves the devices step out
[ -f "$work/devices.log" ] || timeout 60 "$ICL" devices > "$work/devices.log" 2>&1 || true
device=$(sed -n 's/^vulkan device: \[[0-9]*\] //p' "$work/devices.log" | head -1)
devidx=$(sed -n 's/^vulkan device: \[\([0-9]*\)\] .*/\1/p' "$work/devices.log" | head -1) # the same index for ggml
# the several-token matmul paths the chosen device offers at FAST precision (ICL_VK_MATMUL), from its
# "matmul, several tokens, FAST precision: ... offers tiled, intdot; ICL_VK_MATMUL)" line
mm_paths=$(awk -v want="[${devidx:-x}]" '$1 ~ /^\[[0-9]+\]$/ {on = ($1 == want)}
  on && /FAST precision:/ && match($0, /offers [a-z, ]+;/) {
    s = substr($0, RSTART + 7, RLENGTH - 8); gsub(/,/, "", s); print s; exit }' "$work/devices.log")
[ -n "$mm_paths" ] || mm_paths=tiled

# ---- 2. Vulkan op tests, validation on ----
# fusion: the fused ops against the unfused sequence bit for bit on this driver's compiler (docs/vulkan.md, Fusions);
# fusion_hooks: hooks under the fusions; counts: the pinned dispatch counts on this device
for t in device big fusion fusion_hooks counts; do
  ICL_VALIDATION=1 ICL_TEST=1 run_step "op_$t" 150 1 "$KIT/bin/test_vk_$t"
done
# attention with a NaN query row or a fully masked row, with and without a pattern (the query-block kernel's)
ICL_VALIDATION=1 ICL_TEST=1 run_step op_attn_nan 120 1 "$KIT/bin/test_attn_nan"
# the op table (tests/ops/test_backend_ops.c) on both Vulkan kernel families, judged against ref; it covers
# every op and weight type, so --quick leaves out test_vk_matmul (which repeats its matmul rows at more shapes).
# --quick: the device's own kernel family only, and matmul/get_rows on one type of each block family (a float
# type, a legacy quant, a K-quant): on lavapipe each pipeline is seconds of LLVM, and cold they were most of
# the run (docs/gpu.md, Measured)
table_args=(--backend vulkan)
[ $quick = 1 ] && table_args+=(--quick --own-family --types f16,q4_1,q4_k)
ICL_VALIDATION=1 ICL_TEST=1 run_step op_table 240 1 "$KIT/bin/test_backend_ops" "${table_args[@]}"
[ $quick = 1 ] || ICL_VALIDATION=1 ICL_TEST=1 run_step op_matmul 240 1 "$KIT/bin/test_vk_matmul"
# the FAST-precision matmul paths (ICL_VK_MATMUL, issue 38) where the device offers them: against their scalar
# references (test_vk_intdot) and through the op table's matmul rows (the FAST target, every type the path takes)
if [[ " $mm_paths " == *" intdot "* ]]; then
  ICL_VALIDATION=1 ICL_TEST=1 run_step op_intdot 150 1 "$KIT/bin/test_vk_intdot"
  ICL_VK_MATMUL=intdot ICL_VALIDATION=1 ICL_TEST=1 run_step op_table_intdot 240 1 "$KIT/bin/test_backend_ops" \
    --backend vulkan --op matmul --types q4_0,q4_1,q5_0,q5_1,q8_0,q3_k,q4_k,q5_k,q6_k $([ $quick = 1 ] && echo "--quick --own-family")
else
  STEPS+=("op_intdot|OFF|0|0|the device offers no integer dot product (ICL_VK_MATMUL=intdot)")
fi
# coopmat (every weight type): validation layers before 1.3.255 do not know VK_KHR_cooperative_matrix and flag its
# feature struct and SPIR-V; the kit's (Debian 12's 1.3.239) is one, so these steps take ICL_COOPMAT_LAYER_PATH (a
# newer layer's manifest folder; test-device-kit.sh passes the root's own) or run without validation, named _noval
layer_ver=$(sed -n 's/^validation layer: \([0-9.]*\).*/\1/p' "$KIT/VERSION" 2>/dev/null)
cm_layer=${ICL_COOPMAT_LAYER_PATH:-}
[ -z "$cm_layer" ] && [ "$(printf '%s\n' 1.3.255 "${layer_ver:-0}" | sort -V | head -1)" = 1.3.255 ] &&
  cm_layer=$VK_LAYER_PATH
if [[ " $mm_paths " == *" coopmat "* ]]; then
  cm_v=1 cm_s=
  [ -n "$cm_layer" ] || cm_v=0 cm_s=_noval cm_layer=$VK_LAYER_PATH
  cm_env=(VK_LAYER_PATH=$cm_layer ICL_VK_MATMUL=coopmat ICL_VALIDATION=$cm_v ICL_TEST=1)
  run_step op_coopmat$cm_s 240 $cm_v env "${cm_env[@]}" "$KIT/bin/test_vk_coopmat" $Q
  run_step op_table_coopmat$cm_s 240 $cm_v env "${cm_env[@]}" "$KIT/bin/test_backend_ops" --backend vulkan --op matmul \
    $([ $quick = 1 ] && echo "--quick --own-family --types f16,q4_1,q4_k")
else
  STEPS+=("op_coopmat|OFF|0|0|no cooperative-matrix path (no usable shape, or a kit built without its glslang)")
fi

# ---- 3. tiny models: Vulkan forward and hooks against the reference ----
ICL_VALIDATION=1 ICL_TEST=1 run_step forward_hooks_vulkan 150 1 "$KIT/bin/test_forward_tiny" vulkan $Q # --quick: 6 of the 21 (arch, type) pairs, no F32

# ---- 4. random models in the real shapes ----
for m in smollm2 gemma3; do run_step "write_$m" 120 0 "$ICL" testmodel --like $m -o "$work/$m.gguf"; done

# ---- 5. benchmarks, the GPU first (what is left of the budget when time runs short goes to the CPU) ----
bench_pair() { # model backend
  run_step "bench_$1_$2" 240 0 "$ICL" bench model -m "$work/$1.gguf" --backend $2 --tokens $TOK --decode $DEC --reps $REPS
  run_step "pattern_$1_$2" 180 0 "$ICL" bench hooks -m "$work/$1.gguf" --backend $2 --tokens $TOK --reps 1
}
for m in smollm2 gemma3; do [ -f "$work/$m.gguf" ] && bench_pair $m vulkan; done
# the same without the fused ops (ICL_VK_FUSION=0: the unfused sequence, the path before issue 37), timed on the
# same machine in the same run, so the table shows old and new side by side (row "vk-nofuse")
for m in smollm2 gemma3; do
  [ -f "$work/$m.gguf" ] && ICL_VK_FUSION=0 run_step "bench_${m}_vk-nofuse" 240 0 "$ICL" bench model \
    -m "$work/$m.gguf" --backend vulkan --tokens $TOK --decode $DEC --reps $REPS
done
# and with the attention before issue 38 (ICL_VK_ATTN=legacy: one workgroup per query, no query blocks), row
# "vk-oldattn": prefill, the all-logits forward and the pattern capture, old and new side by side
for m in smollm2 gemma3; do
  [ -f "$work/$m.gguf" ] || continue
  ICL_VK_ATTN=legacy run_step "bench_${m}_vk-oldattn" 240 0 "$ICL" bench model \
    -m "$work/$m.gguf" --backend vulkan --tokens $TOK --decode $DEC --reps $REPS
  ICL_VK_ATTN=legacy run_step "pattern_${m}_vk-oldattn" 180 0 "$ICL" bench hooks -m "$work/$m.gguf" --backend vulkan \
    --tokens $TOK --reps 1
done

# and each several-token matmul path the device offers at FAST precision (ICL_VK_MATMUL; bench model runs FAST),
# rows "vk-mm-tiled" (the f32 kernel, as before issue 38's FAST paths), "vk-mm-intdot", "vk-mm-coopmat": prefill 128
# and 512 side by side
for p in $mm_paths; do for m in smollm2 gemma3; do
  [ -f "$work/$m.gguf" ] && ICL_VK_MATMUL=$p run_step "bench_${m}_vk-mm-$p" 240 0 "$ICL" bench model \
    -m "$work/$m.gguf" --backend vulkan --tokens $PTOK --decode $PDEC --reps $REPS
done; done

# ---- 5b. the peer: llama.cpp's Vulkan backend (llama-bench) on the same files and the same device ----
# ggml-vulkan leaves CPU devices (lavapipe) out unless GGML_VK_VISIBLE_DEVICES names them, so it is given the
# index icl chose (both enumerate through the same loader); the step fails unless llama-bench's table says it
# ran on Vulkan with every layer offloaded (-ngl 99). llama-bench reports the mean of -r runs.
PEER=$KIT/bin/llama-bench
if [ $quick = 1 ]; then PEER_P=$TOK PEER_N=$DEC; else PEER_P=128,512 PEER_N=128; fi
peer_bench() { # model: llama-bench's markdown table on stdout, its log (device, load errors) too
  local o=$work/peer_$1.out rc
  GGML_VK_VISIBLE_DEVICES=${devidx:-${GGML_VK_VISIBLE_DEVICES:-}} "$PEER" -m "$work/$1.gguf" -ngl 99 \
    -p "$PEER_P" -n "$PEER_N" -r "$REPS" -o md > "$o" 2>&1
  rc=$?
  cat "$o"
  [ $rc = 0 ] || return $rc
  grep -q '^|.*Vulkan' "$o" || { echo "error: llama-bench's table names no Vulkan backend"; return 3; }
}
export -f peer_bench
export PEER PEER_P PEER_N REPS work devidx
for m in smollm2 gemma3; do
  [ -f "$work/$m.gguf" ] || continue
  if [ -x "$PEER" ]; then run_step "peer_${m}_vulkan" 240 0 bash -c 'peer_bench "$1"' peer_bench $m
  else STEPS+=("peer_${m}_vulkan|OFF|0|0|no llama-bench in the kit (scripts/build-peer-vulkan.sh, then device-kit.sh)")
  fi
done

# ---- 6. per-op GPU times: one prefill, one decode ----
for m in smollm2 gemma3; do
  [ -f "$work/$m.gguf" ] || continue
  ICL_PROFILE=1 run_step "profile_${m}_prefill" 120 0 "$ICL" bench model -m "$work/$m.gguf" --backend vulkan --tokens $PTOK --once prefill
  ICL_PROFILE=1 run_step "profile_${m}_decode" 120 0 "$ICL" bench model -m "$work/$m.gguf" --backend vulkan --decode $PDEC --once decode
done

# ---- 7. kernels against the device's ceilings ----
run_step bench_ops 240 0 "$ICL" bench ops $([ $quick = 1 ] && echo --quick)
# its rows at FAST with the cooperative-matrix matmul ("coopmat x7"), where offered (not the default path yet)
[[ " $mm_paths " == *" coopmat "* ]] && ICL_VK_MATMUL=coopmat run_step bench_ops_coopmat 240 0 "$ICL" bench ops \
  $([ $quick = 1 ] && echo --quick)

# ---- 8. the same models on the CPU backend, for comparison ----
for m in smollm2 gemma3; do [ -f "$work/$m.gguf" ] && bench_pair $m cpu; done

# ---- 9. (--ablation) head_ablation's runs, timed: what its full 16-walk protocol costs on this machine ----
if [ "$ablation" != 0 ]; then
  for be in vulkan cpu; do for m in smollm2 gemma3; do
    [ -f "$work/$m.gguf" ] && run_step "ablation_${m}_$be" 600 0 "$ICL" script "$KIT/bench-head-ablation.lua" \
      "$work/$m.gguf" "$ablation" $be exact $ALEN
  done; done
fi

# ---- the table ----
# bench model lines: "prefill N secs tok/s", "decode D (after 8 tokens) secs tok/s", "forward N, ... secs tok/s";
# bench hooks: "plain run ... S s", "blocks.L.attn.hook_pattern S s  overhead +X%".
bench_row() { # model backend
  local b=$work/bench_$1_$2.log p=$work/pattern_$1_$2.log
  awk -v m="$1" -v be="$2" -v tok="$TOK" -v pf="$p" '
    $1 == "prefill" && $2 == 128 {p128 = $NF} $1 == "prefill" && $2 == 512 {p512 = $NF}
    $1 == "prefill" && $2 == tok {pn = $NF} $1 == "decode" {dec = $NF} $1 == "forward" {fwd = $NF}
    END {
      while ((getline line < pf) > 0) {
        n = split(line, f, " ")
        if (line ~ /hook_pattern/) {pat = f[2]; ovh = f[n]} else if (line ~ /^plain run/) plain = f[n - 1]
      }
      printf "%-8s %-13s %9s %9s %9s %9s %9s %9s %9s\n", m, be, p128 ? p128 : "-", p512 ? p512 : "-", pn ? pn : "-",
             dec ? dec : "-", fwd ? fwd : "-", pat ? pat : "-", ovh ? ovh : "-"
    }' "$b" 2>/dev/null
}
peer_rows() { # model: one row per llama-bench test (ppN, tgN), icl's rate for the same size beside it
  local pl=$work/peer_$1_vulkan.log il=$work/bench_$1_vulkan.log
  [ -f "$pl" ] || return 0
  awk -v m="$1" -v il="$il" '
    BEGIN { while ((getline line < il) > 0) { n = split(line, f, " ")
              if (f[1] == "prefill") icl["pp" f[2]] = f[n]; else if (f[1] == "decode") icl["tg" f[2]] = f[n] } }
    /^\|/ { n = split($0, f, "|"); t = f[n - 2]; r = f[n - 1]; gsub(/ /, "", t); split(r, rr, " ")
            if (t !~ /^(pp|tg)[0-9]+$/) next
            i = (t in icl) ? icl[t] : "-"
            printf "%-8s %-6s %12s %12s %14s\n", m, t, rr[1], i, (i != "-" && rr[1] > 0) ? sprintf("%.2f", i / rr[1]) : "-"
            seen = 1 }
    END { if (!seen) printf "%-8s %-6s %12s %12s %14s\n", m, "-", "failed", "-", "-" }' "$pl"
}
{
  echo
  echo "== icl device check: ${device:-no Vulkan device} | $(date -u +%Y-%m-%dT%H:%M:%SZ) | $([ $quick = 1 ] && echo quick || echo full)"
  echo "   prefill/decode/forward columns in tokens/s (best of $REPS); N = $TOK tokens; decode = $DEC steps after 8 tokens"
  printf "%-8s %-13s %9s %9s %9s %9s %9s %9s %9s\n" model backend pf128 pf512 "pf$TOK" decode "fwd$TOK" \
    "pattern_s" "pat_ovh"
  for m in smollm2 gemma3; do for be in vulkan vk-nofuse vk-oldattn vk-mm-tiled vk-mm-intdot vk-mm-coopmat cpu; do
    [ -f "$work/bench_${m}_$be.log" ] && bench_row $m $be; done; done
  if ls "$work"/peer_*_vulkan.log >/dev/null 2>&1; then
    echo
    echo "== llama.cpp Vulkan beside icl Vulkan: the same GGUF files, the same device; tokens/s"
    echo "   llama.cpp: $(sed -n '1s/^sdist: //p' "$KIT/PEER-VERSION" 2>/dev/null), llama-bench -ngl 99 -p $PEER_P -n $PEER_N -r $REPS (mean of $REPS);"
    echo "   icl: icl bench model (best of $REPS; tg = decode steps after an 8-token prompt, llama.cpp's from an empty cache)"
    printf "%-8s %-6s %12s %12s %14s\n" model test llama.cpp icl icl/llama.cpp
    for m in smollm2 gemma3; do peer_rows $m; done
  fi
  echo
  printf "%-26s %-5s %8s %8s  %s\n" step status wall_s cpu_s note
  for s in "${STEPS[@]}"; do
    IFS='|' read -r n st dt c note <<< "$s"; printf "%-26s %-5s %8s %8s  %s\n" "$n" "$st" "$dt" "$c" "$note"
  done
  echo "   wall_s: the step's elapsed seconds; cpu_s: its user+system CPU seconds, every thread (lavapipe's too)"
  for f in "$work"/ablation_*.log; do [ -f "$f" ] && grep -E '^(head_ablation_bench|  )' "$f"; done
  echo "   load average at the end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown), $(nproc 2>/dev/null || echo '?') CPUs"
} > "$out/summary.txt"
for m in smollm2 gemma3; do for ph in prefill decode; do
  f=$work/profile_${m}_$ph.log
  [ -f "$f" ] && { echo "== $m, one $ph ($([ $ph = prefill ] && echo "$PTOK tokens" || echo "$PDEC steps after an 8-token prompt, which is included")), vulkan"
                   grep -E '^(prefill|decode) ' "$f"; sed -n '/^icl profile/,/^total/p' "$f"; echo; }
done; done > "$out/profile.txt"
[ -f "$work/bench_ops.log" ] && cp "$work/bench_ops.log" "$out/bench-ops.txt"
[ -f "$work/bench_ops_coopmat.log" ] &&
  { echo; echo "== ICL_VK_MATMUL=coopmat"; cat "$work/bench_ops_coopmat.log"; } >> "$out/bench-ops.txt"
cat "$out/summary.txt"
echo
cat "$out/profile.txt"
[ -f "$out/bench-ops.txt" ] && { echo "== icl bench ops"; cat "$out/bench-ops.txt"; }
nfail=0 npass=0 nskip=0
for s in "${STEPS[@]}"; do
  case "$s" in *'|PASS|'*) npass=$((npass+1));; *'|FAIL|'*) nfail=$((nfail+1));; *'|SKIP|'*) nskip=$((nskip+1));; esac
done
echo
times > "$work/times" # not in a pipe (a subshell has its own); the steps' CPU time: a loaded machine's wall time misleads
cpu=$(tail -1 "$work/times" | awk '{print "user " $1 ", system " $2}')
echo "device-check: $npass passed, $nfail failed, $nskip skipped in $(( $(date +%s) - start )) s (CPU time of the steps: $cpu); logs: $log"
[ $nfail = 0 ] && [ $nskip = 0 ]
