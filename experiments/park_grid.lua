-- In-context graph tracing (Park et al.): random walks on a word graph (4x4 grid, 10-word ring or the 30-node
-- hexagonal lattice); rule-following accuracy against context length, PCA of class means at a chosen layer, and
-- the Dirichlet energy of the class means against context length beside its label-shuffle null.
local metrics, plot, X = icl.metrics, icl.plot, icl.experiment
local e = X{name = "park_grid", about = "In-context graph tracing (Park et al.) on a word grid, ring or hex lattice",
  options = {{"graph", "grid", "grid (4x4), ring (10 words) or hex (networkx hexagonal_lattice_graph(3, 3))"},
             {"layer", -1, "layer of the representation (-1: 80% of the depth)", int = {-1, 1 << 16}},
             {"hook", "hook_resid_pre", "hook point at that layer"},
             {"walks", 16, "walks; walk b uses seed S + b - 1 and starts at node b", int = {1, 1 << 16}},
             {"length", 1400, "words per walk", int = {2, 1 << 20}}, {"window", 200, "positions for class means (the last W)", int = {1, 1 << 20}},
             {"shuffles", 200, "label shuffles of the energy null", int = {0, 1 << 20}}},
  quick = {walks = 2, length = 120, window = 50, shuffles = 20}}
local o = e.o
local GRAPHS = {grid = function(w) return icl.graph.grid(4, 4, w(16)) end,
                ring = function(w) return icl.graph.ring(10, w(10)) end,
                hex = function(w) return icl.graph.hex_lattice(3, 3, w(30)) end}
if not GRAPHS[o.graph] then error(("--graph %s: expected grid, ring or hex"):format(o.graph), 0) end
local RANGES = {{0, 10}, {50, 100}, {100, 200}, {200, 400}, {600, 800}, {1000, 1400}}
local TS = {25, 50, 100, 150, 200, 300, 400, 600, 800, 1000, 1200, 1400}

local m = e:load{n_ctx = o.length + 16}
local layer = e:layer()
local hook = ("blocks.%d.%s"):format(layer, o.hook)
local g = GRAPHS[o.graph](X.words)
local ids = g:token_ids(m) -- errors naming any word that is not one token

-- the protocol: each walk's accuracy from reduced logits, and its activations at the hook
local walks, accs, acts = {}, {}, {}
local bar = icl.progress.new{total = o.walks, label = "park_grid walks"}
for b = 1, o.walks do
  walks[b] = g:walk{length = o.length, start = (b - 1) % g.n + 1, seed = o.seed + b - 1}
  local r = m:run(g:tokens(m, walks[b], {bos = true, check = b == 1}),
                  {logits = {select = ids, lse = true}, capture = {hook}})
  accs[b] = metrics.rule_following(r.logits, walks[b], g, {token_ids = ids, lse = r.lse})
  acts[b] = r[hook]
  bar:update(1)
end
bar:done()
local mean, std = metrics.mean_std(accs)
local by_range = metrics.by_range(mean, RANGES)
-- each range's mean over walks with its standard error, the walks being the samples (sample sd / sqrt(walks))
local per_walk = {}
for b = 1, o.walks do per_walk[b] = metrics.by_range(accs[b], RANGES) end
for i, r in ipairs(by_range) do
  local v = {}
  for b = 1, o.walks do v[b] = {per_walk[b][i].mean} end
  local _, sd = metrics.mean_std(v)
  r.n, r.walks = o.walks, {}
  for b = 1, o.walks do r.walks[b] = v[b][1] end
  r.se = o.walks > 1 and sd[1] * math.sqrt(o.walks / (o.walks - 1)) / math.sqrt(o.walks) or icl.json.null
end
local se = {}
for i, v in ipairs(std) do se[i] = v / math.sqrt(math.max(o.walks - 1, 1)) end -- std is over walks (divided by n)

-- class means over the last `window` positions, pooled over walks; classes never seen there are left out
local means = icl.class_means(acts, walks, {last = o.window}, g.n)
local seen, absent = metrics.present(means)
local absent_words = {}
for k, i in ipairs(absent) do
  absent_words[k] = g.words[i]
  io.stderr:write(("park_grid: class '%s' (node %d) does not occur in the last %d positions of the walks: left out of "
                   .. "the PCA and the energy\n"):format(g.words[i], i, o.window))
end
if #seen < 3 then error(("park_grid: only %d classes occur in the window (need 3)"):format(#seen), 0) end
local cm, sub_edges, labels, fill = means:index_select(1, seen), metrics.induced_edges(g, seen), {}, {}
for k, i in ipairs(seen) do labels[k], fill[k] = g.words[i], i end
local npc = o.graph == "ring" and math.min(3, #seen) or 2
local pca = icl.pca(cm, npc)
local final = metrics.energy_with_null(cm, sub_edges, o.shuffles, icl.rng.new(o.seed))
-- how well the plotted PCA plane recovers the graph: Spearman's rho of its pairwise distances against hop
-- distances, beside the same with the class labels shuffled (so "recovers the layout" is a number, not a look)
local pcx, pcy = npc == 3 and 2 or 1, npc == 3 and 3 or 2 -- the plotted plane (the ring: PC2 and PC3)
local fit = metrics.grid_fit(pca.projections:index_select(2, {pcx, pcy}), g, seen,
                             {shuffles = o.shuffles, seed = o.seed + 1})
local energy = metrics.energy_curve(acts, walks, g, {ts = TS, window = o.window, shuffles = o.shuffles, seed = o.seed})

-- figures (the ring is drawn on PC2 and PC3, as Park et al. do)
local name = m.name or o.model
e:figure(plot.line{series = {{y = metrics.moving_average(mean, 30), std = metrics.moving_average(se, 30),
                              label = "mean ± SE over walks (30-wide moving average)"}},
                   title = ("Rule-following accuracy, %s, %s"):format(o.graph, name), xlabel = "context length (words)",
                   ylabel = "probability mass on valid neighbours", ylim = {0, 1}}, "accuracy")
e:figure(plot.scatter{points = pca.projections:index_select(2, {pcx, pcy}), labels = labels, edges = sub_edges,
                      dashed = true, equal = true, fill = fill,
                      title = ("PCA of class means, %s, %s, last %d positions"):format(o.graph, hook, o.window),
                      xlabel = ("PC%d (%.1f%%)"):format(pcx, 100 * pca.explained_ratio[pcx]),
                      ylabel = ("PC%d (%.1f%%)"):format(pcy, 100 * pca.explained_ratio[pcy])}, "pca")
local ex, ey, en = {}, {}, {}
for i, r in ipairs(energy) do ex[i], ey[i], en[i] = r.t, r.raw or 0 / 0, r.null_raw_mean or 0 / 0 end
e:figure(plot.line{series = {{x = ex, y = ey, label = "true graph"},
                              {x = ex, y = en, label = "mean over label shuffles"}},
                   title = ("Dirichlet energy of class means, %s"):format(o.graph), xlabel = "context length (words)",
                   ylabel = "mean over edges of |x_i - x_j|^2"}, "energy")

-- interactive view: the top induction and previous-token heads (scored on 8 repeated random sequences of 32
-- tokens, icl.heads.score_model) attending over the first walk
local _, _, hs = icl.heads.score_model(m, {n_seq = 8, len = 32, seed = o.seed})
local view_heads = {}
for _, k in ipairs({"induction", "previous_token"}) do
  local top = hs[k].ranked[1]
  local nm = ("blocks.%d.attn.hook_pattern"):format(top.layer)
  view_heads[nm] = view_heads[nm] or {}
  if view_heads[nm][1] ~= top.head then table.insert(view_heads[nm], top.head) end
end
do
  local caps, pats, toks = {}, {}, {}
  for nm in pairs(view_heads) do caps[#caps + 1] = nm; table.sort(view_heads[nm]) end
  local seq = g:tokens(m, walks[1], {bos = true})
  local r = assert(m:run(seq, {logits = "none", capture = caps}))
  for i, id in ipairs(seq) do toks[i] = m:token_text(id) end
  for nm, hl in pairs(view_heads) do
    local sel = {}
    for i, h in ipairs(hl) do sel[i] = h + 1 end
    pats[nm] = r[nm]:index_select(1, sel)
  end
  e:view("attention", {tokens = toks, patterns = pats, head_ids = view_heads,
                       title = ("Top induction and previous-token heads of %s on walk 1 (%s graph)"):format(name, o.graph)},
         "heads")
end

local lines = {("park_grid: %s, %s graph, %d walks x %d words, %s (layer %d)"):format(name, o.graph, o.walks,
                                                                                      o.length, hook, layer)}
for _, r in ipairs(by_range) do
  lines[#lines + 1] = ("  accuracy %4d-%-4d  %.3f"):format(r.from, r.to, r.mean) ..
                      (r.se ~= icl.json.null and (" ± %.3f (SE over %d walks)"):format(r.se, r.n) or "")
end
lines[#lines + 1] = ("  PCA explained %.1f%% + %.1f%%, Dirichlet energy (normalized) %.4f, raw %.4g"):format(
  100 * pca.explained_ratio[pcx], 100 * pca.explained_ratio[pcy], final.energy, final.raw)
if final.null_mean then
  lines[#lines + 1] = ("  label-shuffle null (%d shuffles): mean %.4f, %.0f%% of shuffles below the true graph"):format(
    o.shuffles, final.null_mean, 100 * final.null_below)
end
lines[#lines + 1] = ("  grid fit of the PCA plane (Spearman rho, layout vs hop distances) %.3f"):format(fit.rho)
if fit.null_mean then
  lines[#lines + 1] = ("  label-shuffle null: mean %.3f, sd %.3f, %.0f%% of shuffles at or above it"):format(
    fit.null_mean, fit.null_sd, 100 * fit.null_above)
end
e:report({model_name = name, arch = m.arch, backend = m.backend, graph = o.graph, layer = layer, hook = hook,
          walks = o.walks, length = o.length, window = o.window, shuffles = o.shuffles, words = g.words,
          accuracy_by_range = by_range, accuracy_mean = mean, accuracy_std = std, absent_classes = absent_words,
          pca_explained_ratio = pca.explained_ratio, dirichlet_energy_final = final.energy,
          dirichlet_energy_final_raw = final.raw, energy_final_null = final, energy_curve = energy, grid_fit = fit,
          view_heads = view_heads,
          sweep_figures = {{field = "accuracy_mean", title = "Rule-following accuracy (mean ± SE over seeds)",
                            xlabel = "context length (words)", ylabel = "probability mass on valid neighbours"}}},
         lines)
