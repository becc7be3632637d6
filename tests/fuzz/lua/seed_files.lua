-- Lua-API fuzzer seed: tensor files, json and shapes at the bounds.
local T = icl.tensor
local a = T.load(NPY)
local st = T.load_safetensors(ST)
a:save("out.npy")
T.save_safetensors("out.safetensors", {x = a, y = a:transpose(1, 2)})
local b = T.load("out.npy")
local z = T.zeros(0, 1 << 30, 8)
pcall(z.sum, z, 1)
pcall(z.transpose, z, 1, 3)
pcall(T.cat, {z, z, z}, 2)
pcall(a.reshape, a, 1 << 32, 1 << 32, 1 << 32, 6)
pcall(T.arange(4).index_select, T.arange(4), 1, setmetatable({}, {__len = function() return 1 << 61 end, __index = function() return 1 end}))
local j = icl.json.encode({name = "\xff\xfe", list = {1, 2, 0/0}, nested = {a = {b = {c = "x"}}}})
local v = icl.json.decode(j)
icl.json.write("out.json", {a = 1})
local g = icl.graph.grid(2, 2, {"a", "b", "c", "d"})
local walk = g:walk{length = 20, start = 1, seed = 1}
local e = icl.linalg.dirichlet_energy(T.from({{1, 2}, {3, 4}, {5, 6}, {7, 8}}), g)
