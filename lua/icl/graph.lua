-- icl.graph: graphs whose nodes are words, random walks on them, and their text and token ids.
--
-- Node ids are 1-based. Edges are undirected, stored once as {i, j} with i < j, sorted. Constructors also set
-- g.coords, a list of {x, y} per node with the lattice's own geometry (for plotting the ground truth).
local graph = {}

local Graph = {}
Graph.__index = Graph

-- The icl.rng generator for a seed, or the one passed as opts.rng.
local function make_rng(opts, fname)
  if opts.rng ~= nil then return opts.rng end
  if opts.seed ~= nil and math.type(opts.seed) ~= "integer" then
    error(fname .. ": seed must be an integer", 3)
  end
  return icl.rng.new(opts.seed or 0)
end

-- A Lua table holds at most 2^31 - 1 list entries (ICL_LUA_SEQ_MAX in lua/l_seq.h, the bound of the C entry
-- points): a longer length is a __len that lies, refused before any loop runs over it.
local SEQ_MAX = 0x7fffffff

-- The length of list t, read once (__len honoured) and bounded; an error names the list.
local function seq_len(t, what, fname, level)
  local n = #t
  if math.type(n) ~= "integer" or n < 0 or n > SEQ_MAX then
    error(string.format("%s: %s: length %s out of range 0..%d", fname, what, tostring(n), SEQ_MAX), level + 1)
  end
  return n
end

local function default_words(n)
  local w = {}
  for i = 1, n do w[i] = "n" .. i end
  return w
end

local function check_words(words, n, fname)
  if words == nil then return default_words(n) end
  if type(words) ~= "table" then error(fname .. ": words must be a list of strings", 3) end
  local len = seq_len(words, "words", fname, 3)
  if len ~= n then
    error(string.format("%s: %d words for %d nodes", fname, len, n), 3)
  end
  local seen = {}
  for i = 1, n do
    local w = words[i]
    if type(w) ~= "string" or w == "" then error(string.format("%s: words[%d] must be a non-empty string", fname, i), 3) end
    if seen[w] then error(string.format("%s: word %q appears twice (nodes %d and %d)", fname, w, seen[w], i), 3) end
    seen[w] = i
  end
  local copy = {}
  for i = 1, n do copy[i] = words[i] end
  return copy
end

-- Builds a graph from words and edge pairs (duplicates and both directions merged, self-loops rejected).
local function build(words, edges, fname)
  local n = #words
  local adj, seen, list = {}, {}, {}
  for i = 1, n do adj[i] = {} end
  for k = 1, seq_len(edges, "edges", fname, 3) do
    local e = edges[k]
    if type(e) ~= "table" then error(string.format("%s: edge %d must be {i, j}", fname, k), 3) end
    local i, j = e[1], e[2]
    if math.type(i) ~= "integer" or math.type(j) ~= "integer" or i < 1 or j < 1 or i > n or j > n then
      error(string.format("%s: edge %d must be {i, j} with node ids in 1..%d", fname, k, n), 3)
    end
    if i == j then error(string.format("%s: edge %d is a self-loop on node %d", fname, k, i), 3) end
    if i > j then i, j = j, i end
    local key = i * (n + 1) + j
    if not seen[key] then
      seen[key] = true
      list[#list + 1] = { i, j }
      adj[i][#adj[i] + 1] = j
      adj[j][#adj[j] + 1] = i
    end
  end
  table.sort(list, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  for i = 1, n do table.sort(adj[i]) end
  return setmetatable({ words = words, n = n, edges = list, _adj = adj }, Graph)
end

local function check_dims(rows, cols, fname)
  if math.type(rows) ~= "integer" or math.type(cols) ~= "integer" or rows < 1 or cols < 1 then
    error(fname .. ": rows and cols must be positive integers", 3)
  end
end

--- Constructors ---------------------------------------------------------------------------------------------

-- grid(rows, cols, words): node k (1-based) sits at row (k-1) // cols, column (k-1) % cols; edges join
-- horizontal and vertical neighbours. coords: x = column, y = row.
function graph.grid(rows, cols, words)
  check_dims(rows, cols, "graph.grid")
  words = check_words(words, rows * cols, "graph.grid")
  local edges, coords = {}, {}
  for r = 0, rows - 1 do
    for c = 0, cols - 1 do
      local k = r * cols + c + 1
      coords[k] = { c, r }
      if c + 1 < cols then edges[#edges + 1] = { k, k + 1 } end
      if r + 1 < rows then edges[#edges + 1] = { k, k + cols } end
    end
  end
  local g = build(words, edges, "graph.grid")
  g.coords, g.kind, g.rows, g.cols = coords, "grid", rows, cols
  return g
end

-- ring(n, words): a cycle 1 - 2 - ... - n - 1 (n >= 3). coords on the unit circle, node 1 at angle 0.
function graph.ring(n, words)
  if math.type(n) ~= "integer" or n < 3 then error("graph.ring: n must be an integer >= 3", 2) end
  words = check_words(words, n, "graph.ring")
  local edges, coords = {}, {}
  for k = 1, n do
    edges[k] = { k, k % n + 1 }
    local a = 2 * math.pi * (k - 1) / n
    coords[k] = { math.cos(a), math.sin(a) }
  end
  local g = build(words, edges, "graph.ring")
  g.coords, g.kind = coords, "ring"
  return g
end

-- hex(rows, cols, words): a honeycomb lattice (the vertices and edges of a tiling by hexagons; degree <= 3) in
-- the "brick wall" layout. Node k (1-based) sits at row r = (k-1) // cols, column c = (k-1) % cols; it joins
-- (r, c +- 1) in its row, and (r + 1, c) above it when r + c is even. coords: x = c * sqrt(3)/2,
-- y = 1.5 r + 0.25 (r + c even) or - 0.25 (odd), so that every edge has length 1.
function graph.hex(rows, cols, words)
  check_dims(rows, cols, "graph.hex")
  words = check_words(words, rows * cols, "graph.hex")
  local edges, coords = {}, {}
  for r = 0, rows - 1 do
    for c = 0, cols - 1 do
      local k = r * cols + c + 1
      local even = (r + c) % 2 == 0
      coords[k] = { c * math.sqrt(3) / 2, 1.5 * r + (even and 0.25 or -0.25) }
      if c + 1 < cols then edges[#edges + 1] = { k, k + 1 } end
      if even and r + 1 < rows then edges[#edges + 1] = { k, k + cols } end
    end
  end
  local g = build(words, edges, "graph.hex")
  g.coords, g.kind, g.rows, g.cols = coords, "hex", rows, cols
  return g
end

-- hex_lattice(m, n, words): networkx's hexagonal_lattice_graph(m, n) (m rows and n columns of hexagons; 30 nodes
-- for 3 x 3), nodes in networkx's order. Its node (i, j), column i in 0..n and row j in 0..2m+1, joins (i, j+1)
-- and, when i and j have the same parity, (i+1, j); the two corners (0, 2m+1) and (n, (2m+1)(n mod 2)) are
-- removed. Node k (1-based) is the k-th (i, j) in lexicographic order among those left. coords: the hexagon
-- centres' layout, x = i + i//2 + 1/2 + (j mod 2)((i mod 2) - 1/2), y = j sqrt(3)/2.
function graph.hex_lattice(m, n, words)
  check_dims(m, n, "graph.hex_lattice")
  local rows, removed = 2 * m + 2, {[0 .. "," .. (2 * m + 1)] = true, [n .. "," .. (2 * m + 1) * (n % 2)] = true}
  local id, coords, count = {}, {}, 0
  for i = 0, n do
    for j = 0, rows - 1 do
      if not removed[i .. "," .. j] then
        count = count + 1
        id[i * rows + j] = count
        coords[count] = {i + i // 2 + 0.5 + (j % 2) * ((i % 2) - 0.5), j * math.sqrt(3) / 2}
      end
    end
  end
  words = check_words(words, count, "graph.hex_lattice")
  local edges = {}
  local function join(a, b) if a and b then edges[#edges + 1] = {a, b} end end
  for i = 0, n do
    for j = 0, rows - 1 do
      local k = id[i * rows + j]
      if j + 1 < rows then join(k, id[i * rows + j + 1]) end
      if i < n and i % 2 == j % 2 then join(k, id[(i + 1) * rows + j]) end
    end
  end
  local g = build(words, edges, "graph.hex_lattice")
  g.coords, g.kind = coords, "hex_lattice"
  return g
end

-- from_edges(words, edges): any graph; edges is a list of {i, j} (1-based node ids).
function graph.from_edges(words, edges)
  if type(words) ~= "table" then error("graph.from_edges: words must be a list of strings", 2) end
  if type(edges) ~= "table" then error("graph.from_edges: edges must be a list of {i, j}", 2) end
  words = check_words(words, seq_len(words, "words", "graph.from_edges", 2), "graph.from_edges")
  local g = build(words, edges, "graph.from_edges")
  g.kind = "custom"
  return g
end

--- Structure ------------------------------------------------------------------------------------------------

local function check_node(g, i, fname, level)
  if math.type(i) ~= "integer" or i < 1 or i > g.n then
    error(string.format("%s: node must be an integer in 1..%d, got %s", fname, g.n, tostring(i)), level or 3)
  end
end

-- g:neighbors(i): the neighbours of node i, ascending (a new list).
function Graph:neighbors(i)
  check_node(self, i, "graph:neighbors")
  local out = {}
  for k, j in ipairs(self._adj[i]) do out[k] = j end
  return out
end

-- g:degree(i): the number of neighbours of node i.
function Graph:degree(i)
  check_node(self, i, "graph:degree")
  return #self._adj[i]
end

-- g:adjacency(): a symmetric 0/1 tensor [n, n].
function Graph:adjacency()
  local flat = {}
  for k = 1, self.n * self.n do flat[k] = 0 end
  for _, e in ipairs(self.edges) do
    flat[(e[1] - 1) * self.n + e[2]] = 1
    flat[(e[2] - 1) * self.n + e[1]] = 1
  end
  return icl.tensor.new({ self.n, self.n }, flat)
end

-- g:has_edge(i, j): whether i and j are neighbours.
function Graph:has_edge(i, j)
  check_node(self, i, "graph:has_edge")
  check_node(self, j, "graph:has_edge")
  for _, k in ipairs(self._adj[i]) do
    if k == j then return true end
  end
  return false
end

-- g:colours(): for a bipartite graph, colour[i] = 0 or 1 with neighbours always of opposite colours (each
-- component searched from its lowest node, which gets 0), so every step of a walk changes colour; nil and a message
-- naming an edge whose ends share a colour when the graph is not bipartite (an odd ring, the hexagonal lattice).
function Graph:colours()
  local colour, adj = {}, self._adj
  for s = 1, self.n do
    if colour[s] == nil then
      colour[s] = 0
      local queue, qi = { s }, 1
      while queue[qi] do
        local v = queue[qi]
        qi = qi + 1
        for _, u in ipairs(adj[v]) do
          if colour[u] == nil then colour[u], queue[#queue + 1] = 1 - colour[v], u
          elseif colour[u] == colour[v] then
            return nil, string.format("graph:colours: not bipartite (edge %d-%d joins one colour)", v, u)
          end
        end
      end
    end
  end
  return colour
end

--- Walks and pairs ------------------------------------------------------------------------------------------

-- g:walk{length = L, start = node, seed = s (or rng = generator)}: L node ids; the first is start (random when
-- not given); each next node is a uniformly chosen neighbour of the current one.
function Graph:walk(opts)
  opts = opts or {}
  local length = opts.length
  if math.type(length) ~= "integer" or length < 1 or length > SEQ_MAX then
    error("graph:walk: length must be a positive integer (at most 2^31-1)", 2)
  end
  local rng = make_rng(opts, "graph:walk")
  local cur = opts.start
  if cur == nil then cur = rng:int(1, self.n) else check_node(self, cur, "graph:walk (start)") end
  local walk, adj = { cur }, self._adj
  for t = 2, length do
    local nb = adj[cur]
    if #nb == 0 then error(string.format("graph:walk: node %d (%s) has no neighbours", cur, self.words[cur]), 2) end
    cur = nb[rng:int(1, #nb)]
    walk[t] = cur
  end
  return walk
end

-- g:pairs{count = n, seed = s (or rng =)}: n random neighbour pairs {i, j}, each a uniformly chosen edge in a
-- uniformly chosen direction.
function Graph:pairs(opts)
  opts = opts or {}
  local count = opts.count
  if math.type(count) ~= "integer" or count < 0 or count > SEQ_MAX then
    error("graph:pairs: count must be a non-negative integer (at most 2^31-1)", 2)
  end
  if #self.edges == 0 then error("graph:pairs: the graph has no edges", 2) end
  local rng = make_rng(opts, "graph:pairs")
  local out = {}
  for k = 1, count do
    local e = self.edges[rng:int(1, #self.edges)]
    if rng:int(0, 1) == 0 then out[k] = { e[1], e[2] } else out[k] = { e[2], e[1] } end
  end
  return out
end

--- Text and tokens ------------------------------------------------------------------------------------------

-- g:text(walk): the words of the walk, each with a leading space, concatenated (" apple bird ...").
-- walk may also be a list of {i, j} pairs (from g:pairs), which are flattened.
function Graph:text(walk)
  if type(walk) ~= "table" then error("graph:text: walk must be a list of node ids", 2) end
  local parts = {}
  for t = 1, seq_len(walk, "walk", "graph:text", 2) do
    local v = walk[t]
    if type(v) == "table" then
      for k = 1, seq_len(v, string.format("walk[%d]", t), "graph:text", 2) do
        local u = v[k]
        check_node(self, u, "graph:text")
        parts[#parts + 1] = " " .. self.words[u]
      end
    else
      check_node(self, v, string.format("graph:text (walk[%d])", t))
      parts[#parts + 1] = " " .. self.words[v]
    end
  end
  return table.concat(parts)
end

-- The token ids of model:tokenize(text, {bos = false}) as a Lua list.
local function tokenize(model, text)
  local ids = model:tokenize(text, { bos = false })
  if type(ids) ~= "table" then ids = ids:totable() end
  return ids
end

-- g:token_ids(model): node -> token id of " word" (a list of n ids). Raises an error naming the word when
-- " word" is not exactly one token, or when two words share a token.
function Graph:token_ids(model)
  local ids, owner = {}, {}
  for i, w in ipairs(self.words) do
    local t = tokenize(model, " " .. w)
    if #t ~= 1 then
      error(string.format("graph: word %q (node %d) is %d tokens with a leading space, not 1", w, i, #t), 2)
    end
    local id = math.tointeger(t[1])
    if owner[id] then
      error(string.format("graph: words %q and %q are the same token %d", self.words[owner[id]], w, id), 2)
    end
    ids[i], owner[id] = id, i
  end
  return ids
end

-- g:tokens(model, walk, {bos = true, check = false}): the token ids the model sees for the walk: the model's BOS
-- token first (unless bos = false; an error when the model has none), then one token per word (g:token_ids).
-- check = true also tokenizes g:text(walk) and raises unless it gives the same ids.
function Graph:tokens(model, walk, opts)
  opts = opts or {}
  if type(walk) ~= "table" then error("graph:tokens: walk must be a list of node ids", 2) end
  local ids = self:token_ids(model)
  local out = {}
  if opts.bos ~= false then
    if model.bos < 0 then error("graph:tokens: the model has no BOS token (pass bos = false)", 2) end
    out[1] = model.bos
  end
  local n = seq_len(walk, "walk", "graph:tokens", 2)
  for t = 1, n do
    local node = walk[t]
    check_node(self, node, string.format("graph:tokens (walk[%d])", t))
    out[#out + 1] = ids[node]
  end
  if opts.check then
    local via, off = tokenize(model, self:text(walk)), #out - n
    for i = 1, math.max(#via, n) do
      if via[i] ~= out[i + off] then
        error(string.format("graph:tokens: the walk's text tokenizes differently at word %d", i), 2)
      end
    end
  end
  return out
end

-- g:check_tokens(model): true, or an error naming the first word whose " word" is not exactly one token.
function Graph:check_tokens(model)
  self:token_ids(model)
  return true
end

-- g:node_of_token(ids): the inverse map token id -> node id, from a g:token_ids list.
function Graph:node_of_token(ids)
  local inv = {}
  for i = 1, seq_len(ids, "ids", "graph:node_of_token", 2) do
    if ids[i] ~= nil then inv[ids[i]] = i end
  end
  return inv
end

function Graph:__tostring()
  return string.format("icl.graph (%s, %d nodes, %d edges)", self.kind or "custom", self.n, #self.edges)
end

graph.Graph = Graph
return graph
