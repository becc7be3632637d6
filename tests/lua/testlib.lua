-- The Lua tests' shared helpers (not a test: ctest runs tests/lua/test_*.lua). Load it with
--   local t = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
-- check counts a result; errs tells whether a call raises with a message containing a text; raises checks that;
-- same compares two lists element by element (nested lists too); done prints the counts and raises if any check
-- failed, so `icl script` exits non-zero.
local t = {passed = 0, failed = 0}

function t.check(cond, what)
  if cond then
    t.passed = t.passed + 1
  else
    t.failed = t.failed + 1
    io.stderr:write(debug.traceback("FAIL: " .. tostring(what), 2), "\n")
  end
end

-- true if fn raises and the message contains pattern (plain text; nil: any message), and the message.
function t.errs(fn, pattern)
  local ok, msg = pcall(fn)
  return not ok and (pattern == nil or tostring(msg):find(pattern, 1, true) ~= nil), msg
end

function t.raises(fn, pattern, what)
  local ok, msg = t.errs(fn, pattern)
  t.check(ok, what .. " (got: " .. tostring(msg) .. ")")
end

-- true if lists a and b have the same length and equal elements; elements that are tables compare as lists.
function t.same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if type(a[i]) == "table" and type(b[i]) == "table" then
      if not t.same(a[i], b[i]) then return false end
    elseif a[i] ~= b[i] then return false end
  end
  return true
end

function t.done()
  print(string.format("%d passed, %d failed", t.passed, t.failed))
  if t.failed > 0 then error(t.failed .. " checks failed", 0) end
end

return t
