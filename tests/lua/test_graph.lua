-- icl.graph: lattices, edges, adjacency, walks, pairs, text and token checks (with a stand-in tokenizer).
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
local same = tl.same
local words16 = { "apple", "bird", "car", "egg", "house", "milk", "plane", "opera",
                  "box", "sand", "sun", "mango", "rock", "math", "code", "phone" }

-- grid: node k at row (k-1)//cols, column (k-1)%cols
local g = icl.graph.grid(2, 3)
check(g.n == 6 and g.words[1] == "n1", "grid size, default words")
check(same(g.edges, { { 1, 2 }, { 1, 4 }, { 2, 3 }, { 2, 5 }, { 3, 6 }, { 4, 5 }, { 5, 6 } }), "grid(2, 3) edges")
check(same(g:neighbors(2), { 1, 3, 5 }) and g:degree(5) == 3 and g:degree(1) == 2, "grid neighbours, degrees")
check(g:has_edge(1, 4) and not g:has_edge(1, 5), "has_edge")
check(same(g.coords[6], { 2, 1 }), "grid coords x = column, y = row")

local g4 = icl.graph.grid(4, 4, words16)
local deg = { 0, 0, 0, 0, 0 }
for i = 1, 16 do deg[g4:degree(i)] = deg[g4:degree(i)] + 1 end
check(#g4.edges == 24 and deg[2] == 4 and deg[3] == 8 and deg[4] == 4, "grid(4, 4): 24 edges, degrees 2/3/4")
check(tostring(g4):find("16 nodes, 24 edges", 1, true) ~= nil, "tostring")
-- colours of the bipartite grid: (row + column) % 2 from node 1; neighbours differ; odd ring and hex refused
local col = g4:colours()
local col_ok = col ~= nil
for i = 1, 16 do col_ok = col_ok and col[i] == ((i - 1) // 4 + (i - 1) % 4) % 2 end
for _, e in ipairs(g4.edges) do col_ok = col_ok and col[e[1]] ~= col[e[2]] end
check(col_ok, "grid(4, 4):colours(): (row + column) % 2, every edge two colours")
local c5, why5 = icl.graph.ring(5):colours()
check(c5 == nil and tostring(why5):find("not bipartite", 1, true) ~= nil, "ring(5):colours(): not bipartite")
check(same(icl.graph.ring(4):colours(), { 0, 1, 0, 1 }), "ring(4):colours()")

-- ring
local r5 = icl.graph.ring(5)
check(#r5.edges == 5 and same(r5:neighbors(1), { 2, 5 }) and same(r5:neighbors(5), { 1, 4 }), "ring(5)")
check(math.abs(r5.coords[1][1] - 1) < 1e-12 and math.abs(r5.coords[1][2]) < 1e-12, "ring coords")

-- hex: honeycomb, brick-wall layout
local h = icl.graph.hex(2, 4)
check(same(h.edges, { { 1, 2 }, { 1, 5 }, { 2, 3 }, { 3, 4 }, { 3, 7 }, { 5, 6 }, { 6, 7 }, { 7, 8 } }), "hex(2, 4) edges")
local h4 = icl.graph.hex(4, 6)
local unit, maxdeg = true, 0
for _, e in ipairs(h4.edges) do
  local a, b = h4.coords[e[1]], h4.coords[e[2]]
  unit = unit and math.abs(math.sqrt((a[1] - b[1]) ^ 2 + (a[2] - b[2]) ^ 2) - 1) < 1e-12
end
for i = 1, h4.n do maxdeg = math.max(maxdeg, h4:degree(i)) end
check(unit and maxdeg == 3, "hex edges have unit length, degree <= 3")

-- from_edges: duplicates merged, errors
local f = icl.graph.from_edges({ "a", "b", "c" }, { { 2, 1 }, { 1, 2 }, { 2, 3 } })
check(same(f.edges, { { 1, 2 }, { 2, 3 } }), "from_edges merges duplicates")
check(errs(function() icl.graph.from_edges({ "a", "b" }, { { 1, 1 } }) end, "self-loop"), "self-loop rejected")
check(errs(function() icl.graph.from_edges({ "a", "b" }, { { 1, 3 } }) end, "edge 1"), "bad node id")
check(errs(function() icl.graph.grid(2, 2, { "a", "b" }) end, "2 words for 4 nodes"), "word count")
check(errs(function() icl.graph.grid(1, 2, { "a", "a" }) end, "appears twice"), "duplicate words")
check(errs(function() g:neighbors(7) end, "1..6"), "neighbors range")

-- adjacency
local A = g:adjacency()
local sum, sym = 0, true
for i = 1, 6 do
  for j = 1, 6 do
    sum = sum + A:get(i, j)
    sym = sym and A:get(i, j) == A:get(j, i)
  end
end
check(sum == 14 and sym and A:get(1, 2) == 1 and A:get(1, 3) == 0, "adjacency symmetric with 2 |E| ones")

-- walks: known values, validity, reproducibility
local w = g4:walk { length = 12, start = 1, seed = 7 }
check(same(w, { 1, 2, 6, 7, 3, 7, 6, 2, 3, 4, 8, 12 }), "walk seed 7 known values")
local long = g4:walk { length = 1400, start = 5, seed = 1 }
local valid = #long == 1400 and long[1] == 5
for t = 2, #long do valid = valid and g4:has_edge(long[t - 1], long[t]) end
check(valid, "every step of a walk follows an edge")
check(same(long, g4:walk { length = 1400, start = 5, seed = 1 }), "same seed, same walk")
check(not same(long, g4:walk { length = 1400, start = 5, seed = 2 }), "other seed, other walk")
check(g4:walk { length = 3, seed = 3 }[1] == 1, "random start from the seed")
local rng = icl.rng.new(7)
check(same(g4:walk { length = 12, start = 1, rng = rng }, w), "walk with an rng object")
check(errs(function() g4:walk { length = 0 } end, "length must be a positive integer"), "walk length checked")
check(errs(function() icl.graph.from_edges({ "a", "b", "c" }, { { 1, 2 } }):walk { length = 3, start = 3 } end,
  "has no neighbours"), "isolated node")

-- pairs
local ps = g4:pairs { count = 200, seed = 4 }
local ok, both = #ps == 200, { fwd = false, back = false }
for _, p in ipairs(ps) do
  ok = ok and g4:has_edge(p[1], p[2])
  if p[1] < p[2] then both.fwd = true else both.back = true end
end
check(ok and both.fwd and both.back, "pairs are edges in both directions")
check(same(ps, g4:pairs { count = 200, seed = 4 }), "pairs reproducible")

-- text
check(g4:text({ 1, 2, 6 }) == " apple bird milk", "text of a walk")
check(g4:text({ { 1, 2 }, { 3, 4 } }) == " apple bird car egg", "text of pairs")
check(errs(function() g4:text({ 1, 17 }) end, "walk[2]"), "text names the bad position")

-- tokens, with a stand-in model whose tokenizer gives one id per known word and two for others
local vocab = {}
for i, wd in ipairs(words16) do vocab[" " .. wd] = 100 + i end
local model = {
  tokenize = function(_, text, opts)
    assert(opts and opts.bos == false, "tokenize called without {bos = false}")
    if vocab[text] then return { vocab[text] } end
    return { 1, 2 }
  end,
}
local ids = g4:token_ids(model)
check(#ids == 16 and ids[1] == 101 and ids[16] == 116, "token_ids")
check(g4:check_tokens(model) == true, "check_tokens passes")
check(g4:node_of_token(ids)[105] == 5, "node_of_token")
local bad = icl.graph.ring(3, { "apple", "zebra", "car" })
check(errs(function() bad:check_tokens(model) end, '"zebra"'), "check_tokens names the word")
vocab[" car"] = 101
check(errs(function() icl.graph.ring(3, { "apple", "bird", "car" }):token_ids(model) end, "same token"),
  "two words on one token")

-- issue 44: lists whose __len lies are bounded by what a table can hold (2^31 - 1) before any loop runs
local function liar(len, value)
  return setmetatable({}, {__len = function() return len end, __index = function() return value end})
end
local two = { "a", "b" }
check(errs(function() icl.graph.from_edges(two, liar(1 << 61, { 1, 2 })) end,
  "graph.from_edges: edges: length 2305843009213693952 out of range 0..2147483647"), "from_edges: edges with a huge __len")
check(errs(function() icl.graph.from_edges(two, liar(-1, { 1, 2 })) end, "edges: length -1 out of range"),
  "from_edges: a negative __len")
check(errs(function() icl.graph.from_edges(two, liar(2.5, { 1, 2 })) end, "edges: length 2.5 out of range"),
  "from_edges: a fractional __len")
check(errs(function() icl.graph.from_edges(liar(1 << 40, "w"), {}) end, "words: length 1099511627776 out of range"),
  "from_edges: words with a huge __len")
check(errs(function() icl.graph.from_edges(two, liar(3, { 1, 2 })) end, nil) == false
  and #icl.graph.from_edges(two, liar(3, { 1, 2 })).edges == 1, "a small __len is honoured (duplicates merged)")
check(errs(function() icl.graph.from_edges(two, { { 1, 2 }, "x" }) end, "edge 2 must be {i, j}"), "a non-table edge")
local g2 = icl.graph.from_edges(two, { { 1, 2 } })
check(errs(function() g2:text(liar(1 << 62, 1)) end, "graph:text: walk: length"), "text: walk with a huge __len")
check(errs(function() g2:text({ liar(1 << 62, 1) }) end, "walk[1]: length"), "text: a pair with a huge __len")
check(errs(function() g2:walk{ length = 1 << 40, seed = 1 } end, "length must be a positive integer (at most 2^31-1)"), "walk: huge length")
check(errs(function() g2:pairs{ count = 1 << 40, seed = 1 } end, "count must be a non-negative integer (at most 2^31-1)"), "pairs: huge count")
check(errs(function() g2:node_of_token(liar(1 << 62, 5)) end, "ids: length"), "node_of_token: huge __len")

tl.done()
