-- The runs of experiments/head_ablation.lua as a benchmark, on any model of the right shape: the random-weight
-- models of `icl testmodel --like` too, whose synthetic vocabulary has no single-token words (the experiment
-- needs them, so it cannot run there). The cost of the experiment is its runs, and they do not depend on the
-- weights: per walk 1 + 2 #ks + random_sets x #ks runs of LENGTH + 1 tokens (BOS, then the walk), each with the
-- experiment's options (reduced logits of 16 words with the log-sum-exp, a zero ablation of hook_z per layer that
-- holds chosen heads, the residual capture of the last 200 words where the experiment captures), plus the head
-- scoring it does first (icl.heads.score_model, 32 sequences of 32 tokens). Words are the token ids 1000..1015;
-- heads are drawn at random (the experiment ranks them, which only changes which heads, not how many).
-- Prints the seconds of the scoring and of each walk, and the full protocol's time (16 walks) from their mean.
-- usage: icl script scripts/bench-head-ablation.lua MODEL [WALKS [BACKEND [PRECISION [LENGTH]]]]
local path = assert(arg[1], "usage: icl script scripts/bench-head-ablation.lua MODEL [WALKS [BACKEND [PRECISION [LENGTH]]]]")
local walks_n, backend = math.tointeger(tonumber(arg[2] or 2)), arg[3] or "auto"
local precision, length = arg[4] or "exact", math.tointeger(tonumber(arg[5] or 1400))
assert(walks_n and walks_n >= 1 and length and length >= 201, "WALKS >= 1 and LENGTH >= 201 expected")
local clock = icl.clock
local t_load = clock()
local m = assert(icl.load(path, {backend = backend, n_ctx = length + 16, precision = precision}))
t_load = clock() - t_load
local NL, NH = m.n_layers, m.n_heads
local n_total = NL * NH
local layer = math.floor(0.8 * NL + 0.5)
local hook = ("blocks.%d.hook_resid_pre"):format(layer)

-- the experiment's conditions: ks 1,2,4,8,16,32 (and k_pca), 4 random sets; captures as it makes them
local k_pca = math.max(1, math.floor(32 * n_total / 1024 + 0.5))
local ks, seen = {}, {}
for _, k in ipairs({1, 2, 4, 8, 16, 32, k_pca}) do
  if k <= n_total and not seen[k] then ks[#ks + 1], seen[k] = k, true end
end
table.sort(ks)
local rng = icl.rng.new(7)
local function random_heads(k)
  local pick, by, out = rng:sample(n_total, k), {}, {}
  for _, p in ipairs(pick) do
    local l = (p - 1) // NH
    by[l] = by[l] or {}
    table.insert(by[l], (p - 1) % NH)
  end
  for l = 0, NL - 1 do
    if by[l] then table.sort(by[l]); out[#out + 1] = {layer = l, heads = by[l], mode = "zero"} end
  end
  return out
end
local conds = {{ablate = {}, capture = true}}
for _ = 1, 2 do
  for _, k in ipairs(ks) do conds[#conds + 1] = {ablate = random_heads(k), capture = k == k_pca} end
end
for _, k in ipairs(ks) do
  for s = 1, 4 do conds[#conds + 1] = {ablate = random_heads(k), capture = k == k_pca and s == 1} end
end

local ids = {}
for i = 1, 16 do ids[i] = 999 + i end
local g = icl.graph.grid(4, 4, icl.experiment.words(16))

local t_score = clock()
icl.heads.score_model(m, {n_seq = 32, len = 32, seed = 42})
t_score = clock() - t_score

local per_walk = {}
for b = 1, walks_n do
  local walk = g:walk{length = length, start = (b - 1) % g.n + 1, seed = 42 + b - 1}
  local toks = {}
  if m.bos >= 0 then toks[1] = m.bos end
  for _, node in ipairs(walk) do toks[#toks + 1] = ids[node] end
  local t0 = clock()
  for _, c in ipairs(conds) do
    local r = assert(m:run(toks, {logits = {select = ids, lse = true}, ablate = c.ablate,
                                  capture = c.capture and {{name = hook, pos = {-200, -1}}} or nil}))
    icl.metrics.rule_following(r.logits, walk, g, {token_ids = ids, lse = r.lse})
  end
  per_walk[b] = clock() - t0
  io.write(("head_ablation_walk %d %.2f s (%d runs of %d tokens)\n"):format(b, per_walk[b], #conds, #toks))
  io.flush()
  collectgarbage()
end
local sum = 0
for _, s in ipairs(per_walk) do sum = sum + s end
local mean = sum / #per_walk
print(("head_ablation_bench: %s (%s), %s backend on %s, %s precision, %d layers x %d heads, %d runs per walk")
      :format(m.name, m.arch, m.backend, m.device, precision, NL, NH, #conds))
print(("  load %.2f s, head scoring %.2f s, walks %d: mean %.2f s per walk"):format(t_load, t_score, walks_n, mean))
print(("  full protocol (16 walks): %.1f s = %.1f min (scoring + 16 x the mean walk)")
      :format(t_score + 16 * mean, (t_score + 16 * mean) / 60))
