#!/usr/bin/env bash
# icl testmodel: writes the SmolLM2-shaped model that icl info and icl bench model then read (272 tensors,
# 49152 tokens, 30 layers), the same seed gives the same file, bench model's --ceilings, and bad usage exits 2 with
# a message.
# Env: ICL (the icl binary). Prints "N passed, N failed".
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ICL=${ICL:?set ICL to the icl binary}

"$ICL" testmodel --like smollm2 -o "$TMP/a.gguf" --seed 3 >"$TMP/out" 2>&1
check "testmodel exits 0: $(head -c 300 "$TMP/out")" [ $? -eq 0 ]
"$ICL" info --json "$TMP/a.gguf" >"$TMP/info" 2>&1
check "272 tensors" grep -q '"n_tensors":[[:space:]]*272' "$TMP/info"
check "49152 tokens" grep -q '"vocab_size":[[:space:]]*49152' "$TMP/info"
check "30 layers" grep -q '"block_count":[[:space:]]*30' "$TMP/info"
"$ICL" testmodel --like smollm2 -o "$TMP/b.gguf" --seed 3 >/dev/null 2>&1
check "same seed, same bytes" cmp -s "$TMP/a.gguf" "$TMP/b.gguf"
"$ICL" bench model -m "$TMP/a.gguf" --backend cpu --tokens 16 --decode 4 --reps 1 >"$TMP/bench" 2>&1
check "bench model runs on it: $(tail -c 300 "$TMP/bench")" grep -q '^forward 16, all-position logits' "$TMP/bench"
# ceilings measured once elsewhere: the rows are fractions of the given figures
"$ICL" bench model -m "$TMP/a.gguf" --backend cpu --tokens 16 --decode 4 --reps 1 --ceilings 200,800,25 \
  >"$TMP/bench2" 2>&1
check "--ceilings: the given figures are used" \
  grep -q 'given): f32 FMA 200.0 GFLOP/s, int8 dot 800.0 GOP/s, read 25.00 GB/s' "$TMP/bench2"
# the decode row's fraction is its GB/s over the given 25 GB/s
check "--ceilings: decode's fraction is of the given bandwidth" awk '
  /^decode/ {d = 1; next}
  d && /roofline:/ {for (i = 1; i <= NF; i++) { if ($i == "GB/s" && !g) g = $(i - 1); if ($i == "=") p = $(i + 1) }
                    sub("%", "", p); exit !(g > 0 && (p - 100 * g / 25) ^ 2 < 0.01)}
  END {if (!g) exit 1}' "$TMP/bench2"
"$ICL" bench model -m "$TMP/a.gguf" --ceilings 1,2 2>"$TMP/err" >/dev/null
check "--ceilings with two numbers exits 2" [ $? -eq 2 ]
check "... and the message names the value" grep -q "'1,2'" "$TMP/err"
"$ICL" bench model -m "$TMP/a.gguf" --ceilings inf,800,25 2>/dev/null >/dev/null
check "--ceilings that is not finite exits 2" [ $? -eq 2 ]
"$ICL" testmodel --like llama70b -o "$TMP/c.gguf" 2>"$TMP/err"
check "unknown --like exits 2" [ $? -eq 2 ]
check "the message names it" grep -q "llama70b" "$TMP/err"
"$ICL" testmodel --like gemma3 2>/dev/null
check "missing -o exits 2" [ $? -eq 2 ]
finish
