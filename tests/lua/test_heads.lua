-- icl.heads: scores of hand-built attention patterns with known answers, repeated-token sequences, and
-- score_model against a stand-in model that returns built patterns.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-6) end
local function near_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if not near(a[i], b[i]) then return false end end
  return true
end
local H = icl.heads

-- Builds a pattern [#rules, Q, Q]: rules[h](q) gives the 0-based key that 0-based query q attends to fully.
local function pattern(Q, rules)
  local flat = {}
  for h = 1, #rules do
    for q = 0, Q - 1 do
      local k = rules[h](q)
      for j = 0, Q - 1 do flat[#flat + 1] = (j == k) and 1 or 0 end
    end
  end
  return icl.tensor.new({ #rules, Q, Q }, flat)
end

-- BOS + a block of 4 tokens repeated twice (Q = 9, period 4; the second copy is queries 5..8, 0-based).
local period, Q = 4, 9
local function prev(q) return q > 0 and q - 1 or 0 end
local function induct(q) return q >= 5 and q - period + 1 or 0 end
local function dup(q) return q >= 5 and q - period or 0 end
local P = pattern(Q, { prev, induct, dup })
check(near_list(H.previous_token_score(P), { 1, 1 / 8, 1 / 8 }), "previous-token score")
check(near_list(H.induction_score(P, period), { 0, 1, 0 }), "induction score")
check(near_list(H.duplicate_token_score(P, period), { 0, 0, 1 }), "duplicate-token score (period)")
check(near_list(H.prefix_matching_score(P, period), { 0, 1, 0 }), "prefix matching (period)")
local tokens = { 1, 5, 6, 7, 8, 5, 6, 7, 8 }
check(near_list(H.prefix_matching_score(P, tokens), { 0, 1, 0 }), "prefix matching (tokens)")
check(near_list(H.duplicate_token_score(P, tokens), { 0, 0, 1 }), "duplicate-token score (tokens)")

-- half attention: a head splitting evenly between the previous token and the induction target
local flat = {}
for q = 0, Q - 1 do
  for j = 0, Q - 1 do
    local w = 0
    if q >= 5 then
      w = (j == q - 1 and 0.5 or 0) + (j == q - 3 and 0.5 or 0)
    elseif j == prev(q) then
      w = 1
    end
    flat[#flat + 1] = w
  end
end
local half = icl.tensor.new({ Q, Q }, flat) -- a 2-d pattern is one head
check(near_list(H.induction_score(half, period), { 0.5 }), "partial induction on a [q, k] pattern")
check(near_list(H.previous_token_score(half), { (4 + 4 * 0.5) / 8 }), "partial previous-token score")

check(errs(function() H.induction_score(P, 5) end, "2 * period <= 9"), "period too long")
check(errs(function() H.previous_token_score(icl.tensor.zeros({ 3 })) end, "[head, q, k]"), "1-d pattern")

-- repeated random tokens
local seqs = H.make_repeated_tokens { n_seq = 3, len = 5, vocab = 20, seed = 1, bos = 0 }
local ok = #seqs == 3
for _, s in ipairs(seqs) do
  ok = ok and #s == 11 and s[1] == 0
  local seen = {}
  for i = 2, 6 do
    ok = ok and s[i] == s[i + 5] and s[i] >= 0 and s[i] <= 9 and not seen[s[i]]
    seen[s[i]] = true
  end
end
check(ok, "repeated tokens: BOS, distinct lower-half ids, repeated twice")
local again = H.make_repeated_tokens { n_seq = 3, len = 5, vocab = 20, seed = 1, bos = 0 }
check(table.concat(seqs[2], ",") == table.concat(again[2], ","), "reproducible")
local ex = H.make_repeated_tokens { n_seq = 2, len = 8, vocab = 20, seed = 2, exclude = { 0, 1 } }
local clean = #ex[1] == 16
for _, s in ipairs(ex) do for _, t in ipairs(s) do clean = clean and t >= 2 and t <= 9 end end
check(clean, "exclude, no BOS")
check(errs(function() H.make_repeated_tokens { vocab = 20, len = 11 } end, "len must be in 1..10"), "len checked")

-- score_model with a stand-in: layer 0 = {previous-token, induction}, layer 1 = {duplicate, previous-token}
local runs = 0
local model = {
  n_vocab = 64,
  run = function(_, toks, opts)
    runs = runs + 1
    assert(opts.logits == "none" and opts.capture[1] == "blocks.*.attn.hook_pattern")
    local n, len = #toks, (#toks - 1) // 2
    local function ind(q) return q > len and q - len + 1 or 0 end
    local function dp(q) return q > len and q - len or 0 end
    return { ["blocks.0.attn.hook_pattern"] = pattern(n, { prev, ind }),
             ["blocks.1.attn.hook_pattern"] = pattern(n, { dp, prev }) }
  end,
}
local scores, ranked, all = H.score_model(model, { n_seq = 4, len = 6, seed = 3, bos = 1 })
check(runs == 4, "one run per sequence")
check(scores:shape()[1] == 2 and scores:shape()[2] == 2, "scores [layer, head]")
check(near(scores:get(1, 2), 1) and near(scores:get(1, 1), 0) and near(scores:get(2, 1), 0), "induction scores")
check(ranked[1].layer == 0 and ranked[1].head == 1 and near(ranked[1].score, 1), "ranked: L0H1 first")
check(near(all.previous_token.scores:get(1, 1), 1) and all.previous_token.ranked[1].layer == 0, "previous-token kind")
check(near(all.duplicate_token.scores:get(2, 1), 1), "duplicate-token kind")
check(near(all.prefix_matching.scores:get(1, 2), 1), "prefix-matching kind")
local s2 = H.score_model(model, { kind = "previous_token", n_seq = 1, len = 4 })
check(near(s2:get(2, 2), 1), "kind option")
check(errs(function() H.score_model({ run = model.run }, {}) end, "pass opts.vocab"), "vocab needed")
check(errs(function() H.score_model({ n_vocab = 64, run = function() return {} end }, { n_seq = 1 }) end,
  "no blocks.*.attn.hook_pattern"), "no captures")

tl.done()
