-- Tensors dropped in a loop are collected without collectgarbage(): Lua sees only a small box per tensor, so
-- the binding paces the collector to the tensors' data. 40 tensors of 16 MiB each are dropped in turn; a weak
-- table shows how many the collector has not yet taken (all 40 when nothing paced it). Counting collected boxes,
-- not resident memory, keeps the check independent of the allocator (AddressSanitizer quarantines freed blocks).
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check
local T = icl.tensor

local n, mib = 40, 16

-- Drops n tensors of make(i) (which also returns the first element expected, or nil) and checks how many of them
-- the collector has not taken.
local function dropped(what, make)
  local seen = setmetatable({}, { __mode = "k" })
  for i = 1, n do
    local t, want = make(i)
    seen[t] = true
    if want then check(t[1][1] == want, what .. " " .. i .. " holds " .. want) end
  end
  local left = 0
  for _ in pairs(seen) do left = left + 1 end
  check(left <= 8, string.format("%d of %d dropped %s not yet collected (at most 8)", left, n, what))
end

dropped("16 MiB tensors", function(i) return T.full({ mib * 256, 1024 }, i), i end) -- a constructor (tensor_done)
local a = T.ones({ mib * 256, 1024 })
dropped("sums", function(i) return a + i, i + 1 end) -- an operation's result
dropped("clones", function() return a:clone() end) -- icl_lua_tensor_account called directly
tl.done()
