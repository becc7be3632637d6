-- Reduced logits: m:run{logits = {select = ids, lse = true}} against logits = "all" on the real SmolLM2 model:
-- the selected columns equal the full logits exactly, the log-sum-exp equals a float64 one computed here from
-- the full rows, rule-following accuracy from both agrees, across chunk and LM-head sub-chunk boundaries; and the
-- option's argument errors. Exits 77 (skipped) when the model file is absent.
local PATH = "models/SmolLM2-135M-Instruct-Q4_1.gguf"
if not io.open(PATH, "rb") then
  print("SKIPPED: " .. PATH .. " not present")
  os.exit(77, true)
end

local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises

-- float64 log-sum-exp of row r (1-based) of a [n, V] tensor
local function lse_of(full, r)
  local row = full[r]:totable()
  local mx = -math.huge
  for _, v in ipairs(row) do if v > mx then mx = v end end
  local z = 0
  for _, v in ipairs(row) do z = z + math.exp(v - mx) end
  return mx + math.log(z)
end

local WORDS = {"apple", "bird", "car", "egg", "house", "milk", "plane", "opera",
               "box", "sand", "sun", "mango", "rock", "math", "code", "phone"}

-- chunk 8: many chunks of one LM-head sub-chunk; chunk 400: one chunk, LM head in two sub-chunks (341 rows max)
for _, cfg in ipairs({{chunk = 8, len = 40}, {chunk = 400, len = 360}}) do
  local m = assert(icl.load(PATH, {n_ctx = 512, chunk = cfg.chunk}))
  local g = icl.graph.grid(4, 4, WORDS)
  local ids = g:token_ids(m)
  local walk = g:walk{length = cfg.len, start = 1, seed = 3}
  local toks = g:tokens(m, walk, {bos = true})
  local n = #toks
  local full = m:run(toks, {logits = "all"}).logits
  local r = m:run(toks, {logits = {select = ids, lse = true}})
  local tag = ("chunk %d: "):format(cfg.chunk)
  check(r.logits.ndim == 2 and r.logits:shape()[1] == n and r.logits:shape()[2] == #ids, tag .. "selected shape")
  check(r.lse.ndim == 1 and r.lse:shape()[1] == n, tag .. "lse shape")
  local exact, lse_err = true, 0
  for p = 1, n do
    for j, id in ipairs(ids) do
      if r.logits:get(p, j) ~= full:get(p, id + 1) then exact = false end
    end
    if n < 100 or p % 10 == 1 or (p >= 178 and p <= 183) or p == n then -- sampled, boundaries included
      local want = lse_of(full, p)
      lse_err = math.max(lse_err, math.abs(r.lse:get(p) - want) / math.abs(want))
    end
  end
  check(exact, tag .. "selected logits equal the full logits' columns")
  check(lse_err < 2e-6, tag .. ("lse within 2e-6 relative of float64 (%.2e)"):format(lse_err))
  for _, mode in ipairs({"full", "graph"}) do
    local a = icl.metrics.rule_following(full, walk, g, {token_ids = ids, mode = mode})
    local b = icl.metrics.rule_following(r.logits, walk, g, {token_ids = ids, mode = mode, lse = r.lse})
    local d = 0
    for t = 1, #a do d = math.max(d, math.abs(a[t] - b[t])) end
    check(#a == #b and d < 1e-5, tag .. ("rule_following %s from reduced logits (max diff %.2e)"):format(mode, d))
  end
  if cfg.chunk == 8 then
    local seen, first = 0, true
    m:run(toks, {logits = {select = ids, lse = true}, on_chunk = function(p0, cnt, t)
      seen = seen + cnt
      if t.logits:shape()[1] ~= cnt or t.lse:shape()[1] ~= cnt then first = false end
      if math.abs(t.lse:get(1) - r.lse:get(p0)) > 0 then first = false end
    end})
    check(seen == n and first, "on_chunk receives this chunk's selected logits and lse")
    local only = m:run(toks, {logits = {select = {ids[1]}}})
    check(only.lse == nil and only.logits:shape()[2] == 1, "select without lse")
    local lonly = m:run(toks, {logits = {lse = true}})
    check(lonly.logits == nil and math.abs(lonly.lse:get(n) - r.lse:get(n)) == 0, "lse without select")
    raises(function() m:run(toks, {logits = {select = {m.n_vocab}}}) end, "logits.select[1]: 49152 is not a token id",
           "id out of range")
    raises(function() m:run(toks, {logits = {select = {1.5}}}) end, "logits.select[1]", "non-integer id")
    raises(function() m:run(toks, {logits = {lse = 1}}) end, "logits.lse: expected a boolean", "lse type")
    raises(function() m:run(toks, {logits = {}}) end, "expected select = {ids} and/or lse = true", "empty request")
    raises(function() m:run(toks, {logits = {selct = {1}}}) end, "unknown option 'selct'", "misspelt key")
    raises(function() icl.metrics.rule_following(r.logits, walk, g, {token_ids = ids, selected = true}) end,
           "needs opts.lse", "mode full without lse")
  end
  m:close()
end

tl.done()
