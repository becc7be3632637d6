-- The in-context-learning phase change (Olsson et al. 2022): trains, on the same data and seeds, a 1-layer and a
-- 2-layer attention-only model and their smeared-key variants; at every checkpoint measures the training loss, the
-- ICL score (scaled-down token indices: the context is short), the loss by token index, the prefix-matching,
-- copying and previous-token score of every head (icl.olsson, through icl.load of the checkpoint) and the
-- per-token-loss vector on a fixed test set; finds the window where the ICL score and the best prefix-matching
-- score change; ablates each head of the final 2-layer model and reports the change of its ICL score.
--   icl script experiments/induction_phase.lua [--quick] ...   (--help lists the options)
-- Data: icl.data.repeated_segments (a random segment of seg_min..seg_max tokens repeated to fill the context),
-- every position scored. docs/experiments.md has the protocol and docs/results.md the numbers.
local X, json, plot = icl.experiment, icl.json, icl.plot
local O = require("icl.olsson")

local ex = X{name = "induction_phase", model = "none", seed = 1,
  about = "1L / 2L attention-only models, plain and smeared key: ICL score and prefix matching across training",
  options = {{"steps", 2000, "optimizer steps per model"}, {"every", 50, "steps between checkpoints"},
             {"heads", 2, "heads per layer"}, {"d_model", 32, "residual width"}, {"vocab", 32, "tokens"},
             {"ctx", 32, "context length"}, {"seg_min", 3, "shortest segment"}, {"seg_max", 8, "longest segment"},
             {"batch", 16, "sequences per step"}, {"lr", 3e-3, "AdamW peak learning rate (warmup 5%, cosine to 10%)"},
             {"early", 3, "early token index of the ICL score (scaled from 50)"},
             {"late", 30, "late token index of the ICL score (scaled from 500)"},
             {"test_seqs", 16, "test sequences (per-token-loss vectors)"},
             {"score_seqs", 4, "random-token sequences for the head scores"}, {"models", "1L,2L,1Ls,2Ls", "models"}},
  quick = {steps = 200, every = 50, test_seqs = 4, score_seqs = 2}}
local o = ex.o
for _, k in ipairs({"steps", "every", "heads", "d_model", "vocab", "ctx", "seg_min", "seg_max", "batch", "early",
                    "late", "test_seqs", "score_seqs"}) do
  o[k] = math.tointeger(o[k]) or error(("--%s must be an integer"):format(k:gsub("_", "-")), 0)
end
if o.late >= o.ctx or o.early < 2 or o.early >= o.late then error("need 2 <= --early < --late < --ctx", 0) end
local t0 = os.time()
local function log(fmt, ...) io.stderr:write(("[%4d s] " .. fmt .. "\n"):format(os.time() - t0, ...)) end

local SPECS = {["1L"] = {layers = 1, smeared = false}, ["2L"] = {layers = 2, smeared = false},
               ["1Ls"] = {layers = 1, smeared = true}, ["2Ls"] = {layers = 2, smeared = true}}
local names = {}
for s in o.models:gmatch("[^,%s]+") do
  if not SPECS[s] then error("--models: unknown model " .. s .. " (1L, 2L, 1Ls, 2Ls)", 0) end
  names[#names + 1] = s
end

-- fixed test set (all positions scored) and the random-token sequences of the head scores (no BOS: the trained
-- models have none; n tokens repeated so that 4 copies fill the context, as Olsson's 25 x 4 after BOS)
local held = icl.data.repeated_segments{vocab = o.vocab, seq = o.ctx, segment = o.seg_min, segment_max = o.seg_max,
                                        seed = o.seed + 1000}
local test = held(0, o.test_seqs)
local test_tok = test.tokens.totable and test.tokens:totable() or test.tokens
local n_rand = o.ctx // 4
local pick_rng = icl.rng.new(o.seed + 2000)
local score_seqs = {}
for s = 1, o.score_seqs do
  local ids, seq = pick_rng:sample(o.vocab, n_rand), {}
  for _ = 1, 4 do for i = 1, n_rand do seq[#seq + 1] = ids[i] - 1 end end
  score_seqs[s] = seq
end
local all_ids = {}
for i = 1, math.min(o.vocab, o.ctx) do all_ids[i] = i - 1 end

-- per-token losses of the test set from the trainer's forward: list over sequences of T - 1 losses
local function test_losses(net)
  local _, logits = net:forward(test)
  local lp = logits:log_softmax(3)
  local per_seq, flat = {}, {}
  for b = 1, o.test_seqs do
    local row = {}
    for i = 1, o.ctx - 1 do
      row[i] = -lp:get(b, i, test_tok[b][i + 1] + 1)
      flat[#flat + 1] = row[i]
    end
    per_seq[b] = row
  end
  return per_seq, flat
end

local function measure(net, path, loss, step)
  local per_seq, flat = test_losses(net)
  local curve = icl.metrics.mean_std(per_seq)
  local m = assert(icl.load(path, {backend = "cpu"}))
  local ps = O.pattern_scores(m, score_seqs)
  local E = net:params()["token_embd.weight"]:reshape(o.vocab, o.d_model):slice(1, 1, #all_ids)
  local cp = O.copying_scores(m, {tokens = all_ids, embed = E})
  m:close()
  local pm = ps.prefix_matching
  return {step = step, train_loss = loss, icl_score = icl.metrics.icl_score(curve, {late = o.late, early = o.early}),
          loss_by_token = curve, test_loss = icl.metrics.mean(flat), max_prefix_matching = pm:max(),
          prefix_matching = pm, previous_token = ps.previous_token, copying = cp, ptl = flat}
end

local runs = {}
for _, name in ipairs(names) do
  local sp = SPECS[name]
  local dir = ex:path("ckpt-" .. name)
  os.execute(("rm -rf '%s' && mkdir -p '%s'"):format(dir, dir))
  local net = icl.nn.attn_only{layers = sp.layers, heads = o.heads, d_model = o.d_model, vocab = o.vocab, ctx = o.ctx,
                               smeared_key = sp.smeared, seed = o.seed}
  local data = icl.data.repeated_segments{vocab = o.vocab, seq = o.ctx, segment = o.seg_min, segment_max = o.seg_max,
                                          seed = o.seed}
  local p0 = dir .. "/step-0000000.gguf"
  assert(net:save(p0))
  local cks = {measure(net, p0, 0 / 0, 0)}
  local bar = icl.progress.new{total = o.steps // o.every, label = name}
  local r = icl.train{model = net, data = data, steps = o.steps, batch = o.batch, every = o.every, checkpoints = dir,
                      optim = icl.optim.adamw{lr = o.lr, warmup = math.max(1, o.steps // 20), weight_decay = 0.01},
                      on_eval = function(step, n, path, loss)
                        cks[#cks + 1] = measure(n, path, loss, step)
                        bar:update(1)
                      end}
  bar:done()
  runs[#runs + 1] = {name = name, layers = sp.layers, smeared = sp.smeared, loss = r.loss, checkpoints = cks,
                     final = r.checkpoint, seconds = r.seconds} -- seconds: printed only (summary.json stays deterministic)
  local last = cks[#cks]
  log("%s: %d steps in %.0f s, loss %.3f, ICL score %.3f -> %.3f, max prefix matching %.3f -> %.3f", name, r.step,
      r.seconds, r.loss[#r.loss], cks[1].icl_score, last.icl_score, cks[1].max_prefix_matching, last.max_prefix_matching)
end

-- the window of a change: steps where the series first passes 10% and 90% of its change from the first to the
-- last checkpoint (nil when the change is smaller than `min`)
local function window(cks, key, min)
  local a, b = cks[1][key], cks[#cks][key]
  if math.abs(b - a) < min then return nil end
  local lo, hi
  for _, c in ipairs(cks) do
    local f = (c[key] - a) / (b - a)
    if not lo and f >= 0.1 then lo = c.step end
    if not hi and f >= 0.9 then hi = c.step end
  end
  return {from = lo, to = hi, change = b - a}
end
for _, r in ipairs(runs) do
  r.icl_window = window(r.checkpoints, "icl_score", 0.3)
  r.pm_window = window(r.checkpoints, "max_prefix_matching", 0.2)
end

-- test-time ablation of every head of the final 2-layer model
local ablation
for _, r in ipairs(runs) do
  if r.name == "2L" then
    local m = assert(icl.load(r.final, {backend = "cpu"}))
    local seqs = {}
    for b = 1, o.test_seqs do seqs[b] = test_tok[b] end
    local _, base = O.icl_curve(m, seqs, {late = o.late, early = o.early})
    local last = r.checkpoints[#r.checkpoints]
    ablation = {base = base, heads = {}}
    for l = 0, m.n_layers - 1 do
      for h = 0, m.n_heads - 1 do
        local _, s = O.icl_curve(m, seqs, {late = o.late, early = o.early,
                                           run = {ablate = {{layer = l, head = h, mode = "zero"}}}})
        ablation.heads[#ablation.heads + 1] = {layer = l, head = h, icl_score = s, change = s - base,
          prefix_matching = last.prefix_matching:get(l + 1, h + 1), copying = last.copying:get(l + 1, h + 1),
          previous_token = last.previous_token:get(l + 1, h + 1)}
      end
    end
    m:close()
  end
end

-- figures
local function series(key, f)
  local s = {}
  for i, r in ipairs(runs) do
    local x, y = {}, {}
    for j, c in ipairs(r.checkpoints) do x[j], y[j] = c.step, f and f(c) or c[key] end
    s[i] = {x = x, y = y, label = r.name}
  end
  return s
end
local function window_lines(s, lo, hi)
  for _, r in ipairs(runs) do
    local w = r.icl_window
    if w and w.from and w.to then
      s[#s + 1] = {x = {w.from, w.from}, y = {lo, hi}, color = "grey"}
      s[#s + 1] = {x = {w.to, w.to}, y = {lo, hi}, color = "grey"}
    end
  end
  return s
end
local lmax = 0
for _, r in ipairs(runs) do for _, v in ipairs(r.loss) do lmax = math.max(lmax, v) end end
local ls = {}
for i, r in ipairs(runs) do ls[i] = {y = icl.metrics.moving_average(r.loss, 10), label = r.name} end
ex:figure(plot.line{series = window_lines(ls, 0, lmax), xlabel = "step", ylabel = "training loss (mean of 10)",
                    title = "loss; grey lines: ICL-score windows (10%-90% of the change)"}, "loss")
ex:figure(plot.line{series = series("icl_score"), xlabel = "step", ylabel = ("ICL score (loss@%d - loss@%d)"):format(o.late, o.early),
                    title = "ICL score"}, "icl_score")
ex:figure(plot.line{series = series("max_prefix_matching"), xlabel = "step", ylabel = "max prefix-matching score",
                    title = "best prefix-matching head"}, "prefix_matching")
local pts, cols, labels, rows = {}, {}, {}, {}
for i, r in ipairs(runs) do
  for j, c in ipairs(r.checkpoints) do
    rows[#rows + 1] = c.ptl
    cols[#cols + 1] = i
    local inw = r.icl_window and c.step >= (r.icl_window.from or 1e18) and c.step <= (r.icl_window.to or -1)
    labels[#labels + 1] = (j == #r.checkpoints and r.name) or (inw and "w") or false
  end
end
local pca = icl.pca(rows, 2)
ex:figure(plot.scatter{points = pca, fill = cols, labels = labels, size = 4, xlabel = "PC1", ylabel = "PC2",
                       title = "per-token-loss PCA (w: inside the ICL window; label at the last checkpoint)"}, "ptl_pca")
for _, r in ipairs(runs) do
  local heat, dheat, rl = {}, {}, {}
  for j, c in ipairs(r.checkpoints) do
    heat[j], dheat[j], rl[j] = c.loss_by_token, {}, tostring(c.step)
    local lc = c.loss_by_token
    for i = 1, #lc do -- d loss / d log(token index), central differences, token index i + 1
      local a, b = math.max(1, i - 1), math.min(#lc, i + 1)
      dheat[j][i] = (a == b) and 0 or (lc[b] - lc[a]) / (math.log(b + 1) - math.log(a + 1))
    end
  end
  ex:figure(plot.heatmap{data = heat, row_labels = rl, xlabel = "token index - 1", ylabel = "step",
                         title = r.name .. ": loss by token index"}, "loss_heat_" .. r.name)
  ex:figure(plot.heatmap{data = dheat, row_labels = rl, xlabel = "token index - 1", ylabel = "step",
                         title = r.name .. ": d loss / d log(token index)"}, "dloss_heat_" .. r.name)
  local first, last = r.checkpoints[1], r.checkpoints[#r.checkpoints]
  local w = r.icl_window
  local before = first
  if w and w.from then for _, c in ipairs(r.checkpoints) do if c.step < w.from then before = c end end end
  local sp = {}
  for _, c in ipairs({before, last}) do
    local p = {}
    for l = 1, r.layers do
      for h = 1, o.heads do p[#p + 1] = {c.prefix_matching:get(l, h), c.copying:get(l, h)} end
    end
    sp[#sp + 1] = p
  end
  local all, fill = {}, {}
  for k, p in ipairs(sp) do for _, q in ipairs(p) do all[#all + 1] = q; fill[#fill + 1] = k end end
  ex:figure(plot.scatter{points = all, fill = fill, xlim = {0, 1}, ylim = {-1, 1}, xlabel = "prefix-matching score",
                         ylabel = "copying score", title = ("%s heads: blue step %d, orange step %d"):format(r.name,
                         before.step, last.step)}, "heads_" .. r.name)
end

local lines, out_runs = {}, {}
for _, r in ipairs(runs) do
  local a, b = r.checkpoints[1], r.checkpoints[#r.checkpoints]
  local function ws(w) return w and ("steps %s..%s (change %.3f)"):format(w.from, w.to, w.change) or "none" end
  lines[#lines + 1] = ("%-3s loss %.3f; ICL score %.3f -> %.3f, window %s; max prefix matching %.3f -> %.3f, window %s")
    :format(r.name, r.loss[#r.loss], a.icl_score, b.icl_score, ws(r.icl_window), a.max_prefix_matching,
            b.max_prefix_matching, ws(r.pm_window))
  local cks = {}
  for j, c in ipairs(r.checkpoints) do
    cks[j] = {step = c.step, train_loss = c.train_loss, test_loss = c.test_loss, icl_score = c.icl_score,
              max_prefix_matching = c.max_prefix_matching, loss_by_token = c.loss_by_token,
              prefix_matching = c.prefix_matching, previous_token = c.previous_token, copying = c.copying}
  end
  out_runs[#out_runs + 1] = {name = r.name, layers = r.layers, smeared = r.smeared,
                             icl_window = r.icl_window or json.null, pm_window = r.pm_window or json.null,
                             loss = r.loss, checkpoints = cks}
end
if ablation then
  lines[#lines + 1] = ("2L final ICL score %.3f; zeroing one head:"):format(ablation.base)
  for _, h in ipairs(ablation.heads) do
    lines[#lines + 1] = ("  L%dH%d: ICL score %.3f (change %+.3f); prefix matching %.3f, copying %.3f, previous token %.3f")
      :format(h.layer, h.head, h.icl_score, h.change, h.prefix_matching, h.copying, h.previous_token)
  end
end
local ptl = {}
for _, r in ipairs(runs) do
  ptl[r.name] = {}
  for j, c in ipairs(r.checkpoints) do ptl[r.name][j] = {step = c.step, losses = c.ptl} end
end
assert(json.write(ex:path("per_token_losses.json"), ptl, {indent = false}))
-- the options as recorded in summary.json: without --out, so equal runs give equal bytes wherever they write
local recorded = {}
for k, v in pairs(o) do if k ~= "out" then recorded[k] = v end end
ex:report({model = false, options = recorded, runs = out_runs, ablation = ablation or json.null,
           pca_explained = pca.explained_ratio, data = "icl.data.repeated_segments",
           token_indices = {early = o.early, late = o.late}}, lines)
