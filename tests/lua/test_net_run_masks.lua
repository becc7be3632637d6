-- Attention masks (issue 43): masks = {{layer =, heads =, allow = {{q, k}, ...}}} keeps only the listed edges of the
-- heads' queries. A mask equals the knockout of its complement (every causal edge it does not list), bit for bit,
-- on a training net, on icl.load of its checkpoint in chunks of 5 positions, and on a real model in chunks of 4
-- when present; two masks of one head keep the intersection; a mask that allows everything changes nothing.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises

local function diff(a, b)
  if a == nil or b == nil then return math.huge end
  return (a - b):abs():max()
end

local function same_results(r1, r2, what)
  for k, v in pairs(r1) do
    local d = diff(v, r2[k])
    check(d == 0, what .. ": " .. k .. " equal bit for bit (diff " .. tostring(d) .. ")")
  end
end

-- A seeded allowed-edge set over n positions (about keep of the causal edges; each query keeps at least itself).
local function random_allow(rng, n, keep)
  local allow, set = {}, {}
  for q = 1, n do
    for k = 1, q do
      if k == q or rng:uniform() < keep then
        allow[#allow + 1] = {q, k}
        set[q * 1000 + k] = true
      end
    end
  end
  return allow, set
end

-- The knockout edges of the complement of the allowed sets (a list of sets, all applying to one head group).
local function complement(n, sets)
  local e = {}
  for q = 1, n do
    for k = 1, q do
      for _, set in ipairs(sets) do
        if not set[q * 1000 + k] then
          e[#e + 1] = {q, k}
          break
        end
      end
    end
  end
  return e
end

local rng = icl.rng.new(11)
local V, T = 16, 12
local net = icl.nn.attn_only{layers = 2, heads = 2, d_model = 16, vocab = V, ctx = T, seed = 8, threads = 1,
                             norm = "layer", d_ff = 16}
local tokens = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}
local a0, s0 = random_allow(rng, T, 0.5)
local a1, s1 = random_allow(rng, T, 0.3)
local a2, s2 = random_allow(rng, T, 0.6)
local masks = {{layer = 0, allow = a0}, {layer = 1, heads = {1}, allow = a1}, {layer = 1, heads = {1}, allow = a2}}
local knock = {{layer = 0, edges = complement(T, {s0})}, {layer = 1, heads = {1}, edges = complement(T, {s1, s2})}}
local cap = {"blocks.*.attn.hook_pattern", "blocks.1.hook_resid_post"}
local rm = net:run(tokens, {logits = "all", masks = masks, capture = cap})
local rk = net:run(tokens, {logits = "all", knockout = knock, capture = cap})
same_results(rm, rk, "net: masks vs knockouts")
-- the pattern is zero exactly off the allowed set (head 1 of layer 1: the intersection of two masks)
local P = rm["blocks.1.attn.hook_pattern"]
local off_ok, on_ok = true, true
for q = 1, T do
  for k = 1, q do
    local v, kept = P:get(2, q, k), s1[q * 1000 + k] and s2[q * 1000 + k]
    if not kept and v ~= 0 then off_ok = false end
    if kept and not (v > 0) then on_ok = false end
  end
end
check(off_ok, "masked edges have zero attention")
check(on_ok, "kept edges have positive attention")
local plain = net:run(tokens, {logits = "all", capture = cap})
check(diff(rm.logits, plain.logits) > 0, "the masks change the logits")
-- everything allowed: the run without intervention
local all = {}
for q = 1, T do for k = 1, q do all[#all + 1] = {q, k} end end
same_results(net:run(tokens, {logits = "all", masks = {{layer = 0, allow = all}, {layer = 1, allow = all}}}),
             {logits = plain.logits}, "allow-all mask")

-- the same on icl.load of the checkpoint, in chunks of 5 positions (the mask is built per chunk)
local path = os.tmpname()
os.remove(path)
path = path .. ".gguf"
assert(net:save(path))
local m = assert(icl.load(path, {backend = "cpu", chunk = 5}))
local mm = m:run(tokens, {logits = "all", masks = masks, capture = cap})
same_results(mm, m:run(tokens, {logits = "all", knockout = knock, capture = cap}), "chunked model: masks vs knockouts")
same_results(mm, rm, "chunked model vs net:run")
-- errors name the entry and field
raises(function() m:run(tokens, {masks = {{layer = 0, allow = {{2, 3}}}}}) end, "masks[1].allow[1]",
       "key after query")
raises(function() m:run(tokens, {masks = {{layer = 0, allow = {{13, 1}}}}}) end, "out of range", "position range")
raises(function() m:run(tokens, {masks = {{layer = 2, allow = all}}}) end, "masks[1].layer", "layer range")
raises(function() m:run(tokens, {masks = {{layer = 0, edges = all}}}) end, "edges", "unknown key")
raises(function() m:run(tokens, {masks = {{layer = 0, heads = {2}, allow = all}}}) end, "masks[1]", "head range")
-- positions (issue 43 item 3): the binding converts 1-based and negative-from-the-end positions to the C API's
-- 0-based ones, the core checks them; a negative position means what its positive twin means
local function from_end(pairs_)
  local out = {}
  for i, e in ipairs(pairs_) do out[i] = i % 2 == 1 and {e[1] - T - 1, e[2]} or {e[1], e[2] - T - 1} end
  return out
end
same_results(m:run(tokens, {logits = "all", masks = {{layer = 0, allow = from_end(a0)}}, capture = cap}),
             m:run(tokens, {logits = "all", masks = {{layer = 0, allow = a0}}, capture = cap}),
             "mask pairs from the end")
same_results(m:run(tokens, {logits = "all", knockout = {{layer = 1, heads = {1}, edges = from_end(knock[2].edges)}}}),
             m:run(tokens, {logits = "all", knockout = {knock[2]}}), "knockout pairs from the end")
local r = "blocks.1.hook_resid_post"
local function cap_at(pos) return m:run(tokens, {logits = "none", capture = {{name = r, pos = pos}}})[r] end
same_results({x = cap_at(-1)}, {x = cap_at(T)}, "capture pos = -1 is the last position")
same_results({x = cap_at({-3, -1})}, {x = cap_at({T - 2, T})}, "capture pos = {-3, -1} is the last three")
same_results({x = cap_at({2, -2})}, {x = cap_at({2, T - 1})}, "capture pos = {2, -2}")
check(cap_at({-3, -1}):shape()[1] == 3 and cap_at(4):shape()[1] == 1, "rows of pos = {-3, -1} and pos = 4")
raises(function() m:run(tokens, {masks = {{layer = 0, allow = {{0, 1}}}}}) end,
       "masks[1].allow[1]: position 0 (positions are 1-based; -1 is the last)", "position 0 is no Lua position")
raises(function() m:run(tokens, {ablate = {{layer = 0, pos = 0}}}) end,
       "ablate[1].pos: position 0 (positions are 1-based", "pos = 0 is no Lua position")
raises(function() m:run(tokens, {knockout = {{layer = 0, edges = {{1, 1}, {-13, 1}}}}}) end,
       "knockout[1].edges[2]: position -13 out of range 1..12 (1-based; -12..-1 from the end)", "negative out of range")
raises(function() m:run(tokens, {knockout = {{layer = 0, edges = {{-12, -1}}}}}) end,
       "knockout[1].edges[1]: key position after query position (12 > 1)", "negative pair with k > q")
raises(function() m:run(tokens, {capture = {{name = r, pos = {5, 3}}}}) end,
       "capture[1].pos: range 5..3 (first..last, 1-based) is empty", "empty range")
raises(function() m:run(tokens, {patch = {{hook = r, pos = {-2, -4}, value = icl.tensor.zeros(1, 16)}}}) end,
       "patch[1].pos: range -2..-4 (first..last, 1-based) is empty", "empty range from the end")
raises(function() m:run(tokens, {add = {{hook = r, pos = 13, value = icl.tensor.zeros(16)}}}) end,
       "add[1].pos: position 13 out of range 1..12", "add position out of range")
m:close()
os.remove(path)
os.remove(path .. ".optim")

-- the meta-learning model (continuous inputs, classifier head, x1 y1 .. x4 y4 xq): the query sees only the labels
-- in layer 1; net:run with the mask = icl.load + the complement as knockouts (the check meta_learning.lua records as
-- icl_load_check), and net:run's query logits = the trainer's forward (its max_logit_check)
local D, n = 16, 9
local cnet = icl.nn.attn_only{layers = 2, heads = 2, d_model = D, vocab = 6, ctx = n, inputs = D, input_proj = false,
                              position = "none", norm = "none", scale = false, w_o = false, output = "classifier",
                              classes = 6, cls_hidden = 2, out_bias = true, seed = 2, init_std = 0.25, threads = 1}
local ids = {-1, 3, -1, 1, -1, 5, -1, 0, -1}
local inputs = rng:normal_tensor({n, D})
local keep, cut = {}, {}
for q = 1, n do
  for k = 1, q do
    local ok = q ~= n or k % 2 == 0 -- the query (position 9) keeps the labels (2, 4, 6, 8)
    table.insert(ok and keep or cut, {q, k})
  end
end
path = os.tmpname()
os.remove(path)
path = path .. ".gguf"
assert(cnet:save(path))
local cm = assert(icl.load(path, {backend = "cpu"}))
local rmask = cnet:run(ids, {inputs = inputs, logits = "last", masks = {{layer = 1, allow = keep}}})
local rko = cm:run(ids, {inputs = inputs, logits = "last", knockout = {{layer = 1, edges = cut}}})
check(diff(rmask.logits, rko.logits) == 0, "meta-learning mask vs icl.load knockouts, bit for bit")
check(diff(rmask.logits, cnet:run(ids, {inputs = inputs, logits = "last"}).logits) > 0, "the mask matters")
local batch = {tokens = icl.tensor.from(ids):reshape(1, n), inputs = inputs:reshape(1, n, D),
               targets = icl.tensor.from({-1, -1, -1, -1, -1, -1, -1, -1, 2}):reshape(1, n)}
local _, lg = cnet:forward(batch)
local d = diff(cnet:run(ids, {inputs = inputs, logits = "last"}).logits, lg:reshape(n, 6):slice(1, n, n))
check(d < 1e-4, "query logits of net:run vs net:forward (max diff " .. d .. ")")
cm:close()
cnet:close()
os.remove(path)
os.remove(path .. ".optim")

-- a real model in chunks of 4, when present
local PATH = "models/SmolLM2-135M-Instruct-Q4_1.gguf"
local real = io.open(PATH, "rb") and icl.load(PATH, {n_ctx = 32, chunk = 4, backend = "cpu"})
if real then
  local ids = {1, 504, 3458, 282, 4649, 30, 504, 3458, 282, 4649}
  local n = #ids
  local ar, sr = random_allow(rng, n, 0.4)
  local r1 = real:run(ids, {logits = "all", masks = {{layer = 3, heads = {0, 5}, allow = ar}}})
  local r2 = real:run(ids, {logits = "all", knockout = {{layer = 3, heads = {0, 5}, edges = complement(n, {sr})}}})
  same_results(r1, r2, "SmolLM2: masks vs knockouts")
  real:close()
else
  print("(no " .. PATH .. ": the real-model part is not run)")
end
net:close()
tl.done()
