-- In-context graph tracing (Park et al.): random walks on a 4x4 word grid; rule-following accuracy against
-- context length, PCA of class means at a chosen layer, Dirichlet energy against context length.
--   icl script experiments/park_grid.lua [--model M] [--layer L] [--hook NAME] [--seed S] [--walks N]
--                                        [--length T] [--out DIR] [--backend B] [--quick]
local args = require("icl.args")
local graph, metrics, plot, json = icl.graph, icl.metrics, icl.plot, icl.json

local USAGE = [[usage: icl script experiments/park_grid.lua [options]
  --model PATH    GGUF model (default models/SmolLM2-135M-Instruct-Q4_1.gguf)
  --layer L       layer of the representation (default: 80% of the depth)
  --hook NAME     hook point at that layer (default hook_resid_pre)
  --seed S        walk seed (default 42); walk b uses seed S + b - 1 and starts at word b
  --walks N       number of walks (default 16)   --length T   words per walk (default 1400)
  --window W      positions for class means (default 200, the last W)
  --out DIR       output directory (default out/park_grid)
  --backend B     auto, cpu, vulkan
  --quick         2 walks of 120 words (smoke test)]]

local o, given = args.parse(arg, {model = "models/SmolLM2-135M-Instruct-Q4_1.gguf", layer = -1, hook = "hook_resid_pre",
                           seed = 42, walks = 16, length = 1400, window = 200, out = "out/park_grid",
                           backend = "auto", quick = false}, USAGE)
if o.quick then -- smoke-test sizes, except those given explicitly
  if not given.walks then o.walks = 2 end
  if not given.length then o.length = 120 end
  if not given.window then o.window = 50 end
end

local WORDS = {"apple", "bird", "car", "egg", "house", "milk", "plane", "opera",
               "box", "sand", "sun", "mango", "rock", "math", "code", "phone"}
local RANGES = {{0, 10}, {50, 100}, {100, 200}, {200, 400}, {600, 800}, {1000, 1400}}

local t0 = os.clock()
local wall0 = os.time()
local m = assert(icl.load(o.model, {backend = o.backend, n_ctx = o.length + 16}))
local layer = o.layer >= 0 and o.layer or math.floor(0.8 * m.n_layers + 0.5)
if layer >= m.n_layers then error(("--layer %d: the model has layers 0..%d"):format(layer, m.n_layers - 1), 0) end
local hook = ("blocks.%d.%s"):format(layer, o.hook)

local g = graph.grid(4, 4, WORDS)
local ids = g:token_ids(m) -- errors naming any word that is not one token
local bos = m:tokenize("", {bos = true})[1]

-- tokens of a walk: BOS then one token per word; checked once against the tokenizer on the text
local function walk_tokens(walk)
  local t = {bos}
  for i, node in ipairs(walk) do t[i + 1] = ids[node] end
  return t
end

local walks, accs, acts = {}, {}, {}
local bar = icl.progress.new{total = o.walks, label = "park_grid walks"}
for b = 1, o.walks do
  local walk = g:walk{length = o.length, start = (b - 1) % g.n + 1, seed = o.seed + b - 1}
  local toks = walk_tokens(walk)
  if b == 1 then
    local via_text = m:tokenize(g:text(walk), {bos = true})
    assert(#via_text == #toks, "the walk text does not tokenize to one token per word")
    for i = 1, #toks do assert(via_text[i] == toks[i], "tokenization of the walk text differs at " .. i) end
  end
  local r = m:run(toks, {logits = "all", capture = {hook}})
  walks[b] = walk
  accs[b] = metrics.rule_following(r.logits, walk, g, {token_ids = ids, mode = "full"})
  acts[b] = r[hook]
  r = nil
  collectgarbage()
  bar:update(1)
end
bar:done()

-- accuracy: mean and std over walks per position, ranges of context length (in words)
local mean, std = metrics.mean_std(accs)
local by_range = {}
for _, rg in ipairs(RANGES) do
  local a, b = math.max(rg[1], 1), math.min(rg[2], o.length)
  if a <= b then
    by_range[#by_range + 1] = {from = rg[1], to = rg[2], mean = metrics.mean(mean, a, b)}
  end
end

-- representation: class means over the last `window` positions, pooled over walks; PCA to 2-D
local means = icl.class_means(acts, walks, {last = o.window}, g.n)
local pca = icl.pca(means, 2)
local energy_final = metrics.dirichlet_energy(means, g, {normalized = true})

-- Dirichlet energy of class means against context length (window of `window` words ending at t)
local energy = {}
local ts = {}
for _, t in ipairs({25, 50, 100, 150, 200, 300, 400, 600, 800, 1000, 1200, 1400}) do
  if t <= o.length then ts[#ts + 1] = t end
end
for _, t in ipairs(ts) do
  local cm = icl.class_means(acts, walks, {from = math.max(1, t - o.window + 1), to = t}, g.n)
  local complete = true
  for i = 1, g.n do if cm[i][1] ~= cm[i][1] then complete = false end end -- a class not seen yet
  energy[#energy + 1] = {t = t, energy = complete and metrics.dirichlet_energy(cm, g, {normalized = true}) or json.null}
end

-- figures
local ma, mstd = metrics.moving_average(mean, 30), metrics.moving_average(std, 30)
local name = m.name or o.model
plot.line{series = {{y = ma, std = mstd, label = "mean over walks (30-wide moving average)"}},
          title = ("Rule-following accuracy, %s"):format(name), xlabel = "context length (words)",
          ylabel = "probability mass on valid neighbours", ylim = {0, 1}}:save(o.out .. "/accuracy.png")
plot.line{series = {{y = ma, std = mstd, label = "mean over walks (30-wide moving average)"}},
          title = ("Rule-following accuracy, %s"):format(name), xlabel = "context length (words)",
          ylabel = "probability mass on valid neighbours", ylim = {0, 1}}:save(o.out .. "/accuracy.svg")
for _, ext in ipairs({"png", "svg"}) do
  plot.scatter{points = pca, labels = g.words, edges = g.edges, dashed = true, equal = true,
               fill = (function() local f = {} for i = 1, g.n do f[i] = i end return f end)(),
               title = ("PCA of class means, %s, last %d positions"):format(hook, o.window),
               xlabel = ("PC1 (%.1f%%)"):format(100 * pca.explained_ratio[1]),
               ylabel = ("PC2 (%.1f%%)"):format(100 * pca.explained_ratio[2])}:save(o.out .. "/pca." .. ext)
  local ex, ey = {}, {}
  for i, e in ipairs(energy) do ex[i] = e.t; ey[i] = e.energy == json.null and 0 / 0 or e.energy end
  plot.line{series = {{x = ex, y = ey, label = "normalized Dirichlet energy"}}, title = "Dirichlet energy of class means",
            xlabel = "context length (words)", ylabel = "energy"}:save(o.out .. "/energy." .. ext)
end

local summary = {
  experiment = "park_grid", model = o.model, model_name = name, arch = m.arch, backend = m.backend,
  layer = layer, hook = hook, seed = o.seed, walks = o.walks, length = o.length, window = o.window,
  words = WORDS, accuracy_by_range = by_range, accuracy_mean = mean, accuracy_std = std,
  pca_explained_ratio = pca.explained_ratio, dirichlet_energy_final = energy_final, energy_curve = energy,
}
assert(json.write(o.out .. "/summary.json", summary, {indent = true}))

print(("park_grid: %s, %d walks x %d words, %s (layer %d)"):format(name, o.walks, o.length, hook, layer))
for _, r in ipairs(by_range) do print(("  accuracy %4d-%-4d  %.3f"):format(r.from, r.to, r.mean)) end
print(("  PCA explained %.1f%% + %.1f%%, Dirichlet energy (normalized) %.4f"):format(
  100 * pca.explained_ratio[1], 100 * pca.explained_ratio[2], energy_final))
print(("  wrote %s/{summary.json,accuracy,pca,energy}.{png,svg} in %d s (%.0f s of CPU)"):format(
  o.out, os.time() - wall0, os.clock() - t0))
