-- Seeds of experiments/meta_learning.lua, checkpoint by checkpoint: mean ± SE (n = seeds) of accuracy,
-- random-label and shuffled-label accuracy, the FCC attention signature (layer-1 Chunk Example, layer-2 Label
-- Attention) and the label ✗ example intervention, with each seed's stage; then each seed's final values.
--   icl script scripts/meta-learning-seeds.lua DIR/summary.json DIR2/summary.json ...
-- (an `icl sweep` folder's runs are DIR/tasks/NNNN/summary.json)
local json, mean_se = icl.json, icl.metrics.mean_se
if #arg == 0 then error("usage: icl script scripts/meta-learning-seeds.lua SUMMARY.json ...", 0) end
local MARGIN = 0.05 -- meta_learning.lua's SIGNATURE_MARGIN; recomputed here from the stored excesses
local function present(g) return g.l1_ce_over_uniform > MARGIN and g.l2_la_over_uniform > MARGIN end
local runs = {}
for i, path in ipairs(arg) do
  local s, err = json.read(path)
  if not s then error(("%s: %s"):format(path, err or "cannot read"), 0) end
  if not s.checkpoints or not s.checkpoints[1] or not s.checkpoints[1].signature then
    error(("%s: no checkpoints with a signature (written by an older meta_learning.lua?)"):format(path), 0)
  end
  runs[i] = s
end
local steps = {}
for _, cp in ipairs(runs[1].checkpoints) do steps[#steps + 1] = cp.step end
for i, s in ipairs(runs) do
  if #s.checkpoints ~= #steps then error(("%s: %d checkpoints, the first has %d"):format(arg[i], #s.checkpoints, #steps), 0) end
end

local function ms(get, k)
  local xs = {}
  for i, s in ipairs(runs) do xs[i] = get(s.checkpoints[k]) end
  local m, se = mean_se(xs)
  return ("%.3f ± %.3f"):format(m, se)
end

local seeds = {}
for i, s in ipairs(runs) do seeds[i] = tostring(s.config.seed) end
print(("%d runs (seeds %s), held-out %d sequences each; mean ± SE over the seeds"):format(#runs,
  table.concat(seeds, ", "), runs[1].config.eval_n))
print("| step | acc | random-label acc | shuffled-label acc | L1 Chunk Example (uniform .260) | " ..
      "L2 Label Attention (uniform .444) | label ✗ example (L1) | stage per seed | signature present (margin .05) |")
print("|---|---|---|---|---|---|---|---|---|")
for k, step in ipairs(steps) do
  local st, pr = {}, {}
  for i, s in ipairs(runs) do
    st[i] = s.checkpoints[k].stage
    pr[i] = present(s.checkpoints[k].signature) and "yes" or "no"
  end
  print(("| %d | %s | %s | %s | %s | %s | %s | %s | %s |"):format(step,
    ms(function(c) return c.acc end, k), ms(function(c) return c.random_label_acc end, k),
    ms(function(c) return c.shuffled_label_acc end, k),
    ms(function(c) return c.signature.l1_chunk_example end, k),
    ms(function(c) return c.signature.l2_label_attention end, k),
    ms(function(c) return c.interventions.label_cut_from_example end, k),
    table.concat(st, " "), table.concat(pr, " ")))
end
for _, s in ipairs(runs) do
  local f = {}
  for _, cp in ipairs(s.checkpoints) do
    local g = cp.signature
    if not f.ce and g.l1_ce_over_uniform > MARGIN then f.ce = cp.step end
    if not f.la and g.l2_la_over_uniform > MARGIN then f.la = cp.step end
    if not f.both and present(g) then f.both = cp.step end
  end
  print(("seed %s: stages %s; first step more than %.2f above uniform: L1 Chunk Example %s, L2 Label Attention %s, " ..
         "both %s (never: nil)"):format(s.config.seed, table.concat(s.stages, " > "), MARGIN, tostring(f.ce),
         tostring(f.la), tostring(f.both)))
end
