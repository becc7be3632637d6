#!/usr/bin/env bash
# Smoke test of experiments/icl_circuit.lua: --quick on SmolLM2 with the sentiment task, then the 4-label domain
# task twice with the same seed (summary.json must be byte-identical). The data are the fetched Hutto-Gilbert
# files when data/hutto2014 exists, else a small generated set in the same format, so the test runs whenever
# the model is present. summary.json must hold the expected keys (exactly those it had before the script moved
# onto icl.experiment) with sane values; the figures must exist; index.html must link the figures, the view
# patterns.html and summary.json, and nothing else (tests/cli/lib.sh check_index).
# Env: ICL (the binary), ICL_SOURCE_DIR (the source tree). Prints "N passed, N failed"; exit 77 (skipped) when
# the model file is absent.
set -u
ICL=${ICL:?set ICL to the icl binary}
SRC=${ICL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
MODEL=$SRC/models/SmolLM2-135M-Instruct-Q4_1.gguf
[ -f "$MODEL" ] || { echo "skipped: $MODEL is absent (scripts/fetch-models.sh)"; exit 77; }
. "$SRC/tests/cli/lib.sh" # $TMP, check, finish, check_index
cd "$SRC" || exit 1
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)

# generated sentences: id TAB rating TAB text (CRLF), 60 per file; ratings +-2 alternate in the movie file
DATA=$SRC/data/hutto2014
if [ ! -f "$DATA/movieReviewSnippets_GroundTruth.txt" ]; then
  DATA=$TMP/data
  mkdir -p "$DATA"
  gen() { # file word...
    local f=$1 i=0 a b; shift
    for a in "$@"; do
      for b in one two three four five six; do
        i=$((i + 1))
        if [ $((i % 2)) = 0 ]; then r=2.0; w="a wonderful"; else r=-2.0; w="a dreadful"; fi
        printf '%d\t%s\t%s %s %s number %s.\r\n' "$i" "$r" "$w" "$a" "$b" "$i"
      done
    done >"$DATA/$f"
  }
  gen movieReviewSnippets_GroundTruth.txt film movie story plot cast script actor scene ending score
  gen amazonReviewSnippets_GroundTruth.txt phone cable charger screen battery player camera case lens cord
  gen nytEditorialSnippets_GroundTruth.txt senate mayor council budget tax court law vote policy bill
  gen tweets_GroundTruth.txt lol omg friday coffee weekend party gym lunch selfie nap
fi

run() { # out args...
  local out=$1 t0=$SECONDS; shift
  if ICL_PROGRESS= "$ICL" script experiments/icl_circuit.lua --quick --data "$DATA" --out "$out" "$@" \
       >"$out.log" 2>&1; then
    ok; echo "icl_circuit --quick $*: $((SECONDS - t0)) s"
  else
    bad "icl_circuit --quick $* exited with an error:"; sed 's/^/    /' "$out.log" >&2; return 1
  fi
}

cat >"$TMP/check.lua" <<'LUA'
local path, task = arg[1], arg[2]
local j, err = icl.json.read(path)
local function t(what, cond) print((cond and "PASS " or "FAIL ") .. task .. ": " .. what) end
t("summary.json parses (" .. tostring(err) .. ")", j ~= nil)
if not j then return end
local function in01(v) return type(v) == "number" and v == v and v >= 0 and v <= 1 end
local function all(list, n, f) if type(list) ~= "table" or #list ~= n then return false end
  for _, v in ipairs(list) do if not f(v) then return false end end return true end
local NL, NH = j.n_layers, j.n_heads
-- the top-level keys of summary.json before icl_circuit moved onto icl.experiment (issue 42), plus merge and
-- lm_head (issue 40): none other added or lost
local KEYS = "accuracy arch backend bos copy_last_accuracy data differences edges experiment folds " ..
  "follows_last_label heads k knockout knockout_from label_ids labels lm_head max_tokens mean_prompt_tokens merge " ..
  "model model_name n n_heads n_knockout n_layers per_prompt pool_sizes predicted probe seed skip skipped_prompts task " ..
  "template threshold times too_long_sentences"
local keys = {}
for key in pairs(j) do keys[#keys + 1] = key end
table.sort(keys)
t("summary.json keys as before (" .. table.concat(keys, " ") .. ")", table.concat(keys, " ") == KEYS)
t("experiment, model shape, task", j.experiment == "icl_circuit" and NL == 30 and NH == 9 and j.task == task)
t("labels", #j.labels == (task == "domain" and 4 or 2) and j.accuracy.chance == 1 / #j.labels)
t("accuracies in [0, 1]", in01(j.accuracy.true_labels) and in01(j.accuracy.random_labels) and
  in01(j.accuracy.zero_shot))
t("no BOS in front (SmolLM2's vocabulary adds none)", j.bos == false)
local function total(c) local s = 0 for _, v in ipairs(c) do s = s + v end return s end
t("predicted-label counts add up to the prompts", #j.predicted.true_labels == #j.labels and
  total(j.predicted.true_labels) == j.n and total(j.predicted.random_labels) == j.n and
  total(j.predicted.zero_shot) == j.n)
t("share of predictions that copy the last label", in01(j.follows_last_label.true_labels) and
  in01(j.follows_last_label.random_labels))
t("accuracy of a pure last-label copy, in steps of 1 / n", in01(j.copy_last_accuracy.true_labels) and
  in01(j.copy_last_accuracy.random_labels) and (j.copy_last_accuracy.true_labels * j.n) % 1 == 0)
t("probe: one accuracy per layer", all(j.probe.accuracy, NL, in01) and j.probe.samples == j.n * (j.k + 1))
t("cosine similarities per layer", all(j.probe.cos_within, NL, function(v) return v >= -1 and v <= 1 end))
local mg, lh = j.merge, j.lm_head
t("merge: k rows per prompt, split into right and wrong random labels", mg.n_right + mg.n_wrong == j.n * j.k)
for _, k in ipairs({"right_label", "wrong_label", "wrong_read_as_label", "right_label_se", "wrong_label_se"}) do
  t("merge." .. k .. " per layer in [0, 1]", all(mg[k], NL, in01))
end
-- (the domain task's 4 label words leave too few rows per word at this size: null there)
t("merge.within_label per layer in [0, 1]", task ~= "sentiment" or all(mg.within_label, NL, in01))
t("a wrong label's row is read as the sentence's class or as its label (2 classes)", task ~= "sentiment" or
  math.abs(mg.wrong_label[1] + mg.wrong_read_as_label[1] - 1) < 1e-9)
for _, k in ipairs({"lens_truth", "lens_prediction", "lens_last_label"}) do
  t("lm_head." .. k .. " per layer in [0, 1]", all(lh[k], NL, in01))
end
t("the last layer's lens is the model's own read-out: agrees with every prediction, within 1e-3 of the logits",
  lh.lens_prediction[NL] == 1 and lh.last_layer_lens_max_diff < 1e-3)
t("attention's direct attribution per layer with its SE", all(lh.attn_toward_truth, NL, function(v) return v == v end)
  and all(lh.attn_toward_last_label_se, NL, function(v) return v >= 0 end))
for _, k in ipairs({"forerunner", "induction", "correct_induction"}) do
  t(k .. " counts per layer in [0, heads]", all(j.heads[k], NL, function(v) return v >= 0 and v <= NH end))
end
local ko = j.knockout
t("4 quarter ranges 0-6 .. 22-29", #ko.ranges == 4 and ko.ranges[1].last == 6 and ko.ranges[4].first == 22)
for _, k in ipairs(ko.kinds) do
  t(k .. ": accuracy and control per range", all(ko.accuracy[k], 4, in01) and all(ko.random[k], 4, in01) and
    (j.n_knockout == 0 or ko.mean_edges[k] >= 1))
end
t("5 edge kinds", #ko.kinds == 5)
local d = j.differences.true_minus_random
t("paired difference true - random: mean of the per-prompt outcomes, SE, 95% interval",
  #j.per_prompt.true_labels == j.n and d.n == j.n and
  math.abs(d.mean - (j.accuracy.true_labels - j.accuracy.random_labels)) < 1e-9 and d.se >= 0 and
  math.abs(d.hi - d.mean - 1.96 * d.se) < 1e-9)
local kd = ko.differences.minus_none[ko.kinds[1]][1]
t("knockout differences per kind and range, over the knockout prompts", j.n_knockout == 0 or
  (kd.n == j.n_knockout and #ko.per_prompt.none == j.n_knockout and
   math.abs(kd.mean - (ko.accuracy[ko.kinds[1]][1] - ko.none)) < 1e-9))
LUA

out=$TMP/sentiment
if run "$out"; then
  "$ICL" script "$TMP/check.lua" "$out/summary.json" sentiment >"$TMP/check.txt" 2>&1
  while read -r status rest; do
    if [ "$status" = PASS ]; then ok; else bad "$rest"; fi
  done <"$TMP/check.txt"
  for f in probe merge lens heads knockout; do
    check "$f.png is a PNG" bash -c "head -c 8 '$out/$f.png' | od -An -tx1 | tr -d ' \n' | grep -q '^89504e470d0a1a0a$'"
    check "$f.svg is an SVG" grep -q "<svg" "$out/$f.svg"
  done
  # the view: the top induction and forerunner heads (2 + 2, distinct) attending over prompt 1
  check "patterns.html written" test -s "$out/patterns.html"
  check "patterns.html has no network reference" no_network "$out/patterns.html"
  check "patterns.html labels the model's head numbers" grep -qF '"head_ids":[' "$out/patterns.html"
  check "the printed summary names the view's heads" grep -q '^  view heads (mean attention per prompt): induction L[0-9]*\.H[0-9]* ' "$out.log"
  check_index icl_circuit "$out"
  check "index.html shows the five figures and links the view" bash -c \
    "grep -c -e '<img src=\"probe.png\"' -e '<img src=\"merge.png\"' -e '<img src=\"lens.png\"' -e '<img src=\"heads.png\"' -e '<img src=\"knockout.png\"' -e 'href=\"patterns.html\"' '$out/index.html' | grep -qx 6"
  check "chromium is installed (scripts/setup.sh) for the view's self-test" test -n "$CHROMIUM"
  if [ -n "$CHROMIUM" ]; then
    timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$TMP/profile" --dump-dom \
      "file://$out/patterns.html#selftest" >"$TMP/patterns.dom" 2>/dev/null
    check "patterns.html passes its self-test in Chromium" grep -q '<pre id="icl-selftest">selftest: PASS' "$TMP/patterns.dom"
  fi
fi
if run "$TMP/domain1" --task domain --n 4 --n-knockout 0 && run "$TMP/domain2" --task domain --n 4 --n-knockout 0; then
  "$ICL" script "$TMP/check.lua" "$TMP/domain1/summary.json" domain >"$TMP/check2.txt" 2>&1
  while read -r status rest; do
    if [ "$status" = PASS ]; then ok; else bad "$rest"; fi
  done <"$TMP/check2.txt"
  check "same seed, byte-identical summary.json" cmp -s "$TMP/domain1/summary.json" "$TMP/domain2/summary.json"
  check "same seed, byte-identical patterns.html and index.html" \
    bash -c "cmp -s '$TMP/domain1/patterns.html' '$TMP/domain2/patterns.html' && cmp -s '$TMP/domain1/index.html' '$TMP/domain2/index.html'"
fi
# a knockout shard of two edge kinds, without the accuracy runs; computing every run from its first token
# (--recompute) gives the same summary, byte for byte, as reusing the cached prefix
shard=(--n 2 --knockout-from 2 --n-knockout 1 --edges 's->y,y->sq' --skip accuracy,probe,heads)
if run "$TMP/shard1" "${shard[@]}" && run "$TMP/shard2" "${shard[@]}" --recompute; then
  check "--recompute: byte-identical summary.json" cmp -s "$TMP/shard1/summary.json" "$TMP/shard2/summary.json"
  check "the shard has no accuracy runs" grep -q '"accuracy": null' "$TMP/shard1/summary.json"
  check "the shard has the two kinds asked for" grep -qF '"kinds": ["s->y", "y->sq"]' "$TMP/shard1/summary.json"
  check "the shard (heads skipped) writes no view" test ! -e "$TMP/shard1/patterns.html"
  check_index "icl_circuit shard" "$TMP/shard1"
  # scripts/knockout-table.lua: a copy at another seed whose first s->y cell is shifted by +0.5 pools, over the
  # two prompts, to the mean shifted by +0.25 with SE 0.25; the same seed twice or another edge list is refused
  "$ICL" script - <<EOF
local j = assert(icl.json.read("$TMP/shard1/summary.json"))
local c = j.knockout.differences.minus_control["s->y"][1]
j.seed = j.seed + 1
j.knockout.differences.minus_control["s->y"][1] = {mean = c.mean + 0.5, se = 0, n = 1}
assert(icl.json.write("$TMP/ko_seed2.json", j))
io.open("$TMP/ko_want", "w"):write(("| s->y: knockout − control | %+.3f ± 0.250 |"):format(c.mean + 0.25))
j.edges = "s->y"
assert(icl.json.write("$TMP/ko_edges.json", j))
EOF
  check "knockout-table.lua: two seeds' shards pooled over both prompts" bash -c "
    '$ICL' script scripts/knockout-table.lua '$TMP/shard1/summary.json' '$TMP/ko_seed2.json' >'$TMP/ko_t' &&
    grep -q 'Pooled over 2 runs (seeds 42, 43), n = 2 prompts' '$TMP/ko_t' &&
    grep -A3 '^| pooled |' '$TMP/ko_t' | grep -qF \"\$(cat '$TMP/ko_want')\""
  check "knockout-table.lua: runs of one seed, or of other edges, are refused" bash -c "
    ! '$ICL' script scripts/knockout-table.lua '$TMP/shard1/summary.json' '$TMP/shard2/summary.json' 2>'$TMP/err' &&
    grep -q 'already given' '$TMP/err' &&
    ! '$ICL' script scripts/knockout-table.lua '$TMP/shard1/summary.json' '$TMP/ko_edges.json' 2>'$TMP/err' &&
    grep -q 'edges is \"s->y\"' '$TMP/err'"
fi
# a knockout shard past the last prompt is refused before the model loads
msg=$(ICL_PROGRESS= "$ICL" script experiments/icl_circuit.lua --quick --data "$DATA" --out "$TMP/bad" \
        --knockout-from 8 --n-knockout 2 2>&1)
check "--knockout-from 8 --n-knockout 2 past --n 8 is refused, naming the flag and value ($msg)" \
  bash -c '[[ $1 == "--knockout-from 8: needs --knockout-from + --n-knockout - 1 <= --n"* ]]' _ "$msg"
msg=$(ICL_PROGRESS= "$ICL" script experiments/icl_circuit.lua --quick --data "$DATA" --out "$TMP/bad" \
        --edges 's->y,y->x' 2>&1)
check "--edges with an unknown kind is refused, naming the flag and value ($msg)" \
  bash -c '[[ $1 == "--edges s->y,y->x: unknown '"'y->x'"'"* ]]' _ "$msg"
check "the refused runs wrote no summary" test ! -e "$TMP/bad/summary.json"
finish
