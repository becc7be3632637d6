-- Hostile Lua input that needs a model (issue 16), run by tests/lua/test_hostile_model.c with TINY = a tiny random
-- model: token, capture, knockout and hook lists whose __len lies; a capture name with a NUL; misspelt tokenize
-- options; patch messages naming the entry with 1-based positions; streamed runs without full logits.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, check_raises = tl.check, tl.raises

local function liar(len, value)
  return setmetatable({}, {__len = function() return len end, __index = function() return value end})
end

local m = assert(icl.load(TINY, {backend = "cpu", chunk = 4}))
local toks = m:tokenize("hello world")
check(#toks == 12, "tokens of the tiny byte vocabulary (BOS + 11 bytes): " .. #toks)

-- issue 44: token ids that are not integers or too large are named as given, never as a wrapped 32-bit id
for _, c in ipairs({{1 / 0, "tokens[2]: inf is not an integer token id"}, {1e30, "tokens[2]: 1e+30 is not an integer"},
                    {2 ^ 31, "tokens[2]: 2147483648 out of range"}, {1 << 31, "tokens[2]: 2147483648 out of range"},
                    {0 / 0, "is not an integer token id"}, {2.5, "tokens[2]: 2.5 is not an integer"}}) do
  check_raises(function() return m:run({1, c[1]}) end, c[2], "run with token " .. tostring(c[1]))
  local in_tensor = c[1] == 1e30 and "is not an integer token id" or c[2] -- as a float32: 1.0000000150475e+30
  check_raises(function() return m:run(icl.tensor.from({1, c[1]})) end, in_tensor, "run with a tensor token " .. c[1])
end

-- 1: lying lengths, read once and bounded -------------------------------------------------------------------
check_raises(function() return m:detokenize(liar(1 << 62, 5)) end, "tokens: length 4611686018427387904 out of range",
  "detokenize with a huge __len")
check_raises(function() return m:run(liar(1 << 62, 5)) end, "tokens: length", "run with a huge __len")
local calls = 0
local flip = setmetatable({}, {__len = function() calls = calls + 1 return calls == 1 and 1 or 64 end,
  __index = function() return "blocks.0.hook_resid_post" end})
local r = m:run(toks, {capture = flip})
check(calls == 1, "capture list length read once (" .. calls .. " calls)")
check(r["blocks.0.hook_resid_post"] and r["blocks.0.hook_resid_post"]:shape()[1] == #toks, "the one capture is there")
check_raises(function() return m:run(toks, {knockout = {{layer = 0, edges = liar(1 << 60, {2, 1})}}}) end,
  "knockout[1].edges: length 1152921504606846976 out of range", "knockout edges with a huge __len")
check_raises(function() return m:run(toks, {capture = liar(1 << 40, "blocks.0.hook_resid_post")}) end,
  "capture: length", "capture list with a huge __len")
check_raises(function()
  return m:run(toks, {hook = {points = liar(1 << 40, "blocks.0.hook_resid_post"), fn = function() end}})
end, "hook.points: length", "hook points with a huge __len")
check_raises(function() return m:run(toks, {ablate = {{layer = 0, heads = liar(1 << 40, 0)}}}) end,
  "ablate[1].heads: length", "heads with a huge __len")

-- 13: a capture name with an embedded NUL; misspelt options ---------------------------------------------------
check_raises(function() return m:run(toks, {capture = {"blocks.0.hook_resid_post\0junk"}}) end, "NUL",
  "capture name with a NUL (list entry)")
check_raises(function() return m:run(toks, {capture = {{name = "blocks.0.hook_resid_post\0x"}}}) end, "NUL",
  "capture name with a NUL (name field)")
check_raises(function() return m:tokenize("hi", {bso = true}) end, "unknown option 'bso'", "m:tokenize typo")
check_raises(function() return m:detokenize({1, 2}, {specal = true}) end, "unknown option 'specal'",
  "m:detokenize typo")

-- 12: patch errors name the entry and use Lua's 1-based inclusive positions -------------------------------------
local ok, err = pcall(m.run, m, toks, {patch = {{hook = "blocks.0.hook_resid_post", pos = {3, 5},
  value = icl.tensor.zeros(2, 256)}}})
check(not ok and err:find("patch[1] (blocks.0.hook_resid_post)", 1, true) and err:find("positions 3..5", 1, true),
  "patch error names patch[1] and positions 3..5: " .. tostring(err))
check(not ok and err:find("value of shape [2, 256]", 1, true) and err:find("expected [3, 256]", 1, true),
  "patch error gives the value's shape and the expected one: " .. tostring(err))
-- a value with the right element count but not the point's shape is refused too (nothing is guessed from a count)
ok, err = pcall(m.run, m, toks, {add = {{hook = "blocks.0.hook_resid_post", value = icl.tensor.zeros(16, 16)}}})
check(not ok and err:find("add[1] (blocks.0.hook_resid_post): value of shape [16, 16]", 1, true)
  and err:find("expected [256] (one row, broadcast)", 1, true), "add of a [16, 16] value: " .. tostring(err))

-- 11: streaming runs hand logits to on_chunk and keep none --------------------------------------------------
local full = m:run(toks, {logits = "all"})
local rows, seen, same = 0, 0, true
local s = m:run(toks, {logits = "all", on_chunk = function(pos, n, res)
  seen = seen + 1
  check(res.logits and res.logits:shape()[1] == n, "chunk logits hold the chunk's rows")
  for i = 1, n do
    for v = 1, 258, 37 do same = same and res.logits[i][v] == full.logits[pos + i - 1][v] end
  end
  rows = rows + n
end})
check(s.logits == nil, "a streamed run keeps no full logits")
check(seen == 3 and rows == #toks, "on_chunk saw every row in chunks of 4 (" .. seen .. " chunks, " .. rows .. " rows)")
check(same, "streamed logits equal the unstreamed ones")
local kept = m:run(toks, {logits = "all", stream = false, on_chunk = function() end})
check(kept.logits and kept.logits:shape()[1] == #toks, "stream = false keeps the full logits")
m:close()

tl.done()
