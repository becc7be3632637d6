-- Trainer checkpoints for comparing two builds byte for byte (a speed change must not move a bit in EXACT):
-- the four configurations of tests/train/test_train_grad.c plus the meta-learning bench shape (d_model 128, so the
-- gemm's whole tiles run) and a small attn2 shape (160 keys: attention's blocked path, past one 128-column chunk of
-- its backward's in-place products), each trained ~30 steps with AdamW and with SGD, saved (GGUF + .optim) under OUTDIR.
-- Run once per thread count, then sha256sum the folder:
--   ICL_THREADS=1 icl script scripts/train-ckpt-check.lua OUTDIR/t1; ICL_THREADS=2 ... OUTDIR/t2
local out = assert(arg[1], "usage: icl script scripts/train-ckpt-check.lua OUTDIR")
local threads = tonumber(os.getenv("ICL_THREADS") or "1")
assert(icl.fs.make_dirs(out))

local B, T, IN = 4, 5, 8
-- deterministic batch generators, a function of the step (every option of each configuration in use)
local function batch_fn(kind, vocab, classes, width)
  return function(step, nb)
    local rng = icl.rng.new(1000 + step)
    local tok, tgt, mask = {}, {}, {}
    for b = 1, nb do
      tok[b], tgt[b], mask[b] = {}, {}, {}
      for t = 1, T do
        local r = rng:uniform()
        tok[b][t] = (kind == "inputs" and -1) or (r < 0.1 and -1 or math.floor(rng:uniform() * vocab))
        local n = classes or vocab
        tgt[b][t] = rng:uniform() < 0.15 and -1 or math.floor(rng:uniform() * n)
        mask[b][t] = 0.2 + 1.8 * rng:uniform()
      end
    end
    local bt = {tokens = tok, targets = tgt}
    if kind ~= "plain" then bt.mask = mask end
    if width then bt.inputs = rng:normal_tensor({nb, T, width}) end
    if kind == "classifier" then bt.mask = nil end
    return bt
  end
end

local configs = {
  {"all", {layers = 2, heads = 2, d_model = 8, d_head = 4, ctx = 6, vocab = 7, position = "learned", norm = "layer",
           w_o = true, o_bias = true, qkv_bias = true, smeared_key = true, d_ff = 12, out_bias = true, seed = 1},
   batch_fn("mask", 7)},
  {"classifier", {layers = 2, heads = 2, d_model = 8, d_head = 4, ctx = 5, vocab = 7, inputs = IN, input_proj = true,
                  norm = "rms", scale = false, w_o = false, output = "classifier", classes = 3, cls_hidden = 1,
                  position = "none", seed = 2},
   batch_fn("classifier", 7, 3, IN)},
  {"rope", {layers = 2, heads = 2, d_model = 8, d_head = 4, ctx = 5, vocab = 7, position = "rope", norm = "rms",
            w_o = true, smeared_key = true, qkv_bias = true, seed = 4},
   batch_fn("mask", 7)},
  {"inputs", {layers = 1, heads = 1, d_model = 8, d_head = 6, ctx = 5, inputs = 8, input_proj = false, norm = "none",
              position = "none", w_o = true, output = "classifier", classes = 3, seed = 3},
   batch_fn("inputs", 0, 3, 8)},
}

for _, c in ipairs(configs) do
  for _, opt in ipairs({"adamw", "sgd"}) do
    local o = {}
    for k, v in pairs(c[2]) do o[k] = v end
    o.threads = threads
    local net = icl.nn.attn_only(o)
    local optim = opt == "adamw" and icl.optim.adamw{lr = 1e-2, warmup = 5, weight_decay = 0.1}
      or icl.optim.sgd{lr = 0.05, momentum = 0.9}
    local r = icl.train{model = net, data = c[3], steps = 30, batch = B, progress = false, optim = optim}
    assert(net:save(out .. "/" .. c[1] .. "-" .. opt .. ".gguf"))
    print(string.format("%s %s: loss %.6f -> %.6f", c[1], opt, r.loss[1], r.loss[#r.loss]))
  end
end

-- the bench shapes, on repeated-segment data: meta (1152 tokens, d_model 128, 20 steps) and attn2 scaled down
-- (d_head 32, 160 tokens per sequence, 10 steps)
local shapes = {
  {"meta", {layers = 2, heads = 1, d_model = 128, ctx = 9, vocab = 64}, {vocab = 64, seq = 9, segment = 3, seed = 5},
   20, 128},
  {"attn2", {layers = 2, heads = 2, d_model = 64, ctx = 160, vocab = 32}, {vocab = 32, seq = 160, segment = 40, seed = 6},
   10, 8},
}
for _, sh in ipairs(shapes) do
  local name, cfg, seg, steps, batch = sh[1], sh[2], sh[3], sh[4], sh[5]
  cfg.position, cfg.norm, cfg.w_o, cfg.seed, cfg.threads = "learned", "layer", true, 1, threads
  for _, opt in ipairs({"adamw", "sgd"}) do
    local net = icl.nn.attn_only(cfg)
    local data = icl.data.repeated_segments(seg)
    local optim = opt == "adamw" and icl.optim.adamw{lr = 3e-3} or icl.optim.sgd{lr = 0.05, momentum = 0.9}
    local r = icl.train{model = net, data = data, steps = steps, batch = batch, progress = false, optim = optim}
    assert(net:save(out .. "/" .. name .. "-" .. opt .. ".gguf"))
    print(string.format("%s %s: loss %.6f -> %.6f", name, opt, r.loss[1], r.loss[#r.loss]))
  end
end
print("ok")
