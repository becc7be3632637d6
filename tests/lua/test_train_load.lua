-- Trained icl-attn checkpoints through icl.load: m:run gives the trainer's own logits and patterns (CPU backend),
-- for an unembedding model (learned positions, layer norm, W_O, smeared key, MLP), a classifier with continuous
-- inputs (rms norm, no W_O, no scale), a RoPE model and an inputs-only model; every hook point, ablation, knockout, patching
-- and head scoring work on the trained checkpoint.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check
-- max |a - b| / max |b| over [T, n] tensors
local function rel(a, b) return (a - b):abs():max() / b:abs():max() end
local TOL = 1e-5 -- f32 rounding: the same ops, summed in other orders (measured below)

local tmp = os.tmpname()
local function roundtrip(label, opts, batch, run_opts)
  local net = icl.nn.attn_only(opts)
  local data = icl.data.repeated_segments{vocab = opts.vocab or 8, seq = opts.ctx, segment = 3, segment_max = 5, seed = 2}
  if not batch then
    icl.train{model = net, data = data, steps = 30, batch = 4, progress = false, optim = icl.optim.adamw{lr = 1e-2}}
    batch = data(77, 1)
  end
  assert(net:save(tmp))
  local loss, want = net:forward(batch)
  local m = assert(icl.load(tmp, {backend = "cpu"}))
  local toks = {}
  for i = 1, opts.ctx do toks[i] = math.tointeger(batch.tokens[1][i]) end
  local ro = run_opts or {}
  if batch.inputs and not ro.inputs then ro.inputs = batch.inputs:reshape({opts.ctx, opts.inputs}) end
  ro.logits, ro.capture = "all", {"blocks.0.attn.hook_pattern"}
  local r = m:run(toks, ro)
  local e = rel(r.logits, want[1])
  local ep = rel(r["blocks.0.attn.hook_pattern"], net:pattern(0, 1))
  print(string.format("%s: logits rel err %.2e, layer-0 pattern rel err %.2e", label, e, ep))
  check(e < TOL, label .. ": logits match")
  check(ep < TOL, label .. ": pattern matches")
  return m, toks, net
end

local m, toks, net = roundtrip("unembed", {layers = 2, heads = 2, d_model = 16, vocab = 8, ctx = 12, smeared_key = true, d_ff = 8,
                                qkv_bias = true, o_bias = true, out_bias = true, seed = 4})
roundtrip("rope", {layers = 2, heads = 2, d_model = 16, vocab = 8, ctx = 12, position = "rope", rope_base = 500,
                   smeared_key = true, norm = "rms", seed = 9})
-- a classifier on continuous inputs (some positions without a token), untrained random weights
local T, W = 9, 5
local rng = icl.rng.new(3)
local inputs = rng:normal_tensor({1, T, W})
local tok, tgt = {}, {}
for i = 1, T do tok[i] = i % 3 == 0 and -1 or (i % 4); tgt[i] = i % 3 end
roundtrip("classifier", {layers = 2, heads = 2, d_model = 8, d_head = 4, vocab = 4, ctx = T, inputs = W, norm = "rms",
                         w_o = false, scale = false, output = "classifier", classes = 3, cls_hidden = 1, seed = 6,
                         init_std = 0.5},
          {tokens = {tok}, targets = {tgt}, inputs = inputs}, {inputs = inputs:reshape({T, W})})
roundtrip("inputs only", {layers = 1, heads = 1, d_model = 6, ctx = T, inputs = 6, input_proj = false, norm = "none",
                          output = "classifier", classes = 2, position = "none", seed = 7, init_std = 0.5},
          {tokens = {{-1, -1, -1, -1, -1, -1, -1, -1, -1}}, targets = {{0, 1, 0, 1, 0, 1, 0, 1, 0}},
           inputs = rng:normal_tensor({1, T, 6})}, nil)
-- every hook point on the trained checkpoint, with the identities that tie them together
local points = {"hook_embed", "ln_final.hook_normalized"}
for l = 0, 1 do
  for _, p in ipairs{"hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_pattern", "attn.hook_z",
                     "attn.hook_result", "hook_attn_out", "hook_resid_mid", "mlp.hook_pre", "mlp.hook_post",
                     "hook_mlp_out", "hook_resid_post"} do
    points[#points + 1] = "blocks." .. l .. "." .. p
  end
end
local r = m:run(toks, {logits = "all", capture = points})
local all_there = true
for _, p in ipairs(points) do
  local t = r[p]
  if not t or t:abs():max() ~= t:abs():max() then all_there = false; print("missing or NaN: " .. p) end
end
check(all_there, "every hook point captured on a trained checkpoint, finite")
local function close(a, b) return (a - b):abs():max() <= 1e-5 * (b:abs():max() + 1e-30) end
for l = 0, 1 do
  local b = "blocks." .. l .. "."
  check(close(r[b .. "hook_resid_mid"] - r[b .. "hook_resid_pre"], r[b .. "hook_attn_out"]), l .. ": resid_mid = resid_pre + attn_out")
  check(close(r[b .. "hook_resid_post"] - r[b .. "hook_resid_mid"], r[b .. "hook_mlp_out"]), l .. ": resid_post = resid_mid + mlp_out")
end
check(close(r["blocks.1.attn.hook_pattern"], net:pattern(1, 1)), "layer-1 pattern = the trainer's")
-- interventions: a zeroed head changes the logits; a knocked-out edge has zero attention; patching the
-- residual stream of layer 1 with another run's gives that run's logits
local abl = m:run(toks, {logits = "all", ablate = {{layer = 1, head = 0}}})
check((abl.logits - r.logits):abs():max() > 1e-4, "head ablation changes the logits")
local ko = m:run(toks, {logits = "none", capture = {"blocks.0.attn.hook_pattern"},
                        knockout = {{layer = 0, edges = {{5, 2}}}}})
check(ko["blocks.0.attn.hook_pattern"][1][5][2] == 0 and r["blocks.0.attn.hook_pattern"][1][5][2] > 0, "knockout edge")
local other = {}
for i = 1, #toks do other[i] = (toks[i] + 3) % 8 end
local ro = m:run(other, {logits = "all", capture = {"blocks.1.hook_resid_pre"}})
local pa = m:run(toks, {logits = "all", patch = {{hook = "blocks.1.hook_resid_pre", value = ro["blocks.1.hook_resid_pre"]}}})
check(close(pa.logits, ro.logits), "patched layer-1 residual gives the other run's logits")
local sm = icl.heads.score_model(m, {n_seq = 2, len = 4, seed = 1})
check(sm ~= nil, "head scoring runs on a trained checkpoint")
os.remove(tmp)
os.remove(tmp .. ".optim")
tl.done()
