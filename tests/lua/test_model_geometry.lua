-- The attention geometry on the model object (m.rope_style, m.rope_base, m.window, m.attn_scale, m.layer_kind,
-- m.layer_rope_base) for SmolLM2 and Gemma 3, against their GGUF metadata and the architecture tables of
-- docs/hooks.md. Exits 77 (skipped) when neither model file is present.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check
local ran = 0
local function present(p) local f = io.open(p, "rb") if f then f:close() return true end return false end

local SMOL, GEMMA = "models/SmolLM2-135M-Instruct-Q4_1.gguf", "models/gemma-3-270m-Q4_K_M.gguf"
if present(SMOL) then
  ran = ran + 1
  local m = assert(icl.load(SMOL, {n_ctx = 32}))
  check(m.rope_style == "interleaved" and m.rope_base == 100000 and m.window == 0, "SmolLM2: rope and window")
  check(math.abs(m.attn_scale - 1 / 8) < 1e-7, "SmolLM2: scale 1/sqrt(64)")
  local all_global = true
  for l = 0, m.n_layers - 1 do
    all_global = all_global and m.layer_kind[l] == "global" and m.layer_rope_base[l] == 100000
  end
  check(all_global and m.layer_kind[m.n_layers] == nil, "SmolLM2: 30 global layers keyed 0..29")
  -- argument errors name the function under pcall; patch{layer =} is the full hook name's shortcut
  local ok, err = pcall(m.run, m, {1, 2}, {logits = "bogus"})
  check(not ok and tostring(err):find("bad argument #3 to 'run' (logits", 1, true),
        "pcall(m.run, ...) names the function")
  local toks = {1, 5, 9, 13}
  local z = m:run(toks, {capture = {{name = "blocks.2.attn.hook_z", head = 1}}})["blocks.2.attn.hook_z"]
  local zero = z:slice(1, 2, 4) * 0
  local a = m:run(toks, {logits = "all", patch = {{layer = 2, head = 1, value = zero, pos = {2, 4}}}}).logits
  local b = m:run(toks, {logits = "all", patch = {{hook = "blocks.2.attn.hook_z", head = 1, value = zero,
                                                   pos = {2, 4}}}}).logits
  local base = m:run(toks, {logits = "all"}).logits
  check((a - b):abs():max() == 0 and (a - base):abs():max() > 0, "patch{layer = 2} equals hook = blocks.2.attn.hook_z")
  ok, err = pcall(m.run, m, toks, {patch = {{layer = 2, hook = "v", head = 3, value = zero}}})
  check(not ok and tostring(err):find("patch[1].head: 3 out of range 0..2", 1, true), "patch k/v heads are kv heads")
end
if present(GEMMA) then
  ran = ran + 1
  local m = assert(icl.load(GEMMA, {n_ctx = 32}))
  check(m.rope_style == "neox" and m.rope_base == 1e6 and m.window == 512, "Gemma: rope and window")
  check(math.abs(m.attn_scale - 1 / 16) < 1e-7, "Gemma: scale 1/sqrt(256)")
  local ok = true
  for l = 0, m.n_layers - 1 do
    local global = l % 6 == 5
    ok = ok and m.layer_kind[l] == (global and "global" or "sliding")
            and m.layer_rope_base[l] == (global and 1e6 or 1e4)
  end
  check(ok, "Gemma: every 6th layer (5, 11, 17) global with base 1e6, the others sliding with base 1e4")
end
if ran == 0 then print("SKIPPED: no model file present") os.exit(77, true) end
tl.done()
