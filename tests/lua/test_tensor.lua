-- icl.tensor: constructors, indexing, shape operations, math, broadcasting, files and argument errors.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, check_raises = tl.check, tl.raises
local T = icl.tensor
local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-5) * math.max(1, math.abs(b)) end

-- equal shapes and values (b a tensor or nested table)
local function same(t, b, tol)
  if type(b) == "table" then b = T.from(b) end
  if #t:shape() ~= #b:shape() then return false end
  for i, d in ipairs(t:shape()) do if b:shape()[i] ~= d then return false end end
  local x, y = t:reshape(-1), b:reshape(-1)
  for i = 1, x:numel() do if not near(x[i], y[i], tol) then return false end end
  return true
end

-- constructors ---------------------------------------------------------------------------------------------
local z = T.zeros(2, 3)
check(z.ndim == 2 and z:numel() == 6 and #z == 2, "zeros shape")
check(same(T.zeros({2, 3}), z), "zeros from a shape table")
check(same(T.ones(2), {1, 1}), "ones")
check(same(T.full({2, 2}, 7), {{7, 7}, {7, 7}}), "full")
check(same(T.arange(4), {0, 1, 2, 3}), "arange(n)")
check(same(T.arange(1, 2, 0.25), {1, 1.25, 1.5, 1.75}), "arange(start, stop, step)")
check(same(T.arange(5, 1, -2), {5, 3}), "arange with a negative step")
check(T.arange(0):numel() == 0, "empty arange")
check(same(T.eye(3), {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}), "eye")
check(same(T.eye(2, 3), {{1, 0, 0}, {0, 1, 0}}), "eye(n, m)")
check(same(T.new({2, 2}, {1, 2, 3, 4}), {{1, 2}, {3, 4}}), "new with values")
check(same(T.new(3), {0, 0, 0}), "new(dims)")
local f = T.from{{1, 2, 3}, {4, 5, 6}}
check(f:shape()[1] == 2 and f:shape()[2] == 3, "from: shape")
check(same(T.from(f), f), "from(tensor) copies")
check(T.is(f) and not T.is({}) and not T.is(3), "tensor.is")
local four = T.zeros(2, 3, 4, 5)
check(four.ndim == 4 and four:numel() == 120, "4-D tensor")

-- indexing ---------------------------------------------------------------------------------------------------
check(f:get(2, 3) == 6 and f:get(1, 1) == 1, "get")
check(f:get(-1, -1) == 6, "get with negative indices")
check(same(f[2], {4, 5, 6}), "t[i] of a 2-D tensor is a row copy")
check(f[2][3] == 6 and T.from{9, 8}[2] == 8, "t[i] of a 1-D tensor is a number")
local g = f:clone()
g:set(42, 1, 2)
check(g:get(1, 2) == 42 and f:get(1, 2) == 2, "set on a clone leaves the original")
g[2] = 0
check(same(g, {{1, 42, 3}, {0, 0, 0}}), "t[i] = number fills a row")
g[1] = T.from{7, 8, 9}
check(same(g[1], {7, 8, 9}), "t[i] = tensor copies a row")
check(T.from{5}:item() == 5, "item")
check(same(T.zeros(3):fill(2), {2, 2, 2}), "fill")
check_raises(function() return f[3] end, "index 3 out of range 1..2", "row index out of range")
check_raises(function() return f:get(1) end, "expected 2 indices", "get with too few indices")
check_raises(function() return f:get(1, 4) end, "out of range 1..3", "get out of range")
check_raises(function() f.foo = 1 end, "read-only", "fields are read-only")
check_raises(function() return T.from{{1, 2}, {3}} end, "rows must have equal lengths", "ragged table")
check_raises(function() return T.from{1, "x"} end, "expected a number", "non-number entry")
check_raises(function() return T.zeros(1, 2, 3, 4, 5) end, "more than 4 dimensions", "five dimensions")
check_raises(function() return T.zeros(-1) end, "non-negative", "negative size")
check_raises(function() return f:item() end, "6 elements", "item of a non-scalar")

-- shape operations -----------------------------------------------------------------------------------------
check(same(f:reshape(3, 2), {{1, 2}, {3, 4}, {5, 6}}), "reshape")
check(same(f:reshape({-1}), {1, 2, 3, 4, 5, 6}), "reshape with -1")
check_raises(function() return f:reshape(4, 2) end, "cannot reshape", "reshape to a wrong count")
check(same(f:transpose(), {{1, 4}, {2, 5}, {3, 6}}), "transpose")
local a3 = T.arange(24):reshape(2, 3, 4)
local tr = a3:transpose(1, 3)
check(tr:shape()[1] == 4 and tr:shape()[3] == 2 and tr:get(4, 3, 2) == a3:get(2, 3, 4), "transpose of 3-D")
check(same(f:slice(2, 2, 3), {{2, 3}, {5, 6}}), "slice inclusive")
check(same(f:slice(1, -1), {{4, 5, 6}}), "slice from the end")
check(f:slice(2, 3, 2):numel() == 0, "empty slice")
check_raises(function() return f:slice(2, 1, 4) end, "out of range", "slice out of range")
check(same(f:index_select(2, {3, 1}), {{3, 1}, {6, 4}}), "index_select")
check(same(f:index_select(1, T.from{2, 2}), {{4, 5, 6}, {4, 5, 6}}), "index_select with a tensor")
check(same(f:index_select(2, {-1}), {{3}, {6}}), "index_select with a negative index")
check(same(f:gather(2, {3, 1}), {3, 4}), "gather one per row")
check(same(f:gather(2, {{1, 1}, {2, 3}}), {{1, 1}, {5, 6}}), "gather torch-style")
check(same(f:gather(1, {2, 1, 2}), {4, 2, 6}), "gather along dim 1")
check_raises(function() return f:gather(2, {4, 1}) end, "out of range", "gather out of range")
check(same(T.cat({f, f}, 1), {{1, 2, 3}, {4, 5, 6}, {1, 2, 3}, {4, 5, 6}}), "cat along 1")
check(same(T.cat({f, T.ones(2, 1)}, 2), {{1, 2, 3, 1}, {4, 5, 6, 1}}), "cat along 2")
check_raises(function() return T.cat({f, T.ones(3, 1)}, 2) end, "only dimension 2 may differ", "cat mismatch")
check(same(T.stack({T.from{1, 2}, T.from{3, 4}}), {{1, 2}, {3, 4}}), "stack")
check(same(T.stack({T.from{1, 2}, T.from{3, 4}}, 2), {{1, 3}, {2, 4}}), "stack along 2")
local tt = f:totable()
check(#tt == 2 and tt[2][3] == 6, "totable")

-- reductions -------------------------------------------------------------------------------------------------
check(f:sum() == 21 and near(f:mean(), 3.5), "sum and mean of all")
check(same(f:sum(1), {5, 7, 9}) and same(f:sum(2), {6, 15}), "sum along a dim")
check(same(f:sum(2, true), {{6}, {15}}), "sum with keepdim")
check(same(f:mean(-1), {2, 5}), "mean along the last dim")
check(f:max() == 6 and f:min() == 1, "max and min of all")
local mv, mi = f:max(2)
check(same(mv, {3, 6}) and same(mi, {3, 3}), "max along a dim with indices")
local nv, ni = T.from{{3, 1, 2}}:min(2)
check(same(nv, {1}) and same(ni, {2}), "min along a dim with indices")
local r, c = f:argmax()
check(r == 2 and c == 3, "argmax of all: one index per dim")
check(T.from{3, 9, 1}:argmax() == 2 and T.from{3, 9, 1}:argmin() == 3, "argmax/argmin of 1-D")
check(same(T.from{{1, 9}, {8, 2}}:argmax(2), {2, 1}), "argmax along a dim (1-based)")
check(near(T.from{1, 2, 3, 4}:var(), 1.25) and near(T.from{1, 2, 3, 4}:std(), math.sqrt(1.25)), "var/std (population)")
check(same(f:var(2), {2 / 3, 2 / 3}), "var along a dim")
check(near(T.from{3, 4}:norm(), 5), "norm")
check(same(T.from{{3, 4}, {6, 8}}:norm(2), {5, 10}), "norm along a dim")
check(T.zeros(0):sum() == 0, "sum of empty")
check_raises(function() return T.zeros(0):max() end, "empty", "max of empty")
check_raises(function() return f:sum(3) end, "dimension 3 out of range 1..2", "bad dimension")

-- softmax and elementwise ------------------------------------------------------------------------------------
local sm = T.from{{1, 2, 3}, {1, 1, 1}}:softmax()
local e = math.exp(1)
check(near(sm:get(1, 3), e * e / (1 + e + e * e)) and near(sm:get(2, 1), 1 / 3), "softmax along the last dim")
check(same(sm:sum(2), {1, 1}), "softmax rows sum to 1")
local ls = T.from{1, 2, 3}:log_softmax()
check(near(ls[3], 3 - math.log(math.exp(1) + math.exp(2) + math.exp(3))), "log_softmax")
check(same(T.from{{1, 2}, {3, 4}}:softmax(1):sum(1), {1, 1}), "softmax along dim 1")
check(near(T.from{1000, 0}:softmax()[1], 1), "softmax is stable for large inputs")
check(same(T.from{0, 1}:exp(), {1, e}), "exp")
check(same(T.from{1, e}:log(), {0, 1}), "log")
check(same(T.from{4, 9}:sqrt(), {2, 3}), "sqrt")
check(same(T.from{-1, 2}:abs(), {1, 2}), "abs")
check(same(T.from{-1, 2}:neg(), {1, -2}) and same(-T.from{1}, {-1}), "neg and unary minus")

-- arithmetic and broadcasting --------------------------------------------------------------------------------
check(same(f + f, {{2, 4, 6}, {8, 10, 12}}), "tensor + tensor")
check(same(f - 1, {{0, 1, 2}, {3, 4, 5}}) and same(10 - T.from{1}, {9}), "scalar subtraction both ways")
check(same(f * 2, {{2, 4, 6}, {8, 10, 12}}) and same(2 * T.from{3}, {6}), "scalar multiplication")
check(same(T.from{1, 2} / 2, {0.5, 1}) and same(2 / T.from{4}, {0.5}), "scalar division both ways")
check(same(T.from{2, 3} ^ 2, {4, 9}), "power")
check(same(f + T.from{10, 20, 30}, {{11, 22, 33}, {14, 25, 36}}), "broadcast a trailing row")
check(same(f * T.from{{1}, {2}}, {{1, 2, 3}, {8, 10, 12}}), "broadcast a column")
check(same(T.from{10, 20, 30} - f, {{9, 18, 27}, {6, 15, 24}}), "broadcast on the left")
check(same(f / f:sum(2, true), {{1 / 6, 2 / 6, 3 / 6}, {4 / 15, 5 / 15, 6 / 15}}), "normalize rows")
check_raises(function() return f + T.from{1, 2} end, "do not broadcast", "shapes that do not broadcast")
check_raises(function() return f + "x" end, "arithmetic", "tensor + string")

-- products ---------------------------------------------------------------------------------------------------
check(same(f:matmul(T.from{{1, 0}, {0, 1}, {1, 1}}), {{4, 5}, {10, 11}}), "matmul 2-D")
check(same(f:matmul(T.from{1, 1, 1}), {6, 15}), "matmul matrix-vector")
check(same(T.from{1, 1}:matmul(f), {5, 7, 9}), "matmul vector-matrix")
check(same(T.eye(3):matmul(f:transpose()), f:transpose()), "identity matmul")
check_raises(function() return f:matmul(f) end, "matmul of [2, 3] and [2, 3]", "matmul shape mismatch")
check(T.from{1, 2, 3}:dot(T.from{4, 5, 6}) == 32, "dot")
check_raises(function() return T.from{1}:dot(T.from{1, 2}) end, "dot of 1 and 2", "dot length mismatch")

-- files --------------------------------------------------------------------------------------------------------
local dir = os.getenv("TMPDIR") or "/tmp"
local base = string.format("%s/icl_test_tensor_%d_%d", dir, os.time(), math.random(1, 1e9))
local big = T.arange(2 * 3 * 4 * 5):reshape(2, 3, 4, 5) / 7
for _, ext in ipairs{".npy", ".safetensors"} do
  for _, t in ipairs{f, big, T.from{1.5}, T.zeros(0)} do
    local path = base .. ext
    check(t:save(path) == true, "save " .. ext)
    local back, err = T.load(path)
    check(back and same(back, t, 0), "load " .. ext .. " round trip: " .. tostring(err))
    os.remove(path)
  end
end
local set = {alpha = f, beta = big, ["blocks.0.hook_resid_post"] = T.ones(3)}
local sp = base .. "_set.safetensors"
check(T.save_safetensors(sp, set) == true, "save_safetensors")
local loaded = T.load_safetensors(sp)
local count = 0
for k, v in pairs(loaded) do count = count + 1; check(same(v, set[k], 0), "load_safetensors: " .. k) end
check(count == 3, "load_safetensors: three tensors")
local one, msg = T.load(sp)
check(one == nil and msg:find("holds 3 tensors", 1, true), "load of a multi-tensor file says so")
os.remove(sp)
local none, why = T.load(base .. "_missing.npy")
check(none == nil and why:find("_missing.npy", 1, true) and why:find("cannot open", 1, true), "missing file: nil, message")
local junk = io.open(base .. "_junk.npy", "wb")
junk:write("not a numpy file at all")
junk:close()
local bad, bwhy = T.load(base .. "_junk.npy")
check(bad == nil and bwhy:find("bad magic", 1, true), "junk .npy: nil, message")
os.remove(base .. "_junk.npy")
check_raises(function() f:save(base .. ".txt") end, ".npy or .safetensors", "save with an unknown extension")
check_raises(function() T.save_safetensors(sp, {x = 1}) end, "not an open tensor", "save_safetensors of a number")
local unwritable = f:save("/nonexistent-dir/x.npy")
check(unwritable == nil, "save into a missing directory: nil")

-- printing and closing ---------------------------------------------------------------------------------------
local s = tostring(f)
check(s:find("tensor[2, 3]", 1, true) and s:find("[[1, 2, 3],", 1, true), "tostring shows shape and values: " .. s)
local long = tostring(T.arange(100))
check(long:find("...", 1, true) and long:find("99", 1, true) and #long < 80, "tostring of a long tensor is a preview")
do
  local c <close> = T.ones(2)
  check(c:sum() == 2, "to-be-closed tensor works")
end
local closed = T.ones(2)
closed:close()
check(tostring(closed) == "tensor (closed)", "closed tensor prints as closed")
check_raises(function() return closed:sum() end, "tensor is closed", "use after close")
check_raises(function() return T.ones(2):matmul(3) end, "tensor expected", "matmul with a number")

tl.done()
