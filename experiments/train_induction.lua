-- Induction heads from scratch (Olsson et al. 2022): trains a 2-layer attention-only transformer on repeated
-- random segments (segment lengths vary per sequence, so copying needs content, not a fixed offset), then
-- scores every head on random tokens repeated twice: a previous-token head should appear in layer 0 and an
-- induction head in layer 1.
--   icl script experiments/train_induction.lua [--steps N] [--heads H] [--d-model D] [--vocab V] [--ctx T]
--                                              [--seg-min A] [--seg-max B] [--batch N] [--lr X] [--seed S]
--                                              [--out DIR] [--quick]   (--help lists the options and ranges)
-- Scores come twice: from the trainer's own attention patterns (net:pattern) with icl.heads' score functions, and
-- from icl.heads.score_model on the final checkpoint opened with icl.load, as for any model. Writes summary.json
-- (options, loss curve, scores), loss.png/svg, induction.png/svg, previous_token.png/svg.
local heads, plot = icl.heads, icl.plot
local BIG = 1 << 30 -- sizes and steps beyond this are typos, not runs

local ex = icl.experiment{name = "train_induction", model = "none", seed = 1,
  about = "2-layer attention-only transformer trained on repeated random segments; previous-token and induction heads",
  options = {{"steps", 1500, "optimizer steps", int = {1, BIG}}, {"heads", 4, "heads per layer", int = {1, 1024}},
             {"d_model", 64, "residual width (a multiple of --heads)", int = {1, 1 << 16}},
             {"vocab", 64, "vocabulary", int = {2, 1 << 24}},
             {"ctx", 64, "positions per training sequence", int = {2, 1 << 16}},
             {"seg_min", 4, "shortest repeated segment", int = {1, 1 << 16}},
             {"seg_max", 16, "longest repeated segment; also the scoring length", int = {1, 1 << 15}},
             {"batch", 32, "sequences per step", int = {1, 1 << 16}},
             {"lr", 3e-3, "AdamW peak learning rate (warmup 5% of the steps, cosine to 10%)", num = {0, 10, open = true}}},
  quick = {steps = 3000, heads = 2, d_model = 32, vocab = 32, ctx = 24, seg_min = 3, seg_max = 8, batch = 32, lr = 3e-3}}
local o = ex.o
ex:need(o.seg_min <= o.seg_max, "seg_min", ("must be at most --seg-max %d"):format(o.seg_max))
ex:need(2 * o.seg_max <= o.ctx, "seg_max", ("must be at most --ctx / 2 = %d (scoring repeats it twice)"):format(o.ctx // 2))
ex:need(o.d_model % o.heads == 0, "d_model", ("must be a multiple of --heads %d"):format(o.heads))

local net = icl.nn.attn_only{layers = 2, heads = o.heads, d_model = o.d_model, vocab = o.vocab, ctx = o.ctx,
                             seed = o.seed}
local data = icl.data.repeated_segments{vocab = o.vocab, seq = o.ctx, segment = o.seg_min, segment_max = o.seg_max,
                                        seed = o.seed}
local r = icl.train{model = net, data = data, steps = o.steps, batch = o.batch, checkpoints = o.out,
                    optim = icl.optim.adamw{lr = o.lr, warmup = math.max(1, o.steps // 20), weight_decay = 0.01}}
local held = icl.data.repeated_segments{vocab = o.vocab, seq = o.ctx, segment = o.seg_min, segment_max = o.seg_max,
                                        seed = o.seed + 1000, repeated_only = true}
local loss_rep = net:forward(held(0, 64))

-- head scores on random tokens repeated twice, from the trainer's patterns
local L = o.seg_max
local seqs = heads.make_repeated_tokens{n_seq = 16, len = L, vocab = o.vocab, seed = o.seed, hi = o.vocab - 1}
local tok, tgt = {}, {}
for s, q in ipairs(seqs) do
  tok[s], tgt[s] = q, {}
  for i = 1, #q do tgt[s][i] = q[i + 1] or -1 end
end
net:forward{tokens = tok, targets = tgt}
local scores = {}
for layer = 0, 1 do
  local prev, ind = {}, {}
  for h = 1, o.heads do prev[h], ind[h] = 0, 0 end
  for s = 1, #seqs do
    local p = net:pattern(layer, s)
    local a, b = heads.previous_token_score(p), heads.induction_score(p, L)
    for h = 1, o.heads do prev[h], ind[h] = prev[h] + a[h] / #seqs, ind[h] + b[h] / #seqs end
  end
  scores[layer + 1] = {previous_token = prev, induction = ind}
end
local function best(t)
  local bi, bv = 1, t[1]
  for i, v in ipairs(t) do if v > bv then bi, bv = i, v end end
  return bi - 1, bv
end
local ph, pv = best(scores[1].previous_token)
local ih, iv = best(scores[2].induction)
print(string.format("trained %d steps in %.1f s: loss %.3f -> %.3f; held-out loss on repeated positions %.4f",
  r.step, r.seconds, r.loss[1], r.loss[#r.loss], loss_rep))
print(string.format("layer 0: best previous-token head %d (score %.3f); layer 1: best induction head %d (score %.3f)",
  ph, pv, ih, iv))

local summary = {model = false, options = o, loss_curve = r.loss, steps = r.step, first_loss = r.loss[1], final_loss = r.loss[#r.loss],
                 heldout_repeated_loss = loss_rep, checkpoint = r.checkpoint, scores = scores,
                 best_previous_token = {layer = 0, head = ph, score = pv}, best_induction = {layer = 1, head = ih, score = iv}}
-- the checkpoint through icl.load and icl.heads.score_model, as on any model
local m = assert(icl.load(r.checkpoint, {backend = "cpu"}))
local _, _, all = heads.score_model(m, {n_seq = 16, len = L, seed = o.seed, hi = o.vocab - 1})
local function best_in(t, layer)
  local bh, bv = 0, -1
  for h = 1, o.heads do
    local v = t[layer + 1][h]
    if v > bv then bh, bv = h - 1, v end
  end
  return bh, bv
end
local lph, lpv = best_in(all.previous_token.scores, 0)
local lih, liv = best_in(all.induction.scores, 1)
print(string.format("icl.load(%s) + heads.score_model: layer 0 previous-token head %d (%.3f), " ..
  "layer 1 induction head %d (%.3f)", r.checkpoint, lph, lpv, lih, liv))
summary.loaded = {best_previous_token = {layer = 0, head = lph, score = lpv},
                  best_induction = {layer = 1, head = lih, score = liv}}
ex:figure(plot.line{y = r.loss, xlabel = "step", ylabel = "training loss", title = "2-layer attention-only, repeated segments"},
          "loss")
ex:figure(plot.heatmap{data = all.induction.scores, vmin = 0, vmax = 1, xlabel = "head", ylabel = "layer",
                       title = "induction score", colorbar = true}, "induction")
ex:figure(plot.heatmap{data = all.previous_token.scores, vmin = 0, vmax = 1, xlabel = "head", ylabel = "layer",
                       title = "previous-token score", colorbar = true}, "previous_token")
print(string.format("wall %.1f s, CPU %.1f s", r.seconds, os.clock()))
-- the heads are "found" when the layer's best head beats every head of the other layer and twice what uniform
-- causal attention would score (mean of 1/i over the scored query rows i, 1-based)
local function uniform(q0, q1) local t = 0 for i = q0, q1 do t = t + 1 / i end return t / (q1 - q0 + 1) end
local base_prev, base_ind = uniform(2, 2 * L), uniform(L + 1, 2 * L)
local _, other_prev = best_in(all.previous_token.scores, 1)
local _, other_ind = best_in(all.induction.scores, 0)
summary.found = {previous_token_layer0 = lpv > 2 * base_prev and lpv > other_prev,
                 induction_layer1 = liv > 2 * base_ind and liv > other_ind,
                 uniform_baseline = {previous_token = base_prev, induction = base_ind}}
ex:report(summary, {string.format("found: previous-token head in layer 0 %s, induction head in layer 1 %s (uniform baselines %.3f, %.3f)",
  tostring(summary.found.previous_token_layer0), tostring(summary.found.induction_layer1), base_prev, base_ind)})
if o.quick then
  assert(loss_rep < 0.5, "quick: repeated positions not learned: " .. loss_rep)
  assert(summary.found.previous_token_layer0, "quick: no previous-token head in layer 0")
  assert(summary.found.induction_layer1, "quick: no induction head in layer 1")
  print("quick: ok")
end
