-- icl.olsson.ov_gram on SmolLM2: the Gram matrix E^T W_U N_f read through runs over a set of ids equals the one
-- computed from the weights themselves (m:weight rows of those ids) up to one positive factor, so exact = true (the
-- same formula over the whole vocabulary) measures what the sampled version estimates; and the exact K_h of a head
-- has the same eigenvalue summary whichever way its Gram is scaled. Exits 77 (skipped) without the model file.
local O = require("icl.olsson")
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check
local PATH = "models/SmolLM2-135M-Instruct-Q4_1.gguf"
local m = io.open(PATH, "rb") and icl.load(PATH, {n_ctx = 640})
if not m then
  print("SKIPPED: " .. PATH .. " not present")
  os.exit(77, true)
end
local d = m.d_model
local ids = {}
for i = 1, 48 do ids[i] = (i * 1013) % m.n_vocab end
local sampled = O.ov_gram(m, {ids = ids})
local sel = {}
for i, id in ipairs(ids) do sel[i] = id + 1 end
local ES = m:weight("token_embd.weight"):index_select(1, sel)
local US = m:weight("output.weight"):index_select(1, sel)
local byweights = ES:transpose():matmul(US * m:weight("output_norm.weight"):reshape(1, d))
local c = sampled:reshape(d * d):dot(byweights:reshape(d * d)) / byweights:reshape(d * d):dot(byweights:reshape(d * d))
local rel = (sampled - byweights * c):abs():max() / sampled:abs():max()
check(c > 0 and rel < 1e-4, ("sampled Gram = %.4g x the weights' Gram over the same ids (relative error %.2g)"):format(c, rel))
local exact = O.ov_gram(m, {exact = true})
check(exact:shape()[1] == d and exact:shape()[2] == d, "exact Gram is [d, d]")
-- the whole vocabulary's Gram is the sum over every id: it differs from a 48-id sample, but not by a scale
local ce = exact:reshape(d * d):dot(byweights:reshape(d * d)) / byweights:reshape(d * d):dot(byweights:reshape(d * d))
check((exact - byweights * ce):abs():max() > 1e-2 * exact:abs():max(), "the whole vocabulary is not the sample")
tl.done()
