#!/usr/bin/env bash
# icl sweep (issue 39) on the tiny experiment tests/cli/sweep_experiment.lua and the tiny model:
# - hostile input refused before anything is written: an unknown experiment, --out a file, a grid value the
#   experiment rejects (--check-args), a fixed flag the sweep sets, bad --grid and --seeds, another sweep's folder;
# - the local executor: tasks.tsv in stable order, every task done once, ICL_THREADS divided, a rerun skips done
#   tasks, the lock refuses a second sweep on the folder;
# - merge: mean, standard error and count per condition, recomputed here from the summaries; merged.csv's rows;
#   failed tasks named, exit 1; resume runs exactly the failed ones; Ctrl-C stops cleanly and resume finishes;
# - --run slurm against stub sbatch/scontrol/squeue: the arrays split at MaxArraySize, the afterany merge job, the
#   script's #SBATCH lines; sbatch missing and sbatch failing (Slurm down) give clear errors.
# Env: ICL, ICL_TINY_MODEL, ICL_SOURCE_DIR.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ICL=${ICL:?set ICL to the icl binary}
TINY=${ICL_TINY_MODEL:?set ICL_TINY_MODEL to the icl_tiny_model tool}
SRC=${ICL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$SRC" || exit 1
EXP=tests/cli/sweep_experiment.lua
"$TINY" "$TMP/tiny.gguf" || { echo "cannot write the tiny model"; exit 1; }
export ICL_PROGRESS=
unset SLURM_CONF

# refused NAME WANT ARGS...: icl sweep ARGS exits 2 with WANT in its stderr
refused() {
  local name=$1 want=$2
  shift 2
  "$ICL" sweep "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  check "$name: exit 2 (got $rc)" [ "$rc" -eq 2 ]
  check "$name: says '$want'" grep -qF -- "$want" "$TMP/err" || sed 's/^/    /' "$TMP/err" >&2
}

# --- the dry run every task's flags go through: parse, check, exit 0 before any work
"$ICL" script $EXP --model "$TMP/tiny.gguf" --shape steep --check-args --out "$TMP/never" >"$TMP/out" 2>&1
check "--check-args: exit 0" [ $? -eq 0 ]
check "--check-args: says so" grep -qx "check-args: options accepted" "$TMP/out"
check "--check-args: no result written" [ ! -e "$TMP/never/summary.json" ]
# a script that loads no model stops at its first figure; the sweep's checks write nowhere near the sweep
"$ICL" script experiments/neighbor_mixing.lua --quick --check-args --out "$TMP/nm" >"$TMP/out" 2>&1
check "--check-args without a model: exit 0" [ $? -eq 0 ]
check "--check-args without a model: stopped at the first figure" [ -z "$(ls "$TMP/nm" 2>/dev/null)" ]
TMPDIR=$TMP "$ICL" sweep experiments/neighbor_mixing.lua --seeds 2 --out "$TMP/nms" -- --quick >"$TMP/out" 2>&1
check "sweep folder of a model-less experiment: exit 0" [ $? -eq 0 ]
check "its task folders empty after the checks" [ -z "$(find "$TMP/nms/tasks" -type f)" ]
check "the checks' scratch folder removed" [ -z "$(ls -d "$TMP"/icl-sweep-check.* 2>/dev/null)" ]
"$ICL" script $EXP --model "$TMP/tiny.gguf" --shape round --check-args --out "$TMP/never" >"$TMP/out" 2>&1
check "--check-args: a refused value exits 1" [ $? -eq 1 ]

# --- hostile input: nothing is written
refused "unknown experiment" "experiment experiments/nope.lua: no such file" experiments/nope.lua --out "$TMP/h1"
check "unknown experiment: no folder" [ ! -e "$TMP/h1" ]
touch "$TMP/afile"
refused "--out a file" "--out $TMP/afile: is a file" $EXP --seeds 2 --out "$TMP/afile" -- --model "$TMP/tiny.gguf"
refused "rejected grid value" "--shape round: expected flat or steep" \
  $EXP --grid shape=flat,round --seeds 2 --out "$TMP/h2" -- --model "$TMP/tiny.gguf"
check "rejected grid value: the task is named" grep -qF "task 0002 (--shape round --seed 1)" "$TMP/err"
check "rejected grid value: no Lua traceback" bash -c "! grep -q 'stack traceback' '$TMP/err'"
check "rejected grid value: no folder" [ ! -e "$TMP/h2" ]
refused "out of range grid value" "--n 0: expected an integer in 1..64" \
  $EXP --grid n=0 --out "$TMP/h3" -- --model "$TMP/tiny.gguf"
refused "unknown flag in the grid" "unknown option --colour" $EXP --grid colour=red --out "$TMP/h3" -- --model "$TMP/tiny.gguf"
refused "fixed --out" "fixed flag --out" $EXP --seeds 2 --out "$TMP/h3" -- --out x
refused "fixed --seed with --seeds" "fixed flag --seed" $EXP --seeds 2 --out "$TMP/h3" -- --seed 3
refused "grid without values" "--grid shape: expected NAME=V1,V2" $EXP --grid shape --out "$TMP/h3"
refused "empty grid value" "empty value" $EXP --grid shape=flat,,steep --out "$TMP/h3"
refused "bad --seeds" "--seeds 5..2" $EXP --seeds 5..2 --out "$TMP/h3"
refused "bad --run" "--run cloud" $EXP --run cloud --out "$TMP/h3"
check "no folder after the refusals" [ ! -e "$TMP/h3" ]
mkdir "$TMP/busy" && touch "$TMP/busy/x"
refused "a folder of other files" "holds other files and no sweep.json" $EXP --seeds 2 --out "$TMP/busy" -- --model "$TMP/tiny.gguf"

# --- the local executor: 2 conditions x 3 seeds, 2 at a time
S=$TMP/s1
run_sweep() { "$ICL" sweep $EXP --grid shape=flat,steep --seeds 3 --out "$S" "$@" -- --model "$TMP/tiny.gguf" --quick; }
ICL_THREADS=4 run_sweep --run local -j 2 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "local run: exit 0 (got $rc)" [ "$rc" -eq 0 ] || cat "$TMP/err" >&2
check "local run: ICL_THREADS 4 shared by 2" grep -q "2 at a time, ICL_THREADS=2 each" "$TMP/err"
check "local run: each task ran with ICL_THREADS=2" [ "$(cat "$S"/logs/*.log | grep -c '^== icl sweep task on .*, ICL_THREADS=2:')" -eq 6 ]
check "local run: progress for each task" [ "$(grep -c '^icl sweep: \[[1-6]/6\] task .* done' "$TMP/err")" -eq 6 ]
printf 'task\tshape\tseed\tout\n0000\tflat\t1\ttasks/0000\n0001\tflat\t2\ttasks/0001\n0002\tflat\t3\ttasks/0002\n0003\tsteep\t1\ttasks/0003\n0004\tsteep\t2\ttasks/0004\n0005\tsteep\t3\ttasks/0005\n' >"$TMP/want.tsv"
check "tasks.tsv: stable order" cmp -s "$S/tasks.tsv" "$TMP/want.tsv"
check "every task folder has its summary" [ "$(ls "$S"/tasks/*/summary.json | wc -l)" -eq 6 ]
check "no temporary folder left" [ -z "$(ls -d "$S"/tasks/*.tmp 2>/dev/null)" ]
check "task 0004 ran with --shape steep --seed 2" grep -q '"seed": 2' "$S/tasks/0004/summary.json"
check "runs.log: each task done once" [ "$(grep -c ' done ' "$S/runs.log")" -eq 6 ] && \
  [ "$(cut -d' ' -f1 "$S/runs.log" | sort -u | wc -l)" -eq 6 ]
check "sweep.sbatch written" grep -q "^#SBATCH --array=0-5$" "$S/sweep.sbatch"

# a rerun of the same command runs nothing; the runner itself skips a done task
run_sweep --run local -j 2 >"$TMP/out" 2>"$TMP/err"
check "rerun: exit 0" [ $? -eq 0 ]
check "rerun: 6 done before, 0 to run" grep -q "6 done before, 0 to run" "$TMP/err"
"$ICL" sweep task "$S" 1 2>/dev/null
check "runner: a done task is skipped" grep -qx "0001 skip" "$S/runs.log"
check "rerun: still one done line per task" [ "$(grep -c ' done ' "$S/runs.log")" -eq 6 ]
"$ICL" sweep $EXP --grid shape=flat --seeds 3 --out "$S" -- --model "$TMP/tiny.gguf" >"$TMP/out" 2>"$TMP/err"
check "another sweep in the folder: exit 2" [ $? -eq 2 ]
check "another sweep in the folder: named" grep -q "holds a different sweep" "$TMP/err"

# the lock: a second sweep on the folder while one holds it
if command -v flock >/dev/null; then
  flock "$S/.lock" sleep 3 &
  lockpid=$!
  sleep 0.5
  "$ICL" sweep resume "$S" >"$TMP/out" 2>"$TMP/err"
  check "locked folder: exit 1" [ $? -eq 1 ]
  check "locked folder: in use" grep -q "is in use by another icl sweep" "$TMP/err"
  wait $lockpid
fi

"$ICL" sweep status "$S" >"$TMP/out" 2>&1
check "status: exit 0 when all done" [ $? -eq 0 ]
check "status: 6 done" grep -q "6 tasks: 6 done, 0 running, 0 queued, 0 failed, 0 missing" "$TMP/out"
check "status: lists the done tasks" grep -qx "  done    0000-0005" "$TMP/out"

# --- merge: the statistics recomputed from the summaries
"$ICL" sweep merge "$S" >"$TMP/out" 2>"$TMP/err"
check "merge: exit 0" [ $? -eq 0 ]
python3 - "$S" >"$TMP/py" 2>&1 <<'PY'
import json, math, sys, csv
d = sys.argv[1]
m = json.load(open(d + "/merged.json"))
bad = []
def t(what, cond):
    if not cond: bad.append(what)
t("two conditions", [c["flags"] for c in m["conditions"]] == [{"shape": "flat"}, {"shape": "steep"}])
for c, shape, ids in ((m["conditions"][0], "flat", (0, 1, 2)), (m["conditions"][1], "steep", (3, 4, 5))):
    s = [json.load(open("%s/tasks/%04d/summary.json" % (d, i))) for i in ids]
    for key, vals in (("mean", [x["mean"] for x in s]), ("values[3]", [x["values"][3] for x in s])):
        mu = sum(vals) / 3
        se = math.sqrt(sum((v - mu) ** 2 for v in vals) / 2 / 3)
        f = c["fields"][key]
        t(shape + " " + key + " mean", abs(f["mean"] - mu) <= 1e-15 * max(1, abs(mu)))
        t(shape + " " + key + " se", abs(f["se"] - se) <= 1e-12 * max(1e-300, se))
        t(shape + " " + key + " n", f["n"] == 3)
    t(shape + " n", c["n"] == 3)
    t(shape + ": the seed is not averaged", "seed" not in c["fields"])
t("six tasks, all done", [x["status"] for x in m["tasks"]] == ["done"] * 6)
t("task 5 summary", m["tasks"][5]["summary"] == json.load(open(d + "/tasks/0005/summary.json")))
rows = list(csv.reader(open(d + "/merged.csv")))
t("csv header", rows[0][:3] == ["task", "shape", "seed"] and "mean" in rows[0] and "values[0]" in rows[0])
t("csv rows", [r[:3] for r in rows[1:]] == [["0000", "flat", "1"], ["0001", "flat", "2"], ["0002", "flat", "3"],
                                             ["0003", "steep", "1"], ["0004", "steep", "2"], ["0005", "steep", "3"]])
k = rows[0].index("mean")
t("csv values read back exactly", float(rows[4][k]) == json.load(open(d + "/tasks/0003/summary.json"))["mean"])
print("\n".join(bad) if bad else "OK")
PY
check "merge: statistics match a recomputation" grep -qx OK "$TMP/py" || sed 's/^/    /' "$TMP/py" >&2
png() { head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n' | grep -q '^89504e470d0a1a0a$'; }
check "merge: the declared figure as PNG" png "$S/figures/values.png"
check "merge: the declared figure as SVG" grep -q "<svg" "$S/figures/values.svg"
"$ICL" sweep merge "$S" --figure mean >"$TMP/out" 2>"$TMP/err"
check "merge --figure of a scalar: exit 1" [ $? -eq 1 ]
check "merge --figure of a scalar: said" grep -q "figure mean: the summaries hold no numeric array mean" "$TMP/err"
"$ICL" sweep merge "$S" --figure ../x >"$TMP/out" 2>"$TMP/err"
check "merge --figure with a path: exit 2" [ $? -eq 2 ]
cp "$S/merged.json" "$TMP/m1.json"
"$ICL" sweep merge "$S" >/dev/null 2>&1
check "merge: the same bytes twice" cmp -s "$S/merged.json" "$TMP/m1.json"

# --- failures: named by status and merge; resume runs exactly the failed ones
F=$TMP/s2
touch "$TMP/block"
"$ICL" sweep $EXP --grid n=3,5 --seeds 2 --out "$F" --run local -j 2 -- --model "$TMP/tiny.gguf" \
  --fail-if "$TMP/block" >"$TMP/out" 2>"$TMP/err"
check "failing tasks: exit 1" [ $? -eq 1 ]
check "failing tasks: progress says FAILED" [ "$(grep -c 'FAILED' "$TMP/err")" -eq 4 ]
"$ICL" sweep status "$F" >"$TMP/out" 2>&1
check "status: exit 1 with failures" [ $? -eq 1 ]
check "status: 4 failed" grep -q "4 tasks: 0 done, 0 running, 0 queued, 4 failed, 0 missing" "$TMP/out"
check "status: the log's last lines" grep -q "sweep_tiny: failing while" "$TMP/out"
"$ICL" sweep merge "$F" >"$TMP/out" 2>"$TMP/err"
check "merge of failed tasks: exit 1" [ $? -eq 1 ]
check "merge: names the failed task" grep -q "task 0003 (--n 5 --seed 2) is failed" "$TMP/err"
if command -v flock >/dev/null; then # a task whose lock is held: running; a second runner refuses it
  flock "$F/logs/0000.lock" sleep 4 &
  lockpid=$!
  sleep 0.5
  "$ICL" sweep status "$F" >"$TMP/out" 2>&1
  check "status: a held task lock is running" grep -q "4 tasks: 0 done, 1 running, 0 queued, 3 failed" "$TMP/out"
  "$ICL" sweep task "$F" 0 >"$TMP/out" 2>&1
  check "runner: refuses a running task" [ $? -eq 1 ]
  check "runner: says it is running elsewhere" grep -q "task 0000 is already running in another process" "$TMP/out"
  wait $lockpid
fi
rm "$TMP/block"
rm -r "$F/tasks/0002" # a task folder lost too: missing, made again by resume
"$ICL" sweep resume "$F" >"$TMP/out" 2>"$TMP/err"
check "resume: exit 0" [ $? -eq 0 ] || cat "$TMP/err" >&2
check "resume: runs the 4 tasks" grep -q "0 done before, 4 to run, 2 at a time" "$TMP/err"
check "resume: each done once" [ "$(grep -c ' done ' "$F/runs.log")" -eq 4 ]
rm -r "$F/tasks/0001"
"$ICL" sweep status "$F" >"$TMP/out" 2>&1
check "status: done tasks as runs" grep -qx "  done    0000 0002-0003" "$TMP/out"
check "status: the missing task" grep -q "^  missing 0001  --n 3 --seed 2" "$TMP/out"
"$ICL" sweep resume "$F" >/dev/null 2>&1
"$ICL" sweep merge "$F" >/dev/null 2>&1
check "merge after resume: exit 0" [ $? -eq 0 ]

# --- Ctrl-C: stops the running tasks, leaves no temporary folder in place, resume finishes
C=$TMP/s3
touch "$TMP/hold"
"$ICL" sweep $EXP --seeds 4 --out "$C" --run local -j 2 -- --model "$TMP/tiny.gguf" --hold "$TMP/hold" >"$TMP/out" 2>"$TMP/err" &
spid=$!
for _ in $(seq 100); do [ "$(cat "$C"/logs/*.state 2>/dev/null | grep -c running)" -ge 2 ] && break; sleep 0.1; done
t0=$SECONDS
kill -INT $spid
wait $spid
rc=$?
check "Ctrl-C: exit 130 (got $rc)" [ "$rc" -eq 130 ]
check "Ctrl-C: stopped within 10 s" [ $((SECONDS - t0)) -le 10 ]
check "Ctrl-C: says how to resume" grep -q "icl sweep resume" "$TMP/err"
check "Ctrl-C: no task done" [ -z "$(ls "$C"/tasks/*/summary.json 2>/dev/null)" ]
check "Ctrl-C: no runner left" [ -z "$(pgrep -f "sweep task $C" 2>/dev/null)" ]
"$ICL" sweep status "$C" >"$TMP/out" 2>&1
check "status after Ctrl-C: 2 failed, 2 missing" grep -q "4 tasks: 0 done, 0 running, 0 queued, 2 failed, 2 missing" "$TMP/out"
rm "$TMP/hold"
"$ICL" sweep resume "$C" -j 2 >"$TMP/out" 2>"$TMP/err"
check "resume after Ctrl-C: exit 0" [ $? -eq 0 ] || cat "$TMP/err" >&2
check "resume after Ctrl-C: all 4 done" [ "$(ls "$C"/tasks/*/summary.json | wc -l)" -eq 4 ]
check "resume after Ctrl-C: no temporary folder" [ -z "$(ls -d "$C"/tasks/*.tmp 2>/dev/null)" ]

# --- --run slurm against stubs: what is submitted
mkdir -p "$TMP/bin"
cat >"$TMP/bin/sbatch" <<EOF
#!/bin/bash
n=\$(( \$(cat "$TMP/jobid" 2>/dev/null || echo 100) + 1 )); echo \$n >"$TMP/jobid"
echo "\$*" >>"$TMP/sbatch.args"
echo \$n
EOF
printf '#!/bin/bash\necho "MaxArraySize            = 4"\n' >"$TMP/bin/scontrol"
printf '#!/bin/bash\nexit 0\n' >"$TMP/bin/squeue"
chmod +x "$TMP/bin/"*
R=$TMP/s4
PATH="$TMP/bin:$PATH" "$ICL" sweep $EXP --grid shape=flat,steep --seeds 3 --out "$R" --run slurm --partition gpu \
  --cpus-per-task 3 --max-parallel 2 --gres gpu:1 -- --model "$TMP/tiny.gguf" --quick >"$TMP/out" 2>"$TMP/err"
check "slurm (stub): exit 0" [ $? -eq 0 ] || cat "$TMP/err" >&2
printf '%s\n' "--parsable --array=0-3%2 $R/sweep.sbatch 0" "--parsable --array=0-1%2 $R/sweep.sbatch 4" \
  "--parsable --dependency=afterany:101:102 $R/merge.sbatch" >"$TMP/want.args"
check "slurm (stub): arrays split at MaxArraySize 4, merge afterany both" cmp -s "$TMP/sbatch.args" "$TMP/want.args" ||
  diff "$TMP/want.args" "$TMP/sbatch.args" >&2
check "slurm (stub): slurm.jobs" [ "$(cat "$R/slurm.jobs")" = "$(printf '101 0\n102 4')" ]
for l in "#SBATCH --partition=gpu" "#SBATCH --cpus-per-task=3" "#SBATCH --gres=gpu:1" "#SBATCH --array=0-5%2" \
  "#SBATCH --chdir=$SRC" "#SBATCH --output=$R/logs/slurm-%A_%a.out" 'export ICL_THREADS=${SLURM_CPUS_PER_TASK:-${SLURM_CPUS_ON_NODE:-1}}' \
  "exec $ICL sweep task $R \$(( \${1:-0} + SLURM_ARRAY_TASK_ID ))"; do
  check "sweep.sbatch: $l" grep -qxF -- "$l" "$R/sweep.sbatch"
done
check "sweep.sbatch: ICL_DEVICE on GPU nodes" grep -q "export ICL_DEVICE=" "$R/sweep.sbatch"
# the GPU choice, run as Slurm's environment would leave it: the first GPU of the job's numbering as gpu:N, a UUID
# as it is, ROCm's variable where CUDA's is absent, nothing on a node without GPUs, a user's ICL_DEVICE kept
sed -n '/^gpu=/,/^fi$/p' "$R/sweep.sbatch" >"$TMP/gpu_pick.sh"
pick() { env -i PATH="$PATH" "$@" bash -c ". '$TMP/gpu_pick.sh'; echo \"\${ICL_DEVICE:-unset}\""; }
check "gpu pick: CUDA_VISIBLE_DEVICES=2,3 -> gpu:2" [ "$(pick CUDA_VISIBLE_DEVICES=2,3)" = gpu:2 ]
check "gpu pick: a UUID passes" [ "$(pick CUDA_VISIBLE_DEVICES=GPU-8a1b2c3d-0000-1111-2222-333344445555)" = \
  GPU-8a1b2c3d-0000-1111-2222-333344445555 ]
check "gpu pick: ROCR_VISIBLE_DEVICES=1" [ "$(pick ROCR_VISIBLE_DEVICES=1)" = gpu:1 ]
check "gpu pick: no GPU variables -> unset" [ "$(pick SLURM_JOB_GPUS=3)" = unset ]
check "gpu pick: ICL_DEVICE kept" [ "$(pick CUDA_VISIBLE_DEVICES=0 ICL_DEVICE=H100)" = H100 ]
check "merge.sbatch: runs the merge" grep -qxF "exec $ICL sweep merge $R" "$R/merge.sbatch"
# the stub's array elements, run by hand as Slurm would: task = offset + SLURM_ARRAY_TASK_ID
for i in 0 1 2 3; do SLURM_ARRAY_TASK_ID=$i bash "$R/sweep.sbatch" 0 2>/dev/null; done
for i in 0 1; do SLURM_ARRAY_TASK_ID=$i bash "$R/sweep.sbatch" 4 2>/dev/null; done
check "sbatch script: all 6 tasks done by hand" [ "$(ls "$R"/tasks/*/summary.json | wc -l)" -eq 6 ]
"$ICL" sweep merge "$R" >/dev/null 2>&1
check "merge of the stub sweep: the local sweep's conditions" \
  python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(a['conditions']!=b['conditions'])" \
  "$S/merged.json" "$R/merged.json"
# resume with Slurm submits exactly the failed and missing: none here
: >"$TMP/sbatch.args"
PATH="$TMP/bin:$PATH" "$ICL" sweep resume "$R" >"$TMP/out" 2>"$TMP/err"
check "slurm resume of a done sweep: nothing submitted" [ ! -s "$TMP/sbatch.args" ]
rm -r "$R/tasks/0004"
PATH="$TMP/bin:$PATH" "$ICL" sweep resume "$R" >"$TMP/out" 2>"$TMP/err"
check "slurm resume: only task 4 (array 0 at offset 4)" grep -qx -- "--parsable --array=0%2 $R/sweep.sbatch 4" "$TMP/sbatch.args"

# sbatch missing, Slurm down
PATH=/usr/bin/nonexistent "$ICL" sweep $EXP --seeds 2 --out "$TMP/s5" --run slurm -- --model "$TMP/tiny.gguf" \
  >"$TMP/out" 2>"$TMP/err"
check "sbatch missing: exit 2" [ $? -eq 2 ]
check "sbatch missing: nothing written" [ ! -e "$TMP/s5" ]
check "sbatch missing: said" grep -q "sbatch not found in PATH" "$TMP/err"
printf '#!/bin/bash\necho "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)" >&2\nexit 1\n' >"$TMP/bin/sbatch"
PATH="$TMP/bin:$PATH" "$ICL" sweep $EXP --seeds 2 --out "$TMP/s6" --run slurm -- --model "$TMP/tiny.gguf" \
  >"$TMP/out" 2>"$TMP/err"
check "Slurm down: exit 1" [ $? -eq 1 ]
check "Slurm down: sbatch's words" grep -q "Unable to contact slurm controller" "$TMP/err"
check "Slurm down: what to do" grep -q "is Slurm up?" "$TMP/err"
finish
