-- The papers' own copying measures in icl.olsson (issue 41), on matrices, parameter tables and a mock model whose
-- values can be checked by hand:
--   eigvals / eigen_copying: Elhage et al. (2021)'s (sum of eigenvalues) / (sum of |eigenvalues|) of an OV circuit;
--   ov_circuits: the d_head x d_head matrix of each head whose nonzero eigenvalues are those of W_U N_f W_O W_V N_1 W_E^T;
--   copying_evaluator: Olsson et al. (2022)'s copying head activation evaluator.
local O = require("icl.olsson")
local testlib = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = testlib.check
local T = icl.tensor
local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-6) end
local function mat(n, f)
  local t = T.zeros(n, n)
  for i = 1, n do for j = 1, n do t:set(f(i, j), i, j) end end
  return t
end

-- eigenvalues and the eigenvalue summary
do
  check(near(O.eigen_copying(T.eye(5)), 1), "identity: +1")
  check(near(O.eigen_copying(T.eye(5) * -2), -1), "-2 I: -1")
  local th = 0.7
  local R = T.new({2, 2}, {math.cos(th), -math.sin(th), math.sin(th), math.cos(th)})
  check(near(O.eigen_copying(R), math.cos(th)), "rotation by 0.7: cos 0.7")
  local re, im = O.eigvals(R)
  check(near(re[1], math.cos(th)) and near(re[2], math.cos(th)) and near(math.abs(im[1]), math.sin(th))
        and near(im[1], -im[2]), "rotation: eigenvalues cos +- i sin")
  check(near(O.eigen_copying(T.new({2, 2}, {0, -1, 1, 0})), 0), "rotation by 90 degrees: 0")
  -- the 3-cycle permutation: eigenvalues 1, w, w^2 with w = exp(2 pi i / 3): sum 0
  local P = mat(3, function(i, j) return (j == i % 3 + 1) and 1 or 0 end)
  check(near(O.eigen_copying(P), 0), "3-cycle: 0")
  -- diag(1, -1, 2) hidden by a similarity transform: (1 - 1 + 2) / (1 + 1 + 2) = 0.5
  local S = T.new({3, 3}, {1, 2, 0, 0, 1, 3, 1, 0, 1})
  local Si = T.new({3, 3}, {1, -2, 6, 3, 1, -3, -1, 2, 1}) / 7 -- inverse of S (det 7)
  local A = S:matmul(T.new({3, 3}, {1, 0, 0, 0, -1, 0, 0, 0, 2})):matmul(Si)
  check(near(O.eigen_copying(A), 0.5, 1e-5), "S diag(1, -1, 2) S^-1: 0.5")
  check(O.eigen_copying(T.zeros(4, 4)) == 0, "zero matrix: 0")
  check(near(O.eigen_copying(T.new({1, 1}, {-3})), -1), "1 x 1: sign")
  testlib.raises(function() O.eigvals(T.zeros(2, 3)) end, "not square", "a 2 x 3 matrix is refused")
  -- a random 24 x 24 matrix: the sums of the eigenvalues and of their squares are tr(A) and tr(A^2)
  local rng = icl.rng.new(3)
  local B = mat(24, function() return rng:normal() end)
  local r2, i2 = O.eigvals(B)
  local s1, s2, t1, t2 = 0, 0, 0, 0
  local B2 = B:matmul(B)
  for i = 1, 24 do
    s1, s2 = s1 + r2[i], s2 + r2[i] ^ 2 - i2[i] ^ 2
    t1, t2 = t1 + B:get(i, i), t2 + B2:get(i, i)
  end
  check(near(s1, t1, 1e-4) and near(s2, t2, 1e-3), ("random 24 x 24: sum %.6f = tr %.6f, sum of squares %.5f = tr(A^2) %.5f")
        :format(s1, t1, s2, t2))
end

-- ov_circuits from a parameter table: V = d = 4 one-hot tied embeddings, 2 heads of d_head 2
local V, D, H, DH = 4, 4, 2, 2
local function params(wo, norm)
  local p = {["token_embd.weight"] = T.eye(D):reshape(-1), ["blk.0.attn_v.weight"] = T.eye(D):reshape(-1)}
  if wo then p["blk.0.attn_output.weight"] = wo:reshape(-1) end
  if norm == "layer" then
    p["blk.0.attn_norm.weight"], p["blk.0.attn_norm.bias"] = T.ones(D), T.zeros(D)
    p["output_norm.weight"], p["output_norm.bias"] = T.ones(D), T.zeros(D)
  end
  return p
end
local cfg = {layers = 1, heads = H, d_model = D, d_head = DH}
do
  local K = O.ov_circuits(params(T.eye(D)), cfg)
  check(near(O.eigen_copying(K[1][1]), 1) and near(O.eigen_copying(K[1][2]), 1), "W_O = I: both heads +1")
  check(near(K[1][1]:get(1, 1), 1) and near(K[1][1]:get(1, 2), 0), "W_O = I: K = I")
  -- head 1 negated, head 2 rotated by 0.7 inside its 2 columns
  local th = 0.7
  local wo = T.new({D, D}, {-1, 0, 0, 0,
                            0, -1, 0, 0,
                            0, 0, math.cos(th), -math.sin(th),
                            0, 0, math.sin(th), math.cos(th)})
  K = O.ov_circuits(params(wo), cfg)
  check(near(O.eigen_copying(K[1][1]), -1), "negated W_O: -1")
  check(near(O.eigen_copying(K[1][2]), math.cos(th)), "rotated W_O: cos 0.7")
  -- without W_O each head's z lands in its own columns: an identity again
  K = O.ov_circuits(params(nil), cfg)
  check(near(O.eigen_copying(K[1][1]), 1) and near(O.eigen_copying(K[1][2]), 1), "no W_O: +1")
  -- LayerNorm's centring C on both sides: K = (C)[head block] = [[3/4, -1/4], [-1/4, 3/4]], eigenvalues 1 and 1/2
  K = O.ov_circuits(params(T.eye(D), "layer"), cfg)
  check(near(K[1][1]:get(1, 1), 0.75) and near(K[1][1]:get(1, 2), -0.25), "LayerNorm: K = centring block")
  check(near(O.eigen_copying(K[1][1]), 1), "LayerNorm: +1")
  -- the direct-path unembedding of the same parameters: logits = x, mean over the 4 tokens
  local un, col = O.params_unembed(params(T.eye(D)), D)
  local lg, mean = un(T.new({1, D}, {1, 2, 3, 6}))
  check(near(lg:get(1, 3), 3) and near(mean:get(1), 3) and col[0] == 1 and col[3] == 4, "params_unembed: identity")
end

-- copying_evaluator on a mock model: one layer, hand-set head outputs and attention patterns on the sequence
-- 0 1 2 3 (unembedding = identity over the 4 tokens, mean over them subtracted)
do
  local seq = {0, 1, 2, 3}
  local n, NH = 4, 4
  local res, pat = T.zeros(n, NH, D), T.zeros(NH, n, n)
  for q = 1, n do
    -- head 1: attends to position 1 (token 0) and raises token 0: ratio 1
    pat:set(1, 1, q, 1); res:set(1, q, 1, 1)
    -- head 2: attends to position 1 but raises token 1: ratio 0 (for q = 1, 2, 3, 4 alike)
    pat:set(1, 2, q, 1); res:set(1, q, 2, 2)
    -- head 3: attends to itself and raises its own token: ratio 1
    pat:set(1, 3, q, q); res:set(1, q, 3, seq[q] + 1)
    -- head 4: splits its attention 1/2, 1/2 over positions 1 and 2 (q >= 2) and raises both tokens equally:
    -- logits (1/2, 1/2, 0, 0), raises 1/4 each: ratio (1/2 * 1/4 + 1/2 * 1/4) / (1/4 + 1/4) = 1/2; at q = 1 it
    -- attends to position 1 and raises token 0 only: ratio 1. Mean over q: (1 + 3 * 1/2) / 4 = 0.625
    if q == 1 then
      pat:set(1, 4, 1, 1); res:set(1, 1, 4, 1)
    else
      pat:set(0.5, 4, q, 1); pat:set(0.5, 4, q, 2); res:set(0.5, q, 4, 1); res:set(0.5, q, 4, 2)
    end
  end
  local mock = {n_layers = 1, n_heads = NH}
  function mock:run(ids, opts)
    check(#ids == n and opts.logits == "none", "mock run: the sequence, no logits")
    return {["blocks.0.attn.hook_result"] = res, ["blocks.0.attn.hook_pattern"] = pat}
  end
  local un = function(x) return x, x:mean(2) end
  local col = {[0] = 1, 2, 3, 4}
  local score, ratio = O.copying_evaluator(mock, {seqs = {seq}, unembed = un, col = col, post_norm = false})
  check(near(ratio:get(1, 1), 1) and near(score:get(1, 1), 1), "copier of the attended token: ratio 1, score +1")
  check(near(ratio:get(1, 2), 0) and near(score:get(1, 2), -1), "raises another token: ratio 0, score -1")
  check(near(ratio:get(1, 3), 1), "copies its own position: ratio 1")
  check(near(ratio:get(1, 4), 0.625) and near(score:get(1, 4), 0.25), "split attention: ratio 0.625, score 0.25")
  testlib.raises(function() O.copying_evaluator(mock, {seqs = {{0, 1, 2, 9}}, unembed = un, col = col, post_norm = false}) end,
                 "token 9 has no unembedding column", "a token without a column is refused")
end

-- ov_circuits_model (weights read through hooks, the path of the GGUF models) against ov_circuits (the parameters)
-- on a random RMSNorm icl-attn net without biases (RoPE: hook_embed holds no position), the whole vocabulary as the sample: the same K_h up to one
-- positive factor, so the same eigenvalue summary
do
  local net = icl.nn.attn_only{layers = 2, heads = 2, d_model = 16, d_head = 8, vocab = 16, ctx = 32, norm = "rms",
                               position = "rope", qkv_bias = false, o_bias = false, seed = 5, init_std = 0.3}
  local m = net:model()
  local ids = {}
  for i = 0, 15 do ids[#ids + 1] = i end
  local Kp = O.ov_circuits(net:params(), {layers = 2, heads = 2, d_model = 16, d_head = 8})
  local Km = O.ov_circuits_model(m, {ids = ids})
  local worst, ratio = 0, nil
  for l = 1, 2 do
    for h = 1, 2 do
      local a, b = O.eigen_copying(Kp[l][h]), O.eigen_copying(Km[l][h])
      worst = math.max(worst, math.abs(a - b))
      local c = Km[l][h]:get(1, 1) / Kp[l][h]:get(1, 1)
      ratio = ratio or c
      local dev = (Km[l][h] - Kp[l][h] * c):abs():max() / Kp[l][h]:abs():max()
      check(dev < 1e-4 and math.abs(c / ratio - 1) < 1e-4 and c > 0,
            ("L%dH%d: hook-read K = %.4f x the parameters' K (deviation %.2g)"):format(l - 1, h - 1, c, dev))
    end
  end
  check(worst < 1e-4, ("eigenvalue summaries agree (worst %.2g)"):format(worst))
  m:close()
  net:close()
end

testlib.done()
