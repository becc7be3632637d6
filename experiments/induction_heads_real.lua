-- Induction heads in the real models (Olsson et al. 2022, arguments 4 and 6): prefix-matching and copying scores
-- of every head on Olsson's random-token protocol, the model's ICL score on natural text, and the ICL score with
-- the top-k prefix-matching heads zero-ablated versus k random heads.
--   icl script experiments/induction_heads_real.lua [--model M] [--quick] ...   (--help lists the options)
-- Protocol (docs/experiments.md): 25 random tokens drawn from ids [lo_frac V, hi_frac V) (id = merge rank, the
-- proxy for frequency), repeated 4x after BOS; ICL score = loss(token late) - loss(token early) averaged over
-- windows of Shakespeare (data/shakespeare, scripts/fetch-data.sh text). Ablation zeroes hook_z.
local X, json, plot = icl.experiment, icl.json, icl.plot
local O = require("icl.olsson")

local ex = X{name = "induction_heads_real",
  about = "prefix-matching / copying scores of every head, ICL score, top-k vs random-k head ablation",
  options = {{"n_seq", 8, "random-token sequences for prefix matching", int = {1, 1 << 16}}, {"n", 25, "random tokens per block", int = {1, 1 << 20}},
             {"reps", 4, "repetitions of the block", int = {2, 1 << 16}}, {"lo_frac", 0.05, "lowest id of the pool, fraction of V", num = {0, 1}},
             {"hi_frac", 0.5, "end of the id pool, fraction of V", num = {0, 1, open = true}}, {"copy_tokens", 25, "tokens for the copying score", int = {1, 1 << 20}},
             {"text", "data/shakespeare/shakespeare.txt", "natural text for the ICL score"},
             {"text_seqs", 8, "text windows", int = {1, 1 << 16}}, {"len", 512, "tokens per window (BOS included)", int = {3, 1 << 20}},
             {"late", 500, "late token index of the ICL score", int = {2, 1 << 20}}, {"early", 50, "early token index", int = {1, 1 << 20}},
             {"band", 10, "banded ICL score: losses averaged over index +- band (used for the ablations)", int = {0, 1 << 20}},
             {"ks", "1,2,4,8", "numbers of heads ablated"}, {"draws", 3, "random head sets per k", int = {1, 1 << 16}},
             {"eval_seqs", 10, "sequences of n random ids (no BOS) for Olsson's copying evaluator", int = {1, 1 << 16}},
             {"gram_ids", 0, "OV eigenvalue summary: E^T W_U over this many sampled ids (0: the whole vocabulary, from the weights)", int = {0, 1 << 16}},
             {"scores_only", false, "head scores only: stop before the text ICL score and the ablations"}},
  quick = {n_seq = 2, copy_tokens = 6, band = 5, text_seqs = 1, len = 128, late = 120, early = 10, ks = "1,4", draws = 1,
           eval_seqs = 2, gram_ids = 64}}
local o = ex.o
-- the options as recorded in summary.json: without --out, so equal runs give equal bytes wherever they write
local recorded = {}
for k, v in pairs(o) do if k ~= "out" then recorded[k] = v end end
local t0 = os.time()
-- the context also holds the runs of the OV circuits: the d_model basis vectors, the sampled ids, the unembedding
local m = ex:load{n_ctx = math.max(o.len, o.n * o.reps + 1, o.gram_ids, 2048) + 8}
local NL, NH = m.n_layers, m.n_heads

local function log(fmt, ...) io.stderr:write(("[%4d s] " .. fmt .. "\n"):format(os.time() - t0, ...)) end

-- 1. prefix-matching and previous-token scores on random tokens
local seqs, pool = O.random_tokens(m, {n_seq = o.n_seq, n = o.n, reps = o.reps, seed = o.seed,
                                        lo_frac = o.lo_frac, hi_frac = o.hi_frac})
local ps = O.pattern_scores(m, seqs)
local pm_rank = O.ranked(ps.prefix_matching)
log("prefix matching: best L%dH%d %.3f (pool %d ids)", pm_rank[1].layer, pm_rank[1].head, pm_rank[1].score, pool)
-- how many heads are strong prefix matchers (the redundancy the top-k ablation meets)
local pm_counts = {}
for _, t in ipairs({0.8, 0.5, 0.3, 0.1}) do
  local c = 0
  for _, e in ipairs(pm_rank) do if e.score >= t then c = c + 1 end end
  pm_counts[#pm_counts + 1] = {threshold = t, heads = c}
end

-- 2. copying scores: the first copy_tokens ids of the first random block
local ctoks = {}
for i = 1, o.copy_tokens do ctoks[i] = seqs[1][(m.bos >= 0 and 1 or 0) + i] end
local bar = icl.progress.new{label = "copying"}
local copy, copy_ex = O.copying_scores(m, {tokens = ctoks, progress = bar})
bar:done()
log("copying scores done")

-- 2b. the papers' own copying measures (docs/experiments.md, "Copying: the papers' definitions"): Olsson's copying
-- evaluator on eval_seqs sequences of n random ids without BOS (as the paper), the same evaluator on the repeated
-- prefix-matching sequences (a variant: there the induction heads attend to the token they should copy), and the
-- eigenvalue summary of each head's OV circuit, exact (E^T W_U over the whole vocabulary, from m:weight) or over
-- gram_ids sampled ids
local eseqs = O.random_tokens(m, {n_seq = o.eval_seqs, n = o.n, reps = 1, seed = o.seed + 1, lo_frac = o.lo_frac,
                                  hi_frac = o.hi_frac, bos = false})
local need = {}
for _, list in ipairs({eseqs, seqs}) do
  for _, sq in ipairs(list) do for _, t in ipairs(sq) do need[#need + 1] = t end end
end
local un, ucol = O.model_unembed(m, need, {sample = 512, seed = o.seed})
local evaluator = O.copying_evaluator(m, {seqs = eseqs, unembed = un, col = ucol})
local evaluator_rep = O.copying_evaluator(m, {seqs = seqs, unembed = un, col = ucol})
local gram = {}
if o.gram_ids > 0 then
  local all = O.token_pool(m, {})
  for _, i in ipairs(icl.rng.new(o.seed + 2):sample(#all, math.min(o.gram_ids, #all))) do gram[#gram + 1] = all[i] end
end
local K = O.ov_circuits_model(m, {ids = gram, exact = o.gram_ids == 0})
local eigen = icl.tensor.zeros(NL, NH)
for l = 1, NL do for h = 1, NH do eigen:set(O.eigen_copying(K[l][h]), l, h) end end
log("copying evaluator and OV eigenvalue summary done")
local function median(t)
  local v = {}
  for l = 1, NL do for h = 1, NH do v[#v + 1] = t:get(l, h) end end
  table.sort(v)
  return (v[(#v + 1) // 2] + v[#v // 2 + 1]) / 2
end
-- rank of a head's value among all heads (1 = the highest)
local function rank_of(t, l, h)
  local v, r = t:get(l, h), 1
  for a = 1, NL do for b = 1, NH do if t:get(a, b) > v then r = r + 1 end end end
  return r
end
local function head_scores(e)
  local l, h = e.layer + 1, e.head + 1
  return {layer = e.layer, head = e.head, prefix_matching = e.score, copying = copy:get(l, h),
          copying_share = copy_ex.share:get(l, h), copying_top1 = copy_ex.top1:get(l, h),
          copying_olsson = evaluator:get(l, h), copying_olsson_repeated = evaluator_rep:get(l, h),
          copying_eigen = eigen:get(l, h), previous_token = ps.previous_token:get(l, h),
          rank = {copying = rank_of(copy, l, h), copying_olsson = rank_of(evaluator, l, h),
                  copying_olsson_repeated = rank_of(evaluator_rep, l, h), copying_eigen = rank_of(eigen, l, h)}}
end
local medians = {copying = median(copy), copying_olsson = median(evaluator), copying_olsson_repeated = median(evaluator_rep),
                 copying_eigen = median(eigen)}
local function paper_lines()
  local lines = {("%s: %d layers x %d heads; medians over heads: copying %.3f, Olsson's copying evaluator %.3f " ..
    "(on the repeated sequences %.3f), OV eigenvalue summary %.3f"):format(m.name, NL, NH, medians.copying,
    medians.copying_olsson, medians.copying_olsson_repeated, medians.copying_eigen)}
  for i = 1, math.min(8, #pm_rank) do
    local e = head_scores(pm_rank[i])
    local rk = e.rank
    lines[#lines + 1] = ("  top %d: L%dH%d prefix matching %.3f, Olsson's copying evaluator %.3f (rank %d of %d; repeated " ..
      "%.3f, rank %d), OV eigenvalues %.3f (rank %d), copying %.3f (rank %d)"):format(i, e.layer, e.head, e.prefix_matching,
      e.copying_olsson, rk.copying_olsson, NL * NH, e.copying_olsson_repeated, rk.copying_olsson_repeated, e.copying_eigen,
      rk.copying_eigen, e.copying, rk.copying)
  end
  return lines
end
-- the interactive view: every head score as a layers x heads map with a sortable list (heads.html)
ex:view("heads", {scores = {prefix_matching = ps.prefix_matching, previous_token = ps.previous_token, copying = copy,
                            copying_eigen = eigen},
                  title = ("Induction-head scores, %s"):format(m.name)}, "heads")

if o.scores_only then
  local top = {}
  for i = 1, math.min(16, #pm_rank) do top[i] = head_scores(pm_rank[i]) end
  ex:report({options = recorded, n_layers = NL, n_heads = NH, pool_size = pool, prefix_matching = ps.prefix_matching,
             previous_token = ps.previous_token, copying = copy, copying_share = copy_ex.share, copying_top1 = copy_ex.top1,
             copying_olsson = evaluator, copying_olsson_repeated = evaluator_rep, copying_eigen = eigen, medians = medians,
             top = top, copy_tokens = ctoks, gram_ids = #gram}, paper_lines())
  return
end

-- 3. ICL score on text, with ablations
local fh = io.open(o.text, "rb")
if not fh then error(("--text %s: not found (scripts/fetch-data.sh text)"):format(o.text), 0) end
local text = fh:read("a"); fh:close()
local tseqs = O.text_sequences(m, text, {n_seq = o.text_seqs, len = o.len, seed = o.seed})
-- banded ICL score of the mean curve, the mean curve, the single-token score, the banded score of each window and
-- each window's two band losses ({late = {...}, early = {...}}: which end of the score an ablation moves)
local function icl_of(abl)
  local curve, raw, all, banded = O.icl_curve(m, tseqs, {late = o.late, early = o.early, band = o.band,
                                                       run = abl and {ablate = abl} or nil})
  local per, bands = {}, {late = {}, early = {}}
  for i, c in ipairs(all) do
    bands.late[i], bands.early[i] = O.band_losses(c, o.late, o.early, o.band)
    per[i] = bands.late[i] - bands.early[i]
  end
  return banded, curve, raw, per, bands
end
local mean_se = icl.metrics.mean_se
local base_score, base_curve, base_raw, base_per, base_bands = icl_of(nil)
log("ICL score %.4f banded, %.4f at single tokens (loss %.3f at %d, %.3f at %d)", base_score, base_raw,
    base_curve[o.late - 1], o.late, base_curve[o.early - 1], o.early)
-- literal in-context copying: the loss on the repeated blocks of the random-token sequences, per sequence
local function rep_of(abl) return (O.repeat_loss(m, seqs, o.n, abl and {ablate = abl} or nil)) end
local base_rep, base_first = O.repeat_loss(m, seqs, o.n)
log("random tokens: loss %.3f on the repeated blocks, %.3f on the first block", mean_se(base_rep), mean_se(base_first))

local ks = {}
for s in o.ks:gmatch("[^,%s]+") do ks[#ks + 1] = math.tointeger(tonumber(s)) or error("--ks: " .. s, 0) end
local kmax = 0
for _, k in ipairs(ks) do kmax = math.max(kmax, k) end
local top_set = {}
for i = 1, kmax do top_set[pm_rank[i].layer * NH + pm_rank[i].head] = true end
local others = {}
for l = 0, NL - 1 do
  for h = 0, NH - 1 do if not top_set[l * NH + h] then others[#others + 1] = {layer = l, head = h} end end
end
local abl_rows, top8_curve = {}, nil
for _, k in ipairs(ks) do
  local top = {}
  for i = 1, k do top[i] = {layer = pm_rank[i].layer, head = pm_rank[i].head} end
  local ts, tc, _, tper, tbands = icl_of(O.ablation(top))
  local trep = rep_of(O.ablation(top))
  if k == kmax then top8_curve = tc end
  local rnd, rs = {}, {}
  for d = 1, o.draws do
    local pick, set = icl.rng.new(o.seed * 1000 + k * 10 + d):sample(#others, k), {}
    for i, p in ipairs(pick) do set[i] = others[p] end
    local sc, _, _, per, bands = icl_of(O.ablation(set))
    rnd[d], rs[d] = {heads = set, icl_score = sc, windows = per, band_losses = bands,
                     repeat_loss = rep_of(O.ablation(set))}, sc
  end
  local rmean, rse = mean_se(rs)
  local rsd = rse * math.sqrt(#rs)
  local rw = {}
  for d = 1, #rnd do rw[d] = rnd[d].windows end
  local pa = O.paired_ablation(base_per, tper, rw) -- paired over windows, the draws averaged per window
  -- the same comparison for each end of the score: the band losses at `late` and at `early`
  local band_paired = {}
  for _, e in ipairs({"late", "early"}) do
    local re = {}
    for d = 1, #rnd do re[d] = rnd[d].band_losses[e] end
    band_paired[e] = O.paired_ablation(base_bands[e], tbands[e], re)
  end
  local tchg, tse = pa.top_change, pa.top_se
  local rr = {}
  for d = 1, #rnd do rr[d] = rnd[d].repeat_loss end
  local pr = O.paired_ablation(base_rep, trep, rr)
  abl_rows[#abl_rows + 1] = {k = k, top_heads = top, top_icl_score = ts, top_windows = tper, top_change = tchg,
                             top_change_se = tse, random = rnd, random_mean = rmean, random_sd = rsd,
                             random_se = rse, paired = pa, top_band_losses = tbands, band_paired = band_paired,
                             top_loss_by_token = tc,
                             top_repeat_loss = trep, repeat_paired = pr}
  log("k=%d: ICL score top-k ablated %.4f (change %+.4f +- %.4f over windows), random mean %.4f +- sd %.4f (base %.4f)",
      k, ts, tchg, tse, rmean, rsd, base_score)
  log("k=%d: per window: random change %+.4f +- %.4f, top minus random %+.4f +- %.4f, top beats random on %d/%d windows",
      k, pa.random_change, pa.random_se, pa.diff, pa.diff_se, math.floor(pa.beats * pa.n + 0.5), pa.n)
  log("k=%d: band losses: late (%d +- %d) change top-k %+.4f +- %.4f, random %+.4f; early (%d +- %d) top-k %+.4f +- %.4f, random %+.4f",
      k, o.late, o.band, band_paired.late.top_change, band_paired.late.top_se, band_paired.late.random_change,
      o.early, o.band, band_paired.early.top_change, band_paired.early.top_se, band_paired.early.random_change)
  log("k=%d: repeated random tokens: loss change top-k %+.4f +- %.4f, random %+.4f, top minus random %+.4f +- %.4f",
      k, pr.top_change, pr.top_se, pr.random_change, pr.diff, pr.diff_se)
end

-- figures
local pts, labels, cols = {}, {}, {}
for l = 1, NL do
  for h = 1, NH do
    pts[#pts + 1] = {ps.prefix_matching:get(l, h), copy:get(l, h)}
    local v = ps.prefix_matching:get(l, h)
    labels[#labels + 1] = v >= pm_rank[math.min(kmax, #pm_rank)].score and ("L%dH%d"):format(l - 1, h - 1) or false
  end
end
ex:figure(plot.scatter{points = pts, labels = labels, xlabel = "prefix-matching score", ylabel = "copying score",
                       title = m.name .. ": heads", ylim = {-1, 1}}, "heads_scatter")
ex:figure(plot.heatmap{data = ps.prefix_matching, xlabel = "head", ylabel = "layer", vmin = 0, vmax = 1,
                       title = "prefix-matching score"}, "prefix_matching")
ex:figure(plot.heatmap{data = copy, xlabel = "head", ylabel = "layer", vmin = -1, vmax = 1,
                       title = "copying score"}, "copying")
local xs = {}
for i = 1, #base_curve do xs[i] = i + 1 end
local smooth = function(c) return icl.metrics.moving_average(c, 8) end
ex:figure(plot.line{series = {{x = xs, y = smooth(base_curve), label = "model"},
                              {x = xs, y = smooth(top8_curve), label = ("top-%d prefix-matching heads zeroed"):format(kmax)}},
                    xlabel = "token index", ylabel = "loss (moving average of 8)", title = m.name}, "loss_by_token")
local kx, ty, ry, tsd, rsd = {}, {}, {}, {}, {}
for i, r in ipairs(abl_rows) do
  kx[i], ty[i], ry[i], tsd[i], rsd[i] = r.k, r.top_icl_score, r.random_mean, r.top_change_se, r.random_sd
end
ex:figure(plot.line{series = {{x = kx, y = ty, std = tsd, label = "top-k prefix matching (band: SE over windows)"},
                              {x = kx, y = ry, std = rsd, label = "random k (mean; band: sd over draws)"}},
                    xlabel = "heads ablated", ylabel = "ICL score", title = m.name}, "ablation")

local top_list = {}
for i = 1, math.min(16, #pm_rank) do
  local e = pm_rank[i]
  top_list[i] = head_scores(e)
end
local lines = {("%s: %d layers x %d heads; ICL score %.4f (losses averaged over index +-%d), %.4f at single tokens " ..
  "(loss %.3f at token %d, %.3f at token %d, %d windows of %d tokens)"):format(m.name, NL, NH, base_score, o.band,
  base_raw, base_curve[o.late - 1], o.late, base_curve[o.early - 1], o.early, #tseqs, o.len)}
do
  local parts = {}
  for _, c in ipairs(pm_counts) do parts[#parts + 1] = (">= %.1f: %d"):format(c.threshold, c.heads) end
  lines[#lines + 1] = ("  heads by prefix-matching score (of %d): %s"):format(NL * NH, table.concat(parts, ", "))
end
for i = 1, math.min(8, #top_list) do
  local e = top_list[i]
  lines[#lines + 1] = ("  top %d: L%dH%d prefix matching %.3f, copying %.3f (share %.3f, top-1 %.3f), previous token %.3f")
    :format(i, e.layer, e.head, e.prefix_matching, e.copying, e.copying_share, e.copying_top1, e.previous_token)
end
for _, l in ipairs(paper_lines()) do lines[#lines + 1] = l end
for _, r in ipairs(abl_rows) do
  lines[#lines + 1] = ("  k=%d: ICL score with top-k zeroed %.4f (change %+.4f, SE %.4f over %d windows), with k random " ..
    "heads %.4f (mean of %d draws, sd %.4f)"):format(r.k, r.top_icl_score, r.top_change, r.top_change_se, #tseqs,
    r.random_mean, #r.random, r.random_sd)
  local pa = r.paired
  lines[#lines + 1] = ("       per window: random change %+.4f (SE %.4f), top minus random %+.4f (SE %.4f), top beats " ..
    "the random mean on %.0f%% of windows"):format(pa.random_change, pa.random_se, pa.diff, pa.diff_se, 100 * pa.beats)
  local bl, be = r.band_paired.late, r.band_paired.early
  lines[#lines + 1] = ("       band losses (unablated %.3f late, %.3f early): late change top-k %+.4f (SE %.4f), random " ..
    "%+.4f; early change top-k %+.4f (SE %.4f), random %+.4f"):format(mean_se(base_bands.late), mean_se(base_bands.early),
    bl.top_change, bl.top_se, bl.random_change, be.top_change, be.top_se, be.random_change)
  local pr = r.repeat_paired
  lines[#lines + 1] = ("       repeated random tokens (loss %.3f unablated): change top-k %+.4f (SE %.4f), random %+.4f, " ..
    "top minus random %+.4f (SE %.4f over %d sequences)"):format(mean_se(base_rep), pr.top_change, pr.top_se,
    pr.random_change, pr.diff, pr.diff_se, pr.n)
end
ex:report({options = recorded, n_layers = NL, n_heads = NH, pool_size = pool, icl_score = base_score, icl_score_single_tokens = base_raw,
           icl_score_windows = base_per, band_losses = base_bands, loss_by_token = base_curve, prefix_matching = ps.prefix_matching, previous_token = ps.previous_token,
           copying = copy, copying_share = copy_ex.share, copying_top1 = copy_ex.top1, copying_olsson = evaluator,
           copying_olsson_repeated = evaluator_rep, copying_eigen = eigen, medians = medians, top = top_list, prefix_matching_counts = pm_counts,
           repeat_loss = base_rep, first_block_loss = base_first, ablation = abl_rows, copy_tokens = ctoks}, lines)
