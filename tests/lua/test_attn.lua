-- icl-attn from Lua: a hand-built GGUF file (written here byte by byte, independent of icl's writer) whose
-- logits are known in closed form, run with continuous inputs and "no token" (-1) positions.
-- The model: d = 4, one head of 4, norm none, no positions, W_q = W_k = 0 (uniform causal attention),
-- W_v = I, no W_O, classifier with no hidden layer, output = I plus a bias. So with x_i = E[t_i] + inputs_i
-- (E[-1] = 0): logits_i = x_i + mean_{j <= i} x_j + bias.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises

local D, V = 4, 3 -- width, token rows
local E = { { 1, 0, 0, 2 }, { 0, -1, 0.5, 0 }, { 0.25, 0.25, -2, 1 } }
local BIAS = { 0.5, -0.5, 1, 0 }

-- GGUF v3 ---------------------------------------------------------------------------------------------------
local function gstr(s) return string.pack("<I8", #s) .. s end
local function kv_u32(k, v) return gstr(k) .. string.pack("<I4I4", 4, v) end
local function kv_f32(k, v) return gstr(k) .. string.pack("<I4f", 6, v) end
local function kv_bool(k, v) return gstr(k) .. string.pack("<I4B", 7, v and 1 or 0) end
local function kv_str(k, v) return gstr(k) .. string.pack("<I4", 8) .. gstr(v) end
local function floats(list) local t = {} for i, x in ipairs(list) do t[i] = string.pack("<f", x) end return table.concat(t) end
local function eye(n) local t = {} for r = 1, n do for c = 1, n do t[#t + 1] = r == c and 1 or 0 end end return t end
local function zeros(n) local t = {} for i = 1, n do t[i] = 0 end return t end

local function write_model(path)
  local P = "icl-attn."
  local kvs = { kv_str("general.architecture", "icl-attn"), kv_u32(P .. "context_length", 16),
    kv_u32(P .. "embedding_length", D), kv_u32(P .. "block_count", 1), kv_u32(P .. "attention.head_count", 1),
    kv_u32(P .. "attention.key_length", D), kv_f32(P .. "attention.scale", 1.0), kv_str(P .. "norm", "none"),
    kv_str(P .. "position", "none"), kv_bool(P .. "smeared_key", false), kv_u32(P .. "vocab_size", V),
    kv_u32(P .. "input_length", D), kv_str(P .. "output", "classifier"), kv_u32(P .. "classifier.hidden_count", 0),
    kv_str("icl-train.config", "{}") }
  local emb = {}
  for _, row in ipairs(E) do for _, x in ipairs(row) do emb[#emb + 1] = x end end
  local tensors = { { "token_embd.weight", { D, V }, emb }, { "blk.0.attn_q.weight", { D, D }, zeros(D * D) },
    { "blk.0.attn_k.weight", { D, D }, zeros(D * D) }, { "blk.0.attn_v.weight", { D, D }, eye(D) },
    { "output.weight", { D, D }, eye(D) }, { "output.bias", { D }, BIAS } }
  local infos, data, off = {}, {}, 0
  for _, t in ipairs(tensors) do
    local dims = string.pack("<I4", #t[2])
    for _, n in ipairs(t[2]) do dims = dims .. string.pack("<I8", n) end
    infos[#infos + 1] = gstr(t[1]) .. dims .. string.pack("<I4I8", 0, off)
    local bytes = floats(t[3])
    bytes = bytes .. string.rep("\0", (32 - #bytes % 32) % 32)
    data[#data + 1], off = bytes, off + #bytes
  end
  local head = "GGUF" .. string.pack("<I4I8I8", 3, #tensors, #kvs) .. table.concat(kvs) .. table.concat(infos)
  head = head .. string.rep("\0", (32 - #head % 32) % 32)
  local f = assert(io.open(path, "wb"))
  f:write(head, table.concat(data))
  f:close()
end

-- expected logits -------------------------------------------------------------------------------------------
local TOKS = { 0, -1, 2, -1, 1 }
local N = #TOKS
local IN = {}
for i = 1, N do IN[i] = { 0.1 * i, -0.2 * i, 0.3, (i % 2) - 0.5 } end

local function expected(ablated)
  local x, sum, out = {}, zeros(D), {}
  for i = 1, N do
    x[i] = {}
    for c = 1, D do
      x[i][c] = (TOKS[i] >= 0 and E[TOKS[i] + 1][c] or 0) + IN[i][c]
      sum[c] = sum[c] + x[i][c]
      out[#out + 1] = x[i][c] + (ablated and 0 or sum[c] / i) + BIAS[c]
    end
  end
  return out, x
end

local path = os.tmpname()
write_model(path)
for _, backend in ipairs({ "ref", "cpu" }) do
  local m = assert(icl.load(path, { backend = backend, n_ctx = 16, chunk = 2 }))
  check(m.arch == "icl-attn" and m.n_vocab == D and m.n_tokens == V and m.input_length == D and m.d_mlp == 0,
    backend .. ": fields")
  raises(function() m:tokenize("abc") end, "model has no tokenizer", backend .. ": tokenize")
  local inputs = icl.tensor.new({ N, D }, (function() local t = {} for i = 1, N do for c = 1, D do t[#t + 1] = IN[i][c] end end return t end)())
  local r = m:run(TOKS, { logits = "all", inputs = inputs, capture = { "hook_embed", "blocks.0.attn.hook_pattern" } })
  local want, x = expected(false)
  local got, worst = r.logits:totable(), 0
  for i = 1, N do for c = 1, D do worst = math.max(worst, math.abs(got[i][c] - want[(i - 1) * D + c])) end end
  check(worst < 1e-5, backend .. ": logits in closed form (off by " .. worst .. ")")
  local emb = r["hook_embed"]:totable()
  worst = 0
  for i = 1, N do for c = 1, D do worst = math.max(worst, math.abs(emb[i][c] - x[i][c])) end end
  check(worst < 1e-6, backend .. ": hook_embed = token embedding + inputs, 0 for token -1")
  local p = r["blocks.0.attn.hook_pattern"]:totable()
  check(math.abs(p[1][5][1] - 0.2) < 1e-6 and p[1][2][3] == 0, backend .. ": uniform causal pattern")
  -- ablating the only head leaves x + bias
  local abl = m:run(TOKS, { logits = "all", inputs = inputs, ablate = { { layer = 0, head = 0 } } })
  local wa = expected(true)
  got, worst = abl.logits:totable(), 0
  for i = 1, N do for c = 1, D do worst = math.max(worst, math.abs(got[i][c] - wa[(i - 1) * D + c])) end end
  check(worst < 1e-5, backend .. ": zero ablation of head 0 (off by " .. worst .. ")")
  -- no inputs = zero inputs
  local a = m:run(TOKS, { logits = "all" }).logits
  local b = m:run(TOKS, { logits = "all", inputs = icl.tensor.zeros({ N, D }) }).logits
  check((a - b):abs():max() == 0, backend .. ": no inputs equals zero inputs")
  raises(function() m:run(TOKS, { inputs = icl.tensor.zeros({ N, D + 1 }) }) end,
    "inputs: expected a tensor [5, 4]", backend .. ": inputs shape")
  raises(function() m:run({ 0, -2 }) end, "tokens[2]: -2 out of range -1..2", backend .. ": token range")
  raises(function() m:run(TOKS, { capture = { "blocks.0.mlp.hook_post" } }) end, "matches nothing",
    backend .. ": no MLP hook points in an attention-only model")
  local scores = icl.heads.score_model(m, { kind = "previous_token", n_seq = 2, len = 1 })
  check(scores.ndim == 2 and scores:shape()[1] == 1 and scores:shape()[2] == 1, backend .. ": head scores run")
  m:close()
end
os.remove(path)

tl.done()
