#!/usr/bin/env bash
# The experiments under hostile input (issue 44), none needs a model file:
# - no file of experiments/ or lua/icl/ builds a shell command (os.execute, io.popen);
# - the three training experiments (train_induction, induction_phase, meta_learning), in tiny sizes, with an --out
#   holding a quote, spaces and "$(touch ...)": nothing runs, an unrelated folder named inside the quote survives,
#   the outputs land in the hostile folder; meta_learning --analyze of such a folder fails cleanly;
# - numeric flags out of range (0, negative, 2^32 + 3, 1e999) fail up front naming the flag, the value and the range;
# - an unwritable --out fails before any training, and a summary.json that cannot be written is an error (exit != 0).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ICL_SOURCE_DIR:-.}" || exit 1
ICL=${ICL:-build/icl}
export ICL_PROGRESS=
SRC=$(pwd)
case $ICL in /*) ;; *) ICL=$SRC/$ICL ;; esac # the runs below start in another folder
files() { local f; for f in "$@"; do [ -s "$f" ] || return 1; done; } # every file exists and is not empty
failed_with() { [ "$1" -ne 0 ] && grep -qF -- "$2" "$3"; }            # rc text log: a non-zero exit saying text

# ---- no shell commands built from paths -----------------------------------------------------------------------
shell_calls=$(grep -nE 'os\.execute|io\.popen' experiments/*.lua lua/icl/*.lua)
check "no os.execute or io.popen in experiments/ or lua/icl/ (found: $shell_calls)" [ -z "$shell_calls" ]

# ---- hostile --out ------------------------------------------------------------------------------------------
mkdir -p "$TMP/victim" && echo keep >"$TMP/victim/file"
# a quote closes the old commands' quoting: rm -rf '<out>' would also have removed $TMP/victim
hostile="$TMP/a' '$TMP/victim' 'b \$(touch $TMP/pwned) \`touch $TMP/pwned2\`"
work="$TMP/work"
mkdir -p "$work"
nothing_ran() { [ ! -e "$TMP/pwned" ] && [ ! -e "$TMP/pwned2" ] && [ ! -e "$work/pwned" ]; }
survived() { # name: nothing ran, the victim survived
  check "$1: no command ran" nothing_ran
  check "$1: the unrelated folder survived" [ -f "$TMP/victim/file" ]
}
run_in() { # log name args...: runs icl script in $work (so a stray relative file would land there)
  local log=$1
  shift
  (cd "$work" && "$ICL" script "$SRC/experiments/$1.lua" "${@:2}") >"$TMP/$log.log" 2>&1
}

run_in ti train_induction --out "$hostile/ti" --steps 20 --heads 2 --d-model 16 --vocab 16 --ctx 16 --seg-min 2 \
  --seg-max 4 --batch 4
rc=$?
check "train_induction with a hostile --out exits 0 (log: $(tail -3 "$TMP/ti.log"))" [ "$rc" -eq 0 ]
check "train_induction wrote summary.json and the figures there" \
  files "$hostile/ti/summary.json" "$hostile/ti/loss.png" "$hostile/ti/induction.svg"
survived train_induction

run_in ip induction_phase --quick --out "$hostile/ip" --models 1L --steps 20 --every 10 --probe 10 --test-seqs 4 \
  --ptl-seqs 2 --score-seqs 1
rc=$?
check "induction_phase with a hostile --out exits 0 (log: $(tail -3 "$TMP/ip.log"))" [ "$rc" -eq 0 ]
check "induction_phase wrote its checkpoints there" [ -s "$hostile/ip/ckpt-1L/step-0000020.gguf" ]
# a second run replaces the checkpoint folder (the removal that was rm -rf '<dir>')
touch "$hostile/ip/ckpt-1L/stale.txt"
run_in ip2 induction_phase --quick --out "$hostile/ip" --models 1L --steps 20 --every 10 --probe 10 --test-seqs 4 \
  --ptl-seqs 2 --score-seqs 1
check "induction_phase again: the old checkpoint folder was replaced" [ ! -e "$hostile/ip/ckpt-1L/stale.txt" ]
survived induction_phase

run_in ml meta_learning --quick --out "$hostile/ml" --steps 20 --K 4 --eval_n 16 --acc_every 10 --metric_every 10
rc=$?
check "meta_learning with a hostile --out exits 0 (log: $(tail -3 "$TMP/ml.log"))" [ "$rc" -eq 0 ]
check "meta_learning wrote summary.json and final.gguf there" files "$hostile/ml/summary.json" "$hostile/ml/final.gguf"
mkdir -p "$hostile/empty"
run_in mla meta_learning --quick --analyze "$hostile/empty" --out "$hostile/mla"
rc=$?
check "meta_learning --analyze of a hostile folder without checkpoints fails cleanly" \
  failed_with "$rc" "no step-*.gguf there" "$TMP/mla.log"
survived meta_learning

# ---- numeric flags out of range: refused up front, naming the flag, the value and the range --------------------
refused() { # description expected-text experiment args...
  local what=$1 want=$2
  shift 2
  "$ICL" script "experiments/$1.lua" --out "$TMP/r" "${@:2}" >"$TMP/r.log" 2>&1
  local rc=$?
  check "$what is refused (exit $rc; $(head -c 300 "$TMP/r.log"))" failed_with "$rc" "$want" "$TMP/r.log"
}
refused "induction_phase --steps 0" "--steps 0: expected an integer in 1..1073741824" induction_phase --steps 0
refused "induction_phase --probe 0" "--probe 0: expected an integer in 1.." induction_phase --probe 0
refused "induction_phase --every 0" "--every 0: expected an integer in 1.." induction_phase --every 0
refused "induction_phase --score-seqs 0" "--score-seqs 0: expected an integer in 1.." induction_phase --score-seqs 0
refused "induction_phase --every 15 (not a multiple of --probe)" "--every 15: must be a multiple of --probe 10" \
  induction_phase --every 15
refused "induction_phase --warmup -2" "--warmup -2: expected an integer in -1.." induction_phase --warmup -2
refused "induction_phase --warmup 7000 (steps 6000)" "--warmup 7000: must be at most --steps 6000" induction_phase --warmup 7000
refused "induction_phase --lr 0" "--lr 0: expected a number in (0, 10]" induction_phase --lr 0
refused "meta_learning --eval_n 0" "--eval-n 0: expected an integer in 16.." meta_learning --eval_n 0
refused "meta_learning --eval_n 40" "--eval-n 40: must be a multiple of 16" meta_learning --eval_n 40
refused "meta_learning --steps -1" "--steps -1: expected an integer in 1.." meta_learning --steps -1
refused "train_induction --steps 2^32+3" "--steps 4294967299: expected an integer in 1..1073741824" \
  train_induction --steps 4294967299
refused "train_induction --lr 1e999" "--lr inf: expected a number in (0, 10]" train_induction --lr 1e999
refused "train_induction --lr -0.1" "--lr -0.1: expected a number in (0, 10]" train_induction --lr -0.1
refused "train_induction --seed 2^40" "--seed 1099511627776: expected an integer in 0..2147483647" \
  train_induction --seed 1099511627776
refused "train_induction --seg-max 40 (ctx 64)" "--seg-max 40: must be at most --ctx / 2 = 32" train_induction --seg-max 40
refused "park_grid --walks 0" "--walks 0: expected an integer in 1..65536" park_grid --walks 0
refused "park_grid --length 2.5" "--length 2.5: expected an integer" park_grid --length 2.5
refused "neighbor_mixing --steps 0" "--steps 0: expected an integer in 1.." neighbor_mixing --steps 0
refused "icl_circuit --n 0" "--n 0: expected an integer in 1.." icl_circuit --n 0

# ---- output folders checked before any work; a failed summary write is an error ----------------------------
for e in train_induction meta_learning; do
  "$ICL" script "experiments/$e.lua" --quick --out /proc/icl-none >"$TMP/$e.ro" 2>&1
  rc=$?
  check "$e: an unwritable --out fails before training" failed_with "$rc" "out /proc/icl-none: cannot write there" "$TMP/$e.ro"
  check "$e: nothing trained" bash -c "! grep -q 'trained\|phase 1' '$TMP/$e.ro'"
done
"$ICL" script experiments/meta_learning.lua --quick --sweep --sweep_dir /proc/icl-none --out "$TMP/mls" >"$TMP/mls.log" 2>&1
check "meta_learning: an unwritable --sweep-dir fails before training" \
  grep -q "sweep-dir /proc/icl-none: cannot write there" "$TMP/mls.log"
mkdir -p "$TMP/ti2/summary.json" # a folder where the summary goes: the write fails after the run
"$ICL" script experiments/train_induction.lua --out "$TMP/ti2" --steps 5 --heads 2 --d-model 16 --vocab 16 --ctx 16 \
  --seg-min 2 --seg-max 4 --batch 4 >"$TMP/ti2.log" 2>&1
rc=$?
check "train_induction: summary.json that cannot be written exits non-zero (exit $rc)" \
  failed_with "$rc" "summary.json" "$TMP/ti2.log"
finish
