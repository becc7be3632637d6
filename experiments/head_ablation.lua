-- Head ablation on the grid-tracing task: zero hook_z of the top-k induction heads, of the top-k previous-token
-- heads, or of random heads (control), and measure rule-following accuracy against context length; PCA of class
-- means with the top-k_pca heads of each kind ablated.
--   icl script experiments/head_ablation.lua --help   lists the options and their defaults
-- Cost: (1 + 2 #ks + #random-sets x #ks) runs of `length` + 1 tokens per walk, i.e. 37 runs per walk with the
-- defaults; see docs/experiments.md for timings.
local graph, metrics, plot, json, X = icl.graph, icl.metrics, icl.plot, icl.json, icl.experiment

local ex = X{name = "head_ablation",
  about = "zero hook_z of the top-k induction / previous-token heads or of random heads",
  options = {{"layer", -1, "layer of the PCA representation (-1: 80% of the depth)", int = {-1, 1 << 16}},
             {"hook", "hook_resid_pre", "hook point at that layer"},
             {"walks", 4, "walks (the full protocol is 16); walk b uses seed S + b - 1, starts at word b", int = {1, 1 << 16}},
             {"length", 1400, "words per walk", int = {2, 1 << 20}}, {"ks", "1,2,4,8,16,32", "numbers of heads to ablate"},
             {"k_pca", -1, "heads of each kind ablated for the PCA figures (-1: 32 x heads / 1024, >= 1)", int = {-1, 1 << 20}},
             {"random_sets", 4, "random control sets per k, seeds 100, 101, ...", int = {0, 1 << 16}},
             {"exclude_top", 32, "random heads are drawn outside the union of the top N of each kind", int = {0, 1 << 20}},
             {"scores", "", "head_scores (or head_ablation) summary.json to rank heads (default: score them here)"},
             {"score_seed", 42, "seed of the head-score sequences when scoring here", int = {0, 0x7fffffff}},
             {"score_n_seq", 32, "head-score sequences", int = {1, 1 << 16}}, {"score_len", 32, "head-score sequence length", int = {2, 1 << 20}},
             {"window", 200, "positions for class means (the last W)", int = {1, 1 << 20}}},
  quick = {walks = 1, length = 150, ks = "2,8", random_sets = 2, window = 100, score_n_seq = 4, score_len = 16}}
local o = ex.o
local score_nseq, score_len = o.score_n_seq, o.score_len
for _, k in ipairs({"walks", "length", "random_sets", "exclude_top", "window", "seed", "score_seed", "k_pca"}) do
  if math.type(o[k]) ~= "integer" then error(("--%s must be an integer"):format(k:gsub("_", "-")), 0) end
end
if o.walks < 1 or o.length < 2 or o.random_sets < 0 or o.window < 1 or o.window > o.length then
  error("need --walks >= 1, --length >= 2, --random-sets >= 0 and 1 <= --window <= --length", 0)
end

local WORDS = X.words(16)
local RANDOM_SEED0 = 100
local PALETTE16 = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf", "#393b79", "#ad494a", "#8ca252", "#e7ba52", "#7b4173", "#fb9a99"}

local m = ex:load{n_ctx = math.max(o.length, 2 * score_len + 1) + 16}
local NL, NH = m.n_layers, m.n_heads
local n_total = NL * NH
local layer = ex:layer()
local hook = ("blocks.%d.%s"):format(layer, o.hook)
local k_pca = o.k_pca >= 1 and o.k_pca or math.max(1, math.floor(32 * n_total / 1024 + 0.5))

-- ks: sorted, distinct, within 1..n_total, k_pca included
local ks, seen = {}, {}
for s in o.ks:gmatch("[^,%s]+") do
  local k = math.tointeger(tonumber(s))
  if not k or k < 1 or k > n_total then error(("--ks: '%s' is not a head count in 1..%d"):format(s, n_total), 0) end
  if not seen[k] then ks[#ks + 1], seen[k] = k, true end
end
if k_pca > n_total then error(("--k-pca %d: the model has %d heads"):format(k_pca, n_total), 0) end
if not seen[k_pca] then ks[#ks + 1] = k_pca end
table.sort(ks)
local kmax = ks[#ks]

-- head rankings: from a head_scores summary, or scored here with head_scores' defaults
local rank, scores_source = {}, "computed"
if o.scores ~= "" then
  local j, err = json.read(o.scores)
  if not j then error("--scores: " .. err, 0) end
  if j.n_layers ~= NL or j.n_heads ~= NH or type(j.top) ~= "table" then
    error(("--scores %s: not a head_scores summary of a model with %d layers x %d heads"):format(o.scores, NL, NH), 0)
  end
  for _, kind in ipairs({"induction", "previous_token"}) do rank[kind] = j.top[kind] end
  scores_source = o.scores
else
  local _, _, all = icl.heads.score_model(m, {n_seq = score_nseq, len = score_len, seed = o.score_seed})
  for _, kind in ipairs({"induction", "previous_token"}) do rank[kind] = all[kind].ranked end
end
for _, kind in ipairs({"induction", "previous_token"}) do
  if #rank[kind] < kmax then
    error(("%s ranking has %d heads, fewer than k = %d"):format(kind, #rank[kind], kmax), 0)
  end
end
local function head_list(list, k)
  local t = {}
  for i = 1, k do t[i] = {layer = list[i].layer, head = list[i].head, score = list[i].score} end
  return t
end

-- random control pool: heads outside the union of the top `exclude_top` of each kind (fallback for large k on
-- small models: outside the top k of each kind; none when even that pool is smaller than k)
local function pool_excluding(n)
  local ex, pool = {}, {}
  for _, kind in ipairs({"induction", "previous_token"}) do
    for i = 1, math.min(n, #rank[kind]) do ex[rank[kind][i].layer * NH + rank[kind][i].head] = true end
  end
  for l = 0, NL - 1 do
    for h = 0, NH - 1 do
      if not ex[l * NH + h] then pool[#pool + 1] = {layer = l, head = h} end
    end
  end
  return pool
end
local main_pool = pool_excluding(o.exclude_top)
local random_sets, random_pool_note = {}, {}
for _, k in ipairs(ks) do
  local pool, note = main_pool, ("outside the top %d of each kind"):format(o.exclude_top)
  if #pool < k then pool, note = pool_excluding(k), ("outside the top %d of each kind (fallback)"):format(k) end
  if #pool < k then pool, note = nil, "none: too few heads outside the top k of each kind" end
  random_sets[k], random_pool_note[k] = {}, note
  if pool then
    for s = 1, o.random_sets do
      local pick, set = icl.rng.new(RANDOM_SEED0 + s - 1):sample(#pool, k), {}
      for i, p in ipairs(pick) do set[i] = pool[p] end
      table.sort(set, function(a, b) return a.layer < b.layer or (a.layer == b.layer and a.head < b.head) end)
      random_sets[k][s] = set
    end
  end
end

-- conditions: {kind =, k =, set =, heads =, capture =}; heads grouped into one zero ablation of hook_z per layer
local function ablation(hl)
  local by, out = {}, {}
  for _, e in ipairs(hl) do
    by[e.layer] = by[e.layer] or {}
    table.insert(by[e.layer], e.head)
  end
  for l = 0, NL - 1 do
    if by[l] then
      table.sort(by[l])
      out[#out + 1] = {layer = l, heads = by[l], mode = "zero"}
    end
  end
  return out
end
local conds = {{kind = "baseline", k = 0, heads = {}, capture = true}}
for _, kind in ipairs({"induction", "previous_token"}) do
  for _, k in ipairs(ks) do
    conds[#conds + 1] = {kind = kind, k = k, heads = head_list(rank[kind], k), capture = k == k_pca}
  end
end
for _, k in ipairs(ks) do
  for s, set in ipairs(random_sets[k]) do
    conds[#conds + 1] = {kind = "random", k = k, set = s, heads = set, capture = k == k_pca and s == 1}
  end
end
for _, c in ipairs(conds) do c.ablate = ablation(c.heads); c.accs, c.acts = {}, {} end

local g = graph.grid(4, 4, WORDS)
local ids = g:token_ids(m)

-- the runs: walks outer, conditions inner; accuracy per position, activations of the last `window` words
local walks, tails = {}, {}
local bar = icl.progress.new{total = o.walks * #conds, label = "head_ablation runs"}
local run_wall0 = os.time()
for b = 1, o.walks do
  local walk = g:walk{length = o.length, start = (b - 1) % g.n + 1, seed = o.seed + b - 1}
  local toks = g:tokens(m, walk, {bos = true})
  walks[b] = walk
  tails[b] = table.move(walk, o.length - o.window + 1, o.length, 1, {})
  for _, c in ipairs(conds) do
    local r = assert(m:run(toks, {logits = {select = ids, lse = true}, ablate = c.ablate,
                                  capture = c.capture and {{name = hook, pos = {-o.window, -1}}} or nil}))
    c.accs[b] = metrics.rule_following(r.logits, walk, g, {token_ids = ids, lse = r.lse})
    if c.capture then c.acts[b] = r[hook] end
    bar:update(1)
  end
end
bar:done()
local run_wall = os.time() - run_wall0

-- the late window: words 1000..1400, or the same fraction of a shorter walk
local late_from = o.length >= 1400 and 1000 or math.max(1, math.floor(o.length * 1000 / 1400))
local late_to = math.min(o.length, 1400)

-- per condition: mean curve over walks (random: over walks and sets), late mean
local function mean_curve(lists)
  local mean = metrics.mean_std(lists)
  return mean
end
local curves = {induction = {}, previous_token = {}, random = {}}
local late = {induction = {}, previous_token = {}, random = {}, random_sets = {}}
local base_curve = mean_curve(conds[1].accs)
local base_late = metrics.mean(base_curve, late_from, late_to)
for _, c in ipairs(conds) do
  if c.kind == "induction" or c.kind == "previous_token" then
    local i = #curves[c.kind] + 1
    curves[c.kind][i] = mean_curve(c.accs)
    late[c.kind][i] = metrics.mean(curves[c.kind][i], late_from, late_to)
  end
end
for i, k in ipairs(ks) do
  local lists, per_set = {}, {}
  for _, c in ipairs(conds) do
    if c.kind == "random" and c.k == k then
      for _, a in ipairs(c.accs) do lists[#lists + 1] = a end
      per_set[c.set] = metrics.mean(mean_curve(c.accs), late_from, late_to)
    end
  end
  curves.random[i] = #lists > 0 and mean_curve(lists) or json.null
  late.random[i] = #lists > 0 and metrics.mean(curves.random[i], late_from, late_to) or json.null
  late.random_sets[i] = per_set
end

-- PCA of class means (last `window` words, pooled over walks) for the conditions that captured; classes not seen
-- in the window (short walks) are left out of the PCA, the energy and the figure
local function seen_subgraph(means)
  local keep = metrics.present(means)
  return keep, metrics.induced_edges(g, keep)
end
local pca, pca_conds = {}, {}
for _, c in ipairs(conds) do
  if c.capture then
    local means = icl.class_means(c.acts, tails, nil, g.n)
    local keep, edges = seen_subgraph(means)
    local entry = {kind = c.kind, k = c.k, classes_seen = #keep, explained_ratio = json.null,
                   dirichlet_energy = json.null, projections = json.null}
    if #keep >= 3 then
      local sub = #keep < g.n and means:index_select(1, keep) or means
      local p = icl.pca(sub, 2)
      entry.explained_ratio, entry.projections = p.explained_ratio, p.projections
      entry.dirichlet_energy = #edges > 0 and metrics.dirichlet_energy(sub, edges, {normalized = true}) or json.null
      entry._pca, entry._keep, entry._edges = p, keep, edges
    end
    pca[c.kind] = entry
    pca_conds[#pca_conds + 1] = c.kind
  end
end

-- figures
local name = m.name or o.model
local ma_w = math.max(1, math.min(30, o.length // 10))
local function ma(y) return metrics.moving_average(y, ma_w) end
local function shade(i, n, base) -- light (mixed with white) to dark (mixed with black) along the ks
  local t = n > 1 and (i - 1) / (n - 1) or 1
  local s = 0.7 - 1.25 * t
  local function f(c) return s > 0 and c * (1 - s) + s or c * (1 + s) end
  return {r = f(base.r), g = f(base.g), b = f(base.b)}
end
-- the accuracy axis: 0 to a little above the highest curve (SmolLM2-135M stays far below 1), at most 1
local function top_of(curves_list)
  local hi = 0
  for _, y in ipairs(curves_list) do
    if y ~= json.null then for _, v in ipairs(y) do if v == v and v > hi then hi = v end end end
  end
  return math.min(1, math.max(0.05, math.ceil(hi * 1.15 * 20) / 20))
end
local BASE = {induction = {r = 0.8, g = 0.1, b = 0.1}, previous_token = {r = 0.1, g = 0.3, b = 0.8},
              random = {r = 0.2, g = 0.55, b = 0.2}}
local LABEL = {induction = "induction heads", previous_token = "previous-token heads", random = "random heads"}
local figs = {}
for _, kind in ipairs({"induction", "previous_token", "random"}) do
  local series = {{y = ma(base_curve), label = "no ablation", color = "black"}}
  local what = kind == "random" and "" or "top "
  for i, k in ipairs(ks) do
    if curves[kind][i] ~= json.null then
      series[#series + 1] = {y = ma(curves[kind][i]), label = ("%sk = %d"):format(what, k),
                             color = shade(i, #ks, BASE[kind])}
    end
  end
  local ir = 0 -- the random control at the largest k that has one
  for i = 1, #ks do if curves.random[i] ~= json.null then ir = i end end
  if kind ~= "random" and ir > 0 then
    local sets = ("%d set%s"):format(o.random_sets, o.random_sets == 1 and "" or "s")
    series[#series + 1] = {y = ma(curves.random[ir]), color = "grey",
                           label = ("random, k = %d (%s)"):format(ks[ir], sets)}
  end
  local ys = {}
  for i, sr in ipairs(series) do ys[i] = sr.y end
  figs[#figs + 1] = {("accuracy_%s"):format(kind), plot.line, {series = series, ylim = {0, top_of(ys)},
    title = ("Rule following, %s zeroed"):format(LABEL[kind]),
    xlabel = ("context length (words; %d-wide moving average, mean of %d walks)"):format(ma_w, o.walks),
    ylabel = "probability mass on valid neighbours"}}
end
local lx = {}
for i, k in ipairs(ks) do lx[i] = math.log(k, 2) end
local late_series = {{x = {lx[1], lx[#lx]}, y = {base_late, base_late}, label = "no ablation", color = "black"}}
for _, kind in ipairs({"induction", "previous_token", "random"}) do
  local x, y = {}, {}
  for i in ipairs(ks) do
    x[i], y[i] = lx[i], late[kind][i] == json.null and 0 / 0 or late[kind][i]
  end
  late_series[#late_series + 1] = {x = x, y = y, label = LABEL[kind], color = BASE[kind]}
end
local late_ys = {}
for i, sr in ipairs(late_series) do late_ys[i] = sr.y end
figs[#figs + 1] = {"late_accuracy", plot.line, {series = late_series, ylim = {0, top_of(late_ys)},
  title = ("Mean accuracy over words %d-%d"):format(late_from, late_to),
  xlabel = "log2 k (heads zeroed)", ylabel = "mean probability mass on valid neighbours"}}
for _, kind in ipairs(pca_conds) do
  local e = pca[kind]
  if e._pca then
    local what = kind == "baseline" and "no ablation" or ("top %d %s zeroed"):format(k_pca, LABEL[kind])
    if kind == "random" then what = ("%d random heads zeroed (set 1)"):format(k_pca) end
    local labels, fill = {}, {}
    for i, node in ipairs(e._keep) do labels[i], fill[i] = g.words[node], PALETTE16[node] end
    local en = e.dirichlet_energy == json.null and "" or ("; Dirichlet energy %.4f"):format(e.dirichlet_energy)
    figs[#figs + 1] = {"pca_" .. kind, plot.scatter, {points = e._pca, labels = labels, edges = e._edges,
      dashed = true, equal = true, fill = fill, title = ("Class means, layer %d, %s"):format(layer, what),
      xlabel = ("PC1 (%.1f%%)"):format(100 * e.explained_ratio[1]),
      ylabel = ("PC2 (%.1f%%)%s"):format(100 * e.explained_ratio[2], en)}}
  end
end
for _, f in ipairs(figs) do ex:figure(f[2](f[3]), f[1]) end

-- summary
local table_rows = {{condition = "baseline", k = 0, late_accuracy = base_late}}
for _, kind in ipairs({"induction", "previous_token", "random"}) do
  for i, k in ipairs(ks) do
    table_rows[#table_rows + 1] = {condition = kind, k = k, late_accuracy = late[kind][i]}
  end
end
local rs = {}
for i, k in ipairs(ks) do rs[i] = {k = k, pool = random_pool_note[k], sets = random_sets[k]} end
for _, e in pairs(pca) do e._pca, e._keep, e._edges = nil, nil, nil end
local summary = {
  model_name = name, arch = m.arch, backend = m.backend,
  n_layers = NL, n_heads = NH, layer = layer, hook = hook, seed = o.seed, walks = o.walks, length = o.length,
  window = o.window, words = WORDS, ks = ks, k_pca = k_pca, ablated_point = "hook_z (zero, all positions)",
  accuracy = "rule following, full-vocabulary softmax mass on the valid neighbours",
  scores_source = scores_source, score_seed = o.score_seed, score_n_seq = score_nseq, score_len = score_len,
  random_seeds = (function() local t = {} for s = 1, o.random_sets do t[s] = RANDOM_SEED0 + s - 1 end return t end)(),
  exclude_top = o.exclude_top,
  heads = {induction = head_list(rank.induction, kmax), previous_token = head_list(rank.previous_token, kmax)},
  -- the rankings as far as the conditions and the random pool used them: this summary is a valid --scores
  top = (function()
    local t = {}
    for _, kind in ipairs({"induction", "previous_token"}) do
      t[kind] = head_list(rank[kind], math.min(#rank[kind], math.max(kmax, o.exclude_top)))
    end
    return t
  end)(),
  random_sets = rs, late_from = late_from, late_to = late_to,
  late_accuracy = {baseline = base_late, induction = late.induction, previous_token = late.previous_token,
                   random = late.random, random_per_set = late.random_sets},
  table = table_rows,
  curves = {baseline = base_curve, induction = curves.induction, previous_token = curves.previous_token,
            random = curves.random},
  pca = pca,
}
local lines = {}
local function fmt(v) return v == json.null and "   -  " or ("%.3f"):format(v) end
lines[#lines + 1] = (("head_ablation: %s, %d walks x %d words, zeroing hook_z; mean accuracy over words %d-%d"):format(
  name, o.walks, o.length, late_from, late_to))
lines[#lines + 1] = (("  %-6s %-10s %-15s %-10s"):format("k", "induction", "previous-token",
                                         ("random (mean of %d)"):format(o.random_sets)))
lines[#lines + 1] = (("  %-6s %s"):format("none", fmt(base_late)))
for i, k in ipairs(ks) do
  lines[#lines + 1] = (("  %-6d %-10s %-15s %-10s"):format(k, fmt(late.induction[i]), fmt(late.previous_token[i]),
                                            fmt(late.random[i])))
end
for _, kind in ipairs(pca_conds) do
  local e = pca[kind]
  if e.explained_ratio ~= json.null then
    lines[#lines + 1] = (("  PCA %-15s k=%-3d explained %.1f%% + %.1f%%, Dirichlet energy %s (%d classes)"):format(
      kind, e.k,
      100 * e.explained_ratio[1], 100 * e.explained_ratio[2],
      e.dirichlet_energy == json.null and "-" or ("%.4f"):format(e.dirichlet_energy), e.classes_seen))
  end
end
lines[#lines + 1] = ("  %d runs of %d tokens in %d s (%.1f s per run)"):format(o.walks * #conds, o.length + 1,
                                                                                run_wall, run_wall / (o.walks * #conds))
ex:report(summary, lines)
