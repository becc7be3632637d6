#!/usr/bin/env bash
# experiments/meta_learning.lua --quick: trains, measures, writes figures, summary.json and index.html; same
# seed -> same summary; net:run's masked measurement matches the trainer's logits (max_logit_check); the metrics are
# attention fractions.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ICL_SOURCE_DIR:-.}"
ICL=${ICL:-build/icl}
d=$TMP # lib.sh made it and removes it
"$ICL" script experiments/meta_learning.lua --quick --out "$d/a" >"$d/log" 2>&1; rc=$?
check "quick run exits 0 (log: $(tail -3 "$d/log"))" [ "$rc" -eq 0 ]
for f in summary.json accuracy.png accuracy.svg metrics.png metrics.svg attention_phase1_layer1.png final.gguf; do
  check "wrote $f" [ -s "$d/a/$f" ]
done
check "reports the phases" grep -q "phase 1" "$d/log"
"$ICL" script experiments/meta_learning.lua --quick --out "$d/b" >/dev/null 2>&1
check "same seed, same summary.json bytes" cmp -s "$d/a/summary.json" "$d/b/summary.json"
# index.html (issue 42): the main run's figures and summary.json, the lines it printed
check_index meta_learning "$d/a"
check "index.html shows the phase-1 attention map" grep -qF '<img src="attention_phase1_layer1.png"' "$d/a/index.html"
check "index.html holds the printed phases" grep -q "phase 1" "$d/a/index.html"
# (the printed lines hold the training's wall seconds: those are taken out)
check "same seed, same index.html bytes but the training seconds" \
  cmp -s <(sed 's/[0-9]* s of training//' "$d/a/index.html") <(sed 's/[0-9]* s of training//' "$d/b/index.html")
cat >"$d/check.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
assert(s.max_logit_check < 1e-3, "net:run measurement vs net:forward: " .. s.max_logit_check)
assert(#s.checkpoints == 4, "checkpoints at 0, 100, 200, 300: " .. #s.checkpoints)
assert(#s.accuracy.steps == 7, "accuracy every 50 steps: " .. #s.accuracy.steps)
for _, c in ipairs(s.checkpoints) do
  assert(c.acc >= 0 and c.acc <= 1 and c.random_label_acc >= 0 and c.random_label_acc <= 1)
  for l = 1, 2 do
    local m = c.layers[l]
    assert(m.bigram > 0 and m.bigram <= 1 and m.label_attention > 0 and m.label_attention < 1, "layer " .. l)
    assert(m.bigram + m.label_attention <= 1 + 1e-5, "query attention sums to at most 1")
    assert(m.chunk_example > 0 and m.chunk_example < 1)
  end
  local iv = c.interventions
  assert(iv.query_to_self and iv.query_to_labels and iv.query_to_labels_or_self and iv.query_to_labels_all_layers
         and iv.label_to_own_example and iv.label_cut_from_example, "every intervention measured")
  assert(({init = 1, NCC = 1, SCC = 1, FCC = 1})[c.stage], "stage named: " .. tostring(c.stage))
  assert(c.shuffled_label_acc >= 0 and c.shuffled_label_acc <= 1, "shuffled-label accuracy measured")
  local g = c.signature -- the FCC attention signature: layer-1 Chunk Example, layer-2 Label Attention
  assert(g.l1_chunk_example == c.layers[1].chunk_example and g.l2_label_attention == c.layers[2].label_attention)
  assert(math.abs(g.uniform_chunk_example - (1/2 + 1/4 + 1/6 + 1/8) / 4) < 1e-12 and
         math.abs(g.uniform_label_attention - 4 / 9) < 1e-12, "uniform baselines for N = 4")
  assert(g.present == (g.l1_ce_over_uniform > s.signature_margin and g.l2_la_over_uniform > s.signature_margin),
         "present = both above uniform by the margin")
end
assert(type(s.signature_first_step) == "table" and s.signature_margin == 0.05, "signature_first_step written")
assert(s.signature_first_step.l1_chunk_example == nil, "random weights: Chunk Example within the margin of uniform")
-- the held-out set: query class in the context only by chance (N/K = 1/4 here), targets its label
assert(s.data_check.expected_query_in_context == 0.25 and s.data_check.query_in_context < 0.5 and
       s.data_check.target_is_query_label == 1, "data_check " .. icl.json.encode(s.data_check))
assert(#s.stages >= 1 and s.stages[1] == s.checkpoints[1].stage, "stages start at the first checkpoint's")
-- the knockouts of every intervention, in its layers, through icl.load + m:run match the measuring forward
assert(s.icl_load_check < 1e-3, "icl.load knockouts vs measuring forward: " .. s.icl_load_check)
-- at step 0 (random weights) the query attends about uniformly: bigram near 1/9
assert(math.abs(s.checkpoints[1].layers[1].bigram - 1 / 9) < 0.05, "bigram at init " .. s.checkpoints[1].layers[1].bigram)
print("ok")
LUA
out=$("$ICL" script "$d/check.lua" "$d/a/summary.json" 2>&1)
check "summary values ($out)" [ "$out" = "ok" ]
# --p_in_context (the paper's p_B): with 1 and T = 1 every query's class is in its context (the induction case)
"$ICL" script experiments/meta_learning.lua --quick --T 1 --p_in_context 1 --out "$d/pb" >"$d/pb.log" 2>&1; rc=$?
check "p_in_context 1 quick run exits 0 (log: $(tail -3 "$d/pb.log"))" [ "$rc" -eq 0 ]
cat >"$d/pbcheck.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
local d = s.data_check
assert(d.query_in_context == 1 and d.target_is_query_label == 1 and d.expected_query_in_context == 1,
       "every query in its context: " .. icl.json.encode(d))
assert(s.config.p_in_context == 1 and s.config.T == 1)
print("ok")
LUA
out=$("$ICL" script "$d/pbcheck.lua" "$d/pb/summary.json" 2>&1)
check "p_in_context 1: queries in context ($out)" [ "$out" = "ok" ]
"$ICL" script experiments/meta_learning.lua --quick --p_in_context 1.5 --out "$d/bad" >"$d/bad.log" 2>&1; rc=$?
check "p_in_context 1.5 refused, naming the flag" [ "$rc" -ne 0 ] && grep -q "p-in-context 1.5" "$d/bad.log"
check "refused before training" [ ! -e "$d/bad/summary.json" ]
# --theory: the SCC formula p = 1 - C(K-2,4)/C(K-1,4) = 4/(K-1) and the label-set Bayes accuracy, no training
"$ICL" script experiments/meta_learning.lua --theory --eval_n 512 --out "$d/th" >"$d/th.log" 2>&1; rc=$?
check "theory exits 0 (log: $(tail -3 "$d/th.log"))" [ "$rc" -eq 0 ]
cat >"$d/thcheck.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
assert(#s.rows == 8, "K = 8, 16, 32, 64 x T = 2, 3: " .. #s.rows)
for _, r in ipairs(s.rows) do
  assert(math.abs(r.p_formula - 4 / (r.K - 1)) < 1e-12, "p at K = " .. r.K)
  assert(r.bayes_label_set_acc == r.bayes_shuffled_acc, "shuffling keeps the label set")
  assert(r.bayes_label_set_acc > r.bayes_random_label_acc, "labels carry the task")
  assert(math.abs(r.bayes_random_label_acc - 1 / r.T) < 0.1, "uniform labels: about 1/T")
  -- the formula's setting (permuted labels, query never in context), T = 2: the reader's accuracy is (1 + p)/2
  if r.T == 2 then assert(math.abs(r.ideal_bayes_acc - (1 + r.p_formula) / 2) < 0.07, "ideal at K = " .. r.K) end
end
print("ok")
LUA
out=$("$ICL" script "$d/thcheck.lua" "$d/th/theory.json" 2>&1)
check "theory values ($out)" [ "$out" = "ok" ]
check_index "meta_learning --theory" "$d/th"
check "theory: index.html links theory.json" grep -qF 'href="theory.json"' "$d/th/index.html"
finish
