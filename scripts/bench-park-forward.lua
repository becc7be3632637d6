-- The park_grid forward as a benchmark, for the PyTorch + transformers peer (scripts/bench_park_torch.py):
-- WALKS grid walks of TOKENS words (park_grid's seeds and starts), each one forward from an empty context
-- with park_grid's capture (blocks.L.hook_resid_pre, L = round(0.8 × depth)) and
--   all:     logits for every position (what the peer computes), or
--   reduced: park_grid's own reduced logits (the graph's words and the log-sum-exp).
-- Writes the walks' token ids to IDS_FILE (one walk per line) so the peer runs the same sequences, and prints
-- "park_forward_all_s S" and "park_forward_reduced_s S" (wall seconds of the WALKS forwards, model load and
-- token building excluded) and "park_forward_layer L".
-- usage: icl script scripts/bench-park-forward.lua MODEL IDS_FILE [WALKS [TOKENS [PRECISION]]]  (exact|fast)
local path, ids_file = assert(arg[1], "MODEL missing"), assert(arg[2], "IDS_FILE missing")
local walks_n, length, precision = tonumber(arg[3] or 16), tonumber(arg[4] or 1400), arg[5] or "exact"
local m = assert(icl.load(path, {n_ctx = length + 16, precision = precision}))
local layer = math.floor(0.8 * m.n_layers + 0.5)
local hook = ("blocks.%d.hook_resid_pre"):format(layer)
local g = icl.graph.grid(4, 4, icl.experiment.words(16))
local ids = g:token_ids(m)
local seqs = {}
local f = assert(io.open(ids_file .. ".tmp", "w"))
for b = 1, walks_n do
  local walk = g:walk{length = length, start = (b - 1) % g.n + 1, seed = 42 + b - 1}
  seqs[b] = g:tokens(m, walk, {bos = true, check = b == 1})
  f:write(table.concat(seqs[b], " "), "\n")
end
assert(f:close())
assert(os.rename(ids_file .. ".tmp", ids_file))
local wall = icl.clock
m:run({seqs[1][1], seqs[1][2]}, {logits = "none"}) -- warm-up: first-touch of weights and buffers
local modes = {{"all", "all"}, {"reduced", {select = ids, lse = true}}}
for _, md in ipairs(modes) do
  local t0 = wall()
  for b = 1, walks_n do
    local r = m:run(seqs[b], {logits = md[2], capture = {hook}})
    assert(r[hook] and r.logits, "capture or logits missing")
    r = nil
    collectgarbage()
  end
  print(("park_forward_%s_s %.3f"):format(md[1], wall() - t0))
end
print(("park_forward_layer %d"):format(layer))
print(("park_forward: %s, %s backend, %s precision, %d walks x %d tokens, capture %s"):format(m.name, m.backend,
      precision, walks_n, #seqs[1], hook))
