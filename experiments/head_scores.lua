-- Head scores (Olsson et al. 2022): previous-token and induction scores of every attention head, on sequences of
-- random tokens repeated twice; ranked lists and layer x head heatmaps.
--   icl script experiments/head_scores.lua --help   lists the options and their defaults
-- The numbers are those of icl.heads.score_model(model, {n_seq =, len =, seed =}) (same sequences, same score
-- functions, same order of summation; score_model rounds them to float32, this script keeps doubles), but the
-- patterns are captured layer group by layer group so that memory stays bounded for long sequences
-- (--max-capture-mb); the grouping does not change any number.
local heads, plot = icl.heads, icl.plot

local ex = icl.experiment{name = "head_scores",
  about = "previous-token and induction scores of every head (Olsson et al.)",
  options = {{"layer", -1, "score only layer L (-1: every layer)", int = {-1, 1 << 16}}, {"n_seq", 32, "number of sequences", int = {1, 1 << 16}},
             {"len", 32, "random tokens per copy; each sequence is BOS + T tokens + the same T again", int = {2, 1 << 20}},
             {"top", 32, "length of the ranked lists", int = {1, 1 << 20}},
             {"max_capture_mb", 256, "bound on the pattern captures of one run (layers are split into groups)", num = {0, 1 << 30, open = true}}},
  quick = {n_seq = 4, len = 16}}
local o = ex.o
for _, k in ipairs({"n_seq", "len", "top", "seed"}) do
  if math.type(o[k]) ~= "integer" then error(("--%s must be an integer"):format(k:gsub("_", "-")), 0) end
end
if o.n_seq < 1 or o.len < 2 or o.top < 1 then error("--n-seq, --top must be >= 1 and --len >= 2", 0) end

local m = ex:load{n_ctx = 2 * o.len + 16}
local NL, NH = m.n_layers, m.n_heads
local layers = {}
if o.layer >= 0 then layers = {ex:layer()} else for l = 0, NL - 1 do layers[#layers + 1] = l end end

-- the sequences, exactly as icl.heads.score_model makes them
local bos = m.bos >= 0 and m.bos or nil
local seqs = heads.make_repeated_tokens{n_seq = o.n_seq, len = o.len, vocab = m.n_vocab, seed = o.seed, bos = bos,
                                        exclude = {bos or -1, m.eos}}
local T = #seqs[1]

-- layer groups whose patterns [nh, T, T] (float32) fit the capture bound together
local per_layer = NH * T * T * 4
local group = math.max(1, math.min(#layers, (o.max_capture_mb * 1024 * 1024) // per_layer))
local groups = {}
for i = 1, #layers, group do
  local g = {}
  for j = i, math.min(#layers, i + group - 1) do g[#g + 1] = layers[j] end
  groups[#groups + 1] = g
end

local KINDS = {"previous_token", "induction", "duplicate_token", "prefix_matching"}
local sums = {}
for _, k in ipairs(KINDS) do
  sums[k] = {}
  for l = 1, NL do sums[k][l] = {} end
end

local bar = icl.progress.new{total = #seqs * #groups, label = "head scores"}
for _, seq in ipairs(seqs) do
  for _, g in ipairs(groups) do
    local names = {}
    for i, l in ipairs(g) do names[i] = ("blocks.%d.attn.hook_pattern"):format(l) end
    local r = assert(m:run(seq, {logits = "none", capture = names}))
    for i, l in ipairs(g) do
      local p = r[names[i]]
      local s = {previous_token = heads.previous_token_score(p), induction = heads.induction_score(p, o.len),
                 duplicate_token = heads.duplicate_token_score(p, o.len),
                 prefix_matching = heads.prefix_matching_score(p, seq)}
      for _, k in ipairs(KINDS) do
        local row = sums[k][l + 1]
        for h, v in ipairs(s[k]) do row[h] = (row[h] or 0) + v end
      end
    end
    r = nil
    bar:update(1)
  end
  collectgarbage()
end
bar:done()

-- score matrices [layer][head] (NaN for layers not scored) and ranked lists, best first
local scored = {}
for _, l in ipairs(layers) do scored[l + 1] = true end
local scores, ranked = {}, {}
for _, k in ipairs(KINDS) do
  local mat, list = {}, {}
  for l = 1, NL do
    mat[l] = {}
    for h = 1, NH do
      local v = scored[l] and sums[k][l][h] / #seqs or 0 / 0
      mat[l][h] = v
      if scored[l] then list[#list + 1] = {layer = l - 1, head = h - 1, score = v} end
    end
  end
  table.sort(list, function(a, b) -- best first, NaN last, ties by layer then head (as icl.heads)
    local an, bn = a.score ~= a.score, b.score ~= b.score
    if an ~= bn then return bn end
    if not an and a.score ~= b.score then return a.score > b.score end
    return a.layer < b.layer or (a.layer == b.layer and a.head < b.head)
  end)
  scores[k], ranked[k] = mat, list
end
local function top(list, n)
  local t = {}
  for i = 1, math.min(n, #list) do t[i] = list[i] end
  return t
end

-- figures: heatmaps (layer rows, head columns), and induction against previous-token score per head
local name = m.name or o.model
local TITLES = {induction = "Induction score", previous_token = "Previous-token score"}
local hw, hh = math.max(360, 60 * NH + 200), math.max(400, 22 * NL + 160)
do
  for _, k in ipairs({"induction", "previous_token"}) do
    ex:figure(plot.heatmap{data = scores[k], vmin = 0, vmax = 1, width = hw, height = hh, xlabel = "head",
                           ylabel = "layer", title = ("%s, %s"):format(TITLES[k], name)}, k)
  end
  local pts, labels, fill = {}, {}, {}
  local mark = {}
  for _, k in ipairs({"induction", "previous_token"}) do
    for i = 1, math.min(2, #ranked[k]) do mark[ranked[k][i].layer * NH + ranked[k][i].head] = true end
  end
  for _, l in ipairs(layers) do
    for h = 1, NH do
      pts[#pts + 1] = {scores.previous_token[l + 1][h], scores.induction[l + 1][h]}
      labels[#pts] = mark[l * NH + h - 1] and ("L%d.H%d"):format(l, h - 1) or false
      fill[#pts] = {r = l / math.max(1, NL - 1), g = 0.3, b = 1 - l / math.max(1, NL - 1), a = 0.8}
    end
  end
  ex:figure(plot.scatter{points = pts, labels = labels, fill = fill, size = 4, xlim = {0, 1}, ylim = {0, 1},
                         width = 1100, xlabel = "previous-token score (colour: layer, blue = first to red = last)",
                         ylabel = "induction score", title = ("Attention heads of %s"):format(name)}, "scatter")
end

-- interactive views: every score as a layers x heads map with a sortable list, and the top induction and
-- previous-token heads' patterns on the first scoring sequence
local function as_tensor(mat) return icl.tensor.from(mat) end
ex:view("heads", {scores = {induction = as_tensor(scores.induction), previous_token = as_tensor(scores.previous_token),
                            duplicate_token = as_tensor(scores.duplicate_token),
                            prefix_matching = as_tensor(scores.prefix_matching)},
                  title = ("Head scores, %s"):format(name)}, "heads")
do
  local pick, per_layer = {}, {}
  for _, k in ipairs({"induction", "previous_token"}) do
    for i = 1, math.min(2, #ranked[k]) do
      local e = ranked[k][i]
      if e.score == e.score and not pick[e.layer * NH + e.head] then
        pick[e.layer * NH + e.head] = true
        per_layer[e.layer] = per_layer[e.layer] or {}
        table.insert(per_layer[e.layer], e.head)
      end
    end
  end
  local names, pats, ids = {}, {}, {}
  for l, hs in pairs(per_layer) do
    table.sort(hs)
    names[#names + 1] = ("blocks.%d.attn.hook_pattern"):format(l)
    ids[names[#names]] = hs
  end
  if #names > 0 then
    local r = assert(m:run(seqs[1], {logits = "none", capture = names}))
    local toks = {}
    for i, id in ipairs(seqs[1]) do toks[i] = m:token_text(id) end
    for _, nm in ipairs(names) do
      local sel = {}
      for i, h in ipairs(ids[nm]) do sel[i] = h + 1 end
      pats[nm] = r[nm]:index_select(1, sel)
    end
    ex:view("attention", {tokens = toks, patterns = pats, head_ids = ids, window = math.min(T, 160),
                          title = ("Top induction and previous-token heads of %s on a repeated sequence"):format(name)},
            "patterns")
  end
end

local summary = {
  model_name = name, arch = m.arch, backend = m.backend,
  n_layers = NL, n_heads = NH, layers = layers, seed = o.seed, n_seq = o.n_seq, len = o.len, seq_tokens = T,
  top_n = o.top, scores = scores,
  top = {induction = top(ranked.induction, o.top), previous_token = top(ranked.previous_token, o.top),
         duplicate_token = top(ranked.duplicate_token, o.top), prefix_matching = top(ranked.prefix_matching, o.top)},
}
local lines = {("head_scores: %s, %d heads (%d layers x %d), %d sequences of BOS + 2 x %d random tokens, seed %d")
                :format(
  name, #layers * NH, #layers, NH, o.n_seq, o.len, o.seed)}
for _, k in ipairs({"induction", "previous_token"}) do
  local parts = {}
  for i = 1, math.min(8, #ranked[k]) do
    local e = ranked[k][i]
    parts[i] = ("L%d.H%d %.3f"):format(e.layer, e.head, e.score)
  end
  lines[#lines + 1] = ("  top %-15s %s"):format(k, table.concat(parts, ", "))
end
ex:report(summary, lines)
