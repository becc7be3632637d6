-- icl.progress: the object's API, silence when stderr is not a terminal, and the ICL_PROGRESS=lines log format
-- (checked by running this interpreter on a small script when its path is known).
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
local p = icl.progress.new { total = 10, label = "walks" }
for _ = 1, 4 do p:update() end
p:update(2)
check(tostring(p):find("walks: ", 1, true) and tostring(p):find("6/10", 1, true), "count in tostring")
p:set(9)
check(tostring(p):find("9/10", 1, true) ~= nil, "set")
local t = p:done()
check(type(t) == "number" and t >= 0, "done returns the elapsed seconds")
check(p:done() >= t, "done twice is harmless")
p:update(5)
check(tostring(p):find("9/10", 1, true) ~= nil, "updates after done are ignored")
local open = icl.progress.new()
open:update(3)
check(tostring(open):find("3 ", 1, true) ~= nil, "unknown total")
do
  local scoped <close> = icl.progress.new { total = 2 }
  scoped:update(2)
end
check(true, "to-be-closed variable")
check(errs(function() icl.progress.new { total = "x" } end, "total must be a number"), "bad total")
check(errs(function() p:update(-1) end, "n must be a number in 0..2^53"), "negative update")
-- issue 44: a count past the total reads 100% with ETA 0:00, never a negative time; NaN, inf and negative totals
-- or counts are refused, huge ones print in short form and never cut the line
local over = icl.progress.new{total = 10, label = "over"}
over:set(12)
local s = tostring(over)
check(s:find("100% 12/10", 1, true) and s:find("ETA 0:00", 1, true) and not s:find("-", 1, true), "count past the total: " .. s)
for _, bad in ipairs({0 / 0, 1 / 0, -1 / 0, -3, 2 ^ 60}) do
  check(errs(function() icl.progress.new{total = bad} end, "total must be a number in 0..2^53"), "total " .. bad .. " refused")
  check(errs(function() over:update(bad) end, "n must be a number in 0..2^53"), "update " .. bad .. " refused")
  check(errs(function() over:set(bad) end, "count must be a number in 0..2^53"), "set " .. bad .. " refused")
end
local big = icl.progress.new{total = 2 ^ 53, label = "big"}
big:set(2 ^ 52)
s = tostring(big)
check(s:find("50% 4.5e+15/9.01e+15", 1, true) and s:find("ETA", 1, true), "huge counts in short form, the ETA kept: " .. s)

-- ICL_PROGRESS=lines: one line per 10% and a final one, on stderr
local exe = arg and arg[-2]
if exe and os.getenv("ICL_TEST") then
  local script = os.tmpname()
  local f = io.open(script, "w")
  f:write('local p = icl.progress.new{total = 100, label = "job"} for i = 1, 100 do p:update() end p:done()\n')
  f:close()
  local h = io.popen(string.format("ICL_PROGRESS=lines '%s' script '%s' 2>&1 >/dev/null", exe, script))
  local out = h:read("a")
  h:close()
  os.remove(script)
  local lines = {}
  for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
  check(#lines == 10, "ten lines (got " .. #lines .. ")")
  check(lines[1] and lines[1]:find("^job:%s+10%% 10/100") ~= nil, "first line at 10%")
  check(lines[10] and lines[10]:find("100% 100/100", 1, true) and lines[10]:find(" in ", 1, true), "final line")
end

tl.done()
