-- icl.nn / icl.optim / icl.data / icl.train: a 2-layer attention-only model learns repeated segments
-- (loss on the repeated positions near zero), the same seed gives the same loss curve, a checkpoint
-- reloads to the same outputs, bad calls raise clear errors.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check
local same = tl.same

local V, T, SEG = 16, 16, 4
local function train(steps, dir)
  local net = icl.nn.attn_only{layers = 2, heads = 2, d_model = 32, vocab = V, ctx = T, seed = 5, threads = 2}
  local data = icl.data.repeated_segments{vocab = V, seq = T, segment = SEG, seed = 11}
  local r = icl.train{model = net, data = data, steps = steps, batch = 16, progress = false,
                      optim = icl.optim.adamw{lr = 1e-2, warmup = 20}, every = 50, checkpoints = dir}
  return net, r, data
end

local dir = os.tmpname()
os.remove(dir)
local net, r, data = train(300, dir)
check(#r.loss == 300 and r.step == 300 and not r.interrupted, "300 steps, not interrupted")
-- held-out batch scored on the repeated positions only (the first segment is unpredictable)
local held = icl.data.repeated_segments{vocab = V, seq = T, segment = SEG, seed = 999, repeated_only = true}
local loss_rep = net:forward(held(0, 64))
print(string.format("train loss %.3f -> %.3f; held-out loss on repeated positions %.4f (uniform %.3f)",
  r.loss[1], r.loss[#r.loss], loss_rep, math.log(V)))
check(r.loss[1] > 2.5, "starts near log(vocab)")
check(loss_rep < 0.05, "repeated positions learned: " .. loss_rep)

-- determinism: the same run again gives the same loss curve, bit for bit
local _, r2 = train(300, nil)
check(same(r.loss, r2.loss), "same seed, same loss curve")

-- checkpoints: every 50 steps; the last reloads to the same outputs and goes on training
check(r.checkpoint == dir .. "/step-0000300.gguf", "checkpoint path " .. tostring(r.checkpoint))
local back = assert(icl.nn.load(r.checkpoint))
check(back:step() == 300, "reloaded step")
local b = held(3, 8)
local l1, lg1 = net:forward(b)
local l2, lg2 = back:forward(b)
check(l1 == l2 and (lg1 - lg2):abs():max() == 0, "reloaded net gives identical logits")
local nilnet, msg = icl.nn.load(dir .. "/missing.gguf")
check(nilnet == nil and msg:find("missing.gguf"), "missing checkpoint: nil, msg")

-- bad calls
local ok, err = pcall(icl.nn.attn_only, {layers = 0, vocab = 4})
check(not ok and err:find("layers"), "layers = 0 rejected: " .. tostring(err))
ok, err = pcall(icl.nn.attn_only, {norm = "batch", vocab = 4})
check(not ok and err:find("norm"), "unknown norm rejected")
ok, err = pcall(net.forward, net, {tokens = {{1, 2}}, targets = {{2, V}}})
check(not ok and err:find("target"), "target out of range rejected: " .. tostring(err))
ok, err = pcall(icl.train, {model = net, data = function() return 5 end, steps = 301})
check(not ok and err:find("batch table"), "data returning a number rejected")
-- the checkpoint folder is made (parents too) before the first step, or the call fails before training
local nested = dir .. "-nested/a/b"
local small = icl.nn.attn_only{layers = 1, heads = 1, d_model = 8, vocab = V, ctx = T, seed = 1}
local rn = icl.train{model = small, data = data, steps = 2, batch = 2, progress = false, checkpoints = nested}
check(rn.checkpoint == nested .. "/step-0000002.gguf" and io.open(rn.checkpoint) ~= nil, "nested checkpoint folder made")
os.remove(rn.checkpoint); os.remove(rn.checkpoint .. ".optim")
os.remove(nested); os.remove(dir .. "-nested/a"); os.remove(dir .. "-nested")
ok, err = pcall(icl.train, {model = small, data = data, steps = 2, progress = false, checkpoints = "/dev/null/x"})
check(not ok and err:find("checkpoints = /dev/null/x", 1, true) and small:step() == 2,
      "an impossible checkpoint folder fails before any step: " .. tostring(err))

for s = 50, 300, 50 do
  local f = string.format("%s/step-%07d.gguf", dir, s)
  check(io.open(f) ~= nil and io.open(f .. ".optim") ~= nil, "checkpoint and sidecar at step " .. s)
  os.remove(f)
  os.remove(f .. ".optim")
end
os.remove(dir)
tl.done()
