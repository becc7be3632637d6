-- The in-context-learning phase change (Olsson et al. 2022): trains, on the same data and seeds, a 1-layer and a
-- 2-layer attention-only model and their smeared-key variants; probes every --probe steps (test loss, ICL score,
-- best prefix-matching score, all from the trainer's own forward) and writes a checkpoint with the full
-- measurements (loss by token index, prefix-matching, copying and previous-token score of every head through
-- net:model() + icl.olsson, the per-token-loss vector) every --every steps and, densely, whenever a probe has moved
-- by --drop (test loss), --icl-move (ICL score) or --pm-move (prefix matching) since the last checkpoint; finds
-- the window where the ICL score and the best prefix-matching score change; ablates each head of the final
-- 2-layer model and reports the change of its ICL score.
--   icl script experiments/induction_phase.lua [--quick] [--data text] ...   (--help lists the options)
-- Data (docs/experiments.md): --data synthetic (default): icl.data.repeated_segments with gap_max: fresh random
-- tokens in which a random segment (seg_min..seg_max tokens, at a random offset) is copied again and again after
-- random gaps of 0..gap_max fresh tokens, so no fixed relative offset and no small set of context tokens predicts
-- the next token (--gap-max 0: the fixed-period data, a segment repeated back to back). --data text: byte-level
-- Shakespeare windows (icl.data.text; options left at their defaults take the text preset below). --data bpe: the
-- same corpus in a real model's BPE tokens (--tokenizer), the --vocab - 1 most frequent kept and the rest one
-- out-of-vocabulary id, windows of icl.data.tokens (the bpe preset below): repeated words and speaker names are
-- single tokens there, so induction can pay off without first learning to spell.
local X, json, plot = icl.experiment, icl.json, icl.plot
local O = require("icl.olsson")
local heads_lib = require("icl.heads")

local BIG = 1 << 30 -- sizes and steps beyond this are typos, not runs
local ex = X{name = "induction_phase", model = "none", seed = 1,
  about = "1L / 2L attention-only models, plain and smeared key: ICL score and prefix matching across training",
  options = {{"data", "synthetic", "synthetic (spaced repeated segments), text (byte-level Shakespeare) or bpe "
                                   .. "(Shakespeare in --tokenizer's tokens)"},
             {"text", "data/shakespeare/shakespeare.txt", "corpus of --data text or bpe (scripts/fetch-data.sh text)"},
             {"tokenizer", "models/SmolLM2-135M-Instruct-Q4_1.gguf", "model whose tokenizer --data bpe uses"},
             {"steps", 6000, "optimizer steps per model", int = {1, BIG}},
             {"every", 200, "steps between regular checkpoints", int = {1, BIG}},
             {"probe", 10, "steps between probes (test loss, ICL score, prefix matching)", int = {1, BIG}},
             {"drop", 0.05, "a dense checkpoint when the test loss moved this much since the last one", num = {0, 1e6}},
             {"icl_move", 0.1, "... or the ICL score moved this much", num = {0, 1e6}},
             {"pm_move", 0.1, "... or the best prefix-matching score moved this much", num = {0, 1e6}},
             {"heads", 2, "heads per layer", int = {1, 1024}}, {"d_model", 32, "residual width", int = {1, 1 << 16}},
             {"vocab", 32, "tokens (text: 256)", int = {2, 1 << 24}},
             {"ctx", 32, "context length", int = {2, 1 << 16}}, {"seg_min", 3, "shortest segment", int = {1, 1 << 16}},
             {"seg_max", 8, "longest segment", int = {1, 1 << 16}},
             {"gap_max", 6, "longest gap of fresh tokens before and between copies (0: fixed period)", int = {0, 1 << 16}},
             {"batch", 16, "sequences per step", int = {1, 1 << 16}},
             {"lr", 3e-3, "AdamW peak learning rate (cosine to 10% of it by the last step)", num = {0, 10, open = true}},
             {"warmup", -1, "linear warmup steps (-1: 5% of --steps)", int = {-1, BIG}},
             {"early", 3, "early token index of the ICL score (scaled from 50)", int = {1, 1 << 16}},
             {"late", 30, "late token index of the ICL score (scaled from 500)", int = {1, 1 << 16}},
             {"band", 1, "ICL score: losses averaged over token index +- band", int = {0, 1 << 16}},
             {"test_seqs", 128, "test sequences (ICL score, loss by token)", int = {1, 1 << 20}},
             {"ptl_seqs", 16, "of them in the per-token-loss vectors", int = {1, 1 << 20}},
             {"score_seqs", 4, "random-token sequences for the head scores", int = {1, 1 << 16}},
             {"induction", 0.3, "prefix-matching score above which a head counts as an induction head", num = {0, 1}},
             {"models", "1L,2L,1Ls,2Ls", "models"}},
  quick = {steps = 200, every = 50, test_seqs = 16, ptl_seqs = 4, score_seqs = 2}}
local o = ex.o
local TEXT_PRESET = {vocab = 256, ctx = 128, d_model = 64, heads = 4, early = 8, late = 120, band = 4, steps = 3000,
                     every = 150, test_seqs = 64}
local BPE_PRESET = {vocab = 2048, ctx = 256, d_model = 128, heads = 4, early = 8, late = 240, band = 4, steps = 6000,
                    every = 300, test_seqs = 64}
if o.data == "text" then
  for k, v in pairs(TEXT_PRESET) do if not ex.given[k] and not (o.quick and k ~= "vocab") then o[k] = v end end
  if o.quick then o.ctx, o.late, o.early = 32, 28, 4 end
  o.vocab = 256
elseif o.data == "bpe" then
  for k, v in pairs(BPE_PRESET) do if not ex.given[k] and not (o.quick and k ~= "vocab") then o[k] = v end end
  if o.quick then o.ctx, o.late, o.early, o.vocab = 32, 28, 4, ex.given.vocab and o.vocab or 256 end
elseif o.data ~= "synthetic" then
  error("--data: synthetic, text or bpe, not " .. tostring(o.data), 0)
end
if o.late + o.band >= o.ctx or o.early - o.band < 2 or o.early >= o.late then
  error(("--early %d, --late %d, --band %d, --ctx %d: need 2 <= early - band, early < late, late + band < ctx")
        :format(o.early, o.late, o.band, o.ctx), 0)
end
ex:need(o.warmup <= o.steps, "warmup", ("must be at most --steps %d"):format(o.steps))
if o.warmup < 0 then o.warmup = math.max(1, o.steps // 20) end
ex:need(o.every % o.probe == 0, "every", ("must be a multiple of --probe %d"):format(o.probe))
ex:need(o.seg_min <= o.seg_max, "seg_min", ("must be at most --seg-max %d"):format(o.seg_max))
ex:need(o.d_model % o.heads == 0, "d_model", ("must be a multiple of --heads %d"):format(o.heads))
o.ptl_seqs = math.min(o.ptl_seqs, o.test_seqs)
local t0 = os.time()
local function log(fmt, ...) io.stderr:write(("[%4d s] " .. fmt .. "\n"):format(os.time() - t0, ...)) end

local SPECS = {["1L"] = {layers = 1, smeared = false}, ["2L"] = {layers = 2, smeared = false},
               ["1Ls"] = {layers = 1, smeared = true}, ["2Ls"] = {layers = 2, smeared = true}}
local names = {}
for s in o.models:gmatch("[^,%s]+") do
  if not SPECS[s] then error("--models: unknown model " .. s .. " (1L, 2L, 1Ls, 2Ls)", 0) end
  names[#names + 1] = s
end

-- --data bpe: the corpus as token ids once, remapped to the --vocab - 1 most frequent (id 0 the most frequent,
-- ties by the tokenizer's id) plus one out-of-vocabulary id, vocab - 1
local bpe
if o.data == "bpe" then
  local f, ferr = io.open(o.text, "rb")
  if not f then error(("--text: %s (scripts/fetch-data.sh text)"):format(ferr), 0) end
  local corpus = f:read("a")
  f:close()
  local tm = icl.load(o.tokenizer, {backend = "cpu"})
  local raw = tm:tokenize(corpus, {bos = false})
  local count, order = {}, {}
  for _, t in ipairs(raw) do count[t] = (count[t] or 0) + 1 end
  for t in pairs(count) do order[#order + 1] = t end
  table.sort(order, function(a, b) return count[a] > count[b] or (count[a] == count[b] and a < b) end)
  local map, strings, kept = {}, {}, 0
  for r = 1, math.min(#order, o.vocab - 1) do
    map[order[r]], kept = r - 1, kept + count[order[r]]
    strings[r - 1] = tm:token_text(order[r])
  end
  local ids = {}
  for i, t in ipairs(raw) do ids[i] = map[t] or (o.vocab - 1) end
  tm:close()
  bpe = {ids = ids, coverage = kept / #raw, tokens = #raw, distinct = #order, strings = strings,
         kept = math.min(#order, o.vocab - 1)}
  log("--data bpe: %d tokens (%d distinct) of %s by %s; the %d most frequent cover %.1f%%", #raw, #order, o.text,
      o.tokenizer, bpe.kept, 100 * bpe.coverage)
end

-- the training data and a fixed test set from another seed (all positions scored)
local function make_data(seed)
  if o.data == "bpe" then return icl.data.tokens{ids = bpe.ids, vocab = o.vocab, seq = o.ctx, seed = seed} end
  if o.data == "text" then
    local d, err = icl.data.text{file = o.text, seq = o.ctx, seed = seed}
    if not d then error(("--text: %s (scripts/fetch-data.sh text)"):format(err), 0) end
    return d
  end
  return icl.data.repeated_segments{vocab = o.vocab, seq = o.ctx, segment = o.seg_min, segment_max = o.seg_max,
                                    gap_max = o.gap_max, seed = seed}
end
local test = make_data(o.seed + 1000)(0, o.test_seqs)
local test_tok = test.tokens:totable()

-- the token ids of the head scores: every id (synthetic), or for bytes the ids ranked 5..(4 + n) by frequency in
-- the test set (Olsson excludes the most and least common tokens)
local function id_pool(n)
  if o.data == "synthetic" then
    local ids = {}
    for i = 1, o.vocab do ids[i] = i - 1 end
    return ids
  end
  local count, ids = {}, {}
  for _, row in ipairs(test_tok) do for _, t in ipairs(row) do count[t] = (count[t] or 0) + 1 end end
  for t in pairs(count) do ids[#ids + 1] = t end
  table.sort(ids, function(a, b) return count[a] > count[b] or (count[a] == count[b] and a < b) end)
  local out = {}
  for i = 5, math.min(#ids, 4 + n) do out[#out + 1] = ids[i] end
  return out
end
-- random-token sequences of the head scores (no BOS: the trained models have none): ctx/4 distinct ids repeated
-- 4 times to fill the context, as Olsson's 25 x 4 after BOS
local n_rand = o.ctx // 4
local pool = id_pool(2 * n_rand)
if #pool < n_rand then error(("%d ids for %d random tokens"):format(#pool, n_rand), 0) end
local pick_rng = icl.rng.new(o.seed + 2000)
local score_seqs, score_tg = {}, {}
for s = 1, o.score_seqs do
  local pick, seq, tg = pick_rng:sample(#pool, n_rand), {}, {}
  for _ = 1, 4 do for i = 1, n_rand do seq[#seq + 1] = pool[pick[i]] end end
  for i = 1, #seq do tg[i] = seq[i + 1] or -1 end
  score_seqs[s], score_tg[s] = seq, tg
end
local score_batch = {tokens = score_seqs, targets = score_tg}
-- Olsson's copying evaluator: 10 sequences of 25 distinct random ids (no BOS, as in the paper), fewer where the
-- vocabulary or the context is smaller
local eval_seqs = {}
do
  local rng, n = icl.rng.new(o.seed + 3000), math.min(25, #pool, o.ctx)
  for s = 1, 10 do
    local pick, seq = rng:sample(#pool, n), {}
    for i = 1, n do seq[i] = pool[pick[i]] end
    eval_seqs[s] = seq
  end
end
local copy_ids = {}
for i = 1, math.min(#pool, o.ctx) do copy_ids[i] = pool[i] end

-- banded loss at a token index (losses of index +- band averaged); curve[i] is the loss on token i + 1
local function at(curve, t) return icl.metrics.mean(curve, t - 1 - o.band, t - 1 + o.band) end
local function icl_of(curve) return at(curve, o.late) - at(curve, o.early) end

-- a probe from the trainer's forward: per-token losses of the test set, their curve and ICL score, and the
-- best prefix-matching score on the random-token sequences (patterns of the trainer's last forward)
local function probe(net, layers)
  local _, logits = net:forward(test)
  local lp = logits:log_softmax(3)
  local per_seq, ptl = {}, {}
  for b = 1, o.test_seqs do
    local row = {}
    for i = 1, o.ctx - 1 do row[i] = -lp:get(b, i, test_tok[b][i + 1] + 1) end
    per_seq[b] = row
    if b <= o.ptl_seqs then for i = 1, #row do ptl[#ptl + 1] = row[i] end end
  end
  local curve = icl.metrics.mean_std(per_seq)
  net:forward(score_batch)
  local best = 0
  for l = 0, layers - 1 do
    local acc = {}
    for s = 1, o.score_seqs do
      for h, v in ipairs(heads_lib.prefix_matching_score(net:pattern(l, s), score_seqs[s])) do
        acc[h] = (acc[h] or 0) + v / o.score_seqs
      end
    end
    for _, v in ipairs(acc) do best = math.max(best, v) end
  end
  return {curve = curve, test_loss = icl.metrics.mean(curve), icl_score = icl_of(curve), max_pm = best, ptl = ptl}
end

-- the full measurement of the net's current weights, through the forward and hooks of any model (net:model())
local function measure(net, pr, loss, step)
  local m = net:model()
  local ps = O.pattern_scores(m, score_seqs)
  local E = net:params()["token_embd.weight"]:reshape(o.vocab, o.d_model)
  local rows = {}
  for i, id in ipairs(copy_ids) do rows[i] = E:slice(1, id + 1, id + 1) end
  local cp, cpx = O.copying_scores(m, {tokens = copy_ids, embed = icl.tensor.cat(rows, 1)})
  -- the papers' own copying measures (docs/experiments.md): Olsson's copying evaluator and the eigenvalue summary
  -- of each head's full OV circuit (Elhage et al.), both from the net's parameters
  local p = net:params()
  local un, col = O.params_unembed(p, o.d_model)
  local ev = O.copying_evaluator(m, {seqs = eval_seqs, unembed = un, col = col, post_norm = false})
  -- the same evaluator on the repeated random-token sequences of the prefix-matching score (a variant: there an
  -- induction head attends to the token it should copy)
  local ev_rep = O.copying_evaluator(m, {seqs = score_seqs, unembed = un, col = col, post_norm = false})
  local K = O.ov_circuits(p, {layers = m.n_layers, heads = m.n_heads, d_model = m.d_model, d_head = m.d_head})
  local eig = icl.tensor.zeros(m.n_layers, m.n_heads)
  for l = 1, m.n_layers do for h = 1, m.n_heads do eig:set(O.eigen_copying(K[l][h]), l, h) end end
  m:close()
  local pm = ps.prefix_matching
  return {step = step, train_loss = loss, icl_score = pr.icl_score, loss_by_token = pr.curve, test_loss = pr.test_loss,
          max_prefix_matching = pm:max(), prefix_matching = pm, previous_token = ps.previous_token, copying = cp,
          copying_share = cpx.share, copying_top1 = cpx.top1, copying_olsson = ev, copying_olsson_repeated = ev_rep,
          copying_eigen = eig, ptl = pr.ptl}
end

-- one model: probes every --probe steps, checkpoints every --every steps and wherever a probe moved (the scheme
-- in the header); returns the run record
local function train_model(name)
  local sp = SPECS[name]
  local dir = ex:path("ckpt-" .. name)
  local ok, err = icl.fs.remove(dir)
  if ok then ok, err = icl.fs.make_dirs(dir) end
  if not ok then error(("%s: %s"):format(dir, tostring(err)), 0) end
  local net = icl.nn.attn_only{layers = sp.layers, heads = o.heads, d_model = o.d_model, vocab = o.vocab, ctx = o.ctx,
                               smeared_key = sp.smeared, seed = o.seed}
  local cks, probes = {}, {}
  local function checkpoint(step, pr, loss)
    local p = ("%s/step-%07d.gguf"):format(dir, step)
    assert(net:save(p))
    cks[#cks + 1] = measure(net, pr, loss, step)
    return p
  end
  local function add_probe(step, loss)
    local pr = probe(net, sp.layers)
    probes[#probes + 1] = {step = step, test_loss = pr.test_loss, icl_score = pr.icl_score, max_prefix_matching = pr.max_pm}
    local last = cks[#cks]
    if not last or step % o.every == 0 or step == o.steps or math.abs(pr.test_loss - last.test_loss) >= o.drop
       or math.abs(pr.icl_score - last.icl_score) >= o.icl_move
       or math.abs(pr.max_pm - last.max_prefix_matching) >= o.pm_move then
      checkpoint(step, pr, loss)
    end
  end
  add_probe(0, 0 / 0)
  local bar = icl.progress.new{total = o.steps // o.probe, label = name}
  local r = icl.train{model = net, data = make_data(o.seed), steps = o.steps, batch = o.batch, every = o.probe,
                      optim = icl.optim.adamw{lr = o.lr, warmup = o.warmup, weight_decay = 0.01},
                      on_eval = function(step, _, _, loss) add_probe(step, loss); bar:update(1) end}
  bar:done()
  if cks[#cks].step ~= r.step then add_probe(r.step, r.loss[#r.loss]) end
  local final = ("%s/step-%07d.gguf"):format(dir, cks[#cks].step)
  log("%s: %d steps in %.0f s, %d checkpoints, loss %.3f, ICL score %.3f -> %.3f, max prefix matching %.3f -> %.3f",
      name, r.step, r.seconds, #cks, r.loss[#r.loss], cks[1].icl_score, cks[#cks].icl_score,
      cks[1].max_prefix_matching, cks[#cks].max_prefix_matching)
  return {name = name, layers = sp.layers, smeared = sp.smeared, loss = r.loss, checkpoints = cks, probes = probes,
          final = final, net = net}
end

local runs = {}
for _, name in ipairs(names) do runs[#runs + 1] = train_model(name) end

-- the 10%-90% window of a change, on the probes (moving average of 3): the steps where the series first passes 10% and
-- 90% of its change from the first to the last probe (nil when the change is smaller than `min`)
local function window(pr, key, min)
  local v = {}
  for i, p in ipairs(pr) do v[i] = p[key] end
  local sm = icl.metrics.moving_average(v, 3)
  local a, b = v[1], sm[#sm]
  if math.abs(b - a) < min then return nil end
  local lo, hi
  for i, p in ipairs(pr) do
    local f = ((i == 1 and v[1] or sm[i]) - a) / (b - a)
    if not lo and f >= 0.1 then lo = p.step end
    if not hi and f >= 0.9 then hi = p.step end
  end
  return {from = lo, to = hi, change = b - a}
end
-- the phase window: where the series changes fastest. Slopes of the moving average (5 probes) between probes; the
-- window is the run of probes around the steepest slope (in the direction of the overall change) whose slope is at
-- least half of it; `share` = the part of the whole change made inside it (an abrupt change: narrow, large share)
local function steepest(pr, key, min)
  local v = {}
  for i, p in ipairs(pr) do v[i] = p[key] end
  local sm = icl.metrics.moving_average(v, 5)
  local total = sm[#sm] - v[1]
  if math.abs(total) < min or #pr < 3 then return nil end
  local dir, best, at, sl = total > 0 and 1 or -1, -math.huge, 2, {}
  for i = 2, #sm do
    sl[i] = dir * (sm[i] - sm[i - 1])
    if sl[i] > best then best, at = sl[i], i end
  end
  local a, b = at, at
  while a > 2 and sl[a - 1] >= best / 2 do a = a - 1 end
  while b < #sm and sl[b + 1] >= best / 2 do b = b + 1 end
  return {from = pr[a - 1].step, to = pr[b].step, change = sm[b] - sm[a - 1], share = (sm[b] - sm[a - 1]) / total}
end
for _, r in ipairs(runs) do
  r.icl_window = steepest(r.probes, "icl_score", 0.3)
  r.pm_window = steepest(r.probes, "max_prefix_matching", 0.2)
  r.icl_window_10_90 = window(r.probes, "icl_score", 0.3)
  r.pm_window_10_90 = window(r.probes, "max_prefix_matching", 0.2)
end

-- test-time ablation of the final 2-layer model: each head alone, then all induction heads and all others
local ablation
for _, r in ipairs(runs) do
  if r.name == "2L" then
    local m = r.net:model() -- the final weights (those of r.final)
    local function score(abl)
      local curve = O.icl_curve(m, test_tok, {late = o.late, early = o.early, run = abl and {ablate = abl} or nil})
      return icl_of(curve)
    end
    local base, last = score(nil), r.checkpoints[#r.checkpoints]
    ablation = {base = base, heads = {}, groups = {}}
    local ind, other = {}, {}
    for l = 0, m.n_layers - 1 do
      for h = 0, m.n_heads - 1 do
        local s = score({{layer = l, head = h, mode = "zero"}})
        local pm = last.prefix_matching:get(l + 1, h + 1)
        local e = {layer = l, head = h, icl_score = s, change = s - base, induction = pm >= o.induction,
                   prefix_matching = pm, copying = last.copying:get(l + 1, h + 1),
                   copying_share = last.copying_share:get(l + 1, h + 1), copying_top1 = last.copying_top1:get(l + 1, h + 1),
                   copying_olsson = last.copying_olsson:get(l + 1, h + 1), copying_eigen = last.copying_eigen:get(l + 1, h + 1),
                   previous_token = last.previous_token:get(l + 1, h + 1)}
        ablation.heads[#ablation.heads + 1] = e
        table.insert(e.induction and ind or other, {layer = l, head = h})
      end
    end
    for _, g in ipairs({{"induction heads", ind}, {"other heads", other}}) do
      if #g[2] > 0 then
        local s = score(O.ablation(g[2]))
        ablation.groups[#ablation.groups + 1] = {name = g[1], heads = g[2], icl_score = s, change = s - base}
      end
    end
    m:close()
  end
end

-- figures
local function shaded(s, lo, hi)
  for i, r in ipairs(runs) do
    local w = r.icl_window
    if w and w.from and w.to then
      local a, b = w.from, math.max(w.to, w.from + o.probe)
      s[#s + 1] = {x = {a, b}, y = {(lo + hi) / 2, (lo + hi) / 2}, std = {(hi - lo) / 2, (hi - lo) / 2}, color = i,
                   label = r.name .. " ICL window"}
    end
  end
  return s
end
local function probe_series(key)
  local s, lo, hi = {}, math.huge, -math.huge
  for i, r in ipairs(runs) do
    local x, y = {}, {}
    for j, p in ipairs(r.probes) do
      x[j], y[j] = p.step, p[key]
      lo, hi = math.min(lo, y[j]), math.max(hi, y[j])
    end
    s[i] = {x = x, y = y, label = r.name}
  end
  return shaded(s, lo, hi)
end
local lmin, lmax = math.huge, 0
local ls = {}
for i, r in ipairs(runs) do
  local y, x = icl.metrics.moving_average(r.loss, 10), {}
  for j = 1, #y do x[j] = j; lmin, lmax = math.min(lmin, y[j]), math.max(lmax, y[j]) end
  ls[i] = {x = x, y = y, label = r.name}
end
ex:figure(plot.line{series = shaded(ls, lmin, lmax), xlabel = "step", ylabel = "training loss (mean of 10 steps)",
                    title = "training loss; shaded: each model's ICL phase window (steepest change)"}, "loss")
ex:figure(plot.line{series = probe_series("icl_score"), xlabel = "step",
                    ylabel = ("ICL score (loss@%d - loss@%d, +-%d)"):format(o.late, o.early, o.band),
                    title = "ICL score (probes every " .. o.probe .. " steps)"}, "icl_score")
ex:figure(plot.line{series = probe_series("max_prefix_matching"), xlabel = "step", ylabel = "max prefix-matching score",
                    title = "best prefix-matching head (probes)"}, "prefix_matching")
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
  ex:figure(plot.heatmap{data = heat, row_labels = rl, xlabel = "token index - 1", ylabel = "checkpoint step",
                         title = r.name .. ": loss by token index"}, "loss_heat_" .. r.name)
  ex:figure(plot.heatmap{data = dheat, row_labels = rl, xlabel = "token index - 1", ylabel = "checkpoint step",
                         title = r.name .. ": d loss / d log(token index)"}, "dloss_heat_" .. r.name)
  local last, w = r.checkpoints[#r.checkpoints], r.icl_window
  local before = r.checkpoints[1]
  if w and w.from then for _, c in ipairs(r.checkpoints) do if c.step < w.from then before = c end end end
  local all, fill = {}, {}
  local sets = before == r.checkpoints[1] and {before, last} or {r.checkpoints[1], before, last}
  for k, c in ipairs(sets) do
    for l = 1, r.layers do
      for h = 1, o.heads do all[#all + 1] = {c.prefix_matching:get(l, h), c.copying:get(l, h)}; fill[#fill + 1] = k end
    end
  end
  ex:figure(plot.scatter{points = all, fill = fill, xlim = {0, 1}, ylim = {-1, 1}, xlabel = "prefix-matching score",
                         ylabel = "copying score", title = #sets == 3 and
                           ("%s heads: step %d (blue), %d (orange, before the window), %d (green)")
                           :format(r.name, r.checkpoints[1].step, before.step, last.step) or
                           ("%s heads: step %d (blue, before the window), %d (orange)"):format(r.name, before.step,
                                                                                              last.step)},
            "heads_" .. r.name)
end

local lines, out_runs = {}, {}
for _, r in ipairs(runs) do
  local a, b = r.checkpoints[1], r.checkpoints[#r.checkpoints]
  local function ws(w)
    return w and ("steps %s..%s (change %.3f, %.0f%% of the whole)"):format(w.from, w.to, w.change, 100 * w.share) or "none"
  end
  local best = O.ranked(b.prefix_matching)[1]
  lines[#lines + 1] = ("%-3s loss %.3f, test %.3f; ICL score %.3f -> %.3f, window %s; max prefix matching %.3f -> %.3f " ..
    "(L%dH%d), window %s; %d checkpoints"):format(r.name, r.loss[#r.loss], b.test_loss, a.icl_score, b.icl_score,
    ws(r.icl_window), a.max_prefix_matching, b.max_prefix_matching, best.layer, best.head, ws(r.pm_window), #r.checkpoints)
  local cks = {}
  for j, c in ipairs(r.checkpoints) do
    cks[j] = {step = c.step, train_loss = c.train_loss, test_loss = c.test_loss, icl_score = c.icl_score,
              max_prefix_matching = c.max_prefix_matching, loss_by_token = c.loss_by_token,
              prefix_matching = c.prefix_matching, previous_token = c.previous_token, copying = c.copying,
              copying_share = c.copying_share, copying_top1 = c.copying_top1, copying_olsson = c.copying_olsson,
              copying_olsson_repeated = c.copying_olsson_repeated, copying_eigen = c.copying_eigen}
  end
  out_runs[#out_runs + 1] = {name = r.name, layers = r.layers, smeared = r.smeared,
                             icl_window = r.icl_window or json.null, pm_window = r.pm_window or json.null,
                             icl_window_10_90 = r.icl_window_10_90 or json.null,
                             pm_window_10_90 = r.pm_window_10_90 or json.null,
                             loss = r.loss, probes = r.probes, checkpoints = cks}
end
if ablation then
  lines[#lines + 1] = ("2L final ICL score %.3f; zeroing one head:"):format(ablation.base)
  for _, h in ipairs(ablation.heads) do
    lines[#lines + 1] = ("  L%dH%d%s: ICL score %.3f (change %+.3f); prefix matching %.3f, copying %.3f (share %.3f, " ..
      "top-1 %.3f), Olsson's copying evaluator %.3f, OV eigenvalues %.3f, previous token %.3f"):format(h.layer, h.head,
      h.induction and " (induction)" or "", h.icl_score, h.change, h.prefix_matching, h.copying, h.copying_share,
      h.copying_top1, h.copying_olsson, h.copying_eigen, h.previous_token)
  end
  for _, g in ipairs(ablation.groups) do
    lines[#lines + 1] = ("  all %d %s zeroed: ICL score %.3f (change %+.3f)"):format(#g.heads, g.name, g.icl_score, g.change)
  end
end
local ptl = {}
for _, r in ipairs(runs) do
  ptl[r.name] = {}
  for j, c in ipairs(r.checkpoints) do ptl[r.name][j] = {step = c.step, losses = c.ptl} end
end
assert(json.write(ex:path("per_token_losses.json"), ptl, {indent = false}))
-- interactive view per run: the first test sequence coloured by each token's loss at the last checkpoint before
-- the ICL phase window and at the first one after it (the checkpoints' ptl vectors)
local function token_text(t)
  t = math.tointeger(t) or t -- the test batch holds the ids as floats
  if o.data == "text" and math.type(t) == "integer" and t >= 32 and t < 127 then return string.char(t) end
  if o.data == "bpe" and math.type(t) == "integer" then return bpe.strings[t] or "<oov>" end
  return " " .. tostring(t)
end
for _, r in ipairs(runs) do
  local w, cks = r.icl_window, r.checkpoints
  if w and #cks >= 2 then
    local before, after = cks[1], cks[#cks]
    for _, c in ipairs(cks) do if c.step <= w.from then before = c end end
    for j = #cks, 1, -1 do if cks[j].step >= w.to then after = cks[j] end end
    local toks, vals = {}, icl.tensor.zeros(o.ctx - 1, 2)
    for i = 1, o.ctx - 1 do
      toks[i] = token_text(test_tok[1][i + 1])
      vals:set(before.ptl[i], i, 1)
      vals:set(after.ptl[i], i, 2)
    end
    ex:view("tokens", {tokens = toks, values = vals,
                       names = {("loss at step %d (before the ICL window)"):format(before.step),
                                ("loss at step %d (after it)"):format(after.step)},
                       title = ("%s: per-token loss of test sequence 1 before and after the phase change"):format(r.name)},
            "token_loss_" .. r.name)
  end
end
-- the options as recorded in summary.json: without --out, so equal runs give equal bytes wherever they write
local recorded = {}
for k, v in pairs(o) do if k ~= "out" then recorded[k] = v end end
ex:report({model = false, options = recorded, runs = out_runs, ablation = ablation or json.null,
           pca_explained = pca.explained_ratio,
           data = o.data == "text" and ("icl.data.text " .. o.text) or
                  o.data == "bpe" and ("icl.data.tokens: %s in %s's tokens, %d most frequent kept (%.1f%% of %d tokens)")
                    :format(o.text, o.tokenizer, bpe.kept, 100 * bpe.coverage, bpe.tokens) or
                  (o.gap_max > 0 and "icl.data.repeated_segments (gap_max: spaced copies)" or "icl.data.repeated_segments (fixed period)"),
           token_indices = {early = o.early, late = o.late, band = o.band}}, lines)
