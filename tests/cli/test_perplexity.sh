#!/usr/bin/env bash
# icl perplexity on GPL-3 against the llama.cpp references (tests/fixtures/<model>/perplexity.json, same windows):
# within 1% of llama.cpp on the shipped weights, within 0.1% of llama.cpp on f32 weights (its exact variant).
set -u
cd "${ICL_SOURCE_DIR:-.}"
ICL=${ICL:-build/icl}
pass=0 fail=0 ran=0
text=/usr/share/common-licenses/GPL-3
ref() { sed -n 's/^ *"perplexity": *\([0-9.]*\).*/\1/p' "$1" | head -1; }
check() { # model-name model-file
  local name=$1 file=$2
  if [ ! -r "$file" ] || [ ! -r "$text" ]; then
    echo "SKIPPED: $file or $text not present"
    return
  fi
  ran=1
  local out got shipped f32
  out=$("$ICL" perplexity -m "$file" -f "$text" 2>&1)
  got=$(printf '%s\n' "$out" | sed -n 's/^perplexity \([0-9.]*\) .*/\1/p')
  shipped=$(ref "tests/fixtures/$name/perplexity.json")
  f32=$(ref "tests/fixtures/$name/f32/perplexity.json")
  echo "$name: icl $got, llama.cpp $shipped (shipped weights), $f32 (f32 weights)  [$out]"
  if awk -v a="$got" -v b="$shipped" 'BEGIN{ exit !(a > 0 && (a-b)/b < 0.01 && (b-a)/b < 0.01) }'; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $name not within 1% of $shipped"; fi
  if awk -v a="$got" -v b="$f32" 'BEGIN{ exit !(a > 0 && (a-b)/b < 0.001 && (b-a)/b < 0.001) }'; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $name not within 0.1% of $f32"; fi
}
check smollm2 models/SmolLM2-135M-Instruct-Q4_1.gguf
check gemma3 models/gemma-3-270m-Q4_K_M.gguf
echo "$pass passed, $fail failed"
[ "$ran" = 1 ] || exit 77
[ "$fail" -eq 0 ]
