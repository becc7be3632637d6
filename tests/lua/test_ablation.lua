-- icl.ablation on a tiny random attention-only model (icl-attn, written and loaded here): zero, mean and resample
-- ablation of hook_z against what they must do. Mean ablation of a head whose hook_z is constant over positions
-- (one token repeated: every value vector is the same) leaves the logits unchanged bit for bit, and changes them on
-- a sequence of different tokens; resample ablation from the sequence's own run changes nothing, from another
-- sequence it does; the leave-one-out mean is the mean of the other sequences' position means; next_token_nll
-- equals -log_softmax of the full logits; the errors name what is wrong.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises
local A = icl.ablation

local V, CTX = 16, 24
-- RoPE, no learned positions: on one repeated token every value vector is the same
local net = icl.nn.attn_only{layers = 2, heads = 2, d_model = 16, vocab = V, ctx = CTX, position = "rope", seed = 7}
local tmp = os.tmpname()
assert(net:save(tmp))
local m = assert(icl.load(tmp, {backend = "cpu"}))
os.remove(tmp)

local function maxdiff(a, b) return (a - b):abs():max() end
local function logits(toks, opts) return assert(m:run(toks, A.merge({logits = "all"}, opts))).logits end

local const = {}
for i = 1, 12 do const[i] = 3 end
local mixed = {1, 5, 2, 9, 3, 3, 7, 0, 4, 11, 6, 2}
local other = {8, 2, 2, 5, 13, 1, 0, 9, 9, 4, 10, 3}
local heads = {{layer = 1, head = 0}, {layer = 0, head = 1}}

-- by_layer: grouped per layer, layers and heads ascending
local g = A.by_layer({{layer = 1, head = 1}, {layer = 0, head = 1}, {layer = 1, head = 0}})
check(#g == 2 and g[1].layer == 0 and #g[1].heads == 1 and g[2].layer == 1 and g[2].heads[1] == 0
      and g[2].heads[2] == 1, "by_layer groups and sorts")

-- hook_z is constant over positions on one repeated token (the premise of the mean check below)
do
  local r = assert(m:run(const, {logits = "none", capture = {"blocks.1.attn.hook_z", "blocks.0.attn.hook_z"}}))
  local z = r["blocks.1.attn.hook_z"]
  local spread = maxdiff(z, z[1]:reshape(1, z:shape()[2], z:shape()[3]))
  check(z:shape()[1] == #const and spread < 1e-6 * z:abs():max(),
        ("hook_z constant over positions of a repeated token (up to rounding: %.2g)"):format(spread))
end

-- mean: a reference set of two runs of the constant sequence; the leave-one-out mean is that constant row
do
  local ref = A.reference{n = 2, layers = {0, 1}}
  for b = 1, 2 do ref:record(b, assert(m:run(const, {logits = "none", capture = ref:capture()}))) end
  local iv = ref:interventions("mean", heads, 1)
  check(iv.ablate and #iv.ablate == 2 and iv.ablate[1].layer == 0 and iv.ablate[1].mode == "mean",
        "mean: one ablate entry per layer")
  local dc, dm = maxdiff(logits(const, iv), logits(const)), maxdiff(logits(mixed, iv), logits(mixed))
  check(dc < 1e-5, ("mean ablation of a constant hook_z leaves the logits unchanged (%.2g)"):format(dc))
  check(dm > 1e-3, ("the same mean ablation changes the logits of other tokens (%.2g)"):format(dm))
  local z0 = logits(mixed, ref:interventions("zero", heads, 1))
  check(maxdiff(z0, logits(mixed)) > 1e-4, "zero ablation changes the logits")
  check(maxdiff(z0, logits(mixed, {ablate = {{layer = 0, heads = {1}}, {layer = 1, heads = {0}}}})) == 0,
        "zero ablation is ablate{mode zero} per layer")
end

-- leave-one-out mean over three sequences: mean of the other two sequences' position means
do
  local seqs = {mixed, other, const}
  local ref = A.reference{n = 3, layers = {1}, keep_z = true}
  local zs = {}
  for b, s in ipairs(seqs) do
    local r = assert(m:run(s, {logits = "none", capture = ref:capture()}))
    ref:record(b, r)
    zs[b] = r["blocks.1.attn.hook_z"]
  end
  local want = (zs[2]:mean(1) + zs[3]:mean(1)) / 2
  check(maxdiff(ref:loo_mean(1, 1), want) < 1e-6, "loo_mean(1) = mean of sequences 2 and 3's position means")
  check(ref:donor(1) == 2 and ref:donor(3) == 1, "donor: the next sequence, cyclically")
  -- resample from the sequence's own run: no change; from the donor: a change, equal to patching its hook_z
  local h1 = {{layer = 1, head = 0}, {layer = 1, head = 1}}
  check(maxdiff(logits(mixed, ref:interventions("resample", h1, 1, 1)), logits(mixed)) == 0,
        "resample from the same sequence leaves the logits unchanged")
  local rs = ref:interventions("resample", h1, 1)
  check(rs.patch and #rs.patch == 1 and rs.patch[1].value == zs[2], "resample patches the donor's hook_z")
  local lr = logits(mixed, rs)
  check(maxdiff(lr, logits(mixed)) > 1e-4, "resample from another sequence changes the logits")
  check(maxdiff(lr, logits(mixed, {patch = {{layer = 1, heads = {0, 1}, value = zs[2]}}})) == 0,
        "resample = patch of the donor's hook_z")
  check(maxdiff(logits(other, ref:interventions("resample", h1, 2, 2)), logits(other)) == 0,
        "resample of sequence 2 from itself")
end

-- next_token_nll = -log_softmax of the full logits at each next token
do
  local nll = A.next_token_nll(m, mixed, {})
  local lp = logits(mixed):log_softmax(2)
  local worst = 0
  for i = 1, #mixed - 1 do worst = math.max(worst, math.abs(nll[i] + lp:get(i, mixed[i + 1] + 1))) end
  check(#nll == #mixed - 1 and worst < 1e-4, ("next_token_nll matches log_softmax (%.2g)"):format(worst))
  check(math.abs(A.mean_of({1, 2, 3, 4}, 2, 3) - 2.5) < 1e-12, "mean_of a range")
end

-- errors
raises(function() A.check_mode("median", "--ablation") end, "--ablation 'median': expected zero, mean or resample",
       "an unknown mode names the flag")
do
  local ref = A.reference{n = 1, layers = {1}, keep_z = true}
  ref:record(1, assert(m:run(mixed, {logits = "none", capture = ref:capture()})))
  raises(function() ref:interventions("mean", heads, 1) end, "at least 2 sequences", "mean needs 2 sequences")
  raises(function() ref:interventions("resample", heads, 1) end, "at least 2 sequences", "resample needs 2 sequences")
  raises(function() ref:record(1, assert(m:run({1, 2, 3}, {logits = "none", capture = ref:capture()}))) end,
         "equal lengths", "a reference set refuses unequal lengths")
  local nz = A.reference{n = 2, layers = {1}}
  raises(function() nz:interventions("resample", heads, 1) end, "keep_z", "resample needs keep_z")
end

tl.done()
