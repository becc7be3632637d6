-- icl.olsson on tiny icl-attn checkpoints: the copying score through hooks equals the OV circuit computed from the
-- weights (with and without W_O), the prefix-matching score equals the diagonal formula on repeated blocks,
-- token losses equal metrics.token_loss of the full logits, and the small helpers give hand-computed values.
local O = require("icl.olsson")
local testlib = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = testlib.check
local T = icl.tensor

-- copy_fraction: identity logits put all positive mass on the diagonal (score 1); negated identity none (-1);
-- copy_score likewise (more hand examples in test_olsson_copying.lua)
check(math.abs(O.copy_fraction(T.eye(3)) - 1) < 1e-12, "identity -> 1")
check(math.abs(O.copy_fraction(-T.eye(3)) + 1) < 1e-12, "-identity -> -1")
check(math.abs(O.copy_score(-T.eye(3)) + 1) < 1e-12, "-identity: score -1")
-- rows [3,1,2] (attend to token 1) and [0,0,3]... row 1: centred [1,-1,0] -> frac 1; row 2 [1,2,0] attending
-- token 2: centred [0,1,-1] -> frac 1; row 3 [2,2,0] attending token 3: centred [2/3,2/3,-4/3] -> 0
local M = T.new({3, 3}, {3, 1, 2, 1, 2, 0, 2, 2, 0})
check(math.abs(O.copy_fraction(M) - (2 * (2 / 3) - 1)) < 1e-6, "hand example: 2 * 2/3 - 1")
check(math.abs(O.band_score({1, 2, 3, 4, 5, 6}, 6, 3, 1) - ((4 + 5 + 6) / 3 - (1 + 2 + 3) / 3)) < 1e-12, "band_score")
check(O.band_score({1, 2, 3, 4, 5, 6}, 7, 2, 0) == 5, "band 0 = single tokens")
do -- band_losses: the two ends of band_score (late over tokens 5..7 -> entries 4..6, early over 2..4 -> 1..3)
  local late, early = O.band_losses({1, 2, 3, 4, 5, 6}, 6, 3, 1)
  check(late == 5 and early == 2, "band_losses: late and early band means")
end
-- mean_se and paired_ablation by hand: top changes {1, 0, 2, 0}, random means {1, 2, 3.5, 4} -> changes {0, 0, 0.5, 0},
-- differences {1, 0, 1.5, 0} (mean 0.625, SE sqrt(1.6875 / 3 / 4) = 0.375), top beats random on 2 of 4 windows
do
  local mu, se = icl.metrics.mean_se({1, 0, 2, 0})
  check(math.abs(mu - 0.75) < 1e-12 and math.abs(se - math.sqrt(2.75 / 12)) < 1e-12, "mean_se")
  local one, z = icl.metrics.mean_se({3})
  check(one == 3 and z == 0, "mean_se of one value: SE 0")
  local pa = O.paired_ablation({1, 2, 3, 4}, {2, 2, 5, 4}, {{1.5, 2, 3, 4}, {0.5, 2, 4, 4}})
  check(pa.n == 4 and math.abs(pa.top_change - 0.75) < 1e-12 and math.abs(pa.random_change - 0.125) < 1e-12,
        "paired_ablation: mean changes")
  check(math.abs(pa.diff - 0.625) < 1e-12 and math.abs(pa.diff_se - 0.375) < 1e-12 and pa.beats == 0.5,
        "paired_ablation: difference, its SE, share of windows")
  check(not pcall(O.paired_ablation, {1, 2}, {1}, {}), "paired_ablation: lengths must match")
end
local r = O.ranked(T.new({2, 2}, {0.1, 0 / 0, 0.7, 0.3}))
check(r[1].layer == 1 and r[1].head == 0 and r[2].layer == 1 and r[2].head == 1 and r[4].score ~= r[4].score, "ranked")
local a = O.ablation({{layer = 2, head = 3}, {layer = 0, head = 1}, {layer = 2, head = 0}})
check(#a == 2 and a[1].layer == 0 and a[2].layer == 2 and a[2].heads[1] == 0 and a[2].heads[2] == 3 and
      a[2].mode == "zero", "ablation groups heads by layer")

-- repeated_segments with gap_max (icl_data_spaced_repeats, tested in train.test_data_spaced): deterministic,
-- next-token targets everywhere, other data than the fixed-period generator; bad options are argument errors
do
  local sp = icl.data.repeated_segments{vocab = 50, seq = 40, segment = 3, segment_max = 6, gap_max = 4, seed = 3}
  local fixed = icl.data.repeated_segments{vocab = 50, seq = 40, segment = 3, segment_max = 6, seed = 3}
  local a, b, f = sp(2, 8), sp(2, 8), fixed(2, 8)
  local at, tt, ft = a.tokens:totable(), a.targets:totable(), f.tokens:totable()
  local same, next_ok, differ = true, true, false
  local bt = b.tokens:totable()
  for i = 1, 8 do
    for t = 1, 40 do
      same = same and at[i][t] == bt[i][t]
      next_ok = next_ok and tt[i][t] == (t < 40 and at[i][t + 1] or -1)
      differ = differ or at[i][t] ~= ft[i][t]
    end
  end
  check(same and next_ok and differ, "gap_max: deterministic, next-token targets, not the fixed-period data")
  check(not pcall(icl.data.repeated_segments, {vocab = 5, seq = 8, segment = 2, gap_max = -1}), "gap_max < 0")
  check(not pcall(icl.data.repeated_segments, {vocab = 5, seq = 8, segment = 2, gap_max = 2, repeated_only = true}),
        "repeated_only with gap_max")
end

-- tiny checkpoints
local tmp = os.tmpname()
local function checkpoint(opts)
  local net = icl.nn.attn_only(opts)
  local data = icl.data.repeated_segments{vocab = opts.vocab, seq = opts.ctx, segment = 3, segment_max = 4, seed = 5}
  icl.train{model = net, data = data, steps = 20, batch = 4, progress = false, optim = icl.optim.adamw{lr = 1e-2}}
  assert(net:save(tmp))
  return net, assert(icl.load(tmp, {backend = "cpu"}))
end

-- the OV circuit from the weights (norm none: no norms on the path): logits[s, u] = W_U[u] . out_h(E[s])
local function ov_reference(net, o, ids)
  local p = net:params()
  local d, V, H = o.d_model, o.vocab, o.heads
  local dh = d // H
  local E = p["token_embd.weight"]:reshape(V, d):index_select(1, (function() local t = {} for i, id in ipairs(ids) do t[i] = id + 1 end return t end)())
  local Wv = p["blk.0.attn_v.weight"]:reshape(H * dh, d)
  local Wu = p["output.weight"]:reshape(V, d)
  local idx = {}
  for i, id in ipairs(ids) do idx[i] = id + 1 end
  local WuS = Wu:index_select(1, idx)
  local scores = {}
  for h = 1, H do
    local v = E:matmul(Wv:slice(1, (h - 1) * dh + 1, h * dh):transpose()) -- [n, dh]
    local out
    if o.w_o == false then
      out = v:matmul(WuS:slice(2, (h - 1) * dh + 1, h * dh):transpose())
    else
      local Wo = p["blk.0.attn_output.weight"]:reshape(d, H * dh)
      out = v:matmul(Wo:slice(2, (h - 1) * dh + 1, h * dh):transpose()):matmul(WuS:transpose())
    end
    scores[h] = {O.copy_score(out), O.copy_fraction(out), O.copy_top1(out)}
  end
  return scores, E
end

for _, wo in ipairs({true, false}) do
  local o = {layers = 1, heads = 2, d_model = 8, vocab = 6, ctx = 12, norm = "none", w_o = wo, seed = 3}
  local net, m = checkpoint(o)
  local ids = {0, 1, 2, 3, 4, 5}
  local want, E = ov_reference(net, o, ids)
  local got, ex = O.copying_scores(m, {tokens = ids, embed = E})
  for h = 1, 2 do
    local w = want[h]
    print(("w_o=%s head %d: copying %.6f / share %.6f / top1 %.3f via hooks, %.6f / %.6f / %.3f from the weights")
      :format(tostring(wo), h - 1, got:get(1, h), ex.share:get(1, h), ex.top1:get(1, h), w[1], w[2], w[3]))
    check(math.abs(got:get(1, h) - w[1]) < 1e-4, ("copying score w_o=%s head %d"):format(tostring(wo), h - 1))
    check(math.abs(ex.share:get(1, h) - w[2]) < 1e-4, ("copying share w_o=%s head %d"):format(tostring(wo), h - 1))
    check(math.abs(ex.top1:get(1, h) - w[3]) < 1e-6, ("copying top1 w_o=%s head %d"):format(tostring(wo), h - 1))
    check(w[1] >= -1 and w[1] <= 1 and w[2] >= -1 and w[2] <= 1, "scores in -1..1")
  end
  m:close()
end

-- prefix matching on blocks of n distinct ids repeated 4x (no BOS): over queries q > n, the attention summed over
-- the keys q - r n + 1 (r >= 1, the tokens after the earlier copies), averaged; previous token: key q - 1
local o2 = {layers = 2, heads = 2, d_model = 16, vocab = 16, ctx = 24, seed = 7}
local _, m = checkpoint(o2)
local seqs = O.random_tokens(m, {n_seq = 3, n = 6, reps = 4, seed = 9})
check(#seqs == 3 and #seqs[1] == 24, "random_tokens: 3 sequences of 6 x 4 (icl-attn: no BOS)")
local distinct, seen = true, {}
for i = 1, 6 do
  if seen[seqs[1][i]] then distinct = false end
  seen[seqs[1][i]] = true
end
check(distinct and seqs[1][7] == seqs[1][1] and seqs[1][24] == seqs[1][6], "blocks of distinct ids, repeated")
local again = O.random_tokens(m, {n_seq = 3, n = 6, reps = 4, seed = 9})
check(again[2][5] == seqs[2][5], "random_tokens is seeded")
local ps = O.pattern_scores(m, seqs)
local want = {}
for _, seq in ipairs(seqs) do
  local rr = m:run(seq, {logits = "none", capture = {"blocks.*.attn.hook_pattern"}})
  for l = 0, 1 do
    local p = rr[("blocks.%d.attn.hook_pattern"):format(l)]
    local dm, dp = {}, {}
    for h = 1, 2 do
      local s1, s2 = 0, 0
      for q = 7, 24 do
        for k = q - 5, 2, -6 do s1 = s1 + p:get(h, q, k) end
      end
      for q = 2, 24 do s2 = s2 + p:get(h, q, q - 1) end
      dm[h], dp[h] = s1 / 18, s2 / 23
    end
    for h = 1, 2 do
      local k = l * 2 + h
      want[k] = want[k] or {0, 0}
      want[k][1], want[k][2] = want[k][1] + dm[h] / 3, want[k][2] + dp[h] / 3
    end
  end
end
for l = 1, 2 do
  for h = 1, 2 do
    local k = (l - 1) * 2 + h
    check(math.abs(ps.prefix_matching:get(l, h) - want[k][1]) < 1e-6, ("prefix matching L%dH%d"):format(l - 1, h - 1))
    check(math.abs(ps.previous_token:get(l, h) - want[k][2]) < 1e-6, ("previous token L%dH%d"):format(l - 1, h - 1))
  end
end

-- token losses from reduced logits equal metrics.token_loss of the full logits; icl_curve averages them
local rr = m:run(seqs[1], {logits = "all"})
local full = icl.metrics.token_loss(rr.logits, seqs[1])
local tl = O.token_losses(m, seqs[1])
local worst = 0
for i = 1, #full do worst = math.max(worst, math.abs(full[i] - tl[i])) end
check(#tl == 23 and worst < 1e-4, ("token losses match (max diff %.2e)"):format(worst))
local curve, score = O.icl_curve(m, {seqs[1], seqs[1]}, {late = 20, early = 3})
check(math.abs(score - (tl[19] - tl[2])) < 1e-9 and math.abs(curve[5] - tl[5]) < 1e-9, "icl_curve")
-- repeat_loss: blocks of 6 without BOS; the repeated blocks are tokens 7..24 (losses tl[6..23]), the first block's
-- predictable part tokens 2..6 (tl[1..5])
do
  local rep, first = O.repeat_loss(m, {seqs[1]}, 6)
  local a, b = 0, 0
  for i = 6, 23 do a = a + tl[i] end
  for i = 1, 5 do b = b + tl[i] end
  check(#rep == 1 and math.abs(rep[1] - a / 18) < 1e-9 and math.abs(first[1] - b / 5) < 1e-9, "repeat_loss")
  check(not pcall(O.repeat_loss, m, {{1, 2, 3}}, 3), "repeat_loss: no repeated block")
end
local _, zs = O.icl_curve(m, {seqs[1]}, {late = 20, early = 3, run = {ablate = O.ablation({{layer = 1, head = 0}})}})
check(zs ~= score, "an ablation changes the curve")
m:close()
os.remove(tmp)
os.remove(tmp .. ".optim") -- net:save wrote the optimizer state beside the weights

testlib.done()
