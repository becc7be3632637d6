-- icl.heads: attention-head scores from attention patterns (tensors [head, q, k], or [q, k] for one head, as
-- captured at blocks.L.attn.hook_pattern), after Olsson et al. (2022), and scoring every head of a model on
-- repeated random tokens.
--
-- Positions are 1-based query rows of the pattern. Scores are per head, a list indexed by head + 1 (heads and
-- layers are numbered from 0 in hook names, ranked lists and plots, as in TransformerLens).
local heads = {}

local function linalg() return icl.linalg end

local function pattern_dims(p, fname)
  local ok, nd = pcall(function() return p.ndim end)
  if not ok or (nd ~= 2 and nd ~= 3) then error(fname .. ": pattern must be a tensor [head, q, k] or [q, k]", 3) end
  local s = p:shape()
  return s[nd - 1], s[nd] -- queries, keys
end

local function check_period(period, q, fname)
  if math.type(period) ~= "integer" or period < 1 or 2 * period > q then
    error(string.format("%s: period must be an integer with 2 * period <= %d queries", fname, q), 3)
  end
end

-- previous_token_score(pattern): per head, the mean attention from query i to key i - 1 over queries 2..Q.
function heads.previous_token_score(pattern)
  pattern_dims(pattern, "heads.previous_token_score")
  return linalg().pattern_diag_mean(pattern, 1, 2)
end

-- induction_score(pattern, period): on a sequence whose last 2 * period tokens are a random block repeated
-- twice (any prefix such as BOS before it), per head, the mean attention from each query i of the second copy
-- (the last `period` queries) to key i - period + 1, the token after the previous occurrence of token i.
function heads.induction_score(pattern, period)
  local q = pattern_dims(pattern, "heads.induction_score")
  check_period(period, q, "heads.induction_score")
  return linalg().pattern_diag_mean(pattern, period - 1, q - period + 1)
end

-- duplicate_token_score(pattern, period | tokens): per head, attention to earlier copies of the query's token.
-- With a period (repeated block as in induction_score): the mean attention from each query i of the second
-- copy to key i - period. With a list of token ids (one per query): over queries whose token occurred before,
-- the mean of the attention summed over all earlier occurrences.
function heads.duplicate_token_score(pattern, arg)
  local q = pattern_dims(pattern, "heads.duplicate_token_score")
  if type(arg) == "table" then return linalg().pattern_match_mass(pattern, arg, 0, 1) end
  check_period(arg, q, "heads.duplicate_token_score")
  return linalg().pattern_diag_mean(pattern, arg, q - arg + 1)
end

-- prefix_matching_score(pattern, period | tokens): per head, attention to the tokens that followed earlier
-- occurrences of the query's token (Olsson et al.'s prefix matching). With a period it equals induction_score;
-- with a list of token ids (one per query): over queries whose token occurred before, the mean of the attention
-- summed over the keys right after each earlier occurrence.
function heads.prefix_matching_score(pattern, arg)
  local q = pattern_dims(pattern, "heads.prefix_matching_score")
  if type(arg) == "table" then return linalg().pattern_match_mass(pattern, arg, 1, 1) end
  check_period(arg, q, "heads.prefix_matching_score")
  return linalg().pattern_diag_mean(pattern, arg - 1, q - arg + 1)
end

-- make_repeated_tokens{n_seq = 32, len = 32, vocab = V, seed = 0, lo = 0, hi = V // 2 - 1, bos = id,
-- exclude = {ids}}: n_seq token lists, each `len` distinct random ids from lo..hi (inclusive; by default the
-- lower half of the vocabulary) minus `exclude`, repeated twice, after `bos` when given (length 2 len or
-- 2 len + 1).
function heads.make_repeated_tokens(opts)
  opts = opts or {}
  local n_seq, len, vocab = opts.n_seq or 32, opts.len or 32, opts.vocab
  if math.type(vocab) ~= "integer" or vocab < 2 then error("heads.make_repeated_tokens: vocab must be an integer >= 2", 2) end
  local lo, hi = opts.lo or 0, opts.hi or vocab // 2 - 1
  if math.type(lo) ~= "integer" or math.type(hi) ~= "integer" or lo < 0 or hi >= vocab or lo > hi then
    error("heads.make_repeated_tokens: need integers 0 <= lo <= hi < vocab", 2)
  end
  local allowed, skip = {}, {}
  for _, id in ipairs(opts.exclude or {}) do skip[id] = true end
  for id = lo, hi do
    if not skip[id] then allowed[#allowed + 1] = id end
  end
  if math.type(len) ~= "integer" or len < 1 or len > #allowed then
    error(string.format("heads.make_repeated_tokens: len must be in 1..%d (the ids available)", #allowed), 2)
  end
  local rng = opts.rng or icl.rng.new(opts.seed or 0)
  local seqs = {}
  for s = 1, n_seq do
    local pick, seq = rng:sample(#allowed, len), {}
    if opts.bos then seq[1] = opts.bos end
    for rep = 1, 2 do
      for i = 1, len do seq[#seq + 1] = allowed[pick[i]] end
    end
    seqs[s] = seq
  end
  return seqs
end

-- Reads a model property through a few likely names, without failing on a model that lacks them.
local function model_field(model, names)
  for _, name in ipairs(names) do
    local ok, v = pcall(function() return model[name] end)
    if ok and type(v) == "function" then ok, v = pcall(v, model) end
    if ok and v ~= nil and type(v) ~= "function" then return v end
  end
  return nil
end

local function model_vocab(model)
  local v = model_field(model, { "n_tokens", "n_vocab", "vocab_size" }) -- n_tokens: token ids (icl-attn)
  if v == nil then
    local hp = model_field(model, { "hparams", "info" })
    v = type(hp) == "table" and (hp.n_vocab or hp.vocab_size) or nil
  end
  return v
end

local KINDS = { "previous_token", "induction", "duplicate_token", "prefix_matching" }

-- Per-head scores of every kind for one layer's pattern on a repeated sequence.
local function score_pattern(p, len, tokens)
  return {
    previous_token = heads.previous_token_score(p),
    induction = heads.induction_score(p, len),
    duplicate_token = heads.duplicate_token_score(p, len),
    prefix_matching = heads.prefix_matching_score(p, tokens),
  }
end

-- Adds one run's captures into sums[kind][layer + 1][head + 1].
local function accumulate(sums, result, len, tokens)
  local found = 0
  for name, p in pairs(result) do
    local layer = type(name) == "string" and name:match("^blocks%.(%d+)%.attn%.hook_pattern$")
    if layer then
      found = found + 1
      layer = tonumber(layer)
      for kind, per_head in pairs(score_pattern(p, len, tokens)) do
        sums[kind][layer + 1] = sums[kind][layer + 1] or {}
        local row = sums[kind][layer + 1]
        for h, v in ipairs(per_head) do row[h] = (row[h] or 0) + v end
      end
    end
  end
  if found == 0 then error("heads.score_model: the run returned no blocks.*.attn.hook_pattern captures", 3) end
end

-- A tensor [layers, heads] of sums / n and the ranked list of its entries (descending score).
local function finish(rows, n)
  local n_layer, n_head = 0, 0
  for l in pairs(rows) do n_layer = math.max(n_layer, l) end
  for l = 1, n_layer do
    if not rows[l] then error("heads.score_model: layer " .. (l - 1) .. " was not captured", 3) end
    n_head = math.max(n_head, #rows[l])
  end
  local flat, ranked = {}, {}
  for l = 1, n_layer do
    for h = 1, n_head do
      local v = (rows[l][h] or 0 / 0) / n
      flat[#flat + 1] = v
      ranked[#ranked + 1] = { layer = l - 1, head = h - 1, score = v }
    end
  end
  table.sort(ranked, function(a, b) -- best first, NaN last, ties by layer then head
    local a_nan, b_nan = a.score ~= a.score, b.score ~= b.score
    if a_nan ~= b_nan then return b_nan end
    if not a_nan and a.score ~= b.score then return a.score > b.score end
    return a.layer < b.layer or (a.layer == b.layer and a.head < b.head)
  end)
  return icl.tensor.new({ n_layer, n_head }, flat), ranked
end

-- score_model(model, {kind = "induction", n_seq = 32, len = 32, seed = 0, vocab =, bos =, lo =, hi =,
-- exclude =}): runs the model on make_repeated_tokens sequences capturing every layer's attention pattern and
-- averages the per-head scores over sequences. vocab and bos default to the model's n_vocab and bos (bos = false:
-- none); exclude defaults to the model's BOS and EOS ids. Returns the [layer, head] score tensor of `kind`, its ranked
-- list {{layer =, head =, score =}, ...} (best first, 0-based layer and head), and a table of all kinds
-- (previous_token, induction, duplicate_token, prefix_matching), each {scores = tensor, ranked = list}.
function heads.score_model(model, opts)
  opts = opts or {}
  local kind = opts.kind or "induction"
  local sums = {}
  for _, k in ipairs(KINDS) do sums[k] = {} end
  if not sums[kind] then error("heads.score_model: unknown kind " .. tostring(kind), 2) end
  local vocab = opts.vocab or model_vocab(model)
  if not vocab then error("heads.score_model: cannot tell the model's vocabulary size; pass opts.vocab", 2) end
  local len = opts.len or 32
  local bos, eos = opts.bos, model_field(model, { "eos" })
  if bos == nil then bos = model_field(model, { "bos" }) end
  if bos == false or (math.type(bos) == "integer" and bos < 0) then bos = nil end
  local seqs = heads.make_repeated_tokens { n_seq = opts.n_seq, len = len, vocab = vocab, seed = opts.seed,
    bos = bos, lo = opts.lo, hi = opts.hi, exclude = opts.exclude or { bos or -1, eos or -1 } }
  local bar = icl.progress.new { total = #seqs, label = "head scores" }
  for _, seq in ipairs(seqs) do
    local r, err = model:run(seq, { logits = "none", capture = { "blocks.*.attn.hook_pattern" } })
    if not r then error("heads.score_model: " .. tostring(err), 2) end
    accumulate(sums, r, len, seq)
    bar:update(1)
  end
  bar:done()
  local all = {}
  for _, k in ipairs(KINDS) do
    local scores, ranked = finish(sums[k], #seqs)
    all[k] = { scores = scores, ranked = ranked }
  end
  return all[kind].scores, all[kind].ranked, all
end

return heads
