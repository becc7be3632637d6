-- Tensors dropped in a loop are collected without collectgarbage(): Lua sees only a small box per tensor, so
-- the binding paces the collector to the tensors' data. 40 tensors of 16 MiB each, every page written (640 MiB
-- if none were freed); the peak resident set may grow by a few of them, not by all.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check
local T = icl.tensor

local function status_kb(key)
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return tonumber(s:match(key .. ":%s*(%d+)"))
end

local base = status_kb("VmHWM")
if not base then
  print("test_tensor_gc: no /proc/self/status on this system: the peak-memory check does not run")
  os.exit(77)
end
local n, mib = 40, 16
for i = 1, n do
  local t = T.full({ mib * 256, 1024 }, i) -- 16 MiB, written by full; the next iteration drops it
  check(t[1][1] == i, "tensor " .. i .. " holds its value")
end
local grown = (status_kb("VmHWM") - base) / 1024
check(grown < 8 * mib, string.format("peak resident set grew %.0f MiB over %d dropped tensors of %d MiB (at most %d)",
  grown, n, mib, 8 * mib))
-- results of operations too (icl_lua_tensor_done): each sum of two is another 16 MiB
local a = T.ones({ mib * 256, 1024 })
local base2 = status_kb("VmHWM")
for i = 1, n do
  local b = a + i
  check(b[1][1] == i + 1, "a + " .. i)
end
grown = (status_kb("VmHWM") - base2) / 1024
check(grown < 8 * mib, string.format("peak resident set grew %.0f MiB over %d dropped sums (at most %d)", grown, n,
  8 * mib))
tl.done()
