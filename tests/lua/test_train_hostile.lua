-- issue 44, the training API under hostile calls: unknown option keys raise naming the key; integers are
-- range-checked, never cut to 32 bits; impossible hyperparameters are refused before any step; every batch tensor's
-- shape is checked; a net in use by icl.train cannot be closed from its callbacks; a run whose loss turns NaN
-- stops naming the step with its last checkpoint intact; an unwritable checkpoint folder fails before training;
-- m.attn_scale is the file's attention.scale.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises

local V, T = 8, 8
local function net(extra)
  local o = {layers = 1, heads = 2, d_model = 8, vocab = V, ctx = T, seed = 3, threads = 1}
  for k, v in pairs(extra or {}) do o[k] = v end
  return icl.nn.attn_only(o)
end
local data = icl.data.repeated_segments{vocab = V, seq = T, segment = 3, seed = 2}
local function train(o)
  local base = {model = net(), data = data, steps = 3, batch = 2, progress = false}
  for k, v in pairs(o) do base[k] = v end
  return icl.train(base)
end

-- unknown keys, everywhere in the training API
raises(function() icl.nn.attn_only{layer = 3, vocab = V} end, "unknown option 'layer'", "attn_only{layer}")
raises(function() train{step = 5} end, "unknown option 'step'", "icl.train{step}")
raises(function() icl.optim.adamw{lrr = 1e-3} end, "unknown option 'lrr'", "adamw{lrr}")
raises(function() icl.optim.adamw{momentum = 0.5} end, "unknown option 'momentum'", "adamw{momentum}")
raises(function() icl.optim.sgd{beta1 = 0.5} end, "unknown option 'beta1'", "sgd{beta1}")
raises(function() train{optim = {lr = 1e-3, betas = 1}} end, "unknown option 'betas'", "a plain optim table")
raises(function() icl.data.repeated_segments{vocab = V, seq = T, segment = 3, gap = 2} end, "unknown option 'gap'",
       "repeated_segments{gap}")
raises(function() icl.data.text{file = "README.md", seq = 8, sed = 1} end, "unknown option 'sed'", "text{sed}")
raises(function() icl.data.meta_learning{K = 8, N = 2, alpha_clas = 1} end, "unknown option 'alpha_clas'",
       "meta_learning{alpha_clas}")
local meta = icl.data.meta_learning{K = 8, T = 2, N = 2, L = 4, D = 3, P = 5, batch = 2}
raises(function() meta(0, 2, {random_label = true}) end, "unknown option 'random_label'", "meta batch{random_label}")
raises(function() icl.nn.attn_only{vocab = V, [1] = 4} end, "options must be named", "a positional option")

-- messages name the field and the expected type (no "bad argument #-1 to '?'")
raises(function() icl.nn.attn_only{layers = "two", vocab = V} end, "option layers: expected an integer", "layers type")
raises(function() icl.nn.attn_only{vocab = true} end, "option vocab: expected an integer", "vocab type")
raises(function() icl.nn.attn_only{vocab = V, seed = {}} end, "option seed: expected an integer", "seed type")
raises(function() icl.optim.adamw{lr = "fast"} end, "option lr: expected a number", "lr type")
raises(function() icl.train{data = data, steps = 2} end, "option model: expected an icl.net", "missing model")
raises(function() icl.nn.attn_only{vocab = V, d_head = -4} end, "d_head = -4", "d_head = -4 named")
raises(function() icl.nn.attn_only{vocab = V, d_model = 4, heads = 8} end, "d_head", "more heads than d_model")

raises(function() data("x") end, "icl.data.repeated_segments(step [, B]): expected integers", "data step type")
raises(function() data(0, 2 ^ 21) end, "B = 2097152", "data batch too large")

-- integers: never cut to 32 bits
raises(function() train{steps = 2 ^ 32 + 3} end, "option steps = ", "steps = 2^32+3")
raises(function() train{steps = -5} end, "option steps = -5", "steps = -5")
raises(function() train{steps = 0} end, "option steps = 0", "steps = 0")
raises(function() train{every = 2 ^ 32} end, "option every", "every = 2^32")
raises(function() train{optim = icl.optim.adamw{warmup = 2 ^ 32}} end, "option warmup", "warmup = 2^32")
raises(function() icl.nn.attn_only{vocab = 2 ^ 32 + 8} end, "option vocab", "vocab = 2^32+8")
raises(function() icl.nn.attn_only{vocab = V, layers = 2 ^ 32 + 1} end, "option layers", "layers = 2^32+1")
raises(function() icl.nn.attn_only{vocab = V, d_model = 2 ^ 30} end, "option d_model", "d_model = 2^30")
raises(function() icl.data.repeated_segments{vocab = V, seq = 2 ^ 32 + 8, segment = 3} end, "option seq", "seq")
raises(function() icl.nn.attn_only{vocab = V, seed = -1} end, "option seed = -1", "negative seed")
local p40, p0 = net{seed = 2 ^ 40}:params(), net{seed = 0}:params()
check((p40["blk.0.attn_q.weight"] - p0["blk.0.attn_q.weight"]):abs():max() > 0, "seed 2^40 differs from seed 0")
local d40, d0 = icl.data.repeated_segments{vocab = V, seq = T, segment = 3, seed = 2 ^ 40},
                icl.data.repeated_segments{vocab = V, seq = T, segment = 3, seed = 0}
check((d40(0, 4).tokens - d0(0, 4).tokens):abs():max() > 0, "data seed 2^40 differs from seed 0")

-- impossible hyperparameters are refused before any step
local nan, inf = 0 / 0, 1 / 0
for _, c in ipairs{{"lr", nan}, {"lr", inf}, {"lr", 1e300}, {"lr", -1e-3}, {"beta1", 1}, {"weight_decay", nan},
                   {"min_lr", nan}, {"eps", nan}, {"clip", -1}} do
  raises(function() icl.optim.adamw{[c[1]] = c[2]} end, "option " .. c[1], "adamw " .. c[1] .. " = " .. tostring(c[2]))
end
raises(function() icl.optim.sgd{momentum = nan} end, "option momentum", "sgd momentum = nan")
raises(function() icl.optim.adamw{lr = 10, weight_decay = 1} end, "weight_decay", "lr * weight_decay > 1")
for _, c in ipairs{{"init_std", nan}, {"eps", nan}, {"rope_base", inf}} do
  raises(function() net{[c[1]] = c[2]} end, "option " .. c[1], "attn_only " .. c[1])
end
local n0 = net()
raises(function() icl.train{model = n0, data = data, steps = 3, progress = false, optim = {lr = nan}} end, "lr",
       "a plain optim table with lr = nan")
check(n0:step() == 0, "no step taken")

-- batch shapes
local ni = net{inputs = 4}
local function fwd(n, b) return function() n:forward(b) end end
local tg = icl.tensor.zeros{2, 3}
raises(fwd(ni, {targets = tg, inputs = icl.tensor.zeros{2, 3, 2}}), "batch.inputs has shape [2, 3, 2]", "narrow inputs")
raises(fwd(ni, {targets = tg, inputs = icl.tensor.zeros{2, 3, 8}}), "last dimension of 4", "wide inputs")
raises(fwd(ni, {targets = tg, inputs = icl.tensor.zeros{12, 2}}), "batch.inputs", "inputs of the right size, wrong shape")
raises(fwd(n0, {targets = tg, inputs = icl.tensor.zeros{2, 3, 8}}), "takes no continuous inputs", "inputs to a token net")
raises(fwd(n0, {targets = icl.tensor.zeros{2, 3, 4}}), "batch.targets has shape [2, 3, 4]", "3-d targets")
raises(fwd(n0, {targets = icl.tensor.new({})}), "batch.targets has shape []", "0-d targets")
raises(fwd(n0, {targets = tg, tokens = icl.tensor.zeros{3, 2}}), "batch.tokens has shape [3, 2]", "transposed tokens")
raises(fwd(n0, {targets = tg, mask = {{1, 1, 1}, {1, -1, 1}}}), "batch.mask[5] = -1", "negative mask")
raises(fwd(n0, {targets = tg, mask = {{1, 1, 1}, {1, nan, 1}}}), "batch.mask[5]", "NaN mask")
raises(fwd(n0, {targets = tg, tokens = {{1, 2, 3}, {1, 2 ^ 24 + 2, 3}}}), "expected an integer id", "id above 2^24")
raises(fwd(n0, {targets = tg, tokens = {{1, 2, 3}, {1, inf, 3}}}), "batch.tokens[5] = inf", "id inf named as inf")
check(pcall(fwd(ni, {targets = tg, inputs = icl.tensor.zeros{2, 3, 4}})), "the right inputs pass")
check(pcall(fwd(n0, {targets = {1, 2, 3}, tokens = {0, 1, 2}})), "1-d [T] batches pass")

-- a net in use by icl.train cannot be closed from its callbacks (it used to be freed under the loop)
local victim = net()
raises(function() icl.train{model = victim, data = function(s, b) victim:close(); return data(s, b) end, steps = 2,
                            progress = false} end, "in use by a running icl.train", "close in data")
raises(function() icl.train{model = victim, data = data, steps = 4, every = 1, progress = false,
                            on_eval = function() victim:close() end} end, "in use", "close in on_eval")
check(victim:step() == 1 and pcall(victim.params, victim), "the net is intact and usable afterwards")
victim:close()
check(tostring(victim):find("closed"), "closed after icl.train returned")

-- a run whose loss turns NaN stops naming the step; its last checkpoint stays good
local dir = os.tmpname()
os.remove(dir)
local nn = net{inputs = 4}
local function nan_at_3(step, B)
  local inp = icl.tensor.zeros{B, T, 4} + 0.1
  if step == 3 then inp = inp * nan end
  return {targets = data(step, B).targets, inputs = inp}
end
local ok, err = pcall(icl.train, {model = nn, data = nan_at_3, steps = 6, batch = 2, every = 1, checkpoints = dir,
                                  progress = false})
check(not ok and err:find("step 3: train: the loss is NaN", 1, true) and err:find("step-0000003.gguf", 1, true),
      "NaN loss stops the run naming the step and the last checkpoint: " .. tostring(err))
local back = icl.nn.load(dir .. "/step-0000003.gguf")
check(back and back:step() == 3, "the last good checkpoint loads")
check(io.open(dir .. "/step-0000004.gguf") == nil, "no checkpoint after the failure")
for s = 1, 3 do os.remove(("%s/step-%07d.gguf"):format(dir, s)); os.remove(("%s/step-%07d.gguf.optim"):format(dir, s)) end
os.remove(dir)

-- a checkpoint folder that exists but cannot be written fails before any step (/proc refuses new files, even root's)
if io.open("/proc/self/status") then
  local nw = net()
  ok, err = pcall(icl.train, {model = nw, data = data, steps = 2, checkpoints = "/proc", progress = false})
  check(not ok and err:find("checkpoints = /proc: the folder is not writable", 1, true) and nw:step() == 0,
        "unwritable folder: " .. tostring(err))
end
-- net:save into a missing folder names the checkpoint first
local sv, msg = n0:save("/nonexistent-icl/ck.gguf")
check(sv == nil and msg:find("^/nonexistent%-icl/ck%.gguf: "), "save message names the checkpoint: " .. tostring(msg))

-- m.attn_scale is the file's scale (the meta-learning nets have none)
local tmp = os.tmpname()
for _, sc in ipairs{true, false} do
  assert(net{scale = sc, d_model = 16, heads = 4}:save(tmp))
  local m = assert(icl.load(tmp, {backend = "cpu"}))
  local want = sc and 0.5 or 1.0
  check(math.abs(m.attn_scale - want) < 1e-6, ("scale = %s: m.attn_scale %g, expected %g"):format(tostring(sc),
        m.attn_scale, want))
  m:close()
end
os.remove(tmp); os.remove(tmp .. ".optim")
tl.done()
