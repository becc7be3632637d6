#!/usr/bin/env bash
# Training throughput of icl (icl bench train) and PyTorch CPU eager (scripts/bench_train_torch.py) on the same
# models, batches and data, one after the other on this machine, with the ratio icl / PyTorch in steps/s and
# both final losses (after the same steps; the inits differ, so they agree within noise, not exactly).
#   scripts/bench-train-peers.sh [STEPS (20)] [ICL binary (build/icl)]
# STEPS is the attn2 case's count; the meta case runs ICL_META_SCALE (default 10) times as many steps on both
# engines: its step lasts ~7 ms, so 20 steps timed 0.15 s, and one round's ratio swung from 1.33 to 2.53 on one
# quiet machine (docs/performance.md, session 31).
# ICL_BASE=<another icl binary> adds its steps/s as a column (an old build timed in the same run).
# ICL_ROUNDS=N (default 5): each case timed N times over, icl and PyTorch back to back in each round (see below).
# The "of peak" column is icl's GFLOP/s as a share of this machine's f32 FMA peak (icl bench cpu, same run).
# The peer is a current PyTorch from PyPI: $PYTHON if it imports torch >= 2, else the venv ICL_TORCH_VENV (default
# .cache/torch-venv, shared with scripts/bench-peers.sh --park), installed there the first time (about 5.6 GB: PyPI's
# Linux wheel pulls the CUDA libraries even for CPU use). Measure on a quiet machine: the load average before and
# after, and the cores other processes kept busy in the second before, are printed beside the table (a warning when
# that is over 0.1 core).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
icl=${2:-build/icl}
meta_scale=${ICL_META_SCALE:-10}
case $steps$meta_scale in *[!0-9]*) echo "bench-train-peers: STEPS ($steps) and ICL_META_SCALE ($meta_scale) must be whole numbers" >&2; exit 2 ;; esac
TORCH_VERSION=2.15.0
new_torch() { "$1" -c "import sys, torch; sys.exit(int(torch.__version__.split('.')[0]) < 2)" 2>/dev/null; }
py=
if [ -n "${PYTHON:-}" ] && new_torch "$PYTHON"; then py=$PYTHON; fi
if [ -z "$py" ]; then
  TVENV=${ICL_TORCH_VENV:-.cache/torch-venv}
  if ! new_torch "$TVENV/bin/python"; then
    echo "bench-train-peers: installing torch $TORCH_VERSION into $TVENV (about 5.6 GB, a few minutes)" >&2
    python3 -m venv "$TVENV"
    "$TVENV/bin/pip" install -q "torch==$TORCH_VERSION"
  fi
  py=$TVENV/bin/python
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Cores busy in the second before the run (user + nice + system + irq, all CPUs): a job beside the benchmark
# measures the load, not the code. Where the kernel groups tasks by session (sched_autogroup_enabled = 1, Debian's
# default), `nice` does not shield the benchmark from a job started in another session: that job keeps an equal share.
cpu_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
read -r busy0 all0 < <(cpu_jiffies)
sleep 1
read -r busy1 all1 < <(cpu_jiffies)
busy=$(awk -v b=$((busy1 - busy0)) -v a=$((all1 - all0)) -v n="$(nproc)" 'BEGIN { printf "%.2f", (a > 0 ? n * b / a : 0) }')
if awk -v b="$busy" 'BEGIN { exit !(b > 0.10) }'; then
  echo "bench-train-peers: warning: $busy cores were busy before the run (not quiet; figures measure the load too):" >&2
  ps -eo pid,ni,pcpu,etime,comm --sort=-pcpu | head -4 >&2
  if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
    echo "bench-train-peers: autogroup scheduling is on: nice does not lower another session's job below this one" >&2
  fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The FMA peak is probed before the first round and after each, the highest reading kept: a probe taken while the
# machine runs slow reads low (122 of 234 GFLOP/s once, making icl 111% of it), never high.
probe_peak() { "$icl" bench cpu --quick | awk '/f32 FMA peak/ { print $4 }'; }
peak=$(probe_peak)
# Rounds: each case timed icl, base, PyTorch back to back, ROUNDS times over. This machine kind's speed drifts by up
# to half within minutes (docs/performance.md, session 28), so a ratio is only as good as the closeness of its two
# runs; the table gives each engine's median steps/s and the median of the rounds' ratios, with every round's ratio.
# Five rounds, the order flipped in every other one (PyTorch first), so that a drift within a round favours neither
# engine: on 2026-12-07 this machine's speed for the same icl binary switched between ~115 and ~150 meta steps/s
# every few tens of seconds at a load average near 1, and three rounds gave a median of 1.35 where sixteen longer
# pairs gave 1.40-2.10, median 1.76 (docs/performance.md, session 32).
rounds=${ICL_ROUNDS:-5}
case $rounds in '' | *[!0-9]* | 0) echo "bench-train-peers: ICL_ROUNDS ($rounds) must be a whole number >= 1" >&2; exit 2 ;; esac
probes=$peak
cases="attn2-d256-ctx256-b32 meta-d128-h1-T9-b128"
run_torch() { "$py" scripts/bench_train_torch.py "$n" "$(nproc)" "$c" | sed "s/^/$r /" | tee -a "$tmp/torch.txt"; }
for r in $(seq 1 "$rounds"); do
  for c in $cases; do
    n=$steps
    case $c in meta-*) n=$((steps * meta_scale)) ;; esac
    if [ $((r % 2)) = 0 ]; then run_torch; fi
    "$icl" bench train --steps "$n" --case "$c" | sed "s/^/$r /" | tee -a "$tmp/icl.txt"
    if [ -n "${ICL_BASE:-}" ]; then "$ICL_BASE" bench train --steps "$n" --case "$c" | sed "s/^/$r /" | tee -a "$tmp/base.txt"; fi
    if [ $((r % 2)) = 1 ]; then run_torch; fi
  done
  p=$(probe_peak)
  probes="$probes $p"
  peak=$(awk -v a="$peak" -v b="$p" 'BEGIN { print (b > a ? b : a) }')
done
touch "$tmp/base.txt"
echo
echo "torch $("$py" -c 'import torch; print(torch.__version__)'); f32 FMA peak $peak GFLOP/s; load average before" \
  "$load_before, after $(cut -d' ' -f1-3 /proc/loadavg); $busy cores busy in the second before; $rounds rounds of" \
  "$steps steps (attn2) and $((steps * meta_scale)) (meta), PyTorch first in even rounds (medians; ratios per round);" \
  "FMA probes (GFLOP/s, before round 1 and after each): $probes"
printf '%-22s %12s %12s %12s %7s %12s %12s %8s  %s\n' case "icl steps/s" "base st/s" "torch st/s" ratio "icl loss" \
  "torch loss" "of peak" "ratio by round"
awk -v peak="$peak" '
  function median(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
                                     return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  / steps\/s / { k = FILENAME == ARGV[1] ? "i" : FILENAME == ARGV[2] ? "b" : "t"; v[k, $2, $1] = $5; seen[$2] = 1
                 if ($1 > R) R = $1; if (k == "i") { g[$2, $1] = $9; li[$2] = $NF } if (k == "t") lt[$2] = $NF }
  END { split("attn2-d256-ctx256-b32 meta-d128-h1-T9-b128", cs, " ")
        for (ci = 1; ci <= 2; ci++) { c = cs[ci]; if (!(c in seen)) continue
          ni = nb = nt = nr = ng = 0; byr = ""
          for (r = 1; r <= R; r++) {
            if (("i", c, r) in v) { si[++ni] = v["i", c, r]; sg[++ng] = g[c, r] }
            if (("b", c, r) in v) sb[++nb] = v["b", c, r]
            if (("t", c, r) in v) st[++nt] = v["t", c, r]
            if ((("i", c, r) in v) && (("t", c, r) in v)) { rr[++nr] = v["i", c, r] / v["t", c, r]; byr = byr sprintf(" %.2f", rr[nr]) }
          }
          printf "%-22s %12.2f %12s %12.2f %6.2fx %12s %12s %7.0f%%  %s\n", c, median(si, ni),
            nb ? sprintf("%.2f", median(sb, nb)) : "-", median(st, nt), median(rr, nr), li[c], lt[c], 100 * median(sg, ng) / peak, byr } }' \
  "$tmp/icl.txt" "$tmp/base.txt" "$tmp/torch.txt"
