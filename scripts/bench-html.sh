#!/usr/bin/env bash
# How fast icl.html's attention view shows its first screen in headless Chromium, and how large it is: a
# 1,400-token, 4-head view (Gemma 3's head count; the size of a park_grid walk) of synthetic patterns, opened
# from file:// RUNS times. The page stamps performance.now() on #icl-view when its first screen is drawn
# (data-render-ms: from navigation start, so parsing the 5 MB data block is included). Prints size and times.
# Usage: scripts/bench-html.sh [RUNS]   (after scripts/build.sh; needs Debian's chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
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
build/icl script "$tmp/make.lua" "$tmp/view.html"
echo "bench-html: 1400 tokens x 4 heads: $(stat -c %s "$tmp/view.html") bytes; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$runs"); do
  ms=$(chromium --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" --dump-dom "file://$tmp/view.html" \
       2>/dev/null | grep -o 'data-render-ms="[0-9]*"' | grep -o '[0-9]*')
  echo "run $i: first screen at ${ms:-?} ms"
done
