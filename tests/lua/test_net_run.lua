-- net:run (issue 43): a training net runs through the same forward and hooks as a loaded model. Its captures,
-- logits, ablations, patches and knockouts equal icl.load of its checkpoint bit for bit; after a training step the
-- next net:run sees the new weights; its logits agree with the trainer's own forward (net:forward); the net cannot
-- be closed, trained or run again from inside its own run.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises

local function tmpfile()
  local p = os.tmpname()
  os.remove(p)
  return p .. ".gguf"
end

-- Largest |a - b| over two tensors of one shape (0 only when equal bit for bit, the values being finite).
local function diff(a, b)
  if a == nil or b == nil then return math.huge end
  local sa, sb = a:shape(), b:shape()
  if #sa ~= #sb then return math.huge end
  for i = 1, #sa do if sa[i] ~= sb[i] then return math.huge end end
  return (a - b):abs():max()
end

-- Every tensor of the two result tables equal bit for bit (same keys).
local function same_results(r1, r2, what)
  local n = 0
  for k, v in pairs(r1) do
    n = n + 1
    check(diff(v, r2[k]) == 0, what .. ": " .. k .. " equal bit for bit (diff " .. tostring(diff(v, r2[k])) .. ")")
  end
  for k in pairs(r2) do check(r1[k] ~= nil, what .. ": " .. k .. " on both sides") end
  check(n > 0, what .. ": something compared")
end

-- net:run and icl.load(net:save(...)):run of the same requests.
local function against_checkpoint(net, tokens, requests, what)
  local path = tmpfile()
  assert(net:save(path))
  local m = assert(icl.load(path, {backend = "cpu"}))
  for name, opts in pairs(requests) do
    same_results(net:run(tokens, opts), m:run(tokens, opts), what .. " " .. name)
  end
  m:close()
  os.remove(path)
  os.remove(path .. ".optim")
end

local V, T = 16, 12
local net = icl.nn.attn_only{layers = 2, heads = 2, d_model = 16, vocab = V, ctx = T, seed = 3, threads = 1,
                             norm = "layer", d_ff = 32, qkv_bias = true, o_bias = true, smeared_key = true}
local tokens = {1, 5, 7, 2, 9, 1, 5, 7, 2, 9, 1, 5}
local requests = {
  plain = {logits = "all"},
  captures = {logits = "all", capture = {"blocks.*.attn.hook_pattern", "blocks.*.hook_resid_post", "hook_embed",
                                         "blocks.1.attn.hook_z", "blocks.0.mlp.hook_post"}},
  ablate = {logits = "all", ablate = {{layer = 1, head = 0}, {layer = 0, heads = {1}, mode = "zero"}},
            capture = "blocks.1.hook_resid_post"},
  knockout = {logits = "all", knockout = {{layer = 1, edges = {{6, 1}, {6, 2}, {12, 11}}}, {layer = 0, heads = {0},
              edges = {{3, 3}}}}, capture = "blocks.*.attn.hook_pattern"},
  select = {logits = {select = {1, 5}, lse = true}},
}
against_checkpoint(net, tokens, requests, "fresh net")

-- a patch from a capture of another prompt
local other = {3, 3, 4, 4, 8, 8, 0, 0, 6, 6, 2, 2}
local src = net:run(other, {capture = "blocks.0.hook_resid_post", logits = "none"})["blocks.0.hook_resid_post"]
src = src:slice(1, 3, 5)
against_checkpoint(net, tokens, {patch = {logits = "all", patch = {{hook = "blocks.0.hook_resid_post", value = src,
                                                                   pos = {3, 5}}}}}, "fresh net")

-- net:run agrees with the trainer's own forward (a second implementation: close, not bit for bit)
local batch = {tokens = icl.tensor.from(tokens):reshape(1, T), targets = icl.tensor.from(other):reshape(1, T)}
local _, lg = net:forward(batch)
local r = net:run(tokens, {logits = "all"})
local d = diff(r.logits, lg:reshape(T, V))
check(d < 1e-4, "net:run logits match net:forward's (max diff " .. d .. ")")
-- the pattern capture matches net:pattern of the last forward
local pat = net:run(tokens, {capture = "blocks.1.attn.hook_pattern", logits = "none"})["blocks.1.attn.hook_pattern"]
d = diff(pat, net:pattern(1, 1))
check(d < 1e-5, "hook_pattern matches net:pattern (max diff " .. d .. ")")

-- after a training step the next run sees the new weights
local before = net:run(tokens, {logits = "all"}).logits
local data = icl.data.repeated_segments{vocab = V, seq = T, segment = 3, seed = 4}
icl.train{model = net, data = data, steps = 1, batch = 4, progress = false, optim = icl.optim.adamw{lr = 1e-2}}
local after = net:run(tokens, {logits = "all"}).logits
check(diff(before, after) > 0, "a step changes net:run's logits")
against_checkpoint(net, tokens, requests, "after a step")
-- the same inside icl.train's on_eval (the net is being trained, its weights are still)
local evals = 0
icl.train{model = net, data = data, steps = net:step() + 2, batch = 4, progress = false, every = 1,
          optim = icl.optim.adamw{lr = 1e-2}, on_eval = function(step, n)
            against_checkpoint(n, tokens, {plain = requests.plain}, "on_eval step " .. step)
            evals = evals + 1
          end}
check(evals == 2, "on_eval ran twice: " .. evals)

-- continuous inputs and a classifier head (the meta-learning model): arg 2 may be the inputs [n, input_length]
local D, n = 8, 5
local cnet = icl.nn.attn_only{layers = 2, heads = 2, d_model = D, vocab = 4, ctx = n, inputs = D, input_proj = false,
                              position = "none", norm = "none", scale = false, w_o = false, output = "classifier",
                              classes = 4, cls_hidden = 1, out_bias = true, seed = 9, threads = 1}
local rng = icl.rng.new(7)
local inputs = rng:normal_tensor({n, D})
local ids = {-1, 2, -1, 3, -1}
local path = tmpfile()
assert(cnet:save(path))
local cm = assert(icl.load(path, {backend = "cpu"}))
local ko = {{layer = 1, edges = {{5, 1}, {5, 3}}}}
same_results(cnet:run(ids, {inputs = inputs, logits = "all", knockout = ko}),
             cm:run(ids, {inputs = inputs, logits = "all", knockout = ko}), "classifier with inputs")
same_results(cnet:run(inputs, {logits = "last", capture = "blocks.*.attn.hook_pattern"}),
             cm:run({-1, -1, -1, -1, -1}, {inputs = inputs, logits = "last", capture = "blocks.*.attn.hook_pattern"}),
             "inputs as argument 2")
raises(function() cnet:run(inputs, {inputs = inputs}) end, "given twice", "inputs twice")
raises(function() cnet:run(rng:normal_tensor({n, D + 1})) end, "expected a tensor [n, 8]", "inputs of the wrong width")
cm:close()
os.remove(path)
os.remove(path .. ".optim")

-- net:model(): a model view of the net, for code written for loaded models (fields, runs, current weights)
local view = net:model()
check(view.n_layers == 2 and view.n_heads == 2 and view.d_model == 16 and view.n_vocab == V, "view fields")
same_results(view:run(tokens, requests.captures), net:run(tokens, requests.captures), "view vs net:run")
local v_before = view:run(tokens, {logits = "all"}).logits
icl.train{model = net, data = data, steps = net:step() + 1, batch = 4, progress = false,
          optim = icl.optim.adamw{lr = 1e-2}}
local v_after = view:run(tokens, {logits = "all"}).logits
check(diff(v_before, v_after) > 0 and diff(v_after, net:run(tokens, {logits = "all"}).logits) == 0,
      "the view follows the net's steps")
raises(function() view:run(tokens, {hook = {points = "blocks.0.hook_resid_post", fn = function() net:run(tokens) end}})
end, "already running", "net:run inside the view's run")
raises(function() net:run(tokens, {hook = {points = "blocks.0.hook_resid_post", fn = function() view:run(tokens) end}})
end, "already running", "the view's run inside net:run")
view:close()
check(net:run(tokens).logits ~= nil, "closing the view leaves the net open")
raises(function() return view.n_layers end, "closed", "a closed view")
local view2 = net:model()

-- the net cannot be closed, trained or run again from its own run's hooks; bad options raise as in m:run
local function in_hook(fn)
  return net:run(tokens, {hook = {points = "blocks.0.hook_resid_post", fn = fn}, logits = "none"})
end
raises(function() in_hook(function() net:close() end) end, "net is running", "close inside net:run")
raises(function() in_hook(function() net:run(tokens) end) end, "already running", "net:run inside net:run")
raises(function() in_hook(function()
  icl.train{model = net, data = data, steps = 1, batch = 2, progress = false, optim = icl.optim.sgd{lr = 0.1}}
end) end, "the net is running", "icl.train inside net:run")
check(net:run(tokens).logits ~= nil, "the net still runs after the refused calls")
raises(function() net:run(tokens, {capture = "blocks.9.hook_resid_post"}) end, "blocks.9", "unknown layer named")
raises(function() net:run({1, V}) end, "out of range", "token id out of range")
raises(function() net:run(tokens, {bogus = 1}) end, "bogus", "unknown option")
net:close()
raises(function() net:run(tokens) end, "closed net", "closed net")
raises(function() view2:run(tokens) end, "the net of this model is closed", "a view of a closed net")
tl.done()
