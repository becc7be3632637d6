-- Head ablation on the grid-tracing task: remove hook_z of the top-k induction heads, of the top-k previous-token
-- heads, or of random heads (control), and measure rule-following accuracy against context length; PCA of class
-- means with the top-k_pca heads of each kind ablated; and, for every ablated set, a capability check: the
-- next-token loss on natural text and on repeated random tokens (icl.ablation).
--   icl script experiments/head_ablation.lua --help   lists the options and their defaults
-- --ablation zero (the default), mean or resample, or several (zero,mean,resample: one run shares the unablated
-- runs and the random sets): zero sets hook_z of the ablated heads to 0; mean replaces it at every position by the
-- head's mean hook_z over every position of the OTHER walks' unablated runs (leave-one-out); resample patches it
-- with its value at the same positions in a donor walk's unablated run: --donor next (walk b takes walk b % walks + 1's)
-- or colour (the next walk whose start word has walk b's colour on the bipartite grid: under next, a donor starting
-- at a row neighbour is on the other colour at every position, so its next word is never valid for walk b;
-- docs/results.md). The capability check does the same within its own sets (text windows, random-token sequences).
-- Cost: per walk 1 + (2 #ks + #random-sets x #ks) x #modes runs of `length` + 1 tokens (37 runs per walk with the
-- defaults), plus the capability check's short runs; see docs/experiments.md for timings.
local graph, metrics, plot, json, X = icl.graph, icl.metrics, icl.plot, icl.json, icl.experiment
local A = icl.ablation

local ex = X{name = "head_ablation",
  about = "zero, mean or resample ablation of hook_z of the top-k induction / previous-token heads or of random heads",
  options = {{"layer", -1, "layer of the PCA representation (-1: 80% of the depth)", int = {-1, 1 << 16}},
             {"hook", "hook_resid_pre", "hook point at that layer"},
             {"walks", 4, "walks (the full protocol is 16); walk b uses seed S + b - 1, starts at word b", int = {1, 1 << 16}},
             {"length", 1400, "words per walk", int = {2, 1 << 20}}, {"ks", "1,2,4,8,16,32", "numbers of heads to ablate"},
             {"ablation", "zero", "zero, mean or resample, or a comma list of them (mean and resample need --walks >= 2)"},
             {"donor", "next", "resample donor of walk b: next (walk b % walks + 1) or colour (the next walk starting on walk b's colour of the bipartite grid)"},
             {"k_pca", -1, "heads of each kind ablated for the PCA figures (-1: 32 x heads / 1024, >= 1)", int = {-1, 1 << 20}},
             {"random_sets", 4, "random control sets per k, seeds 100, 101, ...", int = {0, 1 << 16}},
             {"exclude_top", 32, "random heads are drawn outside the union of the top N of each kind", int = {0, 1 << 20}},
             {"random_layers", "all", "layers random heads are drawn from: all, or below-pca (only the layers that can act on the PCA's point)"},
             {"scores", "", "head_scores (or head_ablation) summary.json to rank heads (default: score them here)"},
             {"score_seed", 42, "seed of the head-score sequences when scoring here", int = {0, 0x7fffffff}},
             {"score_n_seq", 32, "head-score sequences", int = {1, 1 << 16}}, {"score_len", 32, "head-score sequence length", int = {2, 1 << 20}},
             {"window", 200, "positions for class means (the last W)", int = {1, 1 << 20}},
             {"text", "auto", "capability check: comma list of text files, none, or auto (data/shakespeare/shakespeare.txt and data/web/web.txt where present; scripts/fetch-data.sh text web)"},
             {"text_seqs", 4, "text windows per file (random offsets, seed S + 7)", int = {2, 1 << 16}},
             {"text_len", 256, "tokens per text window (BOS included)", int = {3, 1 << 20}},
             {"rep_seqs", 8, "repeated random-token sequences (BOS + 2 x --score-len tokens, seed S + 11) for the loss on the second copy", int = {0, 1 << 16}}},
  quick = {walks = 1, length = 150, ks = "2,8", random_sets = 2, window = 100, score_n_seq = 4, score_len = 16,
           text_seqs = 2, text_len = 64, rep_seqs = 2}}
local o = ex.o
local score_nseq, score_len = o.score_n_seq, o.score_len
for _, k in ipairs({"walks", "length", "random_sets", "exclude_top", "window", "seed", "score_seed", "k_pca"}) do
  if math.type(o[k]) ~= "integer" then error(("--%s must be an integer"):format(k:gsub("_", "-")), 0) end
end
if o.random_layers ~= "all" and o.random_layers ~= "below-pca" then
  error(("--random-layers '%s': expected all or below-pca"):format(o.random_layers), 0)
end
if o.walks < 1 or o.length < 2 or o.random_sets < 0 or o.window < 1 or o.window > o.length then
  error("need --walks >= 1, --length >= 2, --random-sets >= 0 and 1 <= --window <= --length", 0)
end
-- --ablation: distinct modes in the order given
local modes, mode_seen = {}, {}
for s in o.ablation:gmatch("[^,%s]+") do
  A.check_mode(s, "--ablation")
  if not mode_seen[s] then modes[#modes + 1], mode_seen[s] = s, true end
end
if #modes == 0 then error(("--ablation '%s': expected zero, mean or resample, or a comma list of them"):format(o.ablation), 0) end
if (mode_seen.mean or mode_seen.resample) and o.walks < 2 then
  error(("--ablation %s needs --walks >= 2 (the mean and the donor come from the other walks); got --walks %d")
        :format(o.ablation, o.walks), 0)
end
-- --text: the capability check's files
local text_files = {}
if o.text == "auto" then
  for _, f in ipairs({"data/shakespeare/shakespeare.txt", "data/web/web.txt"}) do
    local fh = io.open(f, "rb")
    if fh then fh:close(); text_files[#text_files + 1] = f end
  end
elseif o.text ~= "none" then
  for f in o.text:gmatch("[^,]+") do
    local fh = io.open(f, "rb")
    if not fh then error(("--text %s: cannot open %s (scripts/fetch-data.sh text web fetches the corpora)"):format(o.text, f), 0) end
    fh:close()
    text_files[#text_files + 1] = f
  end
end

local WORDS = X.words(16)
local g = graph.grid(4, 4, WORDS)

-- resample donors of the walks (walk b starts at word (b - 1) % 16 + 1). Every step of a walk changes its colour on
-- the bipartite grid, so two walks whose starts differ in colour never share one.
if o.donor ~= "next" and o.donor ~= "colour" then
  error(("--donor '%s': expected next or colour"):format(o.donor), 0)
end
local colour = assert(g:colours())
local function start_of(b) return (b - 1) % g.n + 1 end
local donors = {}
for b = 1, o.walks do
  if o.donor == "next" then donors[b] = b % o.walks + 1
  else
    for d = 1, o.walks - 1 do
      local c = (b - 1 + d) % o.walks + 1
      if colour[start_of(c)] == colour[start_of(b)] then donors[b] = c break end
    end
    if not donors[b] and mode_seen.resample then
      error(("--donor colour: walk %d (starting at word %d) has no other walk starting on its colour; --walks %d, "
             .. "expected --walks >= 4 (two walks starting on each colour)"):format(b, start_of(b), o.walks), 0)
    end
  end
end
local RANDOM_SEED0 = 100
local PALETTE16 = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf", "#393b79", "#ad494a", "#8ca252", "#e7ba52", "#7b4173", "#fb9a99"}

local m = ex:load{n_ctx = math.max(o.length, 2 * score_len + 1, o.text_len) + 16}
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
-- small models: outside the top k of each kind; none when even that pool is smaller than k), in layers below
-- `pool_layers`: with below-pca, only heads that can change what the PCA reads (hook_resid_pre at layer L sees
-- layers below L; any later point of layer L sees L's heads too)
local pool_layers = o.random_layers ~= "below-pca" and NL or o.hook == "hook_resid_pre" and layer or layer + 1
local function pool_excluding(n)
  local ex, pool = {}, {}
  for _, kind in ipairs({"induction", "previous_token"}) do
    for i = 1, math.min(n, #rank[kind]) do ex[rank[kind][i].layer * NH + rank[kind][i].head] = true end
  end
  for l = 0, pool_layers - 1 do
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
  if #pool < k then -- last fallback (k = 32 of Gemma 3's 72 heads): outside the top n of each kind, n < k largest
    pool, note = nil, "none: too few heads outside the top 1 of each kind"
    for n = k - 1, 1, -1 do
      local p = pool_excluding(n)
      if #p >= k then
        pool, note = p, ("outside the top %d of each kind (fallback: the largest such pool of >= %d heads)"):format(n, k)
        break
      end
    end
  end
  if pool_layers < NL then note = ("%s, layers 0-%d (those the PCA's point sees)"):format(note, pool_layers - 1) end
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


-- conditions (the ablated sets, the same for every mode): {kind =, k =, set =, heads =}
local conds = {}
for _, kind in ipairs({"induction", "previous_token"}) do
  for _, k in ipairs(ks) do conds[#conds + 1] = {kind = kind, k = k, heads = head_list(rank[kind], k)} end
end
for _, k in ipairs(ks) do
  for s, set in ipairs(random_sets[k]) do conds[#conds + 1] = {kind = "random", k = k, set = s, heads = set} end
end
-- the layers any condition ablates: the reference sets (mean, resample) capture hook_z there
local z_layers, need_ref = {}, mode_seen.mean or mode_seen.resample
if need_ref then
  local seen = {}
  for _, c in ipairs(conds) do
    for _, e in ipairs(c.heads) do
      if not seen[e.layer] then seen[e.layer], z_layers[#z_layers + 1] = true, e.layer end
    end
  end
end
local function new_ref(n) return A.reference{n = n, layers = z_layers, keep_z = mode_seen.resample} end
-- per mode and condition: accuracy per walk, and the PCA window's activations (k = k_pca; every random set, so
-- that the random control's grid fit has a spread, not one draw)
local res = {}
for _, mode in ipairs(modes) do
  res[mode] = {}
  for i, c in ipairs(conds) do
    res[mode][i] = {accs = {}, acts = {}, capture = c.k == k_pca}
  end
end
local base = {accs = {}, acts = {}}

local ids = g:token_ids(m)

-- the runs: first every walk unablated (accuracy, the PCA window, the walks' hook_z for mean and resample), then
-- walks outer, modes and conditions inner
local walks, tails, toks_of = {}, {}, {}
local bar = icl.progress.new{total = o.walks * (1 + #modes * #conds), label = "head_ablation runs"}
local run_wall0, run_cpu0 = icl.clock(), os.clock()
local wref = new_ref(o.walks)
local window_cap = {name = hook, pos = {-o.window, -1}}
for b = 1, o.walks do
  local walk = g:walk{length = o.length, start = (b - 1) % g.n + 1, seed = o.seed + b - 1}
  toks_of[b], walks[b] = g:tokens(m, walk, {bos = true}), walk
  tails[b] = table.move(walk, o.length - o.window + 1, o.length, 1, {})
  local cap = {window_cap}
  for _, nm in ipairs(wref:capture()) do cap[#cap + 1] = nm end
  local r = assert(m:run(toks_of[b], {logits = {select = ids, lse = true}, capture = cap}))
  base.accs[b] = metrics.rule_following(r.logits, walk, g, {token_ids = ids, lse = r.lse})
  base.acts[b] = r[hook]
  if need_ref then wref:record(b, r) end
  r = nil
  bar:update(1)
end
for b = 1, o.walks do
  for _, mode in ipairs(modes) do
    for i, c in ipairs(conds) do
      local e = res[mode][i]
      local r = assert(m:run(toks_of[b], A.merge({logits = {select = ids, lse = true},
                                                  capture = e.capture and {window_cap} or nil},
                                                 wref:interventions(mode, c.heads, b, mode == "resample" and donors[b] or nil))))
      e.accs[b] = metrics.rule_following(r.logits, walks[b], g, {token_ids = ids, lse = r.lse})
      if e.capture then e.acts[b] = r[hook] end
      bar:update(1)
    end
  end
  collectgarbage()
end
bar:done()
local run_wall, run_cpu = icl.clock() - run_wall0, os.clock() - run_cpu0
wref = nil
collectgarbage()

-- the capability check: next-token loss of every ablated set on text windows and on repeated random tokens (the
-- loss on tokens 2..L of the second copy, which an induction head predicts), each set its own reference set
local cap_sets = {}
for i, f in ipairs(text_files) do
  local fh = assert(io.open(f, "rb"))
  local text = fh:read("a")
  fh:close()
  cap_sets[#cap_sets + 1] = {name = (f:match("([^/]+)%.[^./]*$") or f), file = f, from = 1,
    about = ("%d windows of %d tokens (BOS included) at random line starts, seed %d; loss on every next token")
      :format(o.text_seqs, o.text_len, o.seed + 7 + i - 1),
    seqs = icl.olsson.text_sequences(m, text, {n_seq = o.text_seqs, len = o.text_len, seed = o.seed + 7 + i - 1})}
end
if o.rep_seqs > 0 then
  if need_ref and o.rep_seqs < 2 then error("--rep-seqs must be 0 or >= 2 with mean or resample ablation", 0) end
  local bos = m.bos >= 0 and m.bos or nil
  local seqs = icl.heads.make_repeated_tokens{n_seq = o.rep_seqs, len = score_len, vocab = m.n_vocab,
                                              seed = o.seed + 11, bos = bos, exclude = {bos or -1, m.eos}}
  cap_sets[#cap_sets + 1] = {name = "repeated_tokens", from = #seqs[1] - score_len + 1, seqs = seqs,
    about = ("%d sequences of %s2 x %d random tokens (lower half of the vocabulary), seed %d; loss on tokens 2..%d "
      .. "of the second copy"):format(o.rep_seqs, bos and "BOS + " or "", score_len, o.seed + 11, score_len)}
end
local cap_wall0, cap_cpu0 = icl.clock(), os.clock()
local cap_base, cap_res = {}, {} -- [set name] = per-sequence losses; [mode][i][set name] = per-sequence losses
for _, mode in ipairs(modes) do
  cap_res[mode] = {}
  for i in ipairs(conds) do cap_res[mode][i] = {} end
end
local cbar = icl.progress.new{total = #cap_sets > 0 and #cap_sets * (1 + #modes * #conds) or 0,
                              label = "capability check"}
for _, cs in ipairs(cap_sets) do
  local ref, n = new_ref(#cs.seqs), #cs.seqs
  local base_l = {}
  for s = 1, n do
    local l, r = A.next_token_nll(m, cs.seqs[s], {capture = need_ref and ref:capture() or nil})
    base_l[s] = A.mean_of(l, cs.from, #l)
    if need_ref then ref:record(s, r) end
  end
  cbar:update(1)
  cap_base[cs.name] = base_l
  for _, mode in ipairs(modes) do
    for i, c in ipairs(conds) do
      local ls = {}
      for s = 1, n do
        local l = A.next_token_nll(m, cs.seqs[s], ref:interventions(mode, c.heads, s))
        ls[s] = A.mean_of(l, cs.from, #l)
      end
      cap_res[mode][i][cs.name] = ls
      cbar:update(1)
    end
  end
  ref = nil
  collectgarbage()
end
cbar:done()
local cap_wall, cap_cpu = icl.clock() - cap_wall0, os.clock() - cap_cpu0

-- the late window: words 1000..1400, or the same fraction of a shorter walk
local late_from = o.length >= 1400 and 1000 or math.max(1, math.floor(o.length * 1000 / 1400))
local late_to = math.min(o.length, 1400)
local function late_of(curve) return metrics.mean(curve, late_from, late_to) end
-- a cell: mean and SE over walks (or text windows, sequences) of per-walk values, with n and the values themselves
-- (so a cell with a large SE can be traced to its walks)
local function cell(xs)
  local mu, se = metrics.mean_se(xs)
  return {mean = mu, se = se, n = #xs, values = xs}
end
local function per_walk_late(accs)
  local t = {}
  for b = 1, #accs do t[b] = late_of(accs[b]) end
  return t
end
local base_curve = metrics.mean_std(base.accs)
local base_walk_late = per_walk_late(base.accs)
local base_cell = cell(base_walk_late)
local base_late = base_cell.mean

-- capability cells: per condition, the mean loss and SE over the set's sequences, and the paired change from the
-- unablated model (random: per sequence the mean over the sets first)
local function cap_cell(per_seq, base_seq)
  local c = cell(per_seq)
  local d = metrics.paired(per_seq, base_seq)
  c.delta, c.delta_se = d.mean, d.se
  return c
end
local cap_base_cells = {}
for _, cs in ipairs(cap_sets) do cap_base_cells[cs.name] = cell(cap_base[cs.name]) end

-- per mode: curves, late accuracy with SE, capability cells, PCA
local out = {}
for _, mode in ipairs(modes) do
  local R = res[mode]
  local curves = {induction = {}, previous_token = {}, random = {}}
  local late = {induction = {}, previous_token = {}, random = {}, random_sets = {}}
  local cells = {induction = {}, previous_token = {}, random = {}}
  local caps = {induction = {}, previous_token = {}, random = {}}
  for i, c in ipairs(conds) do
    if c.kind ~= "random" then
      local j = #curves[c.kind] + 1
      curves[c.kind][j] = metrics.mean_std(R[i].accs)
      late[c.kind][j] = late_of(curves[c.kind][j])
      cells[c.kind][j] = cell(per_walk_late(R[i].accs))
      caps[c.kind][j] = {}
      for _, cs in ipairs(cap_sets) do caps[c.kind][j][cs.name] = cap_cell(cap_res[mode][i][cs.name], cap_base[cs.name]) end
    end
  end
  for j, k in ipairs(ks) do
    local lists, per_set, walk_sum, nset, seq_sum = {}, {}, {}, 0, {}
    for i, c in ipairs(conds) do
      if c.kind == "random" and c.k == k then
        nset = nset + 1
        for b, a in ipairs(R[i].accs) do
          lists[#lists + 1] = a
          walk_sum[b] = (walk_sum[b] or 0) + late_of(a)
        end
        per_set[c.set] = late_of(metrics.mean_std(R[i].accs))
        for _, cs in ipairs(cap_sets) do
          seq_sum[cs.name] = seq_sum[cs.name] or {}
          for s, v in ipairs(cap_res[mode][i][cs.name]) do seq_sum[cs.name][s] = (seq_sum[cs.name][s] or 0) + v end
        end
      end
    end
    curves.random[j] = #lists > 0 and metrics.mean_std(lists) or json.null
    late.random[j] = #lists > 0 and late_of(curves.random[j]) or json.null
    late.random_sets[j] = per_set
    if nset > 0 then
      for b = 1, #walk_sum do walk_sum[b] = walk_sum[b] / nset end
      cells.random[j] = cell(walk_sum)
      caps.random[j] = {}
      for _, cs in ipairs(cap_sets) do
        local v = seq_sum[cs.name]
        for s = 1, #v do v[s] = v[s] / nset end
        caps.random[j][cs.name] = cap_cell(v, cap_base[cs.name])
      end
    else
      cells.random[j], caps.random[j] = json.null, json.null
    end
  end
  -- PCA of class means (last `window` words, pooled over walks) for the conditions that captured; classes not
  -- seen in the window (short walks) are left out of the PCA, the energy and the figure
  local pca, pca_conds = {}, {}
  local function add_pca(kind, k, acts)
    local means = icl.class_means(acts, tails, nil, g.n)
    local keep = metrics.present(means)
    local edges = metrics.induced_edges(g, keep)
    local entry = {kind = kind, k = k, classes_seen = #keep, explained_ratio = json.null,
                   dirichlet_energy = json.null, projections = json.null, grid_fit = json.null}
    if #keep >= 3 then
      local sub = #keep < g.n and means:index_select(1, keep) or means
      local p = icl.pca(sub, 2)
      entry.explained_ratio, entry.projections = p.explained_ratio, p.projections
      entry.dirichlet_energy = #edges > 0 and metrics.dirichlet_energy(sub, edges, {normalized = true}) or json.null
      -- how well the plane recovers the grid (Spearman rho vs hop distances) beside its label-shuffle null
      entry.grid_fit = metrics.grid_fit(p.projections, g, keep, {shuffles = 200, seed = o.seed + 1})
      entry._pca, entry._keep, entry._edges = p, keep, edges
    end
    pca[kind] = entry
    pca_conds[#pca_conds + 1] = kind
  end
  add_pca("baseline", 0, base.acts)
  -- random set 1 gets the full entry and the figure; every set (1 included, from its entry) its grid fit, and
  -- their spread
  local set_fits = {}
  for i, c in ipairs(conds) do
    if R[i].capture and (c.kind ~= "random" or c.set == 1) then add_pca(c.kind, c.k, R[i].acts) end
    if R[i].capture and c.kind == "random" then
      if c.set == 1 then
        if pca.random.grid_fit ~= json.null then set_fits[#set_fits + 1] = pca.random.grid_fit.rho end
      else
        local means = icl.class_means(R[i].acts, tails, nil, g.n)
        local keep = metrics.present(means)
        if #keep >= 3 then
          local p = icl.pca(#keep < g.n and means:index_select(1, keep) or means, 2)
          set_fits[#set_fits + 1] = metrics.grid_fit(p.projections, g, keep, {shuffles = 0}).rho
        end
      end
    end
  end
  if pca.random and #set_fits > 0 then
    local mean, se = metrics.mean_se(set_fits)
    pca.random.grid_fit_sets = {rho = set_fits, mean = mean, sd = se * math.sqrt(#set_fits), n = #set_fits}
  end
  out[mode] = {curves = curves, late = late, cells = cells, caps = caps, pca = pca, pca_conds = pca_conds}
end

-- figures (zero ablation keeps the names it always had; the other modes add _mean, _resample)
local name = m.name or o.model
local ma_w = math.max(1, math.min(30, o.length // 10))
local function ma(y) return metrics.moving_average(y, ma_w) end
local function shade(i, n, base_c) -- light (mixed with white) to dark (mixed with black) along the ks
  local t = n > 1 and (i - 1) / (n - 1) or 1
  local s = 0.7 - 1.25 * t
  local function f(c) return s > 0 and c * (1 - s) + s or c * (1 + s) end
  return {r = f(base_c.r), g = f(base_c.g), b = f(base_c.b)}
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
local VERB = {zero = "zeroed", mean = "mean-ablated", resample = "resampled"}
local figs = {}
for _, mode in ipairs(modes) do
  local U, sfx = out[mode], mode == "zero" and "" or "_" .. mode
  for _, kind in ipairs({"induction", "previous_token", "random"}) do
    local series = {{y = ma(base_curve), label = "no ablation", color = "black"}}
    local what = kind == "random" and "" or "top "
    for i, k in ipairs(ks) do
      if U.curves[kind][i] ~= json.null then
        series[#series + 1] = {y = ma(U.curves[kind][i]), label = ("%sk = %d"):format(what, k),
                               color = shade(i, #ks, BASE[kind])}
      end
    end
    local ir = 0 -- the random control at the largest k that has one
    for i = 1, #ks do if U.curves.random[i] ~= json.null then ir = i end end
    if kind ~= "random" and ir > 0 then
      local sets = ("%d set%s"):format(o.random_sets, o.random_sets == 1 and "" or "s")
      series[#series + 1] = {y = ma(U.curves.random[ir]), color = "grey",
                             label = ("random, k = %d (%s)"):format(ks[ir], sets)}
    end
    local ys = {}
    for i, sr in ipairs(series) do ys[i] = sr.y end
    figs[#figs + 1] = {("accuracy_%s%s"):format(kind, sfx), plot.line, {series = series, ylim = {0, top_of(ys)},
      title = ("Rule following, %s %s"):format(LABEL[kind], VERB[mode]),
      xlabel = ("context length (words; %d-wide moving average, mean of %d walks)"):format(ma_w, o.walks),
      ylabel = "probability mass on valid neighbours"}}
  end
  local lx = {}
  for i, k in ipairs(ks) do lx[i] = math.log(k, 2) end
  local late_series = {{x = {lx[1], lx[#lx]}, y = {base_late, base_late}, label = "no ablation", color = "black"}}
  for _, kind in ipairs({"induction", "previous_token", "random"}) do
    local x, y = {}, {}
    for i in ipairs(ks) do
      x[i], y[i] = lx[i], U.late[kind][i] == json.null and 0 / 0 or U.late[kind][i]
    end
    late_series[#late_series + 1] = {x = x, y = y, label = LABEL[kind], color = BASE[kind]}
  end
  local late_ys = {}
  for i, sr in ipairs(late_series) do late_ys[i] = sr.y end
  figs[#figs + 1] = {"late_accuracy" .. sfx, plot.line, {series = late_series, ylim = {0, top_of(late_ys)},
    title = ("Mean accuracy over words %d-%d, heads %s"):format(late_from, late_to, VERB[mode]),
    xlabel = ("log2 k (heads %s)"):format(VERB[mode]), ylabel = "mean probability mass on valid neighbours"}}
  for _, kind in ipairs(U.pca_conds) do
    local e = U.pca[kind]
    if e._pca and (kind ~= "baseline" or mode == modes[1]) then
      local what = kind == "baseline" and "no ablation" or ("top %d %s %s"):format(k_pca, LABEL[kind], VERB[mode])
      if kind == "random" then what = ("%d random heads %s (set 1)"):format(k_pca, VERB[mode]) end
      local labels, fill = {}, {}
      for i, node in ipairs(e._keep) do labels[i], fill[i] = g.words[node], PALETTE16[node] end
      local en = e.dirichlet_energy == json.null and "" or ("; Dirichlet energy %.4f"):format(e.dirichlet_energy)
      figs[#figs + 1] = {"pca_" .. kind .. (kind == "baseline" and "" or sfx), plot.scatter, {points = e._pca,
        labels = labels, edges = e._edges, dashed = true, equal = true, fill = fill,
        title = ("Class means, layer %d, %s"):format(layer, what),
        xlabel = ("PC1 (%.1f%%)"):format(100 * e.explained_ratio[1]),
        ylabel = ("PC2 (%.1f%%)%s"):format(100 * e.explained_ratio[2], en)}}
    end
  end
end
for _, f in ipairs(figs) do ex:figure(f[2](f[3]), f[1]) end

-- summary: the first mode's results at the top level (as before --ablation existed), every mode's under by_mode
local function rows_of(mode)
  local U = out[mode]
  local rows = {{condition = "baseline", k = 0, late_accuracy = base_late, se = base_cell.se, n = base_cell.n,
                 loss = cap_base_cells}}
  for _, kind in ipairs({"induction", "previous_token", "random"}) do
    for i, k in ipairs(ks) do
      local c = U.cells[kind][i]
      rows[#rows + 1] = {condition = kind, k = k, late_accuracy = U.late[kind][i],
                         se = c == json.null and json.null or c.se, n = c == json.null and 0 or c.n,
                         loss = U.caps[kind][i]}
    end
  end
  return rows
end
local by_mode = {}
for _, mode in ipairs(modes) do
  local U = out[mode]
  for _, e in pairs(U.pca) do e._pca, e._keep, e._edges = nil, nil, nil end
  by_mode[mode] = {
    about = A.ABOUT[mode],
    late_accuracy = {baseline = base_late, induction = U.late.induction, previous_token = U.late.previous_token,
                     random = U.late.random, random_per_set = U.late.random_sets},
    late_cells = {baseline = base_cell, induction = U.cells.induction, previous_token = U.cells.previous_token,
                  random = U.cells.random},
    capability = {baseline = cap_base_cells, induction = U.caps.induction, previous_token = U.caps.previous_token,
                  random = U.caps.random},
    table = rows_of(mode),
    curves = {baseline = base_curve, induction = U.curves.induction, previous_token = U.curves.previous_token,
              random = U.curves.random},
    pca = U.pca,
  }
end
local rs = {}
for i, k in ipairs(ks) do rs[i] = {k = k, pool = random_pool_note[k], sets = random_sets[k]} end
local first = by_mode[modes[1]]
local cap_about = {}
for i, cs in ipairs(cap_sets) do
  cap_about[i] = {name = cs.name, file = cs.file or json.null, about = cs.about, sequences = #cs.seqs,
                  tokens = #cs.seqs[1]}
end
local summary = {
  model_name = name, arch = m.arch, backend = m.backend,
  n_layers = NL, n_heads = NH, layer = layer, hook = hook, seed = o.seed, walks = o.walks, length = o.length,
  window = o.window, words = WORDS, ks = ks, k_pca = k_pca, donor_rule = o.donor, donors = donors,
  ablation = modes, ablated_point = ("hook_z (%s, all positions)"):format(modes[1]),
  accuracy = "rule following, full-vocabulary softmax mass on the valid neighbours",
  se = "standard error over walks (random: per walk the mean over the sets first); n = walks. Losses: over "
    .. "sequences (text windows, random-token sequences), delta = paired change from the unablated model",
  scores_source = scores_source, score_seed = o.score_seed, score_n_seq = score_nseq, score_len = score_len,
  random_seeds = (function() local t = {} for s = 1, o.random_sets do t[s] = RANDOM_SEED0 + s - 1 end return t end)(),
  exclude_top = o.exclude_top, random_layers = o.random_layers,
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
  late_accuracy = first.late_accuracy, late_cells = first.late_cells, capability = first.capability,
  capability_sets = cap_about,
  table = first.table, curves = first.curves, pca = first.pca,
  by_mode = by_mode,
}
local lines = {}
local function fmt(v) return (v == json.null or v == nil) and "   -  " or ("%.3f"):format(v) end
local function fcell(c) return (c == json.null or c == nil) and "-" or ("%.3f ± %.3f"):format(c.mean, c.se) end
local function floss(c) return (c == json.null or c == nil) and "-" or ("%.2f ± %.2f"):format(c.mean, c.se) end
for _, mode in ipairs(modes) do
  local U = out[mode]
  lines[#lines + 1] = ("head_ablation: %s, %d walks x %d words, %s ablation of hook_z; mean accuracy over words "
    .. "%d-%d ± SE over walks (n = %d)"):format(name, o.walks, o.length, mode, late_from, late_to, o.walks)
  lines[#lines + 1] = ("  %-6s %-17s %-17s %-17s"):format("k", "induction", "previous-token",
                                                         ("random (%d sets)"):format(o.random_sets))
  lines[#lines + 1] = ("  %-6s %s"):format("none", fcell(base_cell))
  for i, k in ipairs(ks) do
    lines[#lines + 1] = ("  %-6d %-17s %-17s %-17s"):format(k, fcell(U.cells.induction[i]),
      fcell(U.cells.previous_token[i]), fcell(U.cells.random[i]))
  end
  for _, cs in ipairs(cap_sets) do
    lines[#lines + 1] = ("  loss on %s (nats, mean ± SE over %d sequences): none %s"):format(cs.name, #cs.seqs,
      floss(cap_base_cells[cs.name]))
    for i, k in ipairs(ks) do
      local function at(kind) local c = U.caps[kind][i]; return c ~= json.null and c[cs.name] or nil end
      lines[#lines + 1] = ("    k=%-4d induction %-13s previous-token %-13s random %s"):format(k, floss(at("induction")),
        floss(at("previous_token")), floss(at("random")))
    end
  end
  for _, kind in ipairs(U.pca_conds) do
    local e = U.pca[kind]
    if e.explained_ratio ~= json.null and (kind ~= "baseline" or mode == modes[1]) then
      lines[#lines + 1] = (("  PCA %-15s k=%-3d explained %.1f%% + %.1f%%, Dirichlet energy %s (%d classes), grid fit "
        .. "%.3f (null %.3f +- %.3f)"):format(kind, e.k, 100 * e.explained_ratio[1], 100 * e.explained_ratio[2],
        e.dirichlet_energy == json.null and "-" or ("%.4f"):format(e.dirichlet_energy), e.classes_seen,
        e.grid_fit.rho, e.grid_fit.null_mean, e.grid_fit.null_sd))
      local gs = e.grid_fit_sets
      if gs and gs.n > 1 then
        lines[#lines + 1] = ("  PCA random, grid fit over the %d random sets: %.3f +- %.3f (sd; min %.3f, max %.3f)")
          :format(gs.n, gs.mean, gs.sd, math.min(table.unpack(gs.rho)), math.max(table.unpack(gs.rho)))
      end
    end
  end
end
local nr = o.walks * (1 + #modes * #conds)
lines[#lines + 1] = ("  %d runs of %d tokens in %.0f s wall, %.0f s CPU (%.1f s wall per run); capability check "
  .. "%.0f s wall, %.0f s CPU"):format(nr, o.length + 1, run_wall, run_cpu, run_wall / nr, cap_wall, cap_cpu)
ex:report(summary, lines)
