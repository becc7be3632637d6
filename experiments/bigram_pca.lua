-- Bigram structure of in-context representations: per-position activations of the last positions of grid walks,
-- projected on the PCA of the class means (current word), coloured by the current word (fill) and the previous
-- word (ring); how much of the variance the current word, the previous word and the pair explain.
--   icl script experiments/bigram_pca.lua --help   lists the options and their defaults
local graph, plot = icl.graph, icl.plot

local ex = icl.experiment{name = "bigram_pca",
  about = "current- and previous-word structure of per-position activations",
  options = {{"layer", -1, "layer of the representation (-1: 80% of the depth)", int = {-1, 1 << 16}},
             {"hook", "hook_resid_pre", "hook point at that layer"},
             {"walks", 16, "walks; walk b uses seed S + b - 1 and starts at word b", int = {1, 1 << 16}},
             {"length", 1400, "words per walk", int = {3, 1 << 20}},
             {"window", 200, "positions used, the last W of each walk", int = {2, 1 << 20}},
             {"plot_walks", 4, "walks whose positions are drawn in the scatter (all are used for the numbers)", int = {0, 1 << 16}},
             {"min_count", 5, "bigram means drawn when seen at least N times", int = {1, 1 << 30}}},
  quick = {walks = 2, length = 120, window = 60, min_count = 2}}
local o = ex.o
for _, k in ipairs({"walks", "length", "window", "plot_walks", "min_count", "seed"}) do
  if math.type(o[k]) ~= "integer" then error(("--%s must be an integer"):format(k:gsub("_", "-")), 0) end
end
if o.walks < 1 or o.window < 2 or o.window >= o.length then
  error("need --walks >= 1 and 2 <= --window < --length", 0)
end

local WORDS = icl.experiment.words(16)
local PALETTE16 = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf", "#393b79", "#ad494a", "#8ca252", "#e7ba52", "#7b4173", "#fb9a99"}

local m = ex:load{n_ctx = o.length + 16}
local layer = ex:layer()
local hook = ("blocks.%d.%s"):format(layer, o.hook)

local g = graph.grid(4, 4, WORDS)

-- activations of the last `window` words of each walk; labels: current word, previous word, the pair
local acts, cur, prev, pair = {}, {}, {}, {}
local bar = icl.progress.new{total = o.walks, label = "bigram_pca walks"}
for b = 1, o.walks do
  local walk = g:walk{length = o.length, start = (b - 1) % g.n + 1, seed = o.seed + b - 1}
  local toks = g:tokens(m, walk, {bos = true})
  local r = assert(m:run(toks, {logits = "none", capture = {{name = hook, pos = {-o.window, -1}}}}))
  acts[b] = r[hook]
  cur[b], prev[b], pair[b] = {}, {}, {}
  for i = 1, o.window do
    local t = o.length - o.window + i
    cur[b][i], prev[b][i] = walk[t], walk[t - 1]
    pair[b][i] = (walk[t] - 1) * g.n + walk[t - 1]
  end
  r = nil
  collectgarbage()
  bar:update(1)
end
bar:done()

local X = icl.tensor.cat(acts, 1)                 -- [N, d], N = walks * window
local N = X:shape()[1]
local mu = X:mean(1)                              -- [d]
local total = ((X - mu) ^ 2):sum()

-- between-class share of the variance for a labelling: sum_c n_c |mean_c - mean|^2 / sum_i |x_i - mean|^2;
-- `chance` is its expectation for random labels with the same number of classes, (C - 1) / (N - 1)
local function between_ratio(labels, n_classes, Y, ytotal, ymu)
  local means, counts = icl.class_means(Y, labels, nil, n_classes)
  local between, seen = 0, 0
  for c = 1, n_classes do
    if (counts[c] or 0) > 0 then
      seen = seen + 1
      between = between + counts[c] * ((means[c] - ymu) ^ 2):sum()
    end
  end
  return between / ytotal, (seen - 1) / (N - 1), means, counts
end

-- PCA of the current-word class means; every position projected on its two components
local cmeans = icl.class_means(acts, cur, nil, g.n)
local complete = {}
for c = 1, g.n do if cmeans[c][1] == cmeans[c][1] then complete[#complete + 1] = c end end
local sub = #complete < g.n and cmeans:index_select(1, complete) or cmeans
local pca = icl.pca(sub, 2)
local proj = (X - pca.mean):matmul(pca.components:transpose())       -- [N, 2]
local proj_list, off = {}, 0
for b = 1, o.walks do proj_list[b] = proj:slice(1, off + 1, off + o.window); off = off + o.window end
local pmu = proj:mean(1)
local ptotal = ((proj - pmu) ^ 2):sum()

local ratios = {}
for _, lab in ipairs({{"current", cur, g.n}, {"previous", prev, g.n}, {"bigram", pair, g.n * g.n}}) do
  local full, chance = between_ratio(lab[2], lab[3], acts, total, mu)
  local in2 = between_ratio(lab[2], lab[3], proj_list, ptotal, pmu)
  ratios[lab[1]] = {full = full, pca2 = in2, chance = chance}
end
-- share of the variance left within current-word classes that the previous word explains
local function given(r) return (r.bigram - r.current) / (1 - r.current) end
local prev_given_cur = {full = given{bigram = ratios.bigram.full, current = ratios.current.full},
                        pca2 = given{bigram = ratios.bigram.pca2, current = ratios.current.pca2}}
local pca2_share = ptotal / total -- share of the per-position variance in the plane of the class-mean PCA

-- bigram means in the PCA plane (pairs seen at least min_count times)
local _, _, bmeans, bcounts = between_ratio(pair, g.n * g.n, proj_list, ptotal, pmu)
local bigrams = {}
for c = 1, g.n * g.n do
  if (bcounts[c] or 0) >= o.min_count then
    local cu, pr = (c - 1) // g.n + 1, (c - 1) % g.n + 1
    bigrams[#bigrams + 1] = {current = WORDS[cu], previous = WORDS[pr], count = bcounts[c],
                             x = bmeans:get(c, 1), y = bmeans:get(c, 2), _cu = cu, _pr = pr}
  end
end

-- figures: positions (fill = current word, ring = previous word) with the class means on top; bigram means
local name = m.name or o.model
local means_pts, means_lab, means_fill, means_edges, back = {}, {}, {}, {}, {}
for i, c in ipairs(complete) do
  means_pts[i] = {pca.projections:get(i, 1), pca.projections:get(i, 2)}
  means_lab[i], means_fill[i], back[c] = WORDS[c], PALETTE16[c], i
end
for _, e in ipairs(g.edges) do
  if back[e[1]] and back[e[2]] then means_edges[#means_edges + 1] = {back[e[1]], back[e[2]]} end
end
local function with_means(pts, fill, border, labels, edges_from)
  local n0 = #pts
  for i = 1, #means_pts do
    pts[n0 + i], fill[n0 + i], border[n0 + i], labels[n0 + i] = means_pts[i], means_fill[i], "black", means_lab[i]
  end
  local edges = {}
  for i, e in ipairs(means_edges) do edges[i] = {e[1] + n0, e[2] + n0} end
  return pts, fill, border, labels, edges
end
local pw = math.min(o.plot_walks, o.walks)
local pts, fill, border, labels = {}, {}, {}, {}
for b = 1, pw do
  for i = 1, o.window do
    local k = #pts + 1
    pts[k] = {proj_list[b]:get(i, 1), proj_list[b]:get(i, 2)}
    fill[k], border[k], labels[k] = PALETTE16[cur[b][i]] .. "b0", PALETTE16[prev[b][i]], false
  end
end
local bpts, bfill, bborder, blabels = {}, {}, {}, {}
for i, e in ipairs(bigrams) do
  bpts[i], bfill[i], bborder[i], blabels[i] = {e.x, e.y}, PALETTE16[e._cu], PALETTE16[e._pr], false
end
local axes = {xlabel = ("PC1 of the class means (%.1f%%)"):format(100 * pca.explained_ratio[1]),
              ylabel = ("PC2 (%.1f%%)"):format(100 * pca.explained_ratio[2])}
do
  local p, f, bo, l, ed = with_means(table.move(pts, 1, #pts, 1, {}), table.move(fill, 1, #fill, 1, {}),
                                     table.move(border, 1, #border, 1, {}), table.move(labels, 1, #labels, 1, {}))
  ex:figure(plot.scatter{points = p, fill = f, border = bo, labels = l, edges = ed, dashed = true, equal = true,
                         size = 4, width = 900, height = 800, xlabel = axes.xlabel, ylabel = axes.ylabel,
                         title = ("Layer %d, last %d positions of %d walks: fill = current word, ring = previous word")
                                 :format(layer, o.window, pw)}, "positions")
  p, f, bo, l, ed = with_means(table.move(bpts, 1, #bpts, 1, {}), table.move(bfill, 1, #bfill, 1, {}),
                               table.move(bborder, 1, #bborder, 1, {}), table.move(blabels, 1, #blabels, 1, {}))
  ex:figure(plot.scatter{points = p, fill = f, border = bo, labels = l, edges = ed, dashed = true, equal = true,
                         size = 5, width = 900, height = 800, xlabel = axes.xlabel, ylabel = axes.ylabel,
                         title = ("Layer %d, bigram means (seen >= %d times): fill = current, ring = previous word")
                                 :format(layer, o.min_count)}, "bigram_means")
end

for _, e in ipairs(bigrams) do e._cu, e._pr = nil, nil end
local summary = {
  model_name = name, arch = m.arch, backend = m.backend,
  layer = layer, hook = hook, seed = o.seed, walks = o.walks, length = o.length, window = o.window, words = WORDS,
  positions = N, pca_explained_ratio = pca.explained_ratio, class_mean_projections = pca.projections,
  classes_seen = #complete, pca_plane_variance_share = pca2_share,
  variance_ratio = ratios, previous_given_current = prev_given_cur, bigram_means = bigrams,
}
local lines = {}
lines[#lines + 1] = (("bigram_pca: %s, %d walks x %d words, last %d positions, %s (layer %d)"):format(
  name, o.walks, o.length, o.window, hook, layer))
lines[#lines + 1] = (("  class-mean PCA explained %.1f%% + %.1f%%; the plane holds %.1f%% of the per-position "
                      .. "variance"):format(
  100 * pca.explained_ratio[1], 100 * pca.explained_ratio[2], 100 * pca2_share))
lines[#lines + 1] = ("  between-class share of variance   full space   PCA plane   chance")
for _, k in ipairs({"current", "previous", "bigram"}) do
  local r = ratios[k]
  lines[#lines + 1] = (("    %-8s word%s                %6.3f      %6.3f     %6.3f"):format(k,
    k == "bigram" and "s" or " ",
    r.full, r.pca2, r.chance))
end
lines[#lines + 1] = (("  previous word, within current-word classes: %.3f (full), %.3f (plane)"):format(
  prev_given_cur.full, prev_given_cur.pca2))
ex:report(summary, lines)
