#!/usr/bin/env bash
# icl tokenize: every conformance string of tests/fixtures/tokenizer through the command line (-f FILE,
# --no-bos) against the expected ids, plus --pieces, --special, exit codes, and SmolLM2 when present.
# Env: ICL (the binary), ICL_SOURCE_DIR (the source tree). Prints "N passed, N failed".
set -u
ICL=${ICL:?set ICL to the icl binary}
SRC=${ICL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
VEC=$SRC/tests/fixtures/tokenizer
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
MARK=$'\n__ggml_vocab_test__\n'

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
expect() { # name want got
  if [[ "$2" == "$3" ]]; then ok; else bad "$1: want '$2', got '$3'"; fi
}

# All cases of one vocabulary: split the .inp on the marker, one .out line per string.
check_vocab() {
  local v=$1 content line want got i=0
  if [[ ! -f $VEC/$v || ! -f $VEC/$v.inp || ! -f $VEC/$v.out ]]; then
    bad "$v: conformance files missing in $VEC"
    return
  fi
  content=$(cat "$VEC/$v.inp"; echo x) # the x keeps trailing newlines
  content=${content%x}
  mapfile -t lines < "$VEC/$v.out"
  while [[ $content == *"$MARK"* ]]; do
    printf '%s' "${content%%"$MARK"*}" > "$TMP/case"
    content=${content#*"$MARK"}
    want=${lines[$i]# }
    got=$("$ICL" tokenize --no-bos "$VEC/$v" -f "$TMP/case")
    expect "$v case $i" "$want" "$got"
    i=$((i + 1))
  done
  expect "$v: number of cases" "${#lines[@]}" "$i"
  echo "$v: $i cases checked"
}

for v in ggml-vocab-gpt-2.gguf ggml-vocab-llama-spm.gguf ggml-vocab-phi-3.gguf; do check_vocab "$v"; done

GPT2=$VEC/ggml-vocab-gpt-2.gguf
SPM=$VEC/ggml-vocab-llama-spm.gguf
# text as an argument; BOS as the vocabulary says (llama-spm adds it, gpt-2 does not), or forced
expect "gpt-2 arg" "15496 995" "$("$ICL" tokenize "$GPT2" "Hello world")"
expect "spm default BOS" "1 15043 3186" "$("$ICL" tokenize "$SPM" "Hello world")"
expect "spm --no-bos" "15043 3186" "$("$ICL" tokenize --no-bos "$SPM" "Hello world")"
expect "gpt-2 --bos" "50256 15496" "$("$ICL" tokenize --bos "$GPT2" "Hello")"
# control tokens only with --special
expect "gpt-2 --special" "15496 50256" "$("$ICL" tokenize --special "$GPT2" "Hello<|endoftext|>")"
expect "gpt-2 no --special" "15496 27 91 437 1659 5239 91 29" "$("$ICL" tokenize "$GPT2" "Hello<|endoftext|>")"
# --pieces: id<TAB>decoded text, control bytes escaped; --raw: the stored piece
expect "pieces" $'29871\t \n12\t\\t\n15043\t Hello' "$("$ICL" tokenize --pieces --no-bos "$SPM" $'\t Hello')"
expect "raw pieces" $'18435\tĠHello' "$("$ICL" tokenize --raw "$GPT2" " Hello")"
expect "text after --" "12 20" "$("$ICL" tokenize "$GPT2" -- "-5")"
expect "stdin" "6738 14367 259" "$(printf 'from stdin' | "$ICL" tokenize "$GPT2" -f -)"

# bad input: exit 2 with one line on stderr
for args in "" "$GPT2" "/nonexistent.gguf x" "$VEC/ggml-vocab-gpt-2.gguf.inp x" "$GPT2 -f /nonexistent" "--bogus $GPT2 x" "$GPT2 a b"; do
  # shellcheck disable=SC2086
  "$ICL" tokenize $args > /dev/null 2> "$TMP/err"
  rc=$?
  expect "exit code for 'tokenize $args'" 2 "$rc"
  expect "one-line message for 'tokenize $args'" 1 "$(wc -l < "$TMP/err")"
done

# SmolLM2: one token per word of the park-grid vocabulary
SMOL=$(ls "$SRC"/models/SmolLM2-135M-Instruct*.gguf 2> /dev/null | head -n 1)
if [[ -n $SMOL ]]; then
  got=$("$ICL" tokenize "$SMOL" " apple bird car egg house milk plane opera box sand sun mango rock math code phone")
  expect "SmolLM2 one token per word" 16 "$(wc -w <<< "$got")"
else
  echo "SKIPPED: model not present (models/SmolLM2-135M-Instruct*.gguf; scripts/fetch-models.sh fetches it)"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
