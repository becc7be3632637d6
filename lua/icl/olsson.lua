-- icl.olsson: the head and model measurements of Olsson et al. (2022), "In-context Learning and Induction
-- Heads", for any model icl.load opens (GGUF language models and icl-attn checkpoints).
--
--   random_tokens(m, opts)     Olsson's protocol: n random tokens repeated `reps` times after BOS
--   pattern_scores(m, seqs)    prefix-matching and previous-token score of every head
--   copying_scores(m, opts)    the direct-path OV copying score of every head (computed through hooks)
--   token_losses(m, tokens)    per-token loss of one sequence (reduced logits: no [n, vocab] on the host)
--   icl_curve(...)             mean loss by token index over sequences, the ICL score
-- Scores are tensors [n_layers, n_heads] (row layer + 1, column head + 1); layers and heads are 0-based in names.
local heads = require("icl.heads")
local metrics = require("icl.metrics")

local O = {}

local function is_control(m, id)
  local ok, text = pcall(m.token_text, m, id)
  if not ok then return false end -- no tokenizer (icl-attn): every id is an ordinary token
  return text == "" or text:match("^<.*>$") ~= nil or text:match("^%[.*%]$") ~= nil
end

-- The candidate ids of random_tokens: ids in [floor(lo_frac * V), floor(hi_frac * V)) that are not BOS, EOS or
-- a control-looking token ("<...>", "[...]", empty text). Without frequency data the id is the proxy for
-- frequency: BPE vocabularies are numbered by merge rank, so the lowest ids (bytes, the first merges) are the
-- most common tokens and the highest ids the rarest.
function O.token_pool(m, opts)
  opts = opts or {}
  local V = m.n_tokens
  local lo = math.floor((opts.lo_frac or 0) * V)
  local hi = math.floor((opts.hi_frac or 1) * V) - 1
  local skip = {}
  for _, f in ipairs({"bos", "eos"}) do
    local ok, v = pcall(function() return m[f] end)
    if ok and math.type(v) == "integer" then skip[v] = true end
  end
  local pool = {}
  for id = math.max(lo, 0), math.min(hi, V - 1) do
    if not skip[id] and not is_control(m, id) then pool[#pool + 1] = id end
  end
  return pool
end

-- random_tokens(m, {n_seq = 8, n = 25, reps = 4, seed = 0, lo_frac, hi_frac, bos = true}): n_seq sequences,
-- each n distinct ids drawn from token_pool, the block repeated reps times, after the model's BOS (when it has
-- one and bos is not false). Returns the list of sequences and the pool size.
function O.random_tokens(m, opts)
  opts = opts or {}
  local n, reps = opts.n or 25, opts.reps or 4
  local pool = O.token_pool(m, opts)
  if n > #pool then error(("olsson.random_tokens: n = %d but only %d ids in the pool"):format(n, #pool), 2) end
  local rng = icl.rng.new(opts.seed or 0)
  local okb, bos = pcall(function() return m.bos end)
  local seqs = {}
  for s = 1, opts.n_seq or 8 do
    local pick, seq = rng:sample(#pool, n), {}
    if opts.bos ~= false and okb and math.type(bos) == "integer" and bos >= 0 then seq[1] = bos end
    for _ = 1, reps do
      for i = 1, n do seq[#seq + 1] = pool[pick[i]] end
    end
    seqs[s] = seq
  end
  return seqs, #pool
end

local function add_into(acc, layer, vals, w)
  acc[layer + 1] = acc[layer + 1] or {}
  for h, v in ipairs(vals) do acc[layer + 1][h] = (acc[layer + 1][h] or 0) + v * w end
end

local function to_tensor(acc, nl, nh)
  local flat = {}
  for l = 1, nl do
    for h = 1, nh do flat[#flat + 1] = acc[l] and acc[l][h] or 0 / 0 end
  end
  return icl.tensor.new({nl, nh}, flat)
end

-- pattern_scores(m, seqs): per head, averaged over the sequences: `prefix_matching` (heads.prefix_matching_score
-- with the token list: over queries whose token occurred before, the attention summed over the keys right
-- after its earlier occurrences) and `previous_token` (mean attention from i to i - 1). Tensors [layers, heads].
function O.pattern_scores(m, seqs)
  local pm, pt = {}, {}
  for _, seq in ipairs(seqs) do
    local r, err = m:run(seq, {logits = "none", capture = {"blocks.*.attn.hook_pattern"}})
    if not r then error("olsson.pattern_scores: " .. tostring(err), 2) end
    for l = 0, m.n_layers - 1 do
      local p = r[("blocks.%d.attn.hook_pattern"):format(l)]
      add_into(pm, l, heads.prefix_matching_score(p, seq), 1 / #seqs)
      add_into(pt, l, heads.previous_token_score(p), 1 / #seqs)
    end
  end
  return {prefix_matching = to_tensor(pm, m.n_layers, m.n_heads),
          previous_token = to_tensor(pt, m.n_layers, m.n_heads)}
end

-- The copying measures of one head take its logit block L [n, n]: row s holds the logits of the n scored tokens
-- when the head attends to token s (copying_scores builds it). Three summaries:
--
-- copy_score(L): Olsson's scale. The raise of each attended token's own logit over the mean of its row,
-- r_s = L[s][s] - mean_u L[s][u], is put through a ReLU and taken as a fraction of the total size,
-- f = sum_s relu(r_s) / sum_s |r_s|, rescaled to 2f - 1 = sum_s r_s / sum_s |r_s|: +1 when attending to any
-- token raises that token above the average token, -1 when it always lowers it, 0 in expectation for a head
-- whose logits do not depend on which token it attends to (whatever n is). 0 for an all-zero block.
function O.copy_score(logits)
  local n = logits:shape()[1]
  local num, den = 0, 0
  for s = 1, n do
    local row = logits[s]
    local r = row[s] - row:mean()
    num, den = num + r, den + math.abs(r)
  end
  return den > 0 and num / den or 0
end

-- copy_fraction(L): the share of each row's positive mass on the attended token. Each row is mean-subtracted,
-- passed through a ReLU, and the share of its positive mass on the diagonal taken; the mean share f over rows is
-- rescaled to 2f - 1. 1 only when every other token of the row lies at or below the row mean; a head whose logits
-- ignore the attended token puts 1/n of the mass there on average (the n entries are exchangeable), so its level
-- is 2/n - 1, and a head whose own token tops every row still scores far below 1 when half of the other tokens
-- lie above the mean (the trained 2L induction heads: -0.44; docs/results.md).
function O.copy_fraction(logits)
  local n = logits:shape()[1]
  local total = 0
  for s = 1, n do
    local row = logits[s]
    local c = row - row:mean()
    local pos = (c:abs() + c) / 2
    local sum = pos:sum()
    total = total + (sum > 0 and pos[s] / sum or 0)
  end
  return 2 * total / n - 1
end

-- copy_top1(L): the fraction of rows whose own token has the strictly largest logit (chance 1/n).
function O.copy_top1(logits)
  local n = logits:shape()[1]
  local hits = 0
  for s = 1, n do
    local row, best = logits[s], true
    local v = row[s]
    for u = 1, n do
      if u ~= s and row[u] >= v then best = false; break end
    end
    if best then hits = hits + 1 end
  end
  return hits / n
end

local function has_post_norm(m)
  local ok = pcall(m.run, m, {m.bos >= 0 and m.bos or 0}, {logits = "none", capture = {"blocks.0.ln1_post.hook_normalized"}})
  return ok
end

-- Every key but the query itself, for all queries 2..n: with these masked each position attends to itself.
local function self_only_edges(n)
  local e = {}
  for q = 2, n do
    for k = 1, q - 1 do e[#e + 1] = {q, k} end
  end
  return e
end

-- The per-head direct outputs of every layer when position i's input to every layer is embed[i] and each position
-- attends only to itself: out[L + 1][head + 1] = tensor [n, d]. The patches at all layers' inputs make one run
-- serve every layer (what layer L reads is the patched embedding, whatever the layers below did). With a
-- post-attention norm (Gemma 3) one run per head with the other heads zeroed, read at hook_attn_out (so the
-- norm's weight is applied); otherwise one run, read at hook_result.
local function head_outputs(m, tokens, embed, post)
  local NL, NH = m.n_layers, m.n_heads
  local o = {logits = "none", patch = {}, knockout = {}}
  local edges = self_only_edges(#tokens)
  for L = 0, NL - 1 do
    o.patch[L + 1] = {hook = ("blocks.%d.hook_resid_pre"):format(L), value = embed}
    o.knockout[L + 1] = {layer = L, edges = edges}
  end
  local out = {}
  for L = 1, NL do out[L] = {} end
  if not post then
    o.capture = {"blocks.*.attn.hook_result"}
    local r = assert(m:run(tokens, o))
    for L = 1, NL do
      local res = r[("blocks.%d.attn.hook_result"):format(L - 1)] -- [n, heads, d]
      for h = 1, NH do out[L][h] = res:slice(2, h, h):reshape(#tokens, -1) end
    end
    return out
  end
  o.capture = {"blocks.*.hook_attn_out"}
  for h = 1, NH do
    local others = {}
    for g = 0, NH - 1 do if g ~= h - 1 then others[#others + 1] = g end end
    o.ablate = nil
    if #others > 0 then
      o.ablate = {}
      for L = 0, NL - 1 do o.ablate[L + 1] = {layer = L, heads = others, mode = "zero"} end
    end
    local r = assert(m:run(tokens, o))
    for L = 1, NL do out[L][h] = r[("blocks.%d.hook_attn_out"):format(L - 1)] end
  end
  return out
end

-- The logits of `tokens` for residual rows x [r, d] placed in the final residual stream, through a run whose
-- last hook_resid_post is patched (any model; the whole forward runs, in runs of at most max_rows rows).
local function patched_unembed(m, tokens, max_rows)
  local n, last = #tokens, ("blocks.%d.hook_resid_post"):format(m.n_layers - 1)
  local per = math.max(1, math.min(m.n_ctx_train, max_rows or 512) // n) * n
  return function(x)
    local parts = {}
    for i = 1, x:shape()[1], per do
      local j = math.min(x:shape()[1], i + per - 1)
      local toks = {}
      for k = i, j do toks[#toks + 1] = tokens[(k - 1) % n + 1] end
      local r = assert(m:run(toks, {logits = {select = tokens}, patch = {{hook = last, value = x:slice(1, i, j)}}}))
      parts[#parts + 1] = r.logits
    end
    return icl.tensor.cat(parts, 1)
  end
end

-- With tied embeddings and an RMS final norm the logits of `tokens` are, up to one positive factor per row
-- (the norm's 1/rms, Gemma's sqrt(d) embedding scale), (w * x) . E_tokens^T: w is read off a run (ln_final
-- output / resid_post at each channel's largest entry) and the identity is checked against the model's own
-- logits of that run (relative error 1e-3 after the best positive factor per row). nil when it does not hold
-- (untied or LayerNorm models), so the caller patches instead.
local function tied_unembed(m, tokens)
  local last = ("blocks.%d.hook_resid_post"):format(m.n_layers - 1)
  local ok, r = pcall(m.run, m, tokens, {logits = {select = tokens},
                      capture = {"hook_embed", last, "ln_final.hook_normalized"}})
  if not ok or not r then return nil end
  local x, y, E = r[last], r["ln_final.hook_normalized"], r.hook_embed
  local d = x:shape()[2]
  local w = {}
  for c = 1, d do
    local best, at = -1, 1
    for i = 1, #tokens do
      local v = math.abs(x:get(i, c))
      if v > best then best, at = v, i end
    end
    local rms = x[at]:norm() / math.sqrt(d)
    w[c] = best > 0 and y:get(at, c) * rms / x:get(at, c) or 0
  end
  local W = icl.tensor.new({1, d}, w)
  local Et = E:transpose()
  local function f(rows) return (rows * W):matmul(Et) end
  local got, want = f(x), r.logits
  for i = 1, #tokens do
    local a, b = want[i], got[i]
    local c = a:dot(b) / b:dot(b)
    if not (c > 0) or (a - b * c):abs():max() > 1e-3 * a:abs():max() then return nil end
  end
  return f
end

-- copying_scores(m, {tokens = ids, embed = tensor [#ids, d] | nil}): per head, how much the head's direct path
-- raises the logit of the token it attends to. For each token t of `tokens`: every layer's residual input is
-- replaced by t's embedding (row of `embed`, default the model's hook_embed of t, which for RoPE models has no
-- position in it), each position attends to itself only, and the head's output (W_O W_V ln1(x); without W_O its
-- z in its own d_head columns; through the post-attention norm where the model has one) is written into the
-- final residual stream of another run, so the logits are W_U ln_final(output). The logits of `tokens` only are
-- kept: one block [n, n] per head (docs/results.md, "Copying score", says it per architecture).
-- Returns copy_score of every head (tensor [layers, heads]) and {share = copy_fraction, top1 = copy_top1,
-- blocks = {[layer + 1][head + 1] = logit block}} of every head.
function O.copying_scores(m, opts)
  local tokens = opts.tokens
  local n = #tokens
  local embed = opts.embed
  if not embed then embed = assert(m:run(tokens, {logits = "none", capture = {"hook_embed"}})).hook_embed end
  local outs = head_outputs(m, tokens, embed, has_post_norm(m))
  local unembed = tied_unembed(m, tokens) or patched_unembed(m, tokens, opts.max_rows)
  local list, rows = {}, {}
  for L = 1, m.n_layers do
    for h = 1, m.n_heads do list[#list + 1] = {L, h}; rows[#rows + 1] = outs[L][h] end
  end
  local logits = unembed(icl.tensor.cat(rows, 1))
  local acc, share, top1, blocks = {}, {}, {}, {}
  for j, lh in ipairs(list) do
    local L, h = lh[1], lh[2]
    acc[L], share[L], top1[L], blocks[L] = acc[L] or {}, share[L] or {}, top1[L] or {}, blocks[L] or {}
    local b = logits:slice(1, (j - 1) * n + 1, j * n)
    acc[L][h], share[L][h], top1[L][h], blocks[L][h] = O.copy_score(b), O.copy_fraction(b), O.copy_top1(b), b
  end
  return to_tensor(acc, m.n_layers, m.n_heads),
         {share = to_tensor(share, m.n_layers, m.n_heads), top1 = to_tensor(top1, m.n_layers, m.n_heads),
          blocks = blocks}
end

-- ---------------------------------------------------------------------------------------------------------------
-- The papers' own copying measures (docs/experiments.md, "Copying: the papers' definitions").
--
-- eigvals(A): the eigenvalues of a real square matrix (tensor [n, n]), as two lists re, im (complex pairs
-- adjacent). Reduction to upper Hessenberg form by Gaussian elimination with partial pivoting, then the Francis
-- double-shift QR iteration with deflation on small subdiagonal entries (Wilkinson's algorithm, written here from
-- its textbook description). Errors after 60 iterations on one eigenvalue.
function O.eigvals(A)
  local n = A:shape()[1]
  if A:shape()[2] ~= n then error("olsson.eigvals: matrix is not square", 2) end
  local a = {}
  for i = 1, n do
    a[i] = {}
    for j = 1, n do a[i][j] = A:get(i, j) end
  end
  local abs = math.abs
  for m = 2, n - 1 do -- Hessenberg reduction
    local x, piv = 0, m
    for j = m, n do if abs(a[j][m - 1]) > abs(x) then x, piv = a[j][m - 1], j end end
    if piv ~= m then
      for j = m - 1, n do a[piv][j], a[m][j] = a[m][j], a[piv][j] end
      for j = 1, n do a[j][piv], a[j][m] = a[j][m], a[j][piv] end
    end
    if x ~= 0 then
      for i = m + 1, n do
        local y = a[i][m - 1]
        if y ~= 0 then
          y = y / x
          a[i][m - 1] = y
          for j = m, n do a[i][j] = a[i][j] - y * a[m][j] end
          for j = 1, n do a[j][m] = a[j][m] + y * a[j][i] end
        end
      end
    end
  end
  for i = 3, n do for j = 1, i - 2 do a[i][j] = 0 end end
  local wr, wi = {}, {}
  local anorm = 0
  for i = 1, n do for j = math.max(i - 1, 1), n do anorm = anorm + abs(a[i][j]) end end
  local function sign(x, y) return y >= 0 and abs(x) or -abs(x) end
  local nn, t = n, 0
  while nn >= 1 do
    local its, l = 0, nil
    repeat
      l = nn
      while l >= 2 do
        local s = abs(a[l - 1][l - 1]) + abs(a[l][l])
        if s == 0 then s = anorm end
        if abs(a[l][l - 1]) + s == s then a[l][l - 1] = 0; break end
        l = l - 1
      end
      local x = a[nn][nn]
      if l == nn then -- one real root
        wr[nn], wi[nn] = x + t, 0
        nn = nn - 1
      else
        local y, w = a[nn - 1][nn - 1], a[nn][nn - 1] * a[nn - 1][nn]
        if l == nn - 1 then -- a pair of roots
          local p = 0.5 * (y - x)
          local q = p * p + w
          local z = math.sqrt(abs(q))
          x = x + t
          if q >= 0 then
            z = p + sign(z, p)
            wr[nn - 1], wr[nn] = x + z, x + z
            if z ~= 0 then wr[nn] = x - w / z end
            wi[nn - 1], wi[nn] = 0, 0
          else
            wr[nn - 1], wr[nn] = x + p, x + p
            wi[nn - 1], wi[nn] = -z, z
          end
          nn = nn - 2
        else
          if its == 60 then error("olsson.eigvals: no convergence after 60 QR iterations", 2) end
          if its == 10 or its == 20 or its == 40 then -- exceptional shift
            t = t + x
            for i = 1, nn do a[i][i] = a[i][i] - x end
            local s = abs(a[nn][nn - 1]) + abs(a[nn - 1][nn - 2])
            x, y, w = 0.75 * s, 0.75 * s, -0.4375 * s * s
          end
          its = its + 1
          local m, p, q, r, z = nn - 2, 0, 0, 0, 0
          while m >= l do
            z = a[m][m]
            r = x - z
            local s = y - z
            p = (r * s - w) / a[m + 1][m] + a[m][m + 1]
            q = a[m + 1][m + 1] - z - r - s
            r = a[m + 2][m + 1]
            s = abs(p) + abs(q) + abs(r)
            p, q, r = p / s, q / s, r / s
            if m == l then break end
            local u = abs(a[m][m - 1]) * (abs(q) + abs(r))
            local v = abs(p) * (abs(a[m - 1][m - 1]) + abs(z) + abs(a[m + 1][m + 1]))
            if u + v == v then break end
            m = m - 1
          end
          for i = m + 2, nn do
            a[i][i - 2] = 0
            if i ~= m + 2 then a[i][i - 3] = 0 end
          end
          for k = m, nn - 1 do
            if k ~= m then
              p, q, r = a[k][k - 1], a[k + 1][k - 1], 0
              if k ~= nn - 1 then r = a[k + 2][k - 1] end
              x = abs(p) + abs(q) + abs(r)
              if x ~= 0 then p, q, r = p / x, q / x, r / x end
            end
            local s = sign(math.sqrt(p * p + q * q + r * r), p)
            if s ~= 0 then
              if k == m then
                if l ~= m then a[k][k - 1] = -a[k][k - 1] end
              else
                a[k][k - 1] = -s * x
              end
              p = p + s
              x, y, z = p / s, q / s, r / s
              q, r = q / p, r / p
              for j = k, nn do
                p = a[k][j] + q * a[k + 1][j]
                if k ~= nn - 1 then
                  p = p + r * a[k + 2][j]
                  a[k + 2][j] = a[k + 2][j] - p * z
                end
                a[k + 1][j] = a[k + 1][j] - p * y
                a[k][j] = a[k][j] - p * x
              end
              for i = l, math.min(nn, k + 3) do
                p = x * a[i][k] + y * a[i][k + 1]
                if k ~= nn - 1 then
                  p = p + z * a[i][k + 2]
                  a[i][k + 2] = a[i][k + 2] - p * r
                end
                a[i][k + 1] = a[i][k + 1] - p * q
                a[i][k] = a[i][k] - p
              end
            end
          end
        end
      end
    until l >= nn - 1
  end
  return wr, wi
end

-- eigen_copying(M): Elhage et al. (2021)'s summary of an OV circuit, (sum of the eigenvalues) / (sum of their
-- absolute values): +1 when every eigenvalue is positive real (a copying matrix), -1 when every one is negative
-- real, cos(theta) for a rotation by theta, 0 for an all-zero matrix. The numerator is real (complex eigenvalues come
-- in conjugate pairs) and equals the trace.
function O.eigen_copying(M)
  local re, im = O.eigvals(M)
  local s, a = 0, 0
  for i = 1, #re do s, a = s + re[i], a + math.sqrt(re[i] * re[i] + im[i] * im[i]) end
  return a > 0 and s / a or 0
end

-- The linear map of a norm with its per-row 1/scale left out (Elhage et al.'s "up to a rescaling due to
-- LayerNorm"): centring (LayerNorm only) then the per-channel weight. Applied to the rows of x [r, d].
local function fold_norm(x, kind, w)
  if kind == "layer" then x = x - x:mean(2):reshape(x:shape()[1], 1) end
  if w then x = x * w:reshape(1, -1) end
  return x
end

-- The norm kind of an icl-attn parameter table (net:params()): "layer" (weight + bias), "rms" (weight), "none".
local function params_norm(p)
  if p["output_norm.bias"] or p["blk.0.attn_norm.bias"] then return "layer" end
  if p["output_norm.weight"] or p["blk.0.attn_norm.weight"] then return "rms" end
  return "none"
end

-- ov_circuits(params, {layers =, heads =, d_model =, d_head =}): the full OV circuit of every head of an icl-attn
-- model from its parameters (net:params(), or a table of the same names), in Elhage et al.'s form
-- F_h = W_U N_f W_O^h W_V^h N_1 W_E^T [vocab, vocab] (column t: the logits when the head attends to token t), with
-- each norm N folded in as its linear part (centring for LayerNorm, then its weight; its 1/scale and bias left
-- out), learned positions and biases left out; without W_O (no attn_output.weight) the head's z lands in its own
-- d_head columns. Returned per head as K_h = W_V^h N_1 W_E^T W_U N_f W_O^h [d_head, d_head], whose nonzero
-- eigenvalues are those of F_h (the eigenvalues of a product do not change when it is cyclically permuted), so
-- eigen_copying(K_h) is the summary of F_h. Returns {[layer + 1][head + 1] = K_h}.
function O.ov_circuits(p, cfg)
  local d, dh, H = cfg.d_model, cfg.d_head, cfg.heads
  local kind = params_norm(p)
  local E = p["token_embd.weight"]:reshape(-1, d) -- [V, d]
  local WU = p["output.weight"] and p["output.weight"]:reshape(-1, d) or E
  -- G = N_1 E^T W_U N_f as a [d, d] matrix: fold ln_final into the rows of W_U (each row of W_U is read through
  -- N_f: logits = W_U N_f x, so W_U N_f = fold_norm applied to the rows of W_U with the roles of centring and
  -- weight transposed), then E^T ... ; built column-wise from the map x -> W_U N_f x.
  local wf = p["output_norm.weight"]
  local Ut = WU:transpose() -- [d, V]
  local WUN = Ut
  if wf then WUN = WUN * wf:reshape(-1, 1) end -- diag(w_f) applied on the left of W_U^T: (W_U diag(w_f))^T
  if kind == "layer" then WUN = WUN - WUN:mean(1):reshape(1, -1) end -- (W_U diag(w_f) C)^T = C diag(w_f) W_U^T
  local out = {}
  for L = 0, cfg.layers - 1 do
    local w1 = p[("blk.%d.attn_norm.weight"):format(L)]
    local EN = fold_norm(E, kind, w1) -- rows: N_1 e_t
    local G = EN:transpose():matmul(WUN:transpose()) -- [d, d] = N_1 E^T W_U N_f (row-vector form, see below)
    local WV = p[("blk.%d.attn_v.weight"):format(L)]:reshape(H * dh, d)
    local WOw = p[("blk.%d.attn_output.weight"):format(L)]
    local WO = WOw and WOw:reshape(d, H * dh) or nil
    out[L + 1] = {}
    for h = 1, H do
      local V = WV:slice(1, (h - 1) * dh + 1, h * dh) -- [dh, d]
      local Oh
      if WO then
        Oh = WO:slice(2, (h - 1) * dh + 1, h * dh) -- [d, dh]
      else
        Oh = icl.tensor.zeros(d, dh)
        for i = 1, dh do Oh:set(1, (h - 1) * dh + i, i) end
      end
      out[L + 1][h] = V:matmul(G):matmul(Oh)
    end
  end
  return out
end

-- params_unembed(params, d_model): the direct-path unembedding of an icl-attn model from its parameters: rows x [r, d] ->
-- logits W_U N_f x over the whole vocabulary [r, V] (N_f: ln_final's linear part, as in ov_circuits) and the mean
-- logit of each row [r]; column t + 1 is token t.
function O.params_unembed(p, d_model)
  local kind = params_norm(p)
  local wf = p["output_norm.weight"]
  local WUt = (p["output.weight"] or p["token_embd.weight"]):reshape(-1, d_model):transpose() -- [d, V]
  local col = {}
  for t = 0, WUt:shape()[2] - 1 do col[t] = t + 1 end
  return function(x)
    local lg = fold_norm(x, kind, wf):matmul(WUt)
    return lg, lg:mean(2)
  end, col
end

-- model_unembed(m, ids, {sample = 512, seed = 0}): the direct-path unembedding of a GGUF model over `ids` plus a
-- uniform random sample of the vocabulary, whose mean logit estimates the mean over the whole vocabulary (the full
-- vocabulary would need every embedding row, which only a run per row can read). Tied embeddings with an RMS final
-- norm use (w_f * x) . E^T (the identity is checked against the model's logits, see tied_unembed); otherwise the
-- final hook_resid_post of a run is patched. Returns the function rows -> logits [r, #cols], mean [r], and col
-- (token id -> column).
function O.model_unembed(m, ids, opts)
  opts = opts or {}
  local rng = icl.rng.new(opts.seed or 0)
  local all, col, seen = {}, {}, {}
  for _, t in ipairs(ids) do if not seen[t] then seen[t] = true; all[#all + 1] = t; col[t] = #all end end
  local K = math.min(opts.sample or 512, m.n_tokens)
  local first = #all + 1
  for _, i in ipairs(rng:sample(m.n_tokens, K)) do all[#all + 1] = i - 1 end
  local f = tied_unembed(m, all) or patched_unembed(m, all)
  return function(x)
    local lg = f(x)
    return lg, lg:slice(2, first, #all):mean(2)
  end, col
end

-- The per-channel weight of the post-attention norm of one layer, read off a run: attn_out = w * s / rms(s) with s
-- the sum of the heads' hook_result rows, so w_c = attn_out[i, c] * rms(s_i) / s[i, c] at the row where |s[i, c]| is
-- largest (the eps of the norm is negligible there).
local function post_weight(res, out)
  local n, d = out:shape()[1], out:shape()[2]
  local s = res:sum(2):reshape(n, d)
  local w = {}
  for c = 1, d do
    local best, at = -1, 1
    for i = 1, n do
      local v = math.abs(s:get(i, c))
      if v > best then best, at = v, i end
    end
    w[c] = best > 0 and out:get(at, c) * (s[at]:norm() / math.sqrt(d)) / s:get(at, c) or 0
  end
  return icl.tensor.new({1, d}, w)
end

-- copying_evaluator(m, {seqs =, unembed =, col =}): Olsson et al. (2022)'s copying head activation evaluator
-- ("Model Analysis Table", "Data Collection", "(3) Head activation evaluators"; docs/experiments.md quotes it).
-- For each sequence (Olsson: 25 random tokens, no BOS, 10 sequences), one run; each head's contribution to the
-- residual stream at each position (hook_result; through the post-attention norm's weight where the model has one)
-- is unembedded along the direct path (unembed, from params_unembed or model_unembed); the logits have the mean
-- logit subtracted and pass a ReLU ("raised" amounts); the raise of the attended tokens (weighted by the head's
-- attention over the positions) is divided by the summed raise of all distinct tokens of the sequence. That ratio
-- r is averaged over positions and sequences, and rescaled to 2r - 1 (r = 1: only the attended token is raised;
-- 0: only tokens not attended to; a head whose output ignores what it attends to sits near 2/n - 1 for n
-- distinct tokens). Returns tensors [layers, heads]: score (2r - 1) and ratio (r).
function O.copying_evaluator(m, opts)
  local seqs, unembed, col = opts.seqs, opts.unembed, opts.col
  local post = opts.post_norm
  if post == nil then post = has_post_norm(m) end
  local NL, NH = m.n_layers, m.n_heads
  local acc = {}
  for L = 1, NL do acc[L] = {} ; for h = 1, NH do acc[L][h] = 0 end end
  for _, seq in ipairs(seqs) do
    local n = #seq
    local caps = {"blocks.*.attn.hook_result", "blocks.*.attn.hook_pattern"}
    if post then caps[3] = "blocks.*.hook_attn_out" end
    local r, err = m:run(seq, {logits = "none", capture = caps})
    if not r then error("olsson.copying_evaluator: " .. tostring(err), 2) end
    local S, seen = {}, {}
    for _, t in ipairs(seq) do
      if not col[t] then error(("olsson.copying_evaluator: token %d has no unembedding column"):format(t), 2) end
      if not seen[t] then seen[t] = true; S[#S + 1] = col[t] end
    end
    for L = 1, NL do
      local res = r[("blocks.%d.attn.hook_result"):format(L - 1)] -- [n, heads, d]
      local pat = r[("blocks.%d.attn.hook_pattern"):format(L - 1)] -- [heads, q, k]
      local wpost = post and post_weight(res, r[("blocks.%d.hook_attn_out"):format(L - 1)]) or nil
      local rows = {}
      for h = 1, NH do
        local x = res:slice(2, h, h):reshape(n, -1)
        rows[h] = wpost and x * wpost or x
      end
      local lg, mean = unembed(icl.tensor.cat(rows, 1))
      for h = 1, NH do
        local tot = 0
        for q = 1, n do
          local row = (h - 1) * n + q
          local mu = mean:get(row)
          local den = 0
          for _, c in ipairs(S) do
            local v = lg:get(row, c) - mu
            if v > 0 then den = den + v end
          end
          local num = 0
          for j = 1, q do
            local a = pat:get(h, q, j)
            if a > 0 then
              local v = lg:get(row, col[seq[j]]) - mu
              if v > 0 then num = num + a * v end
            end
          end
          if den > 0 then tot = tot + num / den end
        end
        acc[L][h] = acc[L][h] + tot / n / #seqs
      end
    end
  end
  local ratio = to_tensor(acc, NL, NH)
  return ratio * 2 - 1, ratio
end

-- ov_gram(m, {ids =, embed =, exact =}): G = E^T W_U N_f [d, d], the part of every head's OV circuit that the heads
-- share: over the ids given (E_S^T (W_U N_f)_S, read through runs), or exact = true over the whole vocabulary from
-- the weights as the forward decodes them (m:weight: token_embd, output, output_norm). Both up to a positive factor
-- (hook_embed's scale, RMSNorm's sqrt(d)), which the eigenvalue summary does not see.
function O.ov_gram(m, opts)
  local d = m.d_model
  if opts.exact then
    local wf = m:weight("output_norm.weight")
    return m:weight("token_embd.weight"):transpose():matmul(m:weight("output.weight") * wf:reshape(1, d))
  end
  local ids, T = opts.ids, icl.tensor
  local eye = T.zeros(d, d)
  for i = 1, d do eye:set(1, i, i) end
  -- E_S [n, d] and w_f; G = E_S^T diag(w_f) E_S... in row form: N_1 E^T W_U N_f = E_S^T (E_S * w_f)
  local ES = opts.embed or assert(m:run(ids, {logits = "none", capture = {"hook_embed"}})).hook_embed
  -- f(eye) [d, n]: row i = the logits of the sample for the residual e_i, (W_U N_f e_i)_S (tied: diag(w_f) E_S^T;
  -- otherwise through a run whose final resid_post is e_i: RMSNorm of e_i is w_f sqrt(d) e_i), so
  -- G = E_S^T f(eye)^T [d, d] = E^T W_U N_f over the sample (the ln1 part N_1 is in the V rows read above)
  local f = tied_unembed(m, ids) or patched_unembed(m, ids)
  return ES:transpose():matmul(f(eye):transpose())
end

-- ov_circuits_model(m, {ids =, embed =, exact =}): the K_h matrices of ov_circuits for a GGUF model. exact = true:
-- E^T W_U N_f over the whole vocabulary from the weights themselves (m:weight: token_embd, output, output_norm),
-- G = E^T (W_U diag(w_f)); ids and embed are then not used. Otherwise read through hooks: W_V^h N_1 from a run whose every layer input (hook_resid_pre) is patched with
-- the d basis vectors (hook_v: RMSNorm of s e_i is w_1i sqrt(d) e_i), W_O^h from a run whose every hook_z is
-- patched with the d_head basis vectors (hook_result), and E^T W_U N_f restricted to the ids given (a random
-- sample of the vocabulary: the Gram matrix over the sample, since the embedding rows of the whole vocabulary
-- need a run over every id; embed: their embedding rows [#ids, d], default hook_embed, which for a model with
-- learned positions has them added), with w_f and, for post-norm models, the post-attention norm's weight read off runs.
-- RMS-norm models without q/k/v/o biases only (the 1/rms factors are left out, as in ov_circuits; a basis
-- vector's RMSNorm is its weight times sqrt(d), the same positive factor for every channel). Returns
-- {[layer + 1][head + 1] = K_h}, equal to ov_circuits' K_h times a positive factor.
function O.ov_circuits_model(m, opts)
  local ids = opts.ids
  local d, dh, NL, NH, NKV = m.d_model, m.d_head, m.n_layers, m.n_heads, m.n_kv_heads
  local T = icl.tensor
  local eye = T.zeros(d, d)
  for i = 1, d do eye:set(1, i, i) end
  if opts.exact then ids = {0} end -- the runs below need some token; their values do not depend on it
  local tok = {}
  for i = 1, d do tok[i] = ids[(i - 1) % #ids + 1] end
  local o = {logits = "none", patch = {}, capture = {"blocks.*.attn.hook_v"}}
  for L = 0, NL - 1 do o.patch[L + 1] = {hook = ("blocks.%d.hook_resid_pre"):format(L), value = eye} end
  local rv = assert(m:run(tok, o))
  local ez = T.zeros(dh, NH, dh)
  for i = 1, dh do for h = 1, NH do ez:set(1, i, h, i) end end
  local tz = {}
  for i = 1, dh do tz[i] = ids[(i - 1) % #ids + 1] end
  local oz = {logits = "none", patch = {}, capture = {"blocks.*.attn.hook_result"}}
  for L = 0, NL - 1 do oz.patch[L + 1] = {hook = ("blocks.%d.attn.hook_z"):format(L), value = ez} end
  local post = has_post_norm(m)
  if post then oz.capture[2] = "blocks.*.hook_attn_out" end
  local rz = assert(m:run(tz, oz))
  local G = O.ov_gram(m, opts)
  local out = {}
  for L = 1, NL do
    local v = rv[("blocks.%d.attn.hook_v"):format(L - 1)] -- [d, kv, dh]
    local res = rz[("blocks.%d.attn.hook_result"):format(L - 1)] -- [dh, heads, d]
    local wpost = post and post_weight(res, rz[("blocks.%d.hook_attn_out"):format(L - 1)]) or nil
    out[L] = {}
    for h = 1, NH do
      local g = (h - 1) // (NH // NKV) + 1
      local Vh = v:slice(2, g, g):reshape(d, dh):transpose() -- [dh, d]: column i = W_V N_1 e_i (times sqrt(d))
      local Oh = res:slice(2, h, h):reshape(dh, d) -- row i = W_O e_i
      if wpost then Oh = Oh * wpost end
      out[L][h] = Vh:matmul(G):matmul(Oh:transpose())
    end
  end
  return out
end

-- token_losses(m, tokens [, run_opts]): the n - 1 losses -log p(tokens[i + 1] | tokens[1..i]), from reduced
-- logits (the sequence's own ids and the log-sum-exp), so [n, vocab] never reaches the host.
function O.token_losses(m, tokens, run_opts)
  local ids, col = {}, {}
  for i = 2, #tokens do
    local t = tokens[i]
    if not col[t] then ids[#ids + 1] = t; col[t] = #ids end
  end
  local o = {logits = {select = ids, lse = true}}
  for k, v in pairs(run_opts or {}) do o[k] = v end
  local r, err = m:run(tokens, o)
  if not r then error("olsson.token_losses: " .. tostring(err), 2) end
  local losses = {}
  for i = 1, #tokens - 1 do losses[i] = r.lse[i] - r.logits:get(i, col[tokens[i + 1]]) end
  return losses
end

-- repeat_loss(m, seqs, n [, run_opts]): per sequence of random_tokens (blocks of n ids after an optional BOS), the
-- mean loss on the tokens of the repeated blocks (every token after the first block), the in-context copying that
-- induction heads do, and the mean loss on the first block's tokens after its first (no copy to make there).
-- Returns two lists (one value per sequence).
function O.repeat_loss(m, seqs, n, run_opts)
  local okb, bos = pcall(function() return m.bos end)
  local rep, first = {}, {}
  for s, seq in ipairs(seqs) do
    local b0 = (okb and math.type(bos) == "integer" and bos >= 0 and seq[1] == bos) and 1 or 0
    if #seq <= b0 + n then error("olsson.repeat_loss: a sequence has no repeated block", 2) end
    local l = O.token_losses(m, seq, run_opts) -- l[i]: loss on token i + 1
    local a, c = 0, 0
    for i = b0 + n + 1, #seq do a, c = a + l[i - 1], c + 1 end
    rep[s] = a / c
    a, c = 0, 0
    for i = b0 + 2, b0 + n do a, c = a + l[i - 1], c + 1 end
    first[s] = a / c
  end
  return rep, first
end

-- icl_curve(m, seqs, {late = 500, early = 50, run = opts}): the mean loss by token index over the sequences
-- (list of n - 1 values: entry i is the loss on token i + 1), the ICL score loss(late) - loss(early), the
-- per-sequence losses and the banded score (band_score with opts.band, default 0).
function O.icl_curve(m, seqs, opts)
  opts = opts or {}
  local all = {}
  for s, seq in ipairs(seqs) do
    all[s] = O.token_losses(m, seq, opts.run)
    if opts.progress then opts.progress:update(1) end
  end
  local mean = icl.metrics.mean_std(all)
  return mean, icl.metrics.icl_score(mean, {late = opts.late or 500, early = opts.early or 50}), all,
         O.band_score(mean, opts.late or 500, opts.early or 50, opts.band or 0)
end

-- band_losses(curve, late, early, band): the loss averaged over token indices late - band .. late + band and
-- over early - band .. early + band (clipped to the curve): the two ends of the banded ICL score, returned as
-- late, early.
function O.band_losses(curve, late, early, band)
  local function at(t)
    local a, b = math.max(1, t - 1 - band), math.min(#curve, t - 1 + band)
    return icl.metrics.mean(curve, a, b)
  end
  return at(late), at(early)
end

-- band_score(curve, late, early, band): the ICL score with each loss averaged over token indices
-- index - band .. index + band (clipped to the curve), which is less noisy than single tokens on few windows.
function O.band_score(curve, late, early, band)
  local l, e = O.band_losses(curve, late, early, band)
  return l - e
end

-- text_sequences(m, text, {n_seq, len, seed}): n_seq windows of `len` tokens (BOS first when the model has one)
-- cut from `text` at seeded random character offsets (each window starts after a newline).
function O.text_sequences(m, text, opts)
  local n_seq, len = opts.n_seq or 8, opts.len or 512
  local rng = icl.rng.new(opts.seed or 0)
  local seqs, chars = {}, len * 8 -- 8 characters per token is ample for English BPE
  local bos = m.bos
  while #seqs < n_seq do
    local at = rng:int(1, #text - chars)
    local nl = text:find("\n", at, true) or at
    local ids = m:tokenize(text:sub(nl + 1, nl + chars), {bos = false})
    if #ids >= len then
      local seq = {}
      if bos >= 0 then seq[1] = bos end
      for i = 1, len - #seq do seq[#seq + 1] = ids[i] end
      seqs[#seqs + 1] = seq
    end
  end
  return seqs
end

-- paired_ablation(base, top, randoms): the per-window comparison of one top-k ablation with its random draws.
-- base and top are lists of per-window scores (same windows), randoms a list of such lists (one per draw).
-- Per window i: top change t_i = top_i - base_i, random change r_i = mean over draws of draw_i - base_i, and
-- their difference t_i - r_i. Returns {top_change, top_se, random_change, random_se, diff, diff_se (paired over
-- windows), beats (fraction of windows with t_i > r_i, i.e. the top-k heads raised that window's score more
-- than the random heads did on average), n (windows)}.
function O.paired_ablation(base, top, randoms)
  local n = #base
  assert(#top == n, "olsson.paired_ablation: top and base differ in length")
  local t, r, d, beats = {}, {}, {}, 0
  for i = 1, n do
    local acc = 0
    for _, w in ipairs(randoms) do
      assert(#w == n, "olsson.paired_ablation: a random draw differs in length")
      acc = acc + w[i]
    end
    t[i] = top[i] - base[i]
    r[i] = #randoms > 0 and acc / #randoms - base[i] or 0 / 0
    d[i] = t[i] - r[i]
    if d[i] > 0 then beats = beats + 1 end
  end
  local out = {n = n, beats = beats / n}
  out.top_change, out.top_se = metrics.mean_se(t)
  out.random_change, out.random_se = metrics.mean_se(r)
  out.diff, out.diff_se = metrics.mean_se(d)
  return out
end

-- ranked(t): the entries of a [layers, heads] tensor best first, NaN last: {{layer =, head =, score =}, ...}.
function O.ranked(t)
  local s, list = t:shape(), {}
  for l = 1, s[1] do
    for h = 1, s[2] do list[#list + 1] = {layer = l - 1, head = h - 1, score = t:get(l, h)} end
  end
  table.sort(list, function(a, b)
    local an, bn = a.score ~= a.score, b.score ~= b.score
    if an ~= bn then return bn end
    if not an and a.score ~= b.score then return a.score > b.score end
    return a.layer < b.layer or (a.layer == b.layer and a.head < b.head)
  end)
  return list
end

-- ablation(list): m:run's ablate option zeroing hook_z of the heads in list ({layer =, head =} entries).
function O.ablation(list)
  local by, out = {}, {}
  for _, e in ipairs(list) do
    by[e.layer] = by[e.layer] or {}
    table.insert(by[e.layer], e.head)
  end
  local layers = {}
  for l in pairs(by) do layers[#layers + 1] = l end
  table.sort(layers)
  for _, l in ipairs(layers) do
    table.sort(by[l])
    out[#out + 1] = {layer = l, heads = by[l], mode = "zero"}
  end
  return out
end

return O
