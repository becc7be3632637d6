#!/usr/bin/env bash
# experiments/induction_phase.lua --quick (trains four tiny models) and experiments/induction_heads_real.lua
# --quick (SmolLM2; left out, and said so, when the model is absent): exit 0, figures, summary.json with scores
# in range, the same bytes for the same seed (phase), the ablation table.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ICL_SOURCE_DIR:-.}"
ICL=${ICL:-build/icl}
d=$TMP # lib.sh made it and removes it
"$ICL" script experiments/induction_phase.lua --quick --out "$d/a" >"$d/log" 2>&1; rc=$?
check "phase quick run exits 0 (log: $(tail -3 "$d/log"))" [ "$rc" -eq 0 ]
for f in summary.json per_token_losses.json loss.png loss.svg icl_score.png prefix_matching.png ptl_pca.png \
         loss_heat_2L.png dloss_heat_2L.svg heads_2L.png ckpt-2L/step-0000200.gguf; do
  check "phase wrote $f" [ -s "$d/a/$f" ]
done
"$ICL" script experiments/induction_phase.lua --quick --out "$d/b" >/dev/null 2>&1
check "phase: same seed, same summary.json bytes" cmp -s "$d/a/summary.json" "$d/b/summary.json"
# the per-token loss before and after the phase change, as an interactive view linked from the index (issue 42)
check "phase wrote token_loss_2Ls.html, same bytes again" cmp -s "$d/a/token_loss_2Ls.html" "$d/b/token_loss_2Ls.html"
check "phase: index.html links it" grep -qF 'href="token_loss_2Ls.html"' "$d/a/index.html"
check "phase: the view holds both checkpoints' losses" grep -q '"columns":\["loss at step [0-9]* (before the ICL window)"' \
  "$d/a/token_loss_2Ls.html"
cat >"$d/check_phase.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
assert(#s.runs == 4, "four models")
for _, r in ipairs(s.runs) do
  local at, prev = {}, -1
  for _, c in ipairs(r.checkpoints) do
    assert(c.step > prev, r.name .. ": checkpoint steps increase"); prev = c.step; at[c.step] = true
  end
  for s = 0, 200, 50 do assert(at[s], r.name .. ": a checkpoint every 50 steps, missing " .. s) end
  assert(#r.probes == 21 and r.probes[21].step == 200, r.name .. ": probes every 10 steps")
  for _, c in ipairs(r.checkpoints) do
    assert(#c.loss_by_token == 31 and #c.prefix_matching == r.layers and #c.copying[1] == 2, r.name .. " shapes")
    for l = 1, r.layers do
      for h = 1, 2 do
        local pm, cp, pt = c.prefix_matching[l][h], c.copying[l][h], c.previous_token[l][h]
        assert(pm >= 0 and pm <= 1 and pt >= 0 and pt <= 1 and cp >= -1 and cp <= 1, r.name .. " score ranges")
        local co, ce = c.copying_olsson[l][h], c.copying_eigen[l][h]
        assert(co >= -1 and co <= 1 and ce >= -1 and ce <= 1, r.name .. " copying evaluator / eigenvalue summary ranges")
      end
    end
  end
  -- at step 0 the test loss is about log(vocab) (random init, std 0.02)
  assert(math.abs(r.checkpoints[1].test_loss - math.log(32)) < 0.05, r.name .. " initial loss " .. r.checkpoints[1].test_loss)
end
assert(#s.ablation.heads == 4, "one ablation per head of the 2-layer model")
assert(#s.ablation.groups >= 1, "induction heads and the others zeroed as groups")
for _, h in ipairs(s.ablation.heads) do
  assert(math.abs(h.change - (h.icl_score - s.ablation.base)) < 1e-9, "change = ablated - base")
end
print("ok")
LUA
out=$("$ICL" script "$d/check_phase.lua" "$d/a/summary.json" 2>&1)
check "phase summary values ($out)" [ "$out" = "ok" ]
# the window table over runs (experiments/induction_windows.lua) on the quick run: one row per model, overlaps
# recomputed from the windows, the cumulative learning rate of the schedule (quick: lr 3e-3, warmup 10 of 200)
"$ICL" script experiments/induction_windows.lua --dirs "$d/a" --out "$d/iw" >"$d/iwlog" 2>&1; rc=$?
check "induction_windows exits 0 (log: $(tail -3 "$d/iwlog"))" [ "$rc" -eq 0 ]
cat >"$d/check_windows.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
assert(#s.rows == 4 and #s.order == 4, "one row and one group per model")
for _, r in ipairs(s.rows) do
  if r.icl9_from and r.pm9_from then
    local ov = math.max(0, math.min(r.icl9_to, r.pm9_to) - math.max(r.icl9_from, r.pm9_from))
    assert(r.overlap_10_90 == ov, "overlap of the 10-90% windows")
  end
  if r.icl_from then
    -- sum of the learning rate over steps 0 .. icl_from - 1: warmup (s + 1) / 10 * lr, then cosine
    local acc = 0
    for k = 0, r.icl_from - 1 do
      acc = acc + (k < 10 and 3e-3 * (k + 1) / 10 or 3e-3 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (k - 10) / 190))))
    end
    assert(math.abs(r.cum_lr_at_icl - acc) < 1e-9, "cumulative learning rate " .. r.cum_lr_at_icl .. " vs " .. acc)
  end
end
print("ok")
LUA
out=$("$ICL" script "$d/check_windows.lua" "$d/iw/summary.json" 2>&1)
check "induction_windows values ($out)" [ "$out" = "ok" ]
# the schedule flags of the confound runs (issue 41): no warmup, 3x the learning rate, one model
"$ICL" script experiments/induction_phase.lua --quick --models 2L --warmup 0 --lr 0.009 --out "$d/w" >"$d/wlog" 2>&1; rc=$?
check "phase --warmup 0 --lr 0.009 exits 0 (log: $(tail -3 "$d/wlog"))" [ "$rc" -eq 0 ]
cat >"$d/check_sched.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
assert(s.options.warmup == 0 and s.options.lr == 0.009, "the schedule is recorded: warmup 0, lr 0.009")
assert(#s.runs == 1 and s.runs[1].name == "2L", "one model")
print("ok")
LUA
out=$("$ICL" script "$d/check_sched.lua" "$d/w/summary.json" 2>&1)
check "phase schedule flags recorded ($out)" [ "$out" = "ok" ]
"$ICL" script experiments/induction_phase.lua --quick --models 2L --out "$d/w5" >/dev/null 2>&1
echo 'print(assert(icl.json.read(arg[1])).options.warmup)' >"$d/warm.lua"
out=$("$ICL" script "$d/warm.lua" "$d/w5/summary.json" 2>&1)
check "phase default warmup is 5% of the steps (quick: 200 -> 10; got $out)" [ "$out" = "10" ]
# the papers' copying measures on SmolLM2 without the text (--scores-only needs no data/)
if [ -f models/SmolLM2-135M-Instruct-Q4_1.gguf ]; then
  # --data bpe (issue 41's natural text in BPE tokens) on a text written here: the ids remapped to the most
  # frequent --vocab - 1 plus one out-of-vocabulary id, and what the summary says about it
  for i in $(seq 1 400); do echo "KING: the crown is mine, said the king $((i % 9)) times to the queen."; done >"$d/t.txt"
  "$ICL" script experiments/induction_phase.lua --quick --data bpe --text "$d/t.txt" --vocab 40 --models 1L \
    --steps 20 --every 10 --out "$d/bpe" >"$d/bpelog" 2>&1; rc=$?
  check "phase --data bpe exits 0 (log: $(tail -3 "$d/bpelog"))" [ "$rc" -eq 0 ]
  cat >"$d/check_bpe.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
assert(s.options.data == "bpe" and s.options.vocab == 40, "bpe options recorded")
local kept, cover, total = s.data:match("(%d+) most frequent kept %(([%d.]+)%% of (%d+) tokens%)")
local distinct = assert(io.open(arg[2])):read("a"):match("tokens %((%d+) distinct%)")
-- every distinct token kept when there are fewer than --vocab - 1 of them (then 100% covered), else 39
local want = math.min(tonumber(distinct), 39)
assert(tonumber(kept) == want and (want == 39 or tonumber(cover) == 100) and tonumber(total) > 4000,
       "the remap described: " .. s.data .. " (distinct " .. tostring(distinct) .. ")")
print("ok")
LUA
  out=$("$ICL" script "$d/check_bpe.lua" "$d/bpe/summary.json" "$d/bpelog" 2>&1)
  check "phase --data bpe summary ($out)" [ "$out" = "ok" ]
  grep -q "tokens (.* distinct) of $d/t.txt" "$d/bpelog"
  check "phase --data bpe logs the corpus' token count" [ $? -eq 0 ]
  "$ICL" script experiments/induction_heads_real.lua --quick --scores-only --out "$d/s" >"$d/slog" 2>&1; rc=$?
  check "real --quick --scores-only exits 0 (log: $(tail -3 "$d/slog"))" [ "$rc" -eq 0 ]
  check_index "real --scores-only" "$d/s"
  check "real --scores-only wrote the heads view" grep -q 'copying_eigen' "$d/s/heads.html"
  cat >"$d/check_scores.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
assert(s.n_layers == 30 and s.n_heads == 9 and s.icl_score == nil, "SmolLM2 scores, no text run")
for _, k in ipairs({"copying_olsson", "copying_olsson_repeated", "copying_eigen"}) do
  for l = 1, 30 do for h = 1, 9 do assert(s[k][l][h] >= -1 and s[k][l][h] <= 1, k .. " range") end end
  assert(s.medians[k] >= -1 and s.medians[k] <= 1, k .. " median")
end
assert(#s.top == 16 and s.top[1].copying_eigen ~= nil, "top heads carry every score")
print("ok")
LUA
  out=$("$ICL" script "$d/check_scores.lua" "$d/s/summary.json" 2>&1)
  check "real --scores-only summary ($out)" [ "$out" = "ok" ]
else
  echo "SKIP real --scores-only: models/SmolLM2-135M-Instruct-Q4_1.gguf absent"
fi
if [ -f models/SmolLM2-135M-Instruct-Q4_1.gguf ] && [ -f data/shakespeare/shakespeare.txt ]; then
  "$ICL" script experiments/induction_heads_real.lua --quick --out "$d/r" >"$d/rlog" 2>&1; rc=$?
  check "real quick run exits 0 (log: $(tail -3 "$d/rlog"))" [ "$rc" -eq 0 ]
  for f in summary.json heads_scatter.png prefix_matching.svg copying.png loss_by_token.png ablation.png heads.html; do
    check "real wrote $f" [ -s "$d/r/$f" ]
  done
  check_index real "$d/r"
  cat >"$d/check_real.lua" <<'LUA'
local s = assert(icl.json.read(arg[1]))
assert(s.n_layers == 30 and s.n_heads == 9, "SmolLM2 geometry")
assert(#s.ablation == 2 and s.ablation[1].k == 1 and s.ablation[2].k == 4, "k = 1, 4")
assert(s.top[1].prefix_matching > 0.5, "SmolLM2 has a head with prefix matching > 0.5: " .. s.top[1].prefix_matching)
for l = 1, 30 do
  for h = 1, 9 do
    assert(s.prefix_matching[l][h] >= 0 and s.prefix_matching[l][h] <= 1, "prefix matching range")
    assert(s.copying[l][h] >= -1 and s.copying[l][h] <= 1, "copying range")
  end
end
assert(s.icl_score < 0, "natural text: later tokens predicted better")
for l = 1, 30 do
  for h = 1, 9 do
    assert(s.copying_share[l][h] >= -1 and s.copying_share[l][h] <= 1, "copying share range")
    assert(s.copying_top1[l][h] >= 0 and s.copying_top1[l][h] <= 1, "copying top-1 range")
  end
end
assert(#s.repeat_loss == 2 and s.repeat_loss[1] < s.first_block_loss[1], "repeated random blocks predicted better than the first")
local a = s.ablation[1]
assert(a.paired.n == 1 and a.repeat_paired.n == 2, "paired statistics over 1 window and 2 random-token sequences")
assert(math.abs(a.paired.top_change - a.top_change) < 1e-9, "paired top change = the per-window mean change")
print("ok")
LUA
  out=$("$ICL" script "$d/check_real.lua" "$d/r/summary.json" 2>&1)
  check "real summary values ($out)" [ "$out" = "ok" ]
else
  echo "SKIP (not counted): induction_heads_real --quick needs models/SmolLM2-135M-Instruct-Q4_1.gguf and data/shakespeare"
fi
finish
