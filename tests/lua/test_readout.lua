-- icl.readout on both real models: the logit lens of the last layer's output equals the model's own logits of the
-- chosen tokens; the direct logit attributions of the embedding and of every layer's attention and MLP outputs add
-- up to the lens of the final residual row (the residual stream is their sum); a model without RMSNorm is refused.
-- Without the model files it prints SKIPPED and exits 77 (ctest: skipped, never passed).
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises
local readout = require("icl.readout")
local PATHS = {"models/SmolLM2-135M-Instruct-Q4_1.gguf", "models/gemma-3-270m-Q4_K_M.gguf"}

local ran = 0
for _, path in ipairs(PATHS) do
  local m = io.open(path, "rb") and icl.load(path, {backend = "cpu", n_ctx = 64})
  if m then
    ran = ran + 1
    local tag = path:match("models/([^-]+)")
    local ids = {m:tokenize(" negative", {bos = false})[1], m:tokenize(" positive", {bos = false})[1], 0}
    local head = readout.head(m, ids)
    local NL = m.n_layers
    local toks = m:tokenize("sentence: a gentle, funny film sentiment: positive\nsentence: dull sentiment:")
    local names = {"hook_embed"}
    for l = 0, NL - 1 do
      names[#names + 1] = ("blocks.%d.hook_attn_out"):format(l)
      names[#names + 1] = ("blocks.%d.hook_mlp_out"):format(l)
    end
    names[#names + 1] = ("blocks.%d.hook_resid_post"):format(NL - 1)
    local r = assert(m:run(toks, {logits = "all", capture = names}))
    local x = r[("blocks.%d.hook_resid_post"):format(NL - 1)]
    local want = r.logits:index_select(2, {ids[1] + 1, ids[2] + 1, ids[3] + 1})
    local lens = readout.lens(head, x)
    local scale = want:abs():max()
    local d = (lens - want):abs():max()
    check(d <= 2e-4 * scale, ("%s: lens of the last layer = the model's logits (max |diff| %.3g of %.3g)")
          :format(tag, d, scale))
    -- one row as a vector gives that row of the matrix form
    local n = #toks
    local dv = (readout.lens(head, x[n]) - lens[n]):abs():max()
    check(dv <= 1e-5 * scale, ("%s: a row's lens = that row of the batch (%.3g)"):format(tag, dv))
    -- the stream is the embedding plus every attention and MLP output: their attributions add up to the lens
    local sum = readout.direct(head, r.hook_embed, x)
    for l = 0, NL - 1 do
      sum = sum + readout.direct(head, r[("blocks.%d.hook_attn_out"):format(l)], x)
                + readout.direct(head, r[("blocks.%d.hook_mlp_out"):format(l)], x)
    end
    local ds = (sum - lens):abs():max()
    check(ds <= 1e-3 * scale, ("%s: direct attributions add up to the lens (max |diff| %.3g)"):format(tag, ds))
    local dd = (readout.direct(head, x[n], x[n]) - lens[n]):abs():max()
    check(dd <= 1e-5 * scale, ("%s: direct(x, x) = lens(x) (%.3g)"):format(tag, dd))
    m:close()
  end
end
if ran == 0 then
  print("SKIPPED: neither " .. table.concat(PATHS, " nor ") .. " is present")
  os.exit(77, true)
end
local net = icl.nn.attn_only{layers = 1, heads = 1, d_model = 8, vocab = 4, ctx = 4, norm = "layer"}
local p = os.tmpname()
assert(net:save(p))
local tm = assert(icl.load(p, {backend = "cpu"}))
raises(function() readout.head(tm, {0}) end, "RMSNorm architectures only", "a LayerNorm model is refused")
tm:close()
os.remove(p)
os.remove(p .. ".optim") -- net:save writes the optimizer state beside the weights
tl.done()
