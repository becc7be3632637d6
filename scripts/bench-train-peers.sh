#!/usr/bin/env bash
# Training throughput of icl (icl bench train) and PyTorch CPU eager (scripts/bench_train_torch.py) on the same
# models, batches and data, one after the other on this machine, with the ratio icl / PyTorch in steps/s and
# both final losses (after the same steps; the inits differ, so they agree within noise, not exactly).
#   scripts/bench-train-peers.sh [STEPS (20)] [ICL binary (build/icl)]
# ICL_BASE=<another icl binary> adds its steps/s as a column (an old build timed in the same run).
# The last column is icl's GFLOP/s as a share of this machine's f32 FMA peak (icl bench cpu, same run).
# The peer is a current PyTorch from PyPI: $PYTHON if it imports torch >= 2, else the venv ICL_TORCH_VENV (default
# .cache/torch-venv, shared with scripts/bench-peers.sh --park), installed there the first time (about 5.6 GB: PyPI's
# Linux wheel pulls the CUDA libraries even for CPU use). Measure on a quiet machine: the load average before and
# after, and the cores other processes kept busy in the second before, are printed beside the table (a warning when
# that is over 0.1 core).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
icl=${2:-build/icl}
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
peak=$("$icl" bench cpu --quick | awk '/f32 FMA peak/ { print $4 }')
"$icl" bench train --steps "$steps" | tee "$tmp/icl.txt"
if [ -n "${ICL_BASE:-}" ]; then "$ICL_BASE" bench train --steps "$steps" | tee "$tmp/base.txt"; else : > "$tmp/base.txt"; fi
"$py" scripts/bench_train_torch.py "$steps" | tee "$tmp/torch.txt"
echo
echo "torch $("$py" -c 'import torch; print(torch.__version__)'); f32 FMA peak $peak GFLOP/s; load average before" \
  "$load_before, after $(cut -d' ' -f1-3 /proc/loadavg); $busy cores busy in the second before"
printf '%-22s %12s %12s %12s %7s %12s %12s %8s\n' case "icl steps/s" "base st/s" "torch st/s" ratio "icl loss" \
  "torch loss" "of peak"
awk -v peak="$peak" 'FILENAME == ARGV[1] && / steps\/s / { s[$1] = $4; l[$1] = $NF; g[$1] = $8; next }
     FILENAME == ARGV[2] && / steps\/s / { b[$1] = $4; next }
     FILENAME == ARGV[3] && / steps\/s / { printf "%-22s %12.2f %12s %12.2f %6.2fx %12s %12s %7.0f%%\n", $1, s[$1],
       ($1 in b) ? sprintf("%.2f", b[$1]) : "-", $4, s[$1] / $4, l[$1], $NF, 100 * g[$1] / peak }' \
  "$tmp/icl.txt" "$tmp/base.txt" "$tmp/torch.txt"
