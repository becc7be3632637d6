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
