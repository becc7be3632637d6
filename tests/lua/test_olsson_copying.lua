-- icl.olsson copying scores on hand-built icl-attn models whose OV circuits through the unembedding are known
-- exactly: a perfect copier (identity), a head whose output ignores the attended token (constant), a head that
-- copies the next token id instead (cyclic permutation) and a noisy copier (2 I + fixed noise in [-1, 1]). The weights are
-- written into a checkpoint saved by icl.nn (its F32 tensor data overwritten in place), read back, and scored
-- through the hooks by olsson.copying_scores; the values are asserted against the exact values of these circuits
-- and against an independent reference computed here from the weights (with and without W_O, without norms and
-- with LayerNorm).
local O = require("icl.olsson")
local testlib = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = testlib.check
local T = icl.tensor

local V, D, H, DH = 8, 16, 2, 8

-- the three summaries on hand-made blocks: identity, a block whose rows are equal (own token ignored), the
-- permutation, and a small example computed by hand
local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-9) end
do
  local g = {1, -2, 3, 0.5, -1, 2.5, -0.5, 1.5}
  local same, perm = {}, {}
  for s = 1, V do
    for u = 1, V do
      same[#same + 1] = g[u]
      perm[#perm + 1] = (u == s % V + 1) and 1 or 0
    end
  end
  local I, C, P = T.eye(V), T.new({V, V}, same), T.new({V, V}, perm)
  check(near(O.copy_score(I), 1) and near(O.copy_fraction(I), 1) and near(O.copy_top1(I), 1), "identity: 1, 1, 1")
  -- equal rows: the raises g_s - mean(g) sum to 0; each row's positive mass is the same, so the diagonal shares
  -- average to exactly 1/n; only the row of the largest g_s has its own token on top
  check(near(O.copy_score(C), 0, 1e-12), "own token ignored: score 0")
  check(near(O.copy_fraction(C), 2 / V - 1, 1e-12), "own token ignored: share 2/n - 1")
  check(near(O.copy_top1(C), 1 / V), "own token ignored: top1 1/n")
  check(near(O.copy_score(P), -1) and near(O.copy_fraction(P), -1) and O.copy_top1(P) == 0, "permutation: -1, -1, 0")
  -- rows [3,1,2], [1,2,0], [2,2,0]: raises 3-2 = 1, 2-1 = 1, 0-4/3 = -4/3: score (1+1-4/3)/(1+1+4/3) = 0.2;
  -- shares 1, 1, 0 -> 2*(2/3)-1; top1: rows 1 and 2 (row 3: 0 is not the largest)
  local M = T.new({3, 3}, {3, 1, 2, 1, 2, 0, 2, 2, 0})
  check(near(O.copy_score(M), (2 / 3) / (10 / 3), 1e-12), "hand example: score 0.2")
  check(near(O.copy_fraction(M), 2 * (2 / 3) - 1, 1e-6), "hand example: share 1/3")
  check(near(O.copy_top1(M), 2 / 3), "hand example: top1 2/3")
  check(O.copy_score(T.zeros({3, 3})) == 0, "all-zero block: score 0")
end

-- ---- a minimal GGUF reader that finds each tensor's data offset, so F32 data can be overwritten in place ----
local function gguf_tensors(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  local pos = 1
  local function u(fmt) local v; v, pos = string.unpack(fmt, s, pos); return v end
  local function str() local n = u("<I8"); local v = s:sub(pos, pos + n - 1); pos = pos + n; return v end
  local SIZE = {[0] = 1, 1, 2, 2, 4, 4, 4, 1, nil, nil, 8, 8, 8}
  local function skip(t)
    if t == 8 then str()
    elseif t == 9 then
      local et, n = u("<I4"), u("<I8")
      for _ = 1, n do skip(et) end
    else pos = pos + assert(SIZE[t], "unknown GGUF type " .. t) end
  end
  assert(s:sub(1, 4) == "GGUF", path .. ": not GGUF")
  pos = 5
  assert(u("<I4") == 3, "GGUF version 3 expected")
  local nt, nkv = u("<I8"), u("<I8")
  local align = 32
  for _ = 1, nkv do
    local key, t = str(), u("<I4")
    if key == "general.alignment" and t == 4 then align = u("<I4") else skip(t) end
  end
  local infos = {}
  for _ = 1, nt do
    local name, nd = str(), u("<I4")
    local n = 1
    for _ = 1, nd do n = n * u("<I8") end
    local ty, off = u("<I4"), u("<I8")
    infos[name] = {n = n, type = ty, offset = off}
  end
  local data = (pos - 1 + align - 1) // align * align
  for _, i in pairs(infos) do i.at = data + i.offset end
  return infos
end

-- overwrite the F32 tensors named in `values` (name -> flat list, row-major as net:params() shows them)
local function patch(path, values)
  local infos = gguf_tensors(path)
  local f = assert(io.open(path, "r+b"))
  for name, flat in pairs(values) do
    local i = assert(infos[name], "no tensor " .. name)
    assert(i.type == 0 and i.n == #flat, name .. ": F32 of " .. i.n .. " values expected")
    f:seek("set", i.at)
    local parts = {}
    for k, v in ipairs(flat) do parts[k] = string.pack("<f", v) end
    f:write(table.concat(parts))
  end
  f:close()
end

-- ---- the heads: v = A x[1..8] (x = the one-hot embedding of the attended token), written to residual columns 1..8
-- (with W_O) or to the head's own columns (without W_O); W_U = [I | I] reads both halves, so logit u of attended
-- token s is A[u][s] ----
local g = {1, -2, 3, 0.5, -1, 2.5, -0.5, 1.5}
local lcg = 12345
local function noise() lcg = (lcg * 1103515245 + 12345) % 2147483648; return lcg / 2147483648 * 2 - 1 end
local A = {copier = {}, constant = {}, perm = {}, noisy = {}}
for u = 1, V do
  A.copier[u], A.constant[u], A.perm[u], A.noisy[u] = {}, {}, {}, {}
  for s = 1, V do
    A.copier[u][s] = u == s and 1 or 0
    A.constant[u][s] = g[u]
    A.perm[u][s] = (u == s % V + 1) and 1 or 0
    A.noisy[u][s] = (u == s and 2 or 0) + noise()
  end
end
local HEADS = {{A.copier, A.constant}, {A.perm, A.noisy}} -- [layer][head]

local function flat_rows(rows, nr, nc, fill)
  local out = {}
  for r = 1, nr do for c = 1, nc do out[#out + 1] = fill(r, c) end end
  return out
end

local function build(tmp, norm, w_o)
  local net = icl.nn.attn_only{layers = 2, heads = H, d_model = D, vocab = V, ctx = 8, norm = norm, position = "none",
                               w_o = w_o, seed = 1}
  assert(net:save(tmp))
  local p, vals = net:params(), {}
  local zero = function() return 0 end
  vals["token_embd.weight"] = flat_rows(nil, V, D, function(r, c) return r == c and 1 or 0 end)
  vals["output.weight"] = flat_rows(nil, V, D, function(r, c) return (c == r or c == r + V) and 1 or 0 end)
  for l = 0, 1 do
    local b = "blk." .. l .. "."
    vals[b .. "attn_q.weight"] = flat_rows(nil, H * DH, D, zero)
    vals[b .. "attn_k.weight"] = flat_rows(nil, H * DH, D, zero)
    vals[b .. "attn_v.weight"] = flat_rows(nil, H * DH, D, function(r, c)
      local h, u = (r - 1) // DH + 1, (r - 1) % DH + 1
      return c <= V and HEADS[l + 1][h][u][c] or 0
    end)
    if w_o then
      vals[b .. "attn_output.weight"] = flat_rows(nil, D, H * DH, function(r, c) return (c - 1) % DH + 1 == r and 1 or 0 end)
    end
    if norm ~= "none" then
      vals[b .. "attn_norm.weight"] = flat_rows(nil, 1, D, function() return 1 end)
      if p[b .. "attn_norm.bias"] then vals[b .. "attn_norm.bias"] = flat_rows(nil, 1, D, zero) end
    end
  end
  if norm ~= "none" then
    vals["output_norm.weight"] = flat_rows(nil, 1, D, function() return 1 end)
    if p["output_norm.bias"] then vals["output_norm.bias"] = flat_rows(nil, 1, D, zero) end
  end
  for name in pairs(p) do assert(vals[name], "test model: tensor " .. name .. " not set") end
  patch(tmp, vals)
  os.remove(tmp .. ".optim") -- the moments belong to the saved weights, not the patched ones (a loader error)
  -- the layout assumption (row-major, as params() shows): the checkpoint reads back as written
  local back = icl.nn.load(tmp):params()
  for name, flat in pairs(vals) do
    local t = back[name]:totable()
    local ok = #t == #flat
    for k = 1, #flat do ok = ok and math.abs(t[k] - flat[k]) <= 1e-6 * math.abs(flat[k]) end -- f32 rounding
    check(ok, ("%s/%s: %s reads back as written"):format(norm, tostring(w_o), name))
  end
end

-- independent reference: the logit block of head (l, h) from the weights above, with the norms applied by hand
local function ln(x, norm)
  if norm == "none" then return x end
  local n, mu, var = #x, 0, 0
  for i = 1, n do mu = mu + x[i] end
  mu = norm == "layer" and mu / n or 0
  for i = 1, n do var = var + (x[i] - mu) ^ 2 end
  local s = math.sqrt(var / n + 1e-5)
  local y = {}
  for i = 1, n do y[i] = (x[i] - mu) / s end
  return y
end
local function reference(l, h, norm, w_o)
  local rows = {}
  for s = 1, V do
    local x = {}
    for i = 1, D do x[i] = i == s and 1 or 0 end
    local y = ln(x, norm)
    local out = {}
    for i = 1, D do out[i] = 0 end
    local base = w_o and 0 or (h - 1) * DH -- W_O maps the head's d_head values to columns 1..8
    for u = 1, DH do
      local v = 0
      for c = 1, V do v = v + HEADS[l][h][u][c] * y[c] end
      out[base + u] = v
    end
    local z = ln(out, norm)
    for u = 1, V do rows[#rows + 1] = z[u] + z[u + V] end
  end
  return T.new({V, V}, rows)
end

local tmp = os.tmpname()
local ids = {}
for i = 1, V do ids[i] = i - 1 end
for _, norm in ipairs({"none", "layer"}) do
  for _, w_o in ipairs({true, false}) do
    build(tmp, norm, w_o)
    local m = assert(icl.load(tmp, {backend = "cpu"}))
    local score, ex = O.copying_scores(m, {tokens = ids}) -- default input: hook_embed (no positions here)
    local tag = ("norm %s, W_O %s"):format(norm, w_o and "yes" or "no")
    local function get(t, l, h) return t:get(l, h) end
    -- the designed heads, exactly
    check(near(get(score, 1, 1), 1, 1e-5) and near(get(ex.share, 1, 1), 1, 1e-5) and get(ex.top1, 1, 1) == 1,
          tag .. ": the copier scores 1 (score, share, top1)")
    check(near(get(score, 1, 2), 0, 1e-5), tag .. ": the constant head scores 0")
    check(near(get(ex.share, 1, 2), 2 / V - 1, 1e-5), tag .. ": the constant head's share is 2/n - 1")
    check(near(get(ex.top1, 1, 2), 1 / V, 1e-6), tag .. ": the constant head's top1 is 1/n")
    check(near(get(score, 2, 1), -1, 1e-5) and near(get(ex.share, 2, 1), -1, 1e-5) and get(ex.top1, 2, 1) == 0,
          tag .. ": the permutation head scores -1 (score, share), top1 0")
    -- every head against the reference from the weights
    for l = 1, 2 do
      for h = 1, 2 do
        local R = reference(l, h, norm, w_o)
        local b = ex.blocks[l][h]
        local worst = (b - R):abs():max()
        check(worst < 1e-4, ("%s: L%dH%d logit block = reference (max diff %.2e)"):format(tag, l - 1, h - 1, worst))
        check(near(get(score, l, h), O.copy_score(R), 1e-4) and near(get(ex.share, l, h), O.copy_fraction(R), 1e-4),
              ("%s: L%dH%d scores = reference"):format(tag, l - 1, h - 1))
      end
    end
    print(("%s: noisy copier (2 I + noise in [-1, 1]) score %.4f, share %.4f, top1 %.3f"):format(tag,
      get(score, 2, 2), get(ex.share, 2, 2), get(ex.top1, 2, 2)))
    m:close()
  end
end
-- the noisy copier's own token tops every row, and its raises are all positive, yet the other tokens above
-- each row's mean keep its share far below 1 (the values of the norm-free model; the block is A transposed)
do
  local R = reference(2, 2, "none", true)
  check(near(O.copy_score(R), 1) and O.copy_top1(R) == 1, "noisy copier: score 1 and top1 1")
  local sh = O.copy_fraction(R)
  check(sh < 0.5, ("noisy copier: share %.4f far below 1"):format(sh))
end
os.remove(tmp)
os.remove(tmp .. ".optim") -- net:save wrote the optimizer state beside the weights
testlib.done()
