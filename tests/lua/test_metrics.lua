-- icl.metrics: rule-following accuracy on hand-built distributions, class means, Dirichlet energy, losses, the
-- ICL score and list helpers.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-6) end
local function near_list(a, b, tol)
  if #a ~= #b then return false end
  for i = 1, #a do if not near(a[i], b[i], tol) then return false end end
  return true
end
local M = icl.metrics

-- Ring a - b - c - d - a with tokens 10..13 in a vocabulary of 16. Walk 1, 2, 3 after a BOS row.
local g = icl.graph.ring(4, { "a", "b", "c", "d" })
local ids = { 10, 11, 12, 13 }
local V = 16
local rows = {}
for r = 1, 4 do
  rows[r] = {}
  for v = 1, V do rows[r][v] = 0 end
end
rows[1][1] = 50                -- BOS row: not scored
rows[2][11 + 1] = math.log(6)  -- after word 1 (a): neighbours b, d = tokens 11, 13
rows[3][10 + 1] = math.log(3)  -- after word 2 (b): neighbours a, c = tokens 10, 12
rows[3][12 + 1] = math.log(3)
                               -- after word 3 (c): uniform
local logits = icl.tensor.from(rows)
local walk = { 1, 2, 3 }
local full = M.rule_following(logits, walk, g, { token_ids = ids })
check(near_list(full, { 7 / 21, 6 / 20, 2 / 16 }), "full-vocabulary accuracy")
local graph_only = M.rule_following(logits, walk, g, { token_ids = ids, mode = "graph" })
check(near_list(graph_only, { 7 / 9, 6 / 8, 2 / 4 }), "graph-restricted accuracy")
local no_bos = icl.tensor.from({ rows[2], rows[3], rows[4] })
check(near_list(M.rule_following(no_bos, walk, g, { token_ids = ids }), full), "without BOS: offset 0")
check(near_list(M.rule_following(logits, { 2, 3 }, g, { token_ids = ids, offset = 2 }), { 6 / 20, 2 / 16 }),
  "explicit offset")
check(errs(function() M.rule_following(logits, walk, g, {}) end, "token_ids"), "token_ids required")
check(errs(function() M.rule_following(logits, walk, g, { token_ids = { 10, 11, 12, 16 } }) end, "token_ids[4] = 16"),
  "token ids checked against the vocabulary")
check(errs(function() M.rule_following(logits, { 1, 2, 3, 4, 1 }, g, { token_ids = ids }) end, "rows cannot hold"),
  "walk longer than logits")
check(errs(function() M.rule_following(logits, walk, g, { token_ids = ids, mode = "x" }) end, "mode"), "bad mode")

-- class means: BOS row, then words 1, 2, 1
local acts = icl.tensor.from({ { 100, 100 }, { 1, 2 }, { 3, 4 }, { 5, 6 } })
local means, counts = M.class_means(acts, { 1, 2, 1 }, nil, 3)
check(near(means:get(1, 1), 3) and near(means:get(1, 2), 4) and near(means:get(2, 1), 3), "class means")
check(means:get(3, 1) ~= means:get(3, 1) and counts[1] == 2 and counts[2] == 1 and counts[3] == 0,
  "unseen class is NaN, counts")
local last2 = M.class_means(acts, { 1, 2, 1 }, { last = 2 }, 2)
check(near(last2:get(1, 1), 5) and near(last2:get(2, 2), 4), "window last = 2")
local mid = M.class_means(acts, { 1, 2, 1 }, { from = 1, to = 2 })
check(near(mid:get(1, 1), 1) and mid:shape()[1] == 2, "window from/to, n_classes from the walk")
local acts2 = icl.tensor.from({ { 0, 0 }, { 7, 8 }, { 9, 10 } })
local pooled, pc = M.class_means({ acts, acts2 }, { { 1, 2, 1 }, { 2, 1 } }, nil, 2)
check(near(pooled:get(1, 1), (1 + 5 + 9) / 3) and near(pooled:get(2, 2), (4 + 8) / 2) and pc[1] == 3, "pooled")
check(errs(function() M.class_means(acts, { 1, 2, 1, 2, 1 }, nil, 2) end, "fewer rows"), "acts too short")
check(errs(function() M.class_means(acts, { 1, 2, 7 }, nil, 3) end, "walk holds node 7"), "class id out of range")

-- Dirichlet energy of a unit square embedding of the 4-ring
local X = icl.tensor.from({ { 0, 0 }, { 1, 0 }, { 1, 1 }, { 0, 1 } })
check(near(M.dirichlet_energy(X, g), 1), "raw energy = mean squared edge length")
check(near(M.dirichlet_energy(X, g, { normalized = true }), 4 / 4 / 2), "normalized energy")
local Xs = icl.tensor.from({ { 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 } }) -- crossed: two diagonals
check(near(M.dirichlet_energy(Xs, g), 1.5), "crossed embedding has higher energy")
check(near(M.dirichlet_energy(X, g.edges), 1), "edges list accepted")

-- token loss: row 1 gives token 1 probability 1/2, row 2 is uniform over 4
local L = icl.tensor.from({ { 0, math.log(3), 0, 0 }, { 0, 0, 0, 0 }, { 9, 9, 9, 9 } })
local losses = M.token_loss(L, { 0, 1, 3 })
check(#losses == 2 and near(losses[1], math.log(2)) and near(losses[2], math.log(4)), "token_loss")
check(errs(function() M.token_loss(L, { 0, 1 }) end, "2 tokens for 3 logits rows"), "token count")

-- ICL score: loss on token 500 minus loss on token 50
local ls = {}
for i = 1, 600 do ls[i] = 10 / i end
check(near(M.icl_score(ls), 10 / 499 - 10 / 49, 1e-12), "icl_score")
check(near(M.icl_score({ ls, ls }), 10 / 499 - 10 / 49, 1e-12), "icl_score over sequences")
check(near(M.icl_score(ls, { late = 100, early = 10 }), 10 / 99 - 10 / 9, 1e-12), "icl_score positions")
check(errs(function() M.icl_score({ 1, 2, 3 }) end, "need losses up to token 500"), "short losses")

-- helpers
check(near_list(M.moving_average({ 1, 2, 3, 4 }, 2), { 1, 1.5, 2.5, 3.5 }), "moving_average")
check(near_list(M.moving_average({ 1, 0 / 0, 3 }, 2), { 1, 1, 3 }), "moving_average skips NaN")
local mean, std = M.mean_std({ { 1, 2 }, { 3, 6 } })
check(near_list(mean, { 2, 4 }) and near_list(std, { 1, 2 }), "mean_std")
check(near(M.mean({ 1, 2, 3, 4 }, 2, 3), 2.5) and near(M.mean({ 2, 4 }), 3), "mean")

-- mean_se and paired by hand: {1, 0, 2, 0}: mean 0.75, SE sqrt(2.75 / 3 / 4)
do
  local mu, se = M.mean_se({1, 0, 2, 0})
  check(near(mu, 0.75, 1e-12) and near(se, math.sqrt(2.75 / 12), 1e-12), "mean_se")
  local one, z = M.mean_se({3})
  check(one == 3 and z == 0, "mean_se of one value: SE 0")
  raises(function() M.mean_se({}) end, "non-empty list", "mean_se of nothing")
  -- pool of two cells equals mean_se over the concatenation: {1, 0} and {2, 0, 4}
  local m1, s1 = M.mean_se({1, 0})
  local m2, s2 = M.mean_se({2, 0, 4})
  local mall, sall = M.mean_se({1, 0, 2, 0, 4})
  local pc = M.pool({{mean = m1, se = s1, n = 2}, {mean = m2, se = s2, n = 3}})
  check(pc.n == 5 and near(pc.mean, mall, 1e-12) and near(pc.se, sall, 1e-12), "pool: equals mean_se of all")
  local pd = M.pool({{delta = m1, delta_se = s1, n = 2}, {delta = 7, delta_se = 0, n = 1}}, "delta", "delta_se")
  local md, sd = M.mean_se({1, 0, 7})
  check(pd.n == 3 and near(pd.mean, md, 1e-12) and near(pd.se, sd, 1e-12), "pool: other keys")
  raises(function() M.pool({}) end, "non-empty list", "pool of nothing")
  raises(function() M.pool({{mean = 1, se = 0, n = 0}}) end, "cell 1: expected n >= 1", "pool: bad n")
  local p = M.paired({2, 1, 5, 3}, {1, 1, 3, 3})                 -- differences {1, 0, 2, 0}
  check(p.n == 4 and near(p.mean, 0.75, 1e-12) and near(p.se, math.sqrt(2.75 / 12), 1e-12), "paired: mean and SE")
  check(near(p.lo, 0.75 - 1.96 * p.se, 1e-12) and near(p.hi, 0.75 + 1.96 * p.se, 1e-12), "paired: 95% interval")
  local q = M.paired({2, 1, 5, 3}, {1, 1, 3, 3}, {1, 1, 1, 1}, {0, 1, 1, 1}) -- minus {1, 0, 0, 0}
  check(near(q.mean, 0.5, 1e-12), "paired: beyond a second difference")
  check(M.paired({}, {}).n == 0, "paired: empty lists")
  raises(function() M.paired({1, 2}, {1}) end, "different lengths", "paired: lengths must match")
end

do -- Spearman's rho and the layout-vs-graph fit with its label-shuffle null
  local function rows(list) -- a tensor [#list, 2] of {x, y} rows
    local flat = {}
    for i, r in ipairs(list) do flat[2 * i - 1], flat[2 * i] = r[1], r[2] end
    return icl.tensor.new({#list, 2}, flat)
  end
  check(near(M.spearman({1, 2, 3, 4}, {10, 20, 30, 41}), 1, 1e-12), "spearman: same order -> 1")
  check(near(M.spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1, 1e-12), "spearman: reversed -> -1")
  -- ties share the average rank: x ranks {1, 2.5, 2.5, 4}: rho = 4.5 / sqrt(4.5 * 5)
  check(near(M.spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 4.5 / math.sqrt(22.5), 1e-12), "spearman with ties")
  local c = M.spearman({1, 1, 1}, {1, 2, 3})
  check(c ~= c, "spearman of a constant list is NaN")
  raises(function() M.spearman({1, 2}, {1}) end, "lists of 2 and 1 values", "spearman: lengths must match")
  -- a path of 8 words laid out on a line at integer positions: distances equal hop counts, rho = 1; shuffled labels
  -- fall far below
  local words, edges, pts, keep = {}, {}, {}, {}
  for i = 1, 8 do
    words[i], pts[i], keep[i] = "w" .. i, {i - 1, 0}, i
    if i > 1 then edges[#edges + 1] = {i - 1, i} end
  end
  local path = icl.graph.from_edges(words, edges)
  local f = M.grid_fit(rows(pts), path, keep, {shuffles = 100, seed = 3})
  check(near(f.rho, 1, 1e-12) and f.pairs == 28 and f.shuffles == 100, "grid_fit: a line fits the path exactly")
  check(f.null_above == 0 and math.abs(f.null_mean) < 0.3 and f.null_sd > 0,
        ("grid_fit: null mean %.3f, sd %.3f, above %.2f"):format(f.null_mean, f.null_sd, f.null_above))
  -- the same points with two labels swapped fit worse; a subset of nodes uses hops on the whole graph
  local swapped = {table.unpack(pts)}
  swapped[1], swapped[5] = pts[5], pts[1]
  check(M.grid_fit(rows(swapped), path, keep, {shuffles = 0}).rho < 0.8, "grid_fit: a wrong label lowers rho")
  local sub = M.grid_fit(rows({{0, 0}, {5, 0}, {1, 0}}), path, {1, 6, 3}, {shuffles = 0})
  check(near(sub.rho, 1, 1e-12) and sub.null_mean == nil, "grid_fit: nodes 1, 6, 3 at hops 5, 2, 3 on the whole path")
  raises(function() M.grid_fit(rows(pts), path, {1, 2}) end, "8 points for 2 nodes", "grid_fit: rows = nodes")
end


tl.done()
