#!/usr/bin/env bash
# experiments/meta_learning.lua --quick: trains, measures, writes figures and summary.json; same seed -> same
# summary; net:run's masked measurement matches the trainer's logits (max_logit_check); the metrics are
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
end
assert(#s.stages >= 1 and s.stages[1] == s.checkpoints[1].stage, "stages start at the first checkpoint's")
-- the knockouts of every intervention, in its layers, through icl.load + m:run match the measuring forward
assert(s.icl_load_check < 1e-3, "icl.load knockouts vs measuring forward: " .. s.icl_load_check)
-- at step 0 (random weights) the query attends about uniformly: bigram near 1/9
assert(math.abs(s.checkpoints[1].layers[1].bigram - 1 / 9) < 0.05, "bigram at init " .. s.checkpoints[1].layers[1].bigram)
print("ok")
LUA
out=$("$ICL" script "$d/check.lua" "$d/a/summary.json" 2>&1)
check "summary values ($out)" [ "$out" = "ok" ]
finish
