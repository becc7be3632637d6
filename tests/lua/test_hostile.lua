-- Hostile Lua input without a model (issue 16): tables whose __len lies, zero-element tensors with huge dimensions,
-- reshape overflow, .npy headers with huge shapes or 'shape' inside another key, safetensors with empty or
-- duplicate names, invalid UTF-8 in json.encode, stale temporary files. Each must be a clean Lua error naming the
-- argument (or nil, message), never a crash.
local T = icl.tensor
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, check_raises = tl.check, tl.raises

local function liar(len, value)
  return setmetatable({}, {__len = function() return len end, __index = function() return value end})
end

-- 1: a __len that lies is read once and bounded -------------------------------------------------------------
check_raises(function() return T.arange(4):index_select(1, liar(1 << 61, 1)) end,
  "indices: length 2305843009213693952 out of range", "index_select with a huge __len")
check_raises(function() return T.arange(4):index_select(1, liar(-5, 1)) end, "out of range", "negative __len")
check_raises(function() return T.cat(liar(1 << 40, T.zeros(1)), 1) end, "list of tensors: length", "cat huge __len")
local calls = 0
local flip = setmetatable({}, {__len = function() calls = calls + 1 return calls == 1 and 2 or 64 end,
  __index = function(_, i) return i end})
local sel = T.arange(4):index_select(1, flip)
check(calls == 1 and sel:numel() == 2, "index_select reads __len once (calls " .. calls .. ", got " .. sel:numel() .. ")")
check_raises(function() return T.new(liar(1 << 62, 1)) end, "shape", "tensor.new with a huge shape list")
check_raises(function() return T.from(liar(1 << 62, 1)) end, "out of range", "tensor.from with a huge row")
-- entries made afresh by __index stay alive while cat uses them
local fresh = setmetatable({}, {__len = function() return 3 end, __index = function() collectgarbage() return T.ones(2) end})
check(T.cat(fresh, 1):numel() == 6, "cat of entries made by __index")
check_raises(function() return icl.pca(liar(1 << 62, {1, 2})) end, "rows: length", "pca rows huge __len")
check_raises(function() return icl.linalg.dirichlet_energy(T.zeros(2, 2),
  setmetatable({}, {__len = function() return 1 << 62 end})) end, "edges: length",
  "dirichlet_energy edges huge __len")

-- 2: every dimension and product bounded, zero or not -------------------------------------------------------
check_raises(function() return T.zeros(0, 1 << 62, 1 << 62) end, "bad shape", "zeros(0, 2^62, 2^62)")
check_raises(function() return T.zeros(0, 1 << 62, 1 << 62):sum(1) end, "bad shape", "zeros(0, 2^62, 2^62):sum(1)")
check_raises(function() return T.zeros(0, 1 << 30, 1 << 30):transpose(1, 3) end, "bad shape", "transpose of a huge empty")
local x = T.zeros(0, 2, 1 << 38)
check_raises(function() return T.cat({x, x, x, x, x}, 2) end, "bad shape", "cat growing past the bound")
check(T.cat({T.zeros(0, 2, 3), T.zeros(0, 2, 3)}, 2):shape()[2] == 4, "cat of empty tensors keeps the other dims")
check_raises(function() return T.arange(6):reshape(1 << 32, 1 << 32, 1 << 32, 6) end, "2^40",
  "reshape(2^32, 2^32, 2^32, 6)")
check_raises(function() return T.arange(6):reshape(-1, 1 << 32, 1 << 32) end, "reshape", "reshape with -1 and huge")
check(T.arange(6):reshape(-1, 3):shape()[1] == 2, "reshape -1 still works")

-- .npy headers: huge shapes are refused; 'shape' inside another key's string does not count --------------------
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local function npy(name, dict, payload)
  local pad = 64 - (10 + #dict + 1) % 64
  local h = dict .. string.rep(" ", pad % 64) .. "\n"
  local f = assert(io.open(dir .. "/" .. name, "wb"))
  f:write("\x93NUMPY\1\0", string.char(#h % 256, #h // 256), h, payload or "")
  f:close()
  return dir .. "/" .. name
end
local big = npy("big.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }")
local t, e = T.load(big)
check(t == nil and tostring(e):find("bad shape", 1, true), "npy huge zero-element shape refused (" .. tostring(e) .. ")")
local tricky = npy("tricky.npy", "{'descr': '<f4', 'note': 'shape': (9, 9), 'fortran_order': False, 'shape': (2,), }",
  string.pack("<ff", 1.5, -2))
t, e = T.load(tricky)
check(t and t.ndim == 1 and t:shape()[1] == 2 and t[2] == -2, "npy: the key 'shape', not the text in 'note' (" .. tostring(e) .. ")")

-- safetensors: empty and duplicate names refused by the loader as by the saver -------------------------------
local function st(name, header, payload)
  local f = assert(io.open(dir .. "/" .. name, "wb"))
  f:write(string.pack("<I8", #header), header, payload)
  f:close()
  return dir .. "/" .. name
end
local one = string.pack("<f", 3)
local dup = st("dup.safetensors", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', one)
t, e = T.load_safetensors(dup)
check(t == nil and tostring(e):find("'a' appears twice", 1, true), "safetensors duplicate name (" .. tostring(e) .. ")")
local empty = st("empty.safetensors", '{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', one)
t, e = T.load_safetensors(empty)
check(t == nil and tostring(e):find("empty name", 1, true), "safetensors empty name (" .. tostring(e) .. ")")
local huge = st("huge.safetensors", '{"a":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}}', "")
t, e = T.load_safetensors(huge)
check(t == nil and tostring(e):find("bad shape", 1, true), "safetensors huge shape (" .. tostring(e) .. ")")
assert(os.execute("mkdir -p " .. dir .. "/sub.npy"))
t, e = T.load(dir .. "/sub.npy")
check(t == nil and tostring(e):find("not a regular file", 1, true), "load of a directory (" .. tostring(e) .. ")")

-- 14: stale temporary files of a dead writer are removed by the next save of the same target ------------------
local target = dir .. "/x.npy"
local stale = target .. ".tmp.999999999"
local other = dir .. "/y.npy.tmp.999999999"
for _, p in ipairs({stale, other}) do assert(io.open(p, "wb")):close() end
T.ones(2):save(target)
check(io.open(stale) == nil, "stale x.npy.tmp.PID of a dead process removed")
check(io.open(other) ~= nil, "another target's temporary file left alone")
local jtarget = dir .. "/s.json"
assert(io.open(jtarget .. ".tmp.999999999", "wb")):close()
assert(icl.json.write(jtarget, {a = 1}))
check(io.open(jtarget .. ".tmp.999999999") == nil, "json.write removes a dead writer's s.json.tmp.PID")

-- 14: json.encode always emits valid UTF-8 ------------------------------------------------------------------
local j = icl.json.encode({name = "ok\xff\xfe\xc3", fine = "caf\xc3\xa9"})
check(j:find("\\ufffd", 1, true) ~= nil and not j:find("\xff", 1, true), "invalid bytes become U+FFFD: " .. j)
check(j:find("caf\xc3\xa9", 1, true) ~= nil, "valid UTF-8 kept as is")
check(utf8.len(j) ~= nil, "the whole document is valid UTF-8")
check(icl.json.decode(j).name == "ok\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", "decodes to replacement characters")

os.execute("rm -rf " .. dir)
tl.done()
