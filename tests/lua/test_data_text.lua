-- icl.data.text: byte-level windows of a text file, deterministic by (seed, step), targets = next byte.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check

local path = os.tmpname()
local text = {}
for i = 1, 500 do text[#text + 1] = string.char(32 + (i * 7919) % 95) end
text = table.concat(text)
local f = assert(io.open(path, "wb")); f:write(text); f:close()

local T, B = 16, 8
local data = assert(icl.data.text{file = path, seq = T, batch = B, seed = 3})
local b = data(5)
check(b.tokens:shape()[1] == B and b.tokens:shape()[2] == T, "tokens [B, T]")
check(b.targets:shape()[1] == B and b.targets:shape()[2] == T, "targets [B, T]")
local tk, tg = b.tokens:totable(), b.targets:totable()
local windows_ok, shift_ok = true, true
for s = 1, B do
  local w = {}
  for t = 1, T do w[t] = string.char(tk[s][t]) end
  w[T + 1] = string.char(tg[s][T])
  if not text:find(table.concat(w), 1, true) then windows_ok = false end -- a contiguous window of the file
  for t = 1, T - 1 do if tg[s][t] ~= tk[s][t + 1] then shift_ok = false end end
end
check(windows_ok, "every sequence is a window of the file, its last target the byte after it")
check(shift_ok, "targets are the next byte")
local again = data(5).tokens:totable()
local same, differs = true, false
local other = data(6).tokens:totable()
for s = 1, B do
  for t = 1, T do
    if again[s][t] ~= tk[s][t] then same = false end
    if other[s][t] ~= tk[s][t] then differs = true end
  end
end
check(same, "the same step gives the same batch")
check(differs, "another step gives another batch")
check(data(0, 3).tokens:shape()[1] == 3, "batch size argument")

local none, msg = icl.data.text{file = path .. ".absent", seq = T}
check(none == nil and msg:find("absent", 1, true), "a missing file returns nil, msg naming it: " .. tostring(msg))
local short, smsg = icl.data.text{file = path, seq = 500}
check(short == nil and smsg:find("500 bytes, a window needs seq + 1 = 501", 1, true), "too short a file: " .. tostring(smsg))
check(not pcall(icl.data.text, {file = path, seq = 0}), "seq 0 raises")
os.remove(path)

tl.done()
