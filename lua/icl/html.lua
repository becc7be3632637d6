-- icl.html: self-contained interactive views, each call writing one .html file that opens offline (inline CSS and
-- JavaScript embedded from lua/icl/assets/, the data in a <script type="application/json"> block, no network, no
-- fetch(), works from file://). Output is deterministic: the same input gives the same bytes.
--   icl.html.attention{out =, tokens =, patterns = {[name] = tensor [head, q, k] or [q, k]}, title =, window =,
--                      head_ids = {[name] = {the head numbers of the pattern's heads}} (default 0, 1, ...)}
--   icl.html.heads{out =, scores = tensor [layer, head] or {[score name] = tensor}, title =}
--   icl.html.tokens{out =, tokens =, values = tensor [pos] or [pos, k], names = {column names}, title =}
-- Attention patterns travel as 8-bit codes of their causal triangles (values in [lo, hi], default [0, 1]; NaN kept
-- as NaN), base64: about 4/3 * heads * T (T + 1) / 2 bytes for a T-token view (1,400 tokens, 4 heads: 5.2 MB).
local html = {}
local codec = icl.htmlcodec

local function fail(fname, msg) error("icl.html." .. fname .. ": " .. msg, 3) end

local function check_keys(spec, allowed, fname)
  if type(spec) ~= "table" then fail(fname, "expected a table of options") end
  for k in pairs(spec) do
    if not allowed[k] then fail(fname, ("unknown option '%s'"):format(tostring(k))) end
  end
  if type(spec.out) ~= "string" or not spec.out:match("%.html?$") then
    fail(fname, "out: expected the path of an .html file")
  end
end

local function check_tokens(tokens, fname)
  if type(tokens) ~= "table" then fail(fname, "tokens: expected a list of strings") end
  local n = #tokens
  for i = 1, n do
    if type(tokens[i]) ~= "string" then
      fail(fname, ("tokens[%d]: expected a string, got %s"):format(i, type(tokens[i])))
    end
  end
  if n == 0 then fail(fname, "tokens: empty") end
  return n
end

-- A tensor as a flat JSON array (icl.json writes NaN and infinities as null, which the page shows as "NaN").
local function flat(t) return t:reshape(-1) end

local function is_tensor(v) return icl.tensor.is(v) end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
  return ks
end

-- The page: stylesheet, data block ("</" escaped so no string can close the script), view root, script.
local function page(title, data)
  local json = icl.json.encode(data):gsub("</", "<\\/")
  return table.concat({
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
    (title:gsub("&", "&amp;"):gsub("<", "&lt;")), "</title>\n<style>\n", codec.asset("views.css"),
    "</style>\n</head>\n<body>\n<div id=\"icl-view\"></div>\n<script type=\"application/json\" id=\"icl-data\">",
    json, "</script>\n<script>\n", codec.asset("views.js"), "</script>\n</body>\n</html>\n"})
end

local function write(path, text, fname)
  local ok, err = codec.write(path, text)
  if not ok then fail(fname, err) end
  return path
end

local ATTN_KEYS = {out = true, tokens = true, patterns = true, title = true, window = true, lo = true, hi = true,
                   head_ids = true}

function html.attention(spec)
  check_keys(spec, ATTN_KEYS, "attention")
  local n = check_tokens(spec.tokens, "attention")
  if type(spec.patterns) ~= "table" or next(spec.patterns) == nil then
    fail("attention", "patterns: expected {[name] = tensor [head, q, k]}")
  end
  local lo, hi = spec.lo or 0, spec.hi or 1
  if type(lo) ~= "number" or type(hi) ~= "number" or not (lo < hi) or hi - lo == math.huge then
    fail("attention", "lo, hi: expected finite numbers with lo < hi")
  end
  local window = spec.window or 160
  if math.type(window) ~= "integer" or window < 8 or window > 4096 then
    fail("attention", "window: expected an integer in 8..4096 (positions shown at once in the zoomed view)")
  end
  local names, labels, heads, data, ids = sorted_keys(spec.patterns), {}, {}, {}, {}
  local head_ids = spec.head_ids or {}
  if type(head_ids) ~= "table" then fail("attention", "head_ids: expected {[name] = {head number, ...}}") end
  for i, name in ipairs(names) do
    local p = spec.patterns[name]
    if type(name) ~= "string" then fail("attention", "patterns: names must be strings") end
    if not (is_tensor(p)) then fail("attention", ("patterns[%q]: expected a tensor"):format(name)) end
    local shape = p:shape()
    if #shape ~= 2 and #shape ~= 3 then
      fail("attention", ("patterns[%q]: expected [head, q, k] or [q, k], got %d dimensions"):format(name, #shape))
    end
    local q, k = shape[#shape - 1], shape[#shape]
    if q ~= k then fail("attention", ("patterns[%q]: not square (%d query and %d key positions)"):format(name, q, k)) end
    if q ~= n then
      fail("attention", ("patterns[%q]: %d positions, but %d tokens"):format(name, q, n))
    end
    heads[i] = #shape == 3 and shape[1] or 1
    local hid = head_ids[name] or {}
    if type(hid) ~= "table" or (head_ids[name] and #hid ~= heads[i]) then
      fail("attention", ("head_ids[%q]: expected %d head numbers (one per head of the pattern)"):format(name, heads[i]))
    end
    ids[i] = {}
    for h = 1, heads[i] do
      local v = hid[h] or (h - 1)
      if math.type(v) ~= "integer" then fail("attention", ("head_ids[%q][%d]: expected an integer"):format(name, h)) end
      ids[i][h] = v
    end
    data[name] = codec.triangle(p, lo, hi)
    labels[i] = name:match("^blocks%.(%d+)%.") and ("L" .. name:match("^blocks%.(%d+)%.")) or name
  end
  return write(spec.out, page(spec.title or "attention", {
    view = "attention", title = spec.title or "attention", tokens = spec.tokens, n = n, names = names,
    labels = labels, heads = heads, head_ids = ids, data = data, lo = lo, hi = hi, window = math.min(window, n)}),
    "attention")
end

local HEADS_KEYS = {out = true, scores = true, title = true}

function html.heads(spec)
  check_keys(spec, HEADS_KEYS, "heads")
  local scores = spec.scores
  if is_tensor(scores) then scores = {score = scores} end
  if type(scores) ~= "table" or next(scores) == nil then
    fail("heads", "scores: expected a tensor [layer, head] or {[score name] = tensor [layer, head]}")
  end
  local names, values, L, H = sorted_keys(scores), {}, nil, nil
  for i, name in ipairs(names) do
    local t = scores[name]
    if not (is_tensor(t)) then fail("heads", ("scores[%q]: expected a tensor"):format(name)) end
    local shape = t:shape()
    if #shape ~= 2 then fail("heads", ("scores[%q]: expected [layer, head], got %d dimensions"):format(name, #shape)) end
    if L and (shape[1] ~= L or shape[2] ~= H) then
      fail("heads", ("scores[%q]: shape [%d, %d], but the others are [%d, %d]"):format(name, shape[1], shape[2], L, H))
    end
    L, H = shape[1], shape[2]
    values[i] = flat(t)
  end
  return write(spec.out, page(spec.title or "head scores", {view = "heads", title = spec.title or "head scores",
    score_names = names, scores = values, layers = L, nheads = H}), "heads")
end

local TOKENS_KEYS = {out = true, tokens = true, values = true, names = true, title = true}

function html.tokens(spec)
  check_keys(spec, TOKENS_KEYS, "tokens")
  local n = check_tokens(spec.tokens, "tokens")
  local v = spec.values
  if not (is_tensor(v)) then fail("tokens", "values: expected a tensor [pos] or [pos, k]") end
  local shape = v:shape()
  if (#shape ~= 1 and #shape ~= 2) or shape[1] ~= n then
    fail("tokens", ("values: expected [%d] or [%d, k] (one row per token), got [%s]"):format(n, n, table.concat(shape, ", ")))
  end
  local k = #shape == 2 and shape[2] or 1
  local names = spec.names or {}
  if type(names) ~= "table" then fail("tokens", "names: expected a list of column names") end
  local columns, values = {}, {}
  for j = 1, k do
    columns[j] = names[j] ~= nil and tostring(names[j]) or (k == 1 and "value" or ("value " .. j))
    values[j] = flat(#shape == 2 and v:slice(2, j, j) or v)
  end
  return write(spec.out, page(spec.title or "token values", {view = "tokens", title = spec.title or "token values",
    tokens = spec.tokens, columns = columns, values = values}), "tokens")
end

return html
