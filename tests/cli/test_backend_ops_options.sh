#!/usr/bin/env bash
# The op table's narrowing options that device-check.sh --quick uses (tests/ops/test_backend_ops.c):
# --types keeps matmul and get_rows to the listed weight types and leaves other ops' types alone, an unknown
# or non-weight type exits 2; --own-family opens one Vulkan target, the family of the device's type (on a
# machine without a Vulkan device that check is reported as not run, never as passed).
# Env: ICL_BUILD_DIR (the build tree). Prints "N passed, N failed".
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OPS=${ICL_BUILD_DIR:?set ICL_BUILD_DIR to the build tree}/test_backend_ops
ICL=${ICL:-$ICL_BUILD_DIR/icl}

# the weight types of the verbose lines' case names ("  get_rows Q4_K tiny K=256 ..."), sorted, unique
types_run() { awk '/^  / && $1 == "'"$1"'" { print $2 }' "$2" | sort -u | tr '\n' ' '; }

"$OPS" --backend cpu/generic --quick --op get_rows --types q4_k,F16 --verbose >"$TMP/rows" 2>&1
check "get_rows --types q4_k,F16 exits 0: $(tail -c 300 "$TMP/rows")" [ $? -eq 0 ]
check "get_rows ran F16 and Q4_K only: $(types_run get_rows "$TMP/rows")" [ "$(types_run get_rows "$TMP/rows")" = "F16 Q4_K " ]

"$OPS" --backend cpu/generic --quick --op matmul --types q8_0 --verbose >"$TMP/mm" 2>&1
check "matmul --types q8_0 exits 0: $(tail -c 300 "$TMP/mm")" [ $? -eq 0 ]
check "matmul ran Q8_0 only: $(types_run matmul "$TMP/mm")" [ "$(types_run matmul "$TMP/mm")" = "Q8_0 " ]
check "the Q8_0-only model entry ran" grep -q '^matmul      entry  3: *[1-9][0-9]* runs' "$TMP/mm"
check "an entry without Q8_0 says so" grep -q '^matmul      entry  1: none of its types in --types, not run' "$TMP/mm"

"$OPS" --backend cpu/generic --quick --op convert --types q4_k --verbose >"$TMP/conv" 2>&1
check "convert ignores --types (its types are not weights): $(types_run convert "$TMP/conv")" \
  [ "$(types_run convert "$TMP/conv")" = "F16 F32 " ]

"$OPS" --types q4_z >/dev/null 2>"$TMP/err"
check "--types q4_z exits 2" [ $? -eq 2 ]
check "the message names it" grep -q "'q4_z' is not a weight type" "$TMP/err"

# --own-family: one Vulkan target, cpu-shaped on a CPU device, gpu-shaped on a GPU
if "$ICL" devices >"$TMP/dev" 2>&1 && grep -q '^vulkan device:' "$TMP/dev"; then
  type=$(awk '$1 == "type" { print $2; exit }' "$TMP/dev")
  want=gpu
  [ "$type" = cpu ] && want=cpu
  ICL_VALIDATION=1 "$OPS" --backend vulkan --own-family --quick --op fill2d >"$TMP/own" 2>&1
  check "--own-family fill2d exits 0: $(tail -c 300 "$TMP/own")" [ $? -eq 0 ]
  check "one Vulkan target" [ "$(grep -c '^target vulkan/' "$TMP/own")" -eq 1 ]
  check "the $want-shaped family of a $type device" grep -q "^target vulkan/$want-shaped" "$TMP/own"
else
  echo "no Vulkan device: --own-family not checked here"
fi
finish
