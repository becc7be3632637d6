-- Head scores (Olsson et al. 2022): previous-token and induction scores of every attention head, on sequences of
-- random tokens repeated twice; ranked lists and layer x head heatmaps.
--   icl script experiments/head_scores.lua [--model M] [--layer L] [--seed S] [--n-seq N] [--len T] [--top K]
--                                          [--out DIR] [--backend B] [--quick]
-- The numbers are those of icl.heads.score_model(model, {n_seq =, len =, seed =}) (same sequences, same score
-- functions, same order of summation; score_model rounds them to float32, this script keeps doubles), but the
-- patterns are captured layer group by layer group so that memory stays bounded for long sequences
-- (--max-capture-mb); the grouping does not change any number.
local args = require("icl.args")
local heads, plot, json = icl.heads, icl.plot, icl.json

local USAGE = [[usage: icl script experiments/head_scores.lua [options]
  --model PATH       GGUF model (default models/SmolLM2-135M-Instruct-Q4_1.gguf)
  --layer L          score only layer L (default -1: every layer)
  --seed S           seed of the random sequences (default 42)
  --n-seq N          number of sequences (default 32)
  --len T            random tokens per copy; each sequence is BOS + T tokens + the same T again (default 32)
  --top K            length of the ranked lists (default 32)
  --max-capture-mb M bound on the pattern captures of one run (default 256; layers are split into groups)
  --out DIR          output directory (default out/head_scores)
  --backend B        auto, cpu, vulkan
  --quick            4 sequences of 16 tokens unless given (smoke test)]]

local o = args.parse(arg, {model = "models/SmolLM2-135M-Instruct-Q4_1.gguf", layer = -1, seed = 42, n_seq = 32,
                           len = 32, top = 32, max_capture_mb = 256, out = "out/head_scores", backend = "auto",
                           quick = false}, USAGE)
-- --quick shrinks the sizes that were not given on the command line
local given = {}
for _, a in ipairs(arg) do
  local k = a:match("^%-%-([%w_%-]+)$")
  if k then given[(k:gsub("-", "_"))] = true end
end
local function quick(t) for k, v in pairs(t) do if not given[k] then o[k] = v end end end
if o.quick then quick{n_seq = 4, len = 16} end
for _, k in ipairs({"n_seq", "len", "top", "seed"}) do
  if math.type(o[k]) ~= "integer" then error(("--%s must be an integer"):format(k:gsub("_", "-")), 0) end
end
if o.n_seq < 1 or o.len < 2 or o.top < 1 then error("--n-seq, --top must be >= 1 and --len >= 2", 0) end

local t0, wall0 = os.clock(), os.time()
local m = assert(icl.load(o.model, {backend = o.backend, n_ctx = 2 * o.len + 16}))
local NL, NH = m.n_layers, m.n_heads
if o.layer >= NL then error(("--layer %d: the model has layers 0..%d"):format(o.layer, NL - 1), 0) end
local layers = {}
if o.layer >= 0 then layers = {math.tointeger(o.layer)} else for l = 0, NL - 1 do layers[#layers + 1] = l end end

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
for _, ext in ipairs({"png", "svg"}) do
  for _, k in ipairs({"induction", "previous_token"}) do
    assert(plot.heatmap{data = scores[k], vmin = 0, vmax = 1, width = hw, height = hh, xlabel = "head",
                        ylabel = "layer",
                        title = ("%s, %s"):format(TITLES[k], name)}:save(("%s/%s.%s"):format(o.out, k, ext)))
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
  assert(plot.scatter{points = pts, labels = labels, fill = fill, size = 4, xlim = {0, 1}, ylim = {0, 1},
                      width = 1100, xlabel = "previous-token score (colour: layer, blue = first to red = last)",
                      ylabel = "induction score", title = ("Attention heads of %s"):format(name)}
         :save(("%s/scatter.%s"):format(o.out, ext)))
end

local summary = {
  experiment = "head_scores", model = o.model, model_name = name, arch = m.arch, backend = m.backend,
  n_layers = NL, n_heads = NH, layers = layers, seed = o.seed, n_seq = o.n_seq, len = o.len, seq_tokens = T,
  top_n = o.top, scores = scores,
  top = {induction = top(ranked.induction, o.top), previous_token = top(ranked.previous_token, o.top),
         duplicate_token = top(ranked.duplicate_token, o.top), prefix_matching = top(ranked.prefix_matching, o.top)},
}
assert(json.write(o.out .. "/summary.json", summary, {indent = true}))

print(("head_scores: %s, %d heads (%d layers x %d), %d sequences of BOS + 2 x %d random tokens, seed %d"):format(
  name, #layers * NH, #layers, NH, o.n_seq, o.len, o.seed))
for _, k in ipairs({"induction", "previous_token"}) do
  local parts = {}
  for i = 1, math.min(8, #ranked[k]) do
    local e = ranked[k][i]
    parts[i] = ("L%d.H%d %.3f"):format(e.layer, e.head, e.score)
  end
  print(("  top %-15s %s"):format(k, table.concat(parts, ", ")))
end
print(("  wrote %s/{summary.json,induction,previous_token,scatter}.{png,svg} in %d s (%.0f s of CPU)"):format(
  o.out, os.time() - wall0, os.clock() - t0))
