-- icl.metrics: rule-following accuracy on graph walks, class means, Dirichlet energy, per-token losses, the
-- in-context-learning score and small list helpers. Inner loops run in C (icl.linalg).
--
-- Position alignment. A walk of L words tokenized one token per word, with a BOS token first, gives the tokens
--   row:   0     1      2     ...  L
--   token: BOS   w1     w2    ...  wL
-- and logits [L + 1, vocab] whose row p predicts token p + 1. The logits row that follows word t is row t (0-based;
-- row t + 1 in 1-based Lua indexing), and it is scored against word t's neighbours; row 0 (BOS, predicting w1) is
-- not scored. In general the offset is rows - L (0 without BOS, 1 with it), and word t sits at 0-based row
-- offset + t - 1. Activations [pos, d] follow the same rule.
local metrics = {}

local function linalg() return icl.linalg end

local function to_list(x)
  if type(x) == "table" then return x end
  if type(x) == "userdata" then return x:totable() end
  error("expected a list or a 1-d tensor", 3)
end

local function rows_of(t, fname, what)
  local ok, nd = pcall(function() return t.ndim end)
  if type(t) ~= "userdata" or not ok or nd ~= 2 then
    error(string.format("%s: %s must be a 2-d tensor", fname, what), 3)
  end
  return t:shape()[1]
end

local function offset_for(rows, walk_len, opts, fname)
  local offset = opts.offset or rows - walk_len
  if math.type(offset) ~= "integer" or offset < 0 or offset + walk_len > rows then
    error(string.format("%s: %d rows cannot hold a walk of %d words (offset %s)", fname, rows, walk_len,
      tostring(opts.offset)), 3)
  end
  return offset
end

-- Accuracy from reduced logits (m:run{logits = {select = token_ids, lse = true}}): sel [rows, n] holds the logits
-- of the graph's word tokens in node order, lse [rows] the log-sum-exp over the vocabulary (nil in mode "graph").
local function mass_selected(sel, lse, walk, g, offset, mode)
  local S, Z, acc, exp = sel:totable(), lse and to_list(lse), {}, math.exp
  for t, node in ipairs(walk) do
    local row, nb, s = S[offset + t], g._adj[node], 0
    local z = mode == "full" and Z[offset + t] or nil
    if not z then -- softmax over the graph's words only
      local mx, sum = -math.huge, 0
      for j = 1, #row do mx = math.max(mx, row[j]) end
      for j = 1, #row do sum = sum + exp(row[j] - mx) end
      z = mx + math.log(sum)
    end
    for _, j in ipairs(nb) do s = s + exp(row[j] - z) end
    acc[t] = s
  end
  return acc
end

-- rule_following(logits, walk, graph, {mode = "full" | "graph", token_ids = ids, model = m, offset = o,
--                lse = t, selected = false}):
-- a list of #walk accuracies: acc[t] is the probability mass that the logits row following word t puts on the
-- tokens of walk[t]'s neighbours. mode "full" (default): softmax over the whole vocabulary; "graph": softmax
-- over the graph's word tokens only. token_ids (node -> token id) comes from graph:token_ids(model), or is
-- computed from opts.model. Reduced logits: with opts.lse (the run's `lse`, for mode "full") or opts.selected =
-- true (mode "graph"), logits is [rows, g.n] from m:run{logits = {select = token_ids, lse = true}}: column i
-- holds node i's token, so the whole [rows, vocab] matrix is never needed.
function metrics.rule_following(logits, walk, g, opts)
  opts = opts or {}
  local fname = "metrics.rule_following"
  local rows = rows_of(logits, fname, "logits")
  if type(walk) ~= "table" or #walk == 0 then error(fname .. ": walk must be a non-empty list of node ids", 2) end
  if type(g) ~= "table" or not g._adj then error(fname .. ": graph must be an icl.graph", 2) end
  local ids = opts.token_ids or (opts.model and g:token_ids(opts.model))
  if type(ids) ~= "table" or #ids ~= g.n then
    error(fname .. ": opts.token_ids must map each of the graph's nodes to a token id (see graph:token_ids)", 2)
  end
  local vocab = logits:shape()[2]
  local mode = opts.mode or "full"
  if mode ~= "full" and mode ~= "graph" then error(fname .. ": mode must be \"full\" or \"graph\"", 2) end
  if opts.lse ~= nil or opts.selected then
    if vocab ~= g.n then
      error(string.format("%s: reduced logits need one column per node (%d), got %d", fname, g.n, vocab), 2)
    end
    if mode == "full" and opts.lse == nil then
      error(fname .. ": mode \"full\" on selected logits needs opts.lse", 2)
    end
    if opts.lse ~= nil and #to_list(opts.lse) ~= rows then
      error(fname .. ": opts.lse must hold one value per row", 2)
    end
    for t, node in ipairs(walk) do
      if math.type(node) ~= "integer" or node < 1 or node > g.n then
        error(string.format("%s: walk[%d] is not a node id in 1..%d", fname, t, g.n), 2)
      end
    end
    return mass_selected(logits, opts.lse, walk, g, offset_for(rows, #walk, opts, fname), mode)
  end
  for i, id in ipairs(ids) do
    if math.type(id) ~= "integer" or id < 0 or id >= vocab then
      error(string.format("%s: token_ids[%d] = %s is not a token id of the logits' %d columns", fname, i,
        tostring(id), vocab), 2)
    end
  end
  local offset = offset_for(rows, #walk, opts, fname)
  local row_list, targets, cache = {}, {}, {}
  for t, node in ipairs(walk) do
    if math.type(node) ~= "integer" or node < 1 or node > g.n then
      error(string.format("%s: walk[%d] is not a node id in 1..%d", fname, t, g.n), 2)
    end
    if not cache[node] then
      local tg = {}
      for k, j in ipairs(g._adj[node]) do tg[k] = ids[j] end
      cache[node] = tg
    end
    row_list[t] = offset + t
    targets[t] = cache[node]
  end
  return linalg().softmax_mass(logits, row_list, targets, mode == "graph" and ids or nil)
end

-- class_means(acts, walk, window, n_classes): tensor [n_classes, d] of the mean activation row of each node
-- over the words of the window ({last = L}, {from = a, to = b} with 1-based word indices, or nil for all), and a
-- list of counts. acts [pos, d] is aligned with the walk as described at the top (offset rows - #walk). Lists of
-- acts and walks pool several sequences. Classes never seen get NaN rows. n_classes defaults to the largest
-- node id in the walks.
function metrics.class_means(acts, walk, window, n_classes)
  return linalg().class_means(acts, walk, window, n_classes)
end

-- dirichlet_energy(X, graph, {normalized = false}): X [n, d] holds one row per node. Raw: the mean over edges of
-- |x_i - x_j|^2. Normalized: X / |X|_F, then E = 1/2 sum_ij A_ij |x_i - x_j|^2 / d (d the number of columns).
function metrics.dirichlet_energy(X, g, opts)
  return linalg().dirichlet_energy(X, g, opts)
end

-- token_loss(logits, tokens): tokens are the P token ids the logits [P, vocab] were computed on. Returns P - 1
-- losses: losses[i] = -log p(tokens[i + 1] | tokens[1..i]) from logits row i (1-based), i.e. the loss on the
-- (i + 1)-th token of the sequence.
function metrics.token_loss(logits, tokens)
  local fname = "metrics.token_loss"
  local rows = rows_of(logits, fname, "logits")
  tokens = to_list(tokens)
  if #tokens ~= rows then
    error(string.format("%s: %d tokens for %d logits rows", fname, #tokens, rows), 2)
  end
  local row_list, targets = {}, {}
  for i = 1, rows - 1 do
    row_list[i] = i
    targets[i] = tokens[i + 1]
  end
  return linalg().token_nll(logits, row_list, targets)
end

-- mean_std(lists): per-position mean and (population) standard deviation over several equal-length lists.
function metrics.mean_std(lists)
  if type(lists) ~= "table" or #lists == 0 then error("metrics.mean_std: expected a non-empty list of lists", 2) end
  local k, ls = #lists, {}
  for j = 1, k do ls[j] = to_list(lists[j]) end
  local n, mean, std = #ls[1], {}, {}
  for i = 1, n do
    local s, s2 = 0, 0
    for j = 1, k do
      local v = ls[j][i]
      if v == nil then error(string.format("metrics.mean_std: list %d is shorter than list 1", j), 2) end
      s, s2 = s + v, s2 + v * v
    end
    mean[i] = s / k
    std[i] = math.sqrt(math.max(0, s2 / k - mean[i] * mean[i]))
  end
  return mean, std
end

-- icl_score(losses, {late = 500, early = 50}): the loss on token `late` minus the loss on token `early` (1-based
-- token indices in the sequence, BOS included when present: losses from token_loss, so losses[late - 1] -
-- losses[early - 1]), after Olsson et al. (2022). Negative when later tokens are predicted better. losses may be
-- a list of loss lists (one per sequence), averaged per position first.
function metrics.icl_score(losses, opts)
  opts = opts or {}
  local late, early = opts.late or 500, opts.early or 50
  if type(losses) == "table" and type(losses[1]) ~= "number" then losses = metrics.mean_std(losses) end
  losses = to_list(losses)
  if math.type(early) ~= "integer" or math.type(late) ~= "integer" or early < 2 or late < 2 then
    error("metrics.icl_score: late and early must be token indices >= 2", 2)
  end
  if #losses < math.max(late, early) - 1 then
    error(string.format("metrics.icl_score: need losses up to token %d, have %d tokens", math.max(late, early),
      #losses + 1), 2)
  end
  return losses[late - 1] - losses[early - 1]
end

-- moving_average(xs, w): trailing mean over windows of w values: out[i] = mean of the finite values among
-- xs[max(1, i - w + 1) .. i] (NaN when none). Same length as xs.
function metrics.moving_average(xs, w)
  xs = to_list(xs)
  if math.type(w) ~= "integer" or w < 1 then error("metrics.moving_average: w must be a positive integer", 2) end
  local out, s, cnt = {}, 0, 0
  local function add(v, sign)
    if v == v and v ~= math.huge and v ~= -math.huge then s, cnt = s + sign * v, cnt + sign end
  end
  for i = 1, #xs do
    add(xs[i], 1)
    if i > w then add(xs[i - w], -1) end
    out[i] = cnt > 0 and s / cnt or 0 / 0
  end
  return out
end

-- by_range(xs, ranges): for each {from, to} of ranges (1-based positions) that overlaps xs, {from =, to =,
-- mean = the mean of xs[max(from, 1) .. min(to, #xs)]}; ranges wholly outside xs are left out.
function metrics.by_range(xs, ranges)
  xs = to_list(xs)
  if type(ranges) ~= "table" then error("metrics.by_range: ranges must be a list of {from, to}", 2) end
  local out = {}
  for k, rg in ipairs(ranges) do
    if type(rg) ~= "table" or math.type(rg[1]) ~= "integer" or math.type(rg[2]) ~= "integer" then
      error(string.format("metrics.by_range: ranges[%d] must be {from, to} integers", k), 2)
    end
    local a, b = math.max(rg[1], 1), math.min(rg[2], #xs)
    if a <= b then out[#out + 1] = {from = rg[1], to = rg[2], mean = metrics.mean(xs, a, b)} end
  end
  return out
end

-- present(means): the node ids whose class-mean rows are finite (seen in the window) and those that are not.
function metrics.present(means)
  local rows = means:totable()
  local seen, absent = {}, {}
  for i, r in ipairs(rows) do
    local ok = true
    for _, v in ipairs(r) do if v ~= v or v == math.huge or v == -math.huge then ok = false break end end
    if ok then seen[#seen + 1] = i else absent[#absent + 1] = i end
  end
  return seen, absent
end

-- The graph's edges among the nodes of `keep`, renumbered 1..#keep in that order.
local function induced_edges(g, keep)
  local new, edges = {}, {}
  for k, i in ipairs(keep) do new[i] = k end
  for _, e in ipairs(g.edges) do
    if new[e[1]] and new[e[2]] then edges[#edges + 1] = {new[e[1]], new[e[2]]} end
  end
  return edges
end
metrics.induced_edges = induced_edges

-- Energies of X (rows = nodes) and of K row shuffles of it: the null of a graph whose labels carry no information.
local function energy_with_null(X, edges, shuffles, rng)
  local la = linalg()
  local e = {energy = la.dirichlet_energy(X, edges, {normalized = true}), raw = la.dirichlet_energy(X, edges)}
  if shuffles > 0 then
    local n, s, s_raw, below = X:shape()[1], 0, 0, 0
    for _ = 1, shuffles do
      local perm = rng:shuffle((function() local p = {} for i = 1, n do p[i] = i end return p end)())
      local Y = X:index_select(1, perm)
      local v = la.dirichlet_energy(Y, edges, {normalized = true})
      s, s_raw = s + v, s_raw + la.dirichlet_energy(Y, edges)
      if v < e.energy then below = below + 1 end
      Y:close()
    end
    e.null_mean, e.null_raw_mean, e.null_below = s / shuffles, s_raw / shuffles, below / shuffles
  end
  return e
end
metrics.energy_with_null = energy_with_null

-- Hop distances between every pair of nodes of keep (a list of node numbers of g), by breadth-first search on the
-- whole graph; pairs in keep order (i < j). math.huge where no path joins two nodes.
local function hop_pairs(g, keep)
  local out = {}
  for a = 1, #keep do
    local dist, queue, head = {[keep[a]] = 0}, {keep[a]}, 1
    while head <= #queue do
      local u = queue[head]
      head = head + 1
      for _, v in ipairs(g:neighbors(u)) do
        if not dist[v] then dist[v] = dist[u] + 1; queue[#queue + 1] = v end
      end
    end
    for b = a + 1, #keep do out[#out + 1] = dist[keep[b]] or math.huge end
  end
  return out
end

-- Ranks of xs (1 = smallest), ties given their average rank.
local function ranks(xs)
  local idx = {}
  for i = 1, #xs do idx[i] = i end
  table.sort(idx, function(a, b) if xs[a] ~= xs[b] then return xs[a] < xs[b] end return a < b end)
  local r, i = {}, 1
  while i <= #idx do
    local j = i
    while j < #idx and xs[idx[j + 1]] == xs[idx[i]] do j = j + 1 end
    for k = i, j do r[idx[k]] = (i + j) / 2 end
    i = j + 1
  end
  return r
end

-- spearman(xs, ys): Spearman's rank correlation of two equally long lists (Pearson's on average ranks); NaN when
-- either list is constant.
function metrics.spearman(xs, ys)
  xs, ys = to_list(xs), to_list(ys)
  if #xs ~= #ys or #xs < 2 then
    error(("metrics.spearman: lists of %d and %d values (need equal, >= 2)"):format(#xs, #ys), 2)
  end
  local rx, ry, n = ranks(xs), ranks(ys), #xs
  local mx, my, sxy, sxx, syy = (n + 1) / 2, (n + 1) / 2, 0, 0, 0
  for i = 1, n do
    local a, b = rx[i] - mx, ry[i] - my
    sxy, sxx, syy = sxy + a * b, sxx + a * a, syy + b * b
  end
  return sxy / math.sqrt(sxx * syy)
end

-- grid_fit(points, g, keep, {shuffles = 200, seed = 1}): how well a layout (points [#keep, dims], row k the node
-- keep[k], e.g. the PCA projections of class means) recovers the graph: Spearman's rho between the pairs' Euclidean
-- distances in the layout and their hop distances on g (1 = the layout orders every pair as the graph does), beside
-- the same rho with the rows' node labels shuffled (the null of a layout that carries no graph information).
-- Returns {rho, null_mean, null_sd, null_above = the fraction of shuffles with rho >= the true one, shuffles, pairs}.
function metrics.grid_fit(points, g, keep, opts)
  opts = opts or {}
  local shuffles = opts.shuffles or 200
  rows_of(points, "metrics.grid_fit", "points")
  local P = points:totable()
  if #P ~= #keep then error(("metrics.grid_fit: %d points for %d nodes"):format(#P, #keep), 2) end
  if #keep < 3 then error("metrics.grid_fit: need at least 3 nodes", 2) end
  local hops = hop_pairs(g, keep)
  local function layout_dists(perm)
    local d = {}
    for a = 1, #P do
      for b = a + 1, #P do
        local pa, pb, s = P[perm[a]], P[perm[b]], 0
        for c = 1, #pa do s = s + (pa[c] - pb[c]) ^ 2 end
        d[#d + 1] = math.sqrt(s)
      end
    end
    return d
  end
  local id = {}
  for i = 1, #P do id[i] = i end
  local out = {rho = metrics.spearman(layout_dists(id), hops), shuffles = shuffles, pairs = #hops}
  if shuffles > 0 then
    local rng, s, ss, above = icl.rng.new(opts.seed or 1), 0, 0, 0
    for _ = 1, shuffles do
      local perm = {}
      for i = 1, #P do perm[i] = i end
      local v = metrics.spearman(layout_dists(rng:shuffle(perm)), hops)
      s, ss = s + v, ss + v * v
      if v >= out.rho then above = above + 1 end
    end
    out.null_mean = s / shuffles
    out.null_sd = math.sqrt(math.max(0, ss / shuffles - out.null_mean ^ 2))
    out.null_above = above / shuffles
  end
  return out
end

-- energy_curve(acts, walks, g, {ts = {...}, window = 200, shuffles = 0, seed = 1}): for each context length t
-- (words), the Dirichlet energy of the class means over the window of words max(1, t - window + 1) .. t pooled over
-- the walks: {t =, energy = normalized, raw = the mean over edges of |x_i - x_j|^2 (Park et al.'s measure),
-- null_mean, null_raw_mean and null_below (the fraction of label shuffles whose energy is below the true one;
-- with shuffles > 0), missing = {words absent from the window}}. A t with absent classes gets no energies (as
-- Park et al. skip it); a t beyond the walks is left out.
function metrics.energy_curve(acts, walks, g, opts)
  opts = opts or {}
  local ts, window, shuffles = opts.ts, opts.window or 200, opts.shuffles or 0
  if type(ts) ~= "table" then error("metrics.energy_curve: opts.ts must be a list of context lengths", 2) end
  local rng, len, out = icl.rng.new(opts.seed or 1), #walks[1], {}
  for _, t in ipairs(ts) do
    if t <= len then
      local cm = metrics.class_means(acts, walks, {from = math.max(1, t - window + 1), to = t}, g.n)
      local _, absent = metrics.present(cm)
      local row = {t = t}
      if #absent == 0 then
        for k, v in pairs(energy_with_null(cm, g.edges, shuffles, rng)) do row[k] = v end
      else
        row.energy, row.missing = icl.json.null, {}
        for k, i in ipairs(absent) do row.missing[k] = g.words[i] end
      end
      out[#out + 1] = row
      cm:close()
    end
  end
  return out
end

-- mean(xs, from, to): the mean of xs[from..to] (defaults: the whole list).
function metrics.mean(xs, from, to)
  xs = to_list(xs)
  from, to = from or 1, to or #xs
  if from < 1 or to > #xs or from > to then error("metrics.mean: range outside the list", 2) end
  local s = 0
  for i = from, to do s = s + xs[i] end
  return s / (to - from + 1)
end

-- mean_se(xs): the mean of a list and the standard error of that mean (sample sd / sqrt(n); 0 for one value).
function metrics.mean_se(xs)
  local v = to_list(xs)
  local n = #v
  if n == 0 then error("metrics.mean_se: expected a non-empty list", 2) end
  local s = 0
  for i = 1, n do s = s + v[i] end
  local mu, q = s / n, 0
  for i = 1, n do q = q + (v[i] - mu) ^ 2 end
  return mu, n > 1 and math.sqrt(q / (n - 1) / n) or 0
end

-- pool(cells [, mean_key, se_key]): one {mean, se, n} cell from several cells of disjoint samples, each given as
-- its mean, standard error (sample sd / sqrt(n)) and n; exactly what mean_se gives on the concatenated samples
-- (the between-cell spread is added to the within-cell one). mean_key/se_key name other fields (e.g. "delta").
function metrics.pool(cells, mean_key, se_key)
  mean_key, se_key = mean_key or "mean", se_key or "se"
  if type(cells) ~= "table" or #cells == 0 then error("metrics.pool: expected a non-empty list of cells", 2) end
  local N, s = 0, 0
  for i, c in ipairs(cells) do
    local n, m, e = c.n, c[mean_key], c[se_key]
    if type(n) ~= "number" or n < 1 or n ~= math.floor(n) or type(m) ~= "number" or type(e) ~= "number" or e < 0 then
      error(("metrics.pool: cell %d: expected n >= 1 (an integer), a %s and a %s >= 0"):format(i, mean_key, se_key), 2)
    end
    N, s = N + n, s + n * m
  end
  local mu, q = s / N, 0
  for _, c in ipairs(cells) do
    q = q + (c.n - 1) * (c[se_key] ^ 2 * c.n) + c.n * (c[mean_key] - mu) ^ 2
  end
  return {mean = mu, se = N > 1 and math.sqrt(q / (N - 1) / N) or 0, n = N}
end

-- paired(a, b [, c, d]): the paired difference of equal-length lists, a[j] - b[j] (minus c[j] - d[j] when c and
-- d are given): {n, mean, se, lo, hi} with the standard error over j and the normal 95% interval; {n = 0} when
-- the lists are empty.
function metrics.paired(a, b, c, d)
  local n = #a
  if n == 0 then return {n = 0} end
  if #b ~= n or (c and (#c ~= n or #d ~= n)) then error("metrics.paired: lists of different lengths", 2) end
  local diff = {}
  for j = 1, n do diff[j] = a[j] - b[j] - (c and (c[j] - d[j]) or 0) end
  local mean, se = metrics.mean_se(diff)
  return {n = n, mean = mean, se = se, lo = mean - 1.96 * se, hi = mean + 1.96 * se}
end

return metrics
