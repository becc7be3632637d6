#!/usr/bin/env bash
# icl.html in a real browser: each view (attention, head scores, token values) written by icl and opened from
# file:// in headless Chromium, whose page runs its own self-test (#selftest: hover, click, lock, read-outs, the
# heatmap's pixels) and writes PASS or FAIL into the DOM that --dump-dom returns; a screenshot with content; the
# size bound of a 1,400-token, 4-head view; deterministic bytes; no network reference; clear errors for bad
# input. Prints "N passed, N failed".
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ICL=${ICL:-build/icl}
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)

cat >"$TMP/views.lua" <<'LUA'
local T, dir, n = icl.tensor, arg[1], tonumber(arg[2])
local p = T.zeros(4, n, n)
for h = 1, 4 do
  for q = 1, n do
    for k = 1, q do p:set(h == 1 and 1 / q or h == 2 and (k == q - 1 and 1 or 0) or ((q * 7 + k * 3 + h) % 11) / 10, h, q, k) end
  end
end
p:set(0 / 0, 3, 2, 1)
local toks = {}
for i = 1, n do toks[i] = " w" .. i end
toks[3] = "</script><b>x"
icl.html.attention{out = dir .. "/attention.html", tokens = toks, title = "attention view",
                   patterns = {["blocks.3.attn.hook_pattern"] = p:slice(1, 1, 2), ["blocks.5.attn.hook_pattern"] = p:slice(1, 3, 4)}}
local s = T.zeros(3, 4)
s:set(0.5, 1, 2)
s:set(0 / 0, 2, 3)
icl.html.heads{out = dir .. "/heads.html", scores = {induction = s, previous = s * 2}, title = "head scores"}
local v = T.arange(n)
v:set(0 / 0, 2)
icl.html.tokens{out = dir .. "/tokens.html", tokens = toks, values = v, names = {"loss"}}
LUA

"$ICL" script "$TMP/views.lua" "$TMP" 60 2>"$TMP/err"
check "three views written ($(head -c 300 "$TMP/err"))" test -s "$TMP/attention.html" -a -s "$TMP/heads.html" -a -s "$TMP/tokens.html"
mkdir "$TMP/again"
"$ICL" script "$TMP/views.lua" "$TMP/again" 60 2>/dev/null
for v in attention heads tokens; do
  check "$v: deterministic bytes" cmp -s "$TMP/$v.html" "$TMP/again/$v.html"
  check "$v: no network reference" no_network "$TMP/$v.html"
done
check "attention: '</' in a token is escaped in the data block" grep -qF '"<\/script><b>x"' "$TMP/attention.html"
check "attention: exactly two script end tags" [ "$(grep -o '</script>' "$TMP/attention.html" | wc -l)" -eq 2 ]

# ---- bad input: an error naming the argument, and no file ----------------------------------------------------
bad() { # bad DESCRIPTION NEEDLE LUA
  printf '%s\n' "$3" >"$TMP/bad.lua"
  "$ICL" script "$TMP/bad.lua" >/dev/null 2>"$TMP/berr"
  local rc=$?
  check "$1: fails (rc $rc)" [ "$rc" -ne 0 ]
  check "$1: names it ($(head -c 200 "$TMP/berr"))" grep -qF -- "$2" "$TMP/berr"
}
bad "mismatched lengths" 'patterns["p"]: 3 positions, but 2 tokens' \
  "icl.html.attention{out = '$TMP/x.html', tokens = {'a', 'b'}, patterns = {p = icl.tensor.zeros(1, 3, 3)}}"
bad "non-square pattern" 'patterns["p"]: not square (2 query and 3 key positions)' \
  "icl.html.attention{out = '$TMP/x.html', tokens = {'a', 'b'}, patterns = {p = icl.tensor.zeros(1, 2, 3)}}"
bad "missing folder" "the folder $TMP/nowhere does not exist" \
  "icl.html.tokens{out = '$TMP/nowhere/x.html', tokens = {'a'}, values = icl.tensor.zeros(1)}"
bad "unknown option" "icl.html.heads: unknown option 'score'" "icl.html.heads{out = '$TMP/x.html', score = 1}"
bad "values of another length" "values: expected [2] or [2, k]" \
  "icl.html.tokens{out = '$TMP/x.html', tokens = {'a', 'b'}, values = icl.tensor.zeros(3)}"
check "no file left by the failures" [ ! -e "$TMP/x.html" ]

# ---- size bound: 1,400 tokens, 4 heads ----------------------------------------------------------------------
"$ICL" script "$TMP/views.lua" "$TMP/again" 1400 2>/dev/null
size=$(stat -c %s "$TMP/again/attention.html")
bound=$(( 4 * (4 * 1400 * 1401 / 2 + 2) / 3 + 200000 )) # base64 of the 8-bit triangles, plus the page and tokens
check "1400 tokens x 4 heads: $size bytes <= $bound" [ "$size" -le "$bound" ]

# ---- the browser --------------------------------------------------------------------------------------------
if [ -z "$CHROMIUM" ]; then
  check "chromium is installed (scripts/setup.sh installs Debian's chromium)" false
  finish
  exit
fi
browse() { timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$TMP/profile" "$@" 2>/dev/null; }
for v in attention heads tokens; do
  browse --dump-dom "file://$TMP/$v.html#selftest" >"$TMP/$v.dom"
  # the DOM holds the script's own text too: only the element the self-test writes counts
  check "$v: the page's self-test passes ($(grep -o '<pre id="icl-[a-z]*">[^<]*' "$TMP/$v.dom" | head -c 300))" \
    grep -q '<pre id="icl-selftest">selftest: PASS' "$TMP/$v.dom"
done
check "heads: a NaN score is shown as NaN" grep -q '<td class="nan">NaN</td>' "$TMP/heads.dom"
check "tokens: a NaN value is marked, not coloured" grep -q 'class="tok nan"' "$TMP/tokens.dom"
browse --dump-dom "file://$TMP/again/attention.html#selftest" >"$TMP/big.dom"
check "1400 tokens: the self-test passes" grep -q '<pre id="icl-selftest">selftest: PASS' "$TMP/big.dom"
# an experiment writes its views and an index linking them (SmolLM2, fetched by scripts/test.sh)
MODEL=${ICL_SOURCE_DIR:-.}/models/SmolLM2-135M-Instruct-Q4_1.gguf
if [ -f "$MODEL" ]; then
  "$ICL" script "${ICL_SOURCE_DIR:-.}/experiments/head_scores.lua" --quick --model "$MODEL" --out "$TMP/hs" >/dev/null 2>&1
  for v in heads patterns; do
    browse --dump-dom "file://$TMP/hs/$v.html#selftest" >"$TMP/hs-$v.dom"
    check "head_scores: $v.html passes its self-test" grep -q '<pre id="icl-selftest">selftest: PASS' "$TMP/hs-$v.dom"
  done
  check "head_scores: both views and the induction heatmap written" \
    test -s "$TMP/hs/heads.html" -a -s "$TMP/hs/patterns.html" -a -s "$TMP/hs/induction.png"
  check_index head_scores "$TMP/hs" # so the index links heads.html and patterns.html, shows induction.png, ...
  check "head_scores: the pattern view labels the model's head numbers" grep -qF '"head_ids":[' "$TMP/hs/patterns.html"
else
  check "SmolLM2 present for the experiment's views ($MODEL; scripts/fetch-models.sh smollm2)" false
fi
browse --window-size=1100,1000 --screenshot="$TMP/shot.png" "file://$TMP/attention.html" >/dev/null
# a blank page of this size compresses to a few KB; the heatmap, thumbnails and tokens make it far larger
check "screenshot has content ($(stat -c %s "$TMP/shot.png" 2>/dev/null) bytes)" \
  [ "$(stat -c %s "$TMP/shot.png" 2>/dev/null || echo 0)" -gt 15000 ]
[ -n "${ICL_HTML_SHOTS:-}" ] && cp "$TMP/shot.png" "$ICL_HTML_SHOTS/attention.png"
finish
