#!/usr/bin/env bash
# The local executor's speed-up (issue 39): the same 6 --quick tasks (park_grid, graph grid and ring x 3 seeds) run
# by icl sweep --run local one after the other (-j 1: each task with all the threads, as a plain loop of icl script
# would run them; and each with ICL_THREADS=1) and two at a time (-j 2, the threads divided). Prints each run's wall
# and CPU seconds (user + sys: wall x CPUs bounds what any executor can gain), the ratios and the load average
# before and after; run it on an idle machine.
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

# run NAME J [ENV...]: "wall cpu" seconds of the 6 tasks at J at a time, in a fresh folder
run() {
  local name=$1 j=$2
  shift 2
  local TIMEFORMAT='%R %U %S'
  { time env ICL_PROGRESS= "$@" "$ICL" sweep "$EXP" "${GRID[@]}" --out "$TMP/$name" --run local -j "$j" -- --quick \
      >/dev/null 2>"$TMP/$name.err"; } 2>"$TMP/$name.time" || { cat "$TMP/$name.err" >&2; exit 1; }
  awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' "$TMP/$name.time"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
read -r s_wall s_cpu < <(run serial 1)
read -r s1_wall s1_cpu < <(run serial1 1 ICL_THREADS=1)
read -r p_wall p_cpu < <(run parallel 2)
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
echo "6 tasks of $EXP --quick (wall s, CPU s):"
echo "  one after the other, all threads each (-j 1):  $s_wall  $s_cpu"
echo "  one after the other, ICL_THREADS=1:            $s1_wall  $s1_cpu"
echo "  two at a time, threads divided (-j 2):         $p_wall  $p_cpu"
awk -v a="$s_wall" -v b="$s1_wall" -v c="$p_wall" -v cpu="$s_cpu" -v n="$(nproc)" 'BEGIN {
  printf "speed-up of -j 2: %.2fx over -j 1, %.2fx over ICL_THREADS=1 one after the other\n", a / c, b / c
  printf "(-j 1 already keeps %.1f of %d CPUs busy, part of it in its thread pool waiting for work)\n", cpu / a, n
}'
