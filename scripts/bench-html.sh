#!/usr/bin/env bash
# How fast icl.html's attention view shows its first screen in headless Chromium, and how large it is: a
# 1,400-token, 4-head view (Gemma 3's head count; the size of a park_grid walk), opened from file:// RUNS times.
# The patterns are synthetic, or with --model GGUF the real ones of every head of one layer of that model on a
# 1,400-word park_grid walk (BOS + 1,399 words: 4x4 grid, seed 7). The page stamps performance.now() on #icl-view
# when its first screen is drawn (data-render-ms: from navigation start, so parsing the 5 MB data block is
# included). Prints size and times.
# Usage: scripts/bench-html.sh [RUNS] [--model GGUF [--layer L]]   (after scripts/build.sh; needs Debian's chromium)
# (ICL=<binary> to time another build than build/icl)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5 model= layer=5
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=${2:?--model needs a GGUF file}; shift 2 ;;
    --layer) layer=${2:?--layer needs a layer number}; shift 2 ;;
    [0-9]*) runs=$1; shift ;;
    *) echo "bench-html: unknown argument '$1' (expected RUNS, --model GGUF, --layer L)" >&2; exit 2 ;;
  esac
done
[ -z "$model" ] || [ -f "$model" ] || { echo "bench-html: --model $model: no such file" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/make.lua" <<'LUA'
local n = 1400
-- softmax rows of pseudo-random scores: a realistic spread of values, not one colour
local scores = (icl.tensor.arange(4 * n * n):reshape(4, n, n) * 0.61803398875):exp():log() * 7.3
local p = (scores - (scores * (1 / 13)):reshape(4, n, n)):softmax(3)
local toks = {}
for i = 1, n do toks[i] = " w" .. i end
icl.html.attention{out = arg[1], tokens = toks, patterns = {["blocks.5.attn.hook_pattern"] = p}}
LUA
cat >"$tmp/real.lua" <<'LUA'
-- every head of one layer of a real model on one 1,400-token park_grid walk
local out, path, layer = arg[1], arg[2], math.tointeger(tonumber(arg[3]))
local m = icl.load(path, {n_ctx = 1424})
local g = icl.graph.grid(4, 4, {"apple", "bird", "car", "egg", "house", "milk", "plane", "opera",
                                "box", "sand", "sun", "mango", "rock", "math", "code", "phone"})
local seq = g:tokens(m, g:walk{length = 1399, start = 1, seed = 7}, {bos = true})
local nm = ("blocks.%d.attn.hook_pattern"):format(layer)
local r = assert(m:run(seq, {logits = "none", capture = {nm}}))
local toks = {}
for i, id in ipairs(seq) do toks[i] = m:token_text(id) end
icl.html.attention{out = out, tokens = toks, patterns = {[nm] = r[nm]},
                   title = ("%s, layer %d, one park_grid walk"):format(path:match("[^/]*$"), layer)}
LUA
if [ -n "$model" ]; then
  "${ICL:-build/icl}" script "$tmp/real.lua" "$tmp/view.html" "$model" "$layer"
  what="$(basename "$model") layer $layer"
else
  "${ICL:-build/icl}" script "$tmp/make.lua" "$tmp/view.html"
  what="synthetic"
fi
echo "bench-html: $what: 1400 tokens: $(stat -c %s "$tmp/view.html") bytes; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do
  ms=$(chromium --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" --dump-dom "file://$tmp/view.html" \
       2>/dev/null | grep -o 'data-render-ms="[0-9]*"' | grep -o '[0-9]*')
  echo "run $i: first screen at ${ms:-?} ms"
done
