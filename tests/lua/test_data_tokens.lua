-- icl.data.tokens: windows of a token-id stream, drawn as icl.data.text draws (same offsets for the same seed,
-- step and sequence), targets = next id; bad ids, short streams and missing options are refused.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check

-- a byte stream as ids and as a file: the two generators must pick the same windows
local path = os.tmpname()
local ids, bytes = {}, {}
for i = 1, 600 do
  ids[i] = 32 + (i * 7919) % 95
  bytes[i] = string.char(ids[i])
end
local f = assert(io.open(path, "wb")); f:write(table.concat(bytes)); f:close()
local T, B = 12, 6
local tok = icl.data.tokens{ids = ids, vocab = 128, seq = T, batch = B, seed = 9}
local txt = assert(icl.data.text{file = path, seq = T, batch = B, seed = 9})
local a, b = tok(7), txt(7)
check(icl.json.encode(a.tokens:totable()) == icl.json.encode(b.tokens:totable()), "same windows as icl.data.text")
check(icl.json.encode(a.targets:totable()) == icl.json.encode(b.targets:totable()), "same targets as icl.data.text")
os.remove(path)

-- larger ids (above a byte), from a tensor: every window is a contiguous run of the stream, targets shifted
local n = 5000
local stream = {}
for i = 1, n do stream[i] = (i * 104729) % 3001 end
local gen = icl.data.tokens{ids = icl.tensor.from(stream), vocab = 3001, seq = 32, batch = 4, seed = 2}
local bt = gen(3)
local tk, tg = bt.tokens:totable(), bt.targets:totable()
local ok = true
for s = 1, 4 do
  local start
  for i = 1, n - 32 do if stream[i] == tk[s][1] and stream[i + 1] == tk[s][2] and stream[i + 2] == tk[s][3] then
    start = i; break end end
  if not start then ok = false else
    for t = 1, 32 do
      if tk[s][t] ~= stream[start + t - 1] or tg[s][t] ~= stream[start + t] then ok = false end
    end
  end
end
check(ok, "windows of the stream with the next id as target")
check(gen(0, 2).tokens:shape()[1] == 2, "batch size argument")

local function raises(fn, want, what)
  local okc, err = pcall(fn)
  check(not okc and tostring(err):find(want, 1, true), what .. ": " .. tostring(err))
end
raises(function() icl.data.tokens{ids = {1, 2, 3}, vocab = 4, seq = 3} end, "3 ids, a window needs seq + 1 = 4",
       "too short")
raises(function() icl.data.tokens{ids = {1, 2, 9, 3}, vocab = 4, seq = 2} end, "entry 3 is 9", "id out of range")
raises(function() icl.data.tokens{ids = {1, 2.5, 3, 0}, vocab = 4, seq = 2} end, "entry 2 is 2.5", "not an integer")
raises(function() icl.data.tokens{ids = {1, 2, 3, 0}, seq = 2} end, "option vocab is required", "no vocab")
raises(function() icl.data.tokens{ids = "1 2 3", vocab = 4, seq = 2} end, "expected a list or 1-d tensor", "a string")
raises(function() icl.data.tokens{ids = {1, 2, 3, 0}, vocab = 4, seq = 2, bogus = 1} end, "bogus", "unknown option")

tl.done()
