#!/usr/bin/env bash
# The local executor's speed-up (issue 39): the same 6 --quick tasks (park_grid, graph grid and ring x 3 seeds) run
# by icl sweep --run local -j 1 (one after the other, each with all the threads) and -j 2 (two at a time, the threads
# divided). Prints both wall times, their ratio and the load average before and after; run it on an idle machine.
#   scripts/bench-sweep.sh [ICL_BINARY] [EXPERIMENT]   (defaults: build/icl, experiments/park_grid.lua)
set -euo pipefail
cd "$(dirname "$0")/.."
ICL=${1:-build/icl}
EXP=${2:-experiments/park_grid.lua}
[ -x "$ICL" ] || { echo "bench-sweep: $ICL: not an executable (build first, or name the binary)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
GRID=(--grid graph=grid,ring --seeds 3)
[ "$EXP" = experiments/park_grid.lua ] || GRID=(--seeds 6)

# run J: wall seconds of the 6 tasks at J at a time, in a fresh folder
run() {
  local t0 t1
  t0=$(date +%s.%N)
  ICL_PROGRESS= "$ICL" sweep "$EXP" "${GRID[@]}" --out "$TMP/j$1" --run local -j "$1" -- --quick >/dev/null 2>"$TMP/j$1.err" ||
    { cat "$TMP/j$1.err" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
serial=$(run 1)
parallel=$(run 2)
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
printf '6 tasks of %s --quick: -j 1 %.1f s, -j 2 %.1f s, speed-up %.2fx\n' "$EXP" "$serial" "$parallel" \
  "$(awk -v a="$serial" -v b="$parallel" 'BEGIN { print a / b }')"
cmp -s "$TMP/j1/tasks.tsv" "$TMP/j2/tasks.tsv" || { echo "bench-sweep: the two sweeps differ" >&2; exit 1; }
