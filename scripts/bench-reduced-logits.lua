-- Reduced logits against full logits on one 1401-token grid walk (seed 42): wall and CPU seconds of logits =
-- "none", "all" + rule_following, {select, lse} + rule_following. usage: icl script scripts/bench-reduced-logits.lua MODEL
local m = assert(icl.load(arg[1], {n_ctx = 1500}))
local g = icl.graph.grid(4, 4, icl.experiment.words(16))
local ids = g:token_ids(m)
local walk = g:walk{length = 1400, start = 1, seed = 42}
local toks = g:tokens(m, walk, {bos = true})
m:run({toks[1], toks[2]}, {logits = "none"})
local wall = icl.clock
local t0, c0 = wall(), os.clock(); m:run(toks, {logits = "none"}); local t1, c1 = wall(), os.clock()
local r = m:run(toks, {logits = "all"}); local a = icl.metrics.rule_following(r.logits, walk, g, {token_ids = ids})
r.logits:close(); r = nil; collectgarbage(); local t2, c2 = wall(), os.clock()
local s = m:run(toks, {logits = {select = ids, lse = true}})
local b = icl.metrics.rule_following(s.logits, walk, g, {token_ids = ids, lse = s.lse}); local t3, c3 = wall(), os.clock()
local d = 0 for i = 1, #a do d = math.max(d, math.abs(a[i] - b[i])) end
print(("%s (%s): none %.1f s (%.1f CPU), all + rule_following %.1f s (%.1f CPU), select + lse + rule_following %.1f s (%.1f CPU); max |acc diff| %.1e; load %s"):format(
  m.name, m.backend, t1 - t0, c1 - c0, t2 - t1, c2 - c1, t3 - t2, c3 - c2, d, io.open("/proc/loadavg"):read("l")))
