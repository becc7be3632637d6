-- Lua-API fuzzer seed: the tiny model with runs, captures, interventions and hostile tables.
local m = icl.load(TINY)
local toks = m:tokenize("hello world, hello")
local r = m:run(toks, {logits = "all", capture = {"blocks.0.hook_resid_post", {name = "blocks.1.attn.hook_pattern", pos = {2, 3}}}})
local x = r.logits:sum(2)
local lie = setmetatable({}, {__len = function() return 1 << 62 end, __index = function() return 5 end})
pcall(m.detokenize, m, lie)
pcall(m.run, m, lie)
local n = 0
local flip = setmetatable({}, {__len = function() n = n + 1 return n == 1 and 1 or 64 end,
  __index = function() return "blocks.0.hook_resid_post" end})
pcall(m.run, m, toks, {capture = flip})
pcall(m.run, m, toks, {knockout = {{layer = 0, edges = setmetatable({}, {__len = function() return 1 << 60 end})}}})
pcall(m.run, m, toks, {ablate = {{layer = 1, head = 0}}, patch = {{hook = "blocks.0.hook_resid_post", pos = {3, 5}, value = icl.tensor.zeros(3, 64)}}})
pcall(m.run, m, toks, {logits = "all", on_chunk = function(p, k, res) return res end})
pcall(m.run, m, toks, {hook = {points = {"blocks.0.hook_resid_post"}, fn = function(name, v, p) return v * 2 end}})
local s = m:detokenize(toks)
m:close()
