-- Attention-knockout edge sets built from the role positions of a templated prompt (icl.prompt.build), for
-- m:run's knockout option. An edge is information flow a -> b: the attention of position b to position a is
-- removed, i.e. the pair {q = b, k = a} (1-based, k <= q). The kinds follow Cho et al. (ICLR 2025):
--   "x->s"   each demonstration's text (the tokens after the previous label up to its forerunner) -> its s_i
--   "xq->sq" the query's text -> the query's forerunner s_q
--   "s->y"   each forerunner s_i -> its label y_i
--   "y->sq"  every demonstration label y_i -> s_q
--   "s->s"   every forerunner s_j -> every later-or-same forerunner s_i (the query's included)
-- Position 1 (BOS where the vocabulary adds one, else the first text token; the attention sink either way) is
-- never in an edge, neither in these sets nor in random ones.
local M = {}

M.KINDS = {"x->s", "xq->sq", "s->y", "y->sq", "s->s"}

-- The forerunners of a prompt, demonstrations then the query.
local function forerunners(p)
  local s = {}
  for i, d in ipairs(p.demos) do s[i] = d.s end
  s[#s + 1] = p.query.s
  return s
end

-- Edges from the text span before a forerunner: positions lo .. s - 1 (lo >= 2) -> s.
local function span_edges(edges, lo, s)
  for k = math.max(lo, 2), s - 1 do edges[#edges + 1] = {s, k} end
end

-- The label position of block d (the label slot's first token).
local function label_pos(p, d) return d[p.label or "y"][1] end

local BUILD = {
  ["x->s"] = function(p, e)
    local lo = 2
    for _, d in ipairs(p.demos) do
      span_edges(e, lo, d.s)
      lo = label_pos(p, d) + 1
    end
  end,
  ["xq->sq"] = function(p, e)
    local n = #p.demos
    span_edges(e, n > 0 and label_pos(p, p.demos[n]) + 1 or 2, p.query.s)
  end,
  ["s->y"] = function(p, e)
    for _, d in ipairs(p.demos) do e[#e + 1] = {label_pos(p, d), d.s} end
  end,
  ["y->sq"] = function(p, e)
    for _, d in ipairs(p.demos) do e[#e + 1] = {p.query.s, label_pos(p, d)} end
  end,
  ["s->s"] = function(p, e)
    local s = forerunners(p)
    for i = 1, #s do for j = 1, i do e[#e + 1] = {s[i], s[j]} end end
  end,
}

-- knockout.edges(p, kind [, label_slot]): the list of {q, k} pairs of one kind for prompt p (from icl.prompt.build).
function M.edges(p, kind, label_slot)
  local f = BUILD[kind]
  if not f then error(("knockout.edges: unknown kind '%s' (use %s)"):format(tostring(kind),
                      table.concat(M.KINDS, ", ")), 2) end
  if type(p) ~= "table" or not p.demos or not p.query then error("knockout.edges: p must come from prompt.build", 2) end
  local e = {}
  f({demos = p.demos, query = p.query, label = label_slot}, e)
  return e
end

-- knockout.random_edges(n, count, rng [, avoid]): count distinct causal pairs {q, k}, 2 <= k <= q <= n, drawn
-- uniformly with rng (icl.rng); pairs in avoid (a list of {q, k}) are not drawn.
function M.random_edges(n, count, rng, avoid)
  local total = (n - 1) * n // 2
  local taken = {}
  local free = total
  for _, e in ipairs(avoid or {}) do
    local key = e[1] * (n + 1) + e[2]
    if e[2] >= 2 and e[2] <= e[1] and e[1] <= n and not taken[key] then free = free - 1 end
    taken[key] = true
  end
  if count > free then error(("knockout.random_edges: %d edges asked, %d free"):format(count, free), 2) end
  local out = {}
  while #out < count do
    local q = rng:int(2, n)
    local k = rng:int(2, n)
    if k <= q and not taken[q * (n + 1) + k] then
      taken[q * (n + 1) + k] = true
      out[#out + 1] = {q, k}
    end
  end
  return out
end

-- knockout.spec(edges, layers [, heads]): m:run's knockout list, the same edges in every layer of layers.
function M.spec(edges, layers, heads)
  local out = {}
  for i, l in ipairs(layers) do out[i] = {layer = l, edges = edges, heads = heads} end
  return out
end

-- knockout.ranges(n_layers, parts = 4): contiguous 0-based layer ranges {first, last, layers = {...}} that split
-- the depth into parts as evenly as possible (boundaries at floor(i * n_layers / parts)).
function M.ranges(n_layers, parts)
  parts = parts or 4
  if parts < 1 or parts > n_layers then error("knockout.ranges: parts must be in [1, n_layers]", 2) end
  local out = {}
  for i = 1, parts do
    local a, b = (i - 1) * n_layers // parts, i * n_layers // parts - 1
    local ls = {}
    for l = a, b do ls[#ls + 1] = l end
    out[i] = {first = a, last = b, layers = ls}
  end
  return out
end

return M
