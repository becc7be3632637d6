#!/usr/bin/env bash
# icl sweep --run slurm on a real single-node Slurm (scripts/slurm-local.sh: munged, slurmctld, slurmd on localhost,
# ports 16817-16818, state under $TMP), ctest label slurm (issue 39):
# 1. experiments/park_grid.lua --quick, --grid graph=grid,ring --seeds 3 (the tiny experiment when the SmolLM2 file
#    is absent): the merge job's merged.json and merged.csv are byte-identical to the local executor's (-j 2);
# 2. the fault test: the tiny experiment holds its tasks (--hold FILE); slurmd is killed while the array runs and one
#    running task is killed with its experiment (a lost node); slurmd restarts, the array drains, icl sweep resume
#    submits exactly the lost task; every task completes exactly once (runs.log) and the merge equals the local one;
# 3. Slurm down (slurmctld stopped): --run slurm fails with sbatch's own words and what to do.
# Skipped (77) unless run as root with Debian's slurmctld, slurmd, slurm-client and munge (scripts/setup.sh).
# Env: ICL, ICL_TINY_MODEL, ICL_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ICL=${ICL:?set ICL to the icl binary}
TINY=${ICL_TINY_MODEL:?set ICL_TINY_MODEL to the icl_tiny_model tool}
SRC=${ICL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$SRC" || exit 1
for p in munged slurmctld slurmd sbatch squeue; do
  command -v $p >/dev/null || { echo "skipped: $p not installed (scripts/setup.sh)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "skipped: the local Slurm's daemons run as root here"; exit 77; }
export ICL_SLURM_DIR=$TMP/slurm ICL_SLURM_PORT=16817 ICL_PROGRESS=
export SLURM_CONF=$ICL_SLURM_DIR/slurm.conf
trap 'scripts/slurm-local.sh stop; rm -rf "$TMP"' EXIT
scripts/slurm-local.sh start >/dev/null || { echo "FAIL: scripts/slurm-local.sh start"; exit 1; }
"$TINY" "$TMP/tiny.gguf" || { echo "cannot write the tiny model"; exit 1; }

# drain DIR SECONDS: waits until Slurm holds none of the sweep's jobs (slurm.jobs) nor its merge job
drain() {
  local i
  for i in $(seq $(($2 * 2))); do
    [ -z "$(squeue -h -o '%j' -n icl-sweep,icl-sweep-merge 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  echo "Slurm's queue did not drain in $2 s:" >&2
  squeue >&2
  return 1
}

# done_once DIR N: N tasks, each with exactly one "done" line in runs.log
done_once() {
  [ "$(grep -c ' done ' "$1/runs.log")" -eq "$2" ] && [ "$(grep ' done ' "$1/runs.log" | cut -d' ' -f1 | sort -u | wc -l)" -eq "$2" ]
}

# --- 1. the same sweep through both executors: the same merge, byte for byte
if [ -f models/SmolLM2-135M-Instruct-Q4_1.gguf ]; then
  SWEEP=(experiments/park_grid.lua --grid graph=grid,ring --seeds 3)
  FIXED=(--quick)
else
  echo "(SmolLM2 absent: the tiny experiment instead of park_grid)"
  SWEEP=(tests/cli/sweep_experiment.lua --grid shape=flat,steep --seeds 3)
  FIXED=(--model "$TMP/tiny.gguf" --quick)
fi
t0=$SECONDS
"$ICL" sweep "${SWEEP[@]}" --out "$TMP/local" --run local -j 2 -- "${FIXED[@]}" >"$TMP/out" 2>"$TMP/err"
check "local executor: exit 0" [ $? -eq 0 ] || cat "$TMP/err" >&2
"$ICL" sweep merge "$TMP/local" >/dev/null 2>"$TMP/err"
check "local merge: exit 0" [ $? -eq 0 ] || cat "$TMP/err" >&2
echo "local: $((SECONDS - t0)) s"
t0=$SECONDS
"$ICL" sweep "${SWEEP[@]}" --out "$TMP/slurm1" --run slurm --cpus-per-task 1 -- "${FIXED[@]}" >"$TMP/out" 2>"$TMP/err"
check "slurm: submitted" [ $? -eq 0 ] || cat "$TMP/err" >&2
check "slurm: one array and a merge job" grep -q "merge job [0-9]* runs after them (afterany)" "$TMP/err"
drain "$TMP/slurm1" 240
echo "slurm: $((SECONDS - t0)) s"
check "slurm: every task done once" done_once "$TMP/slurm1" 6
check "slurm: the merge job ran" grep -q "6 of 6 tasks" "$TMP/slurm1"/logs/merge-*.out
check "slurm: each task ran with ICL_THREADS from --cpus-per-task 1" \
  [ "$(cat "$TMP/slurm1"/logs/*.log | grep -c '^== icl sweep task on .*, ICL_THREADS=1:')" -eq 6 ]
check "merged.json: the same bytes as the local executor's" cmp "$TMP/local/merged.json" "$TMP/slurm1/merged.json"
check "merged.csv: the same bytes as the local executor's" cmp "$TMP/local/merged.csv" "$TMP/slurm1/merged.csv"
"$ICL" sweep status "$TMP/slurm1" >"$TMP/out" 2>&1
check "slurm: status all done" grep -q "6 tasks: 6 done, 0 running, 0 queued, 0 failed, 0 missing" "$TMP/out"

# --- 2. slurmd killed while the array runs, and one running task lost with it
TINYSW=(tests/cli/sweep_experiment.lua --grid shape=flat,steep --seeds 3)
TFIXED=(--model "$TMP/tiny.gguf" --quick --hold "$TMP/hold")
F=$TMP/fault
touch "$TMP/hold"
"$ICL" sweep "${TINYSW[@]}" --out "$F" --run slurm --cpus-per-task 1 -- "${TFIXED[@]}" >"$TMP/out" 2>"$TMP/err"
check "fault: submitted" [ $? -eq 0 ] || cat "$TMP/err" >&2
for _ in $(seq 120); do [ "$(cat "$F"/logs/*.state 2>/dev/null | grep -c '^running')" -ge 1 ] && break; sleep 0.5; done
"$ICL" sweep status "$F" >"$TMP/out" 2>&1
check "fault: status shows running and queued tasks" grep -Eq "[1-9] running, [1-9] queued" "$TMP/out" ||
  cat "$TMP/out" >&2
scripts/slurm-local.sh slurmd-kill
lost=$(grep -l '^running' "$F"/logs/*.state | head -1)
runner=$(cut -d' ' -f3 "$lost")
exp=$(pgrep -P "$runner")
kill -9 "$runner" $exp # the task's node is gone: its runner and its experiment
lost=$(basename "$lost" .state)
sleep 1
rm "$TMP/hold"
scripts/slurm-local.sh slurmd-start >/dev/null
check "fault: slurmd back" [ $? -eq 0 ]
drain "$F" 240
"$ICL" sweep status "$F" >"$TMP/out" 2>&1
check "fault: the lost task $lost shows failed" grep -q "^  failed  $lost " "$TMP/out" || cat "$TMP/out" >&2
check "fault: the others done" grep -q "6 tasks: 5 done" "$TMP/out"
"$ICL" sweep resume "$F" >"$TMP/out" 2>"$TMP/err"
check "fault: resume submits exactly 1 task" grep -q "^icl sweep: 1 tasks submitted" "$TMP/err" || cat "$TMP/err" >&2
drain "$F" 240
check "fault: every task done exactly once" done_once "$F" 6 || cat "$F/runs.log" >&2
check "fault: the resumed merge job ran" grep -q "6 of 6 tasks" "$F"/logs/merge-*.out
"$ICL" sweep "${TINYSW[@]}" --out "$TMP/flocal" --run local -j 2 -- "${TFIXED[@]}" >/dev/null 2>&1
"$ICL" sweep merge "$TMP/flocal" >/dev/null 2>&1
check "fault: merge identical to the local executor's" cmp "$TMP/flocal/merged.json" "$F/merged.json"

# --- 3. Slurm down
kill "$(cat "$ICL_SLURM_DIR/slurmctld.pid")"
sleep 1
"$ICL" sweep "${TINYSW[@]}" --out "$TMP/down" --run slurm -- --model "$TMP/tiny.gguf" --quick >"$TMP/out" 2>"$TMP/err"
check "Slurm down: exit 1" [ $? -eq 1 ]
check "Slurm down: sbatch's words" grep -q "Unable to contact slurm controller" "$TMP/err" || cat "$TMP/err" >&2
check "Slurm down: what to do" grep -q "is Slurm up?" "$TMP/err"
finish
