-- icl.runs.read: summaries of one protocol at several seeds read in order; every refusal names the file and why.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises
local R = require("icl.runs")
local J = icl.json

local dir = os.tmpname()
os.remove(dir)
assert(icl.fs.make_dirs(dir))
local function put(name, t)
  local p = dir .. "/" .. name
  assert(J.write(p, t))
  return p
end
local base = {experiment = "exp", table = {1, 2}, model_name = "m", k = 4}
local function with(changes)
  local t = {}
  for key, v in pairs(base) do t[key] = v end
  for key, v in pairs(changes) do t[key] = v end
  return t
end
local a = put("a.json", with{seed = 1})
local b = put("b.json", with{seed = 2})
local spec = {experiment = "exp", has = "table", hint = "run it with --table", same = {"model_name", "k"}}

local rs = R.read({a, b}, spec)
check(#rs == 2 and rs[1].seed == 1 and rs[2].seed == 2 and rs[2].table[2] == 2, "two runs read in order")
check(#R.read({a}, spec) == 1, "one run")
raises(function() R.read({a, put("c.json", with{seed = 1})}, spec) end,
  dir .. "/c.json: seed 1 already given (" .. a .. ")", "a repeated seed is refused, naming both files")
raises(function() R.read({a, put("d.json", with{seed = 3, k = 8})}, spec) end,
  dir .. "/d.json: k is 8, but " .. a .. " has 4 (pool only runs that differ in --seed)", "another k is refused")
raises(function() R.read({put("e.json", with{seed = 4, experiment = "other"})}, spec) end,
  "e.json: not a exp summary with table (run it with --table)", "another experiment is refused")
raises(function() R.read({put("f.json", with{seed = 5, table = 3})}, spec) end,
  "f.json: not a exp summary with table", "a summary without the table is refused")
raises(function() R.read({dir .. "/absent.json"}, spec) end, dir .. "/absent.json: ", "an absent file is named")
raises(function() R.read({}, spec) end, "expected a non-empty list of paths", "no paths")
for _, f in ipairs({"a", "b", "c", "d", "e", "f"}) do os.remove(dir .. "/" .. f .. ".json") end
os.remove(dir)
tl.done()
