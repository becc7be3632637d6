-- icl.json: deterministic encoding (sorted keys, exact numbers, tensors), decoding, round trips, files, errors.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
local J = icl.json

-- encoding
check(J.encode({ b = 1, a = { 1, 2, 3 }, c = "x" }) == '{"a":[1,2,3],"b":1,"c":"x"}', "sorted keys, compact")
check(J.encode({ 1.5, 0.1, 3.0, -0.0, 1e300, 2 ^ 53 }) == "[1.5,0.1,3.0,-0.0,1e+300,9007199254740992.0]",
  "shortest round-trip floats, integral floats keep .0")
check(J.encode({ 1, math.maxinteger }) == "[1,9223372036854775807]", "integers exact")
check(J.encode({ 0 / 0, math.huge }) == "[null,null]", "NaN and Inf become null")
check(J.encode("a\"b\\c\n\t\1") == '"a\\"b\\\\c\\n\\t\\u0001"', "string escapes")
check(J.encode("caf\xc3\xa9") == '"caf\xc3\xa9"', "UTF-8 passes through")
check(J.encode({}) == "[]" and J.encode(J.object()) == "{}" and J.encode(J.array({})) == "[]", "empty tables")
check(J.encode({ [1] = "a", [3] = "c" }) == '{"1":"a","3":"c"}', "sparse tables are objects")
check(J.encode({ J.null, true, false }) == "[null,true,false]", "null and booleans")
check(J.encode({ x = { y = { z = 1 } } }, { indent = true }) == '{\n  "x": {\n    "y": {\n      "z": 1\n    }\n  }\n}',
  "indentation")
check(J.encode({ a = { 1, 2 }, b = { { 1 }, { 2 } } }, { indent = 1 }) == '{\n "a": [1, 2],\n "b": [\n  [1],\n  [2]\n ]\n}',
  "flat arrays on one line")

-- tensors as nested arrays (float32 values, shortest form that reads back as the same float)
local t = icl.tensor.from({ { 1, 0.1 }, { -2.5, 3 } })
check(J.encode(t) == "[[1.0,0.1],[-2.5,3.0]]", "tensor")
check(J.encode({ t = icl.tensor.from({ 1, 2 }) }) == '{"t":[1.0,2.0]}', "tensor inside a table")

-- determinism: same content, different insertion order, same text
local a, b = {}, {}
for i = 1, 50 do a["k" .. i] = i end
for i = 50, 1, -1 do b["k" .. i] = i end
check(J.encode(a, { indent = true }) == J.encode(b, { indent = true }), "key order independent of insertion")

-- decoding
local v = J.decode('{"a": [1, 2.5, "s", true, null, {}], "b": {"c": -3e2}}')
check(v.a[1] == 1 and math.type(v.a[1]) == "integer" and v.a[2] == 2.5 and v.a[3] == "s" and v.a[4] == true,
  "decode values")
check(v.a[5] == J.null and #v.a == 6 and v.b.c == -300, "decode null keeps positions")
check(J.encode(v.a[6]) == "{}", "decoded {} stays an object")
local bad, msg = J.decode('{"a": [1, 2}')
check(bad == nil and msg:find("invalid JSON near byte", 1, true), "decode error: nil, message")

-- round trip of awkward doubles
local xs = { 0.1, 1 / 3, 2 / 3, 1e-310, 123456789.123456789, -1.7976931348623157e308, math.pi }
local back = J.decode(J.encode(xs))
local exact = true
for i = 1, #xs do exact = exact and back[i] == xs[i] end
check(exact, "floats round-trip exactly")
local nested = { name = "run", seeds = { 1, 2, 3 }, acc = { 0.25, 0.5 }, cfg = { lr = 1e-3, deep = { ok = true } } }
check(J.encode(J.decode(J.encode(nested))) == J.encode(nested), "round trip is stable")

-- files
local dir = os.tmpname()
os.remove(dir)
local path = dir .. "/sub/summary.json"
check(J.write(path, nested) == true, "write (creates directories)")
local f = io.open(path, "rb")
local text = f:read("a")
f:close()
check(text == J.encode(nested, { indent = true }) .. "\n", "file holds the indented text and a newline")
local r = J.read(path)
check(r.cfg.deep.ok == true and r.seeds[3] == 3 and r.acc[1] == 0.25, "read back")
check(J.write(path, { 1 }, { indent = false }) and io.open(path):read("a") == "[1]\n", "overwrite, compact")
local none, rmsg = J.read(dir .. "/missing.json")
check(none == nil and rmsg:find("missing.json", 1, true), "read of a missing file: nil, message")
os.remove(path)
os.remove(dir .. "/sub")
os.remove(dir)

-- errors name the place
check(errs(function() J.encode({ a = { 1, print } }) end, "cannot encode a function at $.a[2]"), "function rejected")
local cyc = {}
cyc.self = cyc
check(errs(function() J.encode(cyc) end, "nested too deep"), "cycle detected")
check(errs(function() J.encode({ [true] = 1 }) end, "keys must be strings or numbers"), "boolean key")
check(errs(function() J.encode({ [1] = 1, ["1"] = 2 }) end, 'two keys read as "1"'), "colliding keys")
check(errs(function() J.encode({}, { indent = 99 }) end, "indent"), "indent range")

tl.done()
