-- icl.rng: known first values (xoshiro256** seeded through splitmix64), ranges, sampling, tensors, errors.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
local same = tl.same
local function draws(seed, n, f)
  local r, out = icl.rng.new(seed), {}
  for i = 1, n do out[i] = f(r) end
  return out
end

-- known values (an independent implementation of the same algorithm gave them)
check(draws(42, 1, function(r) return r:uniform() end)[1] == 0.08386297105988216, "uniform seed 42")
check(same(draws(7, 10, function(r) return r:int(1, 6) end), { 1, 3, 1, 5, 3, 6, 5, 5, 5, 2 }), "dice seed 7")
check(same(draws(7, 10, function(r) return r:int(6) end), { 1, 3, 1, 5, 3, 6, 5, 5, 5, 2 }), "int(n) = int(1, n)")
check(same(draws(3, 8, function(r) return r:int(-5, 5) end), { 5, -1, 5, 2, 1, 4, 0, 3 }), "int(-5, 5) seed 3")
check(same(icl.rng.new(1):sample(10, 3), { 6, 2, 1 }), "sample(10, 3) seed 1")
check(same(icl.rng.new(2):shuffle({ 1, 2, 3, 4, 5 }), { 4, 2, 5, 3, 1 }), "shuffle seed 2")
check(same(draws(4, 5, function(r) return r:choice({ "a", "b", "c" }) end), { "c", "a", "c", "a", "a" }), "choice seed 4")
local z = draws(5, 3, function(r) return r:normal() end)
check(math.abs(z[1] + 1.565523310998701) < 1e-12 and math.abs(z[2] - 0.4943461931977683) < 1e-12, "normal seed 5")

-- same seed, same sequence; different seeds differ; default seed 0
check(same(draws(9, 20, function(r) return r:int(1, 1000) end), draws(9, 20, function(r) return r:int(1, 1000) end)),
  "reproducible")
check(not same(draws(9, 20, function(r) return r:int(1, 1000) end), draws(10, 20, function(r) return r:int(1, 1000) end)),
  "seeds differ")
check(icl.rng.new():uniform() == icl.rng.new(0):uniform(), "default seed 0")

-- ranges
local r = icl.rng.new(11)
local lo, hi, sum = math.huge, -math.huge, 0
for _ = 1, 20000 do
  local v = r:int(-3, 3)
  lo, hi, sum = math.min(lo, v), math.max(hi, v), sum + v
end
check(lo == -3 and hi == 3 and math.abs(sum / 20000) < 0.05, "int(-3, 3) covers its range, mean 0")
check(math.type(r:int(math.mininteger, math.maxinteger)) == "integer", "full 64-bit range")
local u = r:uniform(2, 4)
check(u >= 2 and u < 4, "uniform(a, b)")
local s = r:sample(1000, 1000)
table.sort(s)
check(#s == 1000 and s[1] == 1 and s[1000] == 1000, "sample(n, n) is a permutation")
check(#r:sample(5, 0) == 0, "sample(n, 0)")
local m, m2 = 0, 0
for _ = 1, 20000 do
  local v = r:normal(1, 2)
  m, m2 = m + v, m2 + v * v
end
m, m2 = m / 20000, m2 / 20000
check(math.abs(m - 1) < 0.06 and math.abs(m2 - m * m - 4) < 0.2, "normal(mu, sigma) moments")

-- tensors
local t = icl.rng.new(1):normal_tensor({ 3, 4 })
check(t:shape()[1] == 3 and t:shape()[2] == 4, "normal_tensor shape")
local t2 = icl.rng.new(1):normal_tensor(3, 4)
check(t:get(2, 3) == t2:get(2, 3), "normal_tensor reproducible, shape as integers")
local ut = icl.rng.new(2):uniform_tensor({ 100 })
local ok = true
for i = 1, 100 do ok = ok and ut[i] >= 0 and ut[i] < 1 end
check(ok, "uniform_tensor in [0, 1)")

-- errors name the argument
check(errs(function() icl.rng.new(1.5) end, "seed must be an integer"), "bad seed")
check(errs(function() r:int(5, 1) end, "hi must be >= lo"), "empty range")
check(errs(function() r:choice({}) end, "list is empty"), "empty choice")
check(errs(function() r:sample(3, 4) end, "k must be in [0, n]"), "sample k > n")
check(errs(function() r:normal_tensor({ 1, 2, 3, 4, 5 }) end, "1 to 4 dimensions"), "too many dims")
check(tostring(r):find("icl.rng", 1, true) ~= nil, "tostring")

tl.done()
