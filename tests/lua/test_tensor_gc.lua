-- Tensors dropped in a loop are collected without collectgarbage(): Lua sees only a small box per tensor, so
-- the binding paces the collector to the tensors' data. 40 tensors of 16 MiB each are dropped in turn; a weak
-- table shows how many the collector has not yet taken (all 40 when nothing paced it). Counting collected boxes,
-- not resident memory, keeps the check independent of the allocator (AddressSanitizer quarantines freed blocks).
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check
local T = icl.tensor

local function alive(w)
  local n = 0
  for _ in pairs(w) do n = n + 1 end
  return n
end

local n, mib = 40, 16
local seen = setmetatable({}, { __mode = "k" })
for i = 1, n do
  local t = T.full({ mib * 256, 1024 }, i) -- a constructor (icl_lua_tensor_done)
  seen[t] = true
  check(t[1][1] == i, "tensor " .. i .. " holds its value")
end
local left = alive(seen)
check(left <= 8, string.format("%d of %d dropped 16 MiB tensors not yet collected (at most 8)", left, n))

local a = T.ones({ mib * 256, 1024 })
seen = setmetatable({}, { __mode = "k" })
for i = 1, n do
  local b = a + i -- an operation's result
  seen[b] = true
  check(b[1][1] == i + 1, "a + " .. i)
end
left = alive(seen)
check(left <= 8, string.format("%d of %d dropped sums not yet collected (at most 8)", left, n))

seen = setmetatable({}, { __mode = "k" })
for i = 1, n do
  local c = a:clone() -- icl_lua_tensor_account called directly
  seen[c] = true
end
left = alive(seen)
check(left <= 8, string.format("%d of %d dropped clones not yet collected (at most 8)", left, n))
tl.done()
