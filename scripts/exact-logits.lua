-- EXACT logits and captures of both real models (CPU backend), written as .npy so that two builds can be compared
-- byte for byte (a refactor must not move a bit): icl script scripts/exact-logits.lua OUTDIR, then cmp each file.
local out = arg[1]
for _, f in ipairs({"models/SmolLM2-135M-Instruct-Q4_1.gguf", "models/gemma-3-270m-Q4_K_M.gguf"}) do
  local m = assert(icl.load(f, {backend = "cpu", n_ctx = 256}))
  local ids = m:tokenize(("The quick brown fox jumps over the lazy dog. "):rep(12))
  local r = assert(m:run(ids, {logits = "all", capture = {"blocks.1.attn.hook_pattern", "blocks.2.hook_resid_post"},
                              ablate = {{layer = 3, head = 1}}}))
  local tag = f:match("models/(%w+)")
  assert(r.logits:save(out .. "/" .. tag .. "-logits.npy"))
  assert(r["blocks.1.attn.hook_pattern"]:save(out .. "/" .. tag .. "-pattern.npy"))
  assert(r["blocks.2.hook_resid_post"]:save(out .. "/" .. tag .. "-resid.npy"))
  local r2 = assert(m:run(ids, {logits = "all", knockout = {{layer = 2, heads = {0}, edges = {{20, 3}, {40, 10}}}}}))
  assert(r2.logits:save(out .. "/" .. tag .. "-knockout.npy"))
end
print("ok")
