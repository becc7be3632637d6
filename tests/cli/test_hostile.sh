#!/usr/bin/env bash
# Hostile CLI input (issue 16): FIFOs and directories as files, lost output (/dev/full), NaN weights, out-of-range
# options, stray arguments, the context limit of icl run, escape sequences and invalid UTF-8 in model names,
# ICL_THREADS. Each must end in a clean error (exit 2, one message naming the thing), never a hang, a signal or
# exit 0 with lost output. Env: ICL (the icl binary), ICL_TINY_MODEL (tests/tools/tiny_model.c).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ICL=${ICL:?set ICL to the icl binary}
TINY=${ICL_TINY_MODEL:?set ICL_TINY_MODEL to the icl_tiny_model tool}
run() { # run ARGS...: rc, stdout in $TMP/out, stderr in $TMP/err (10 s at most: a hang fails)
  timeout 10 "$ICL" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
}
err_has() { grep -q -- "$1" "$TMP/err"; }
expect2() { # expect2 DESCRIPTION PATTERN: exit 2 and the message
  check "$1: exit 2 (got $rc)" [ "$rc" -eq 2 ]
  check "$1: message '$2' (got: $(head -c 300 "$TMP/err"))" err_has "$2"
}

"$TINY" "$TMP/tiny.gguf" && "$TINY" "$TMP/nan.gguf" --nan blk.0.attn_norm.weight &&
  "$TINY" "$TMP/esc.gguf" --name $'\e[31mEVIL\xff\xfe' || { echo "cannot write the tiny models"; exit 1; }
m="$TMP/tiny.gguf"
yes "the cat sat on the mat and the dog ate the hat" | head -40 >"$TMP/text.txt"
mkfifo "$TMP/fifo"

# ---- 4: a FIFO (or a directory) as a file: refused at once, never a hang ----
run info "$TMP/fifo"; expect2 "info FIFO" "not a regular file (a FIFO)"
run run -m "$TMP/fifo" -p hi; expect2 "run FIFO" "not a regular file"
run tokenize "$TMP/fifo" hi; expect2 "tokenize FIFO model" "not a regular file"
run tokenize "$m" -f "$TMP/fifo"; expect2 "tokenize -f FIFO" "not a regular file"
run perplexity -m "$m" -f "$TMP/fifo"; expect2 "perplexity -f FIFO" "not a regular file"
run perplexity -m "$m" -f "$TMP"; expect2 "perplexity -f DIR (12)" "not a regular file (a directory)"
run script "$TMP/fifo"; check "script FIFO: exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "script FIFO: message" err_has "not a regular file"
printf 'local m, e = icl.load("%s")\nassert(m == nil and e:find("not a regular file"), e)\n' "$TMP/fifo" >"$TMP/load.lua"
run script "$TMP/load.lua"; check "icl.load FIFO: nil + message, no hang (rc $rc: $(cat "$TMP/err"))" [ "$rc" -eq 0 ]

# ---- 5: NaN in the weights: an error naming the run and position; info --check names the tensor ----
run run -m "$TMP/nan.gguf" -p "hello" -n 3 --backend cpu; expect2 "run NaN weights" "logits at position"
run perplexity -m "$TMP/nan.gguf" -f "$TMP/text.txt" --ctx 32 --max-windows 1 --backend cpu
expect2 "perplexity NaN weights" "are NaN"
check "perplexity NaN weights: no 'perplexity nan' line" [ ! -s "$TMP/out" ]
run info --check "$TMP/nan.gguf"; expect2 "info --check NaN" "1 of 20 tensors hold NaN or Inf"
check "info --check names the tensor" grep -q "tensor 'blk.0.attn_norm.weight' (F32) holds 1 non-finite" "$TMP/out"
run info --check "$m"
check "info --check clean model: exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "info --check clean model: all finite" grep -q "all 20 tensors hold finite values" "$TMP/out"

# ---- 6: option ranges ----
for v in nan -5 7 inf; do run run -m "$m" -p hi --top-p "$v"; expect2 "--top-p $v" "expected a number in \[0, 1\]"; done
for v in nan -1 inf; do run run -m "$m" -p hi --temp "$v"; expect2 "--temp $v" "expected a number in \[0, 100\]"; done

# ---- 12: a stray positional argument is named as such, not as "needs a value" ----
run run -m "$m" -p hi stray; expect2 "stray argument" "unexpected argument 'stray'"

# ---- 7: the context limit and the stop reason; the generated count is exact ----
run run -m "$m" -p "hello world" -n 100 --ctx 16 --temp 0 --stats --backend cpu
check "context full: exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "context full: says why" err_has "the context of 16 tokens is full (raise it with --ctx)"
check "context full: 11 prompt + 5 generated = 16" err_has "stopped after 5 tokens"
check "context full: --stats counts 5" err_has "generation: 5 tokens"
run run -m "$m" -p "hello" -n 3 --temp 0 --stats --backend cpu
check "-n limit: stop reason" err_has "stopped: the -n limit"
check "-n limit: 3 generated" err_has "generation: 3 tokens"

# ---- 8: output lost to a full disk is an error with a message, for every command ----
full() { # full DESCRIPTION ARGS...
  local what=$1
  shift
  timeout 20 "$ICL" "$@" >/dev/full 2>"$TMP/err"
  rc=$?
  expect2 "$what > /dev/full" "cannot write the output"
}
printf 'print("hello")\n' >"$TMP/p.lua"
full "perplexity" perplexity -m "$m" -f "$TMP/text.txt" --ctx 32 --max-windows 1 --backend cpu
full "run" run -m "$m" -p hi -n 3 --backend cpu
full "info" info "$m"
full "script print" script "$TMP/p.lua"
full "tokenize" tokenize "$m" hello

# ---- 14: names from the file reach the terminal without escape sequences; --json is valid UTF-8 ----
run info "$TMP/esc.gguf"
check "info: exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "info: no ESC byte in the output" bash -c "! grep -q $'\e' '$TMP/out'"
check "info: the name shown with the escape neutralised" grep -q "^name: .*?\[31mEVIL" "$TMP/out"
run info --json "$TMP/esc.gguf"
check "info --json: valid UTF-8" iconv -f UTF-8 -t UTF-8 "$TMP/out" -o /dev/null
printf 'local m = assert(icl.load("%s", {backend = "cpu"}))\nio.write(tostring(m), "\\n", m.name, "\\n")\n' \
  "$TMP/esc.gguf" >"$TMP/name.lua"
run script "$TMP/name.lua"
check "tostring(m): no ESC byte" bash -c "! grep -q $'\e' '$TMP/out'"
check "tostring(m): valid UTF-8" iconv -f UTF-8 -t UTF-8 "$TMP/out" -o /dev/null

# ---- 13: ICL_THREADS must be a thread count ----
for v in 0 -3 abc; do
  ICL_THREADS=$v timeout 10 "$ICL" run -m "$m" -p hi -n 2 --backend cpu >"$TMP/out" 2>"$TMP/err"
  rc=$?
  expect2 "ICL_THREADS=$v" "ICL_THREADS='$v': expected an integer in 1..256"
done

finish
