-- Templated few-shot prompts with the token positions of their roles, and the read-out of a few label tokens.
--   local prompt = require "icl.prompt"
--   local tpl = prompt.template("sentence: {x} sentiment: {y}\n")          -- the last slot is the label
--   local p = assert(prompt.build(m, tpl, {{x = "great fun", y = "positive"}, ...}, {x = "dull"}))
--   p.tokens, p.demos[i].x = {first, last}, p.demos[i].s (forerunner), p.demos[i].y, p.query.s, ...
--   local scores = prompt.label_logits(r.logits, {id_neg, id_pos})      -- [rows, 2]
-- Positions are 1-based token positions in p.tokens (BOS included when the vocabulary adds one), as m:run's pos
-- and knockout edges expect.
-- Pieces are tokenized one by one and their concatenation must equal the tokenization of the whole text: a
-- prompt where a boundary merges (a BPE merge across a slot, an added prefix space) fails with nil, message.
local M = {}

-- Splits a template into literal pieces and {name} slots. Whitespace just before a slot moves into the slot's
-- text (" {x}" -> the slot's text is " " .. value), so a BPE word keeps its leading space.
function M.template(text, opts)
  if type(text) ~= "string" then error("prompt.template: text must be a string", 2) end
  opts = opts or {}
  local pieces, pos = {}, 1
  while true do
    local a, b, name = text:find("{([%a_][%w_]*)}", pos)
    local lit = text:sub(pos, (a or #text + 1) - 1)
    local pre = ""
    if a then lit, pre = lit:match("^(.-)(%s*)$") end
    if #lit > 0 then pieces[#pieces + 1] = {lit = lit} end
    if not a then break end
    pieces[#pieces + 1] = {slot = name, pre = pre}
    pos = b + 1
  end
  local label
  for i, p in ipairs(pieces) do if p.slot then label = i end end
  if not label then error("prompt.template: the template has no {slot}", 2) end
  if label == 1 or not pieces[label - 1].lit then
    error("prompt.template: the label slot {" .. pieces[label].slot .. "} needs literal text before it " ..
          "(its last token is the forerunner)", 2)
  end
  return {text = text, pieces = pieces, label = pieces[label].slot, label_index = label, single = opts.single}
end

local function tokenizer(tok)
  if type(tok) == "function" then return tok end
  return function(s) return tok:tokenize(s, {bos = false}) end
end

-- Appends ids to out; returns the first and last positions they took.
local function append(out, ids)
  local first = #out + 1
  for _, id in ipairs(ids) do out[#out + 1] = id end
  return first, #out
end

-- One block (a demonstration, or the query when stop is the label piece): tokens appended, positions recorded.
local function add_block(st, tpl, values, stop, what)
  local block = {start = #st.tokens + 1}
  for i = 1, stop do
    local p = tpl.pieces[i]
    local text
    if p.lit then
      text = p.lit
    else
      local v = values[p.slot]
      if type(v) ~= "string" then error(("prompt.build: %s has no string for {%s}"):format(what, p.slot), 3) end
      text = p.pre .. v
    end
    local ids = st.cache[text] or st.tok(text)
    if p.lit then st.cache[text] = ids end
    if #ids == 0 then return nil, ("%s: piece %q gives no token"):format(what, text) end
    local a, b = append(st.tokens, ids)
    st.text[#st.text + 1] = text
    if p.slot then
      block[p.slot] = {a, b}
      if (p.slot == tpl.label or (tpl.single and tpl.single[p.slot])) and a ~= b then
        return nil, ("%s: {%s} = %q must be one token, it is %d"):format(what, p.slot, text, b - a + 1)
      end
    end
    if i == tpl.label_index - 1 then block.s = b end
  end
  block.stop = #st.tokens
  return block
end

-- The first position where a and b differ, or nil.
local function first_diff(a, b)
  for i = 1, math.max(#a, #b) do if a[i] ~= b[i] then return i end end
end

-- The BOS id a model's vocabulary prepends by itself (tokenizer.ggml.add_bos_token), or nil: SmolLM2's says no,
-- and an <|im_start|> forced in front of a plain prompt is not what the model (or HF's tokenizer) sees.
local function vocab_bos(m)
  if m.bos < 0 then return nil end
  local ids = m:tokenize("a")
  return ids[1] == m.bos and m.bos or nil
end

-- prompt.build(tok, tpl, demos, query [, {bos = id|true|false}]): tok is a model (m:tokenize) or a function
-- text -> ids. BOS: by default as the model's vocabulary says (none for a function); true forces the model's.
-- demos: list of tables with a string per slot; query: the same without the label. Returns
-- {tokens, text, demos = {{start, stop, s, <slot> = {first, last}}...}, query = {start, stop, s, ...}, n}.
function M.build(tok, tpl, demos, query, opts)
  if type(tpl) ~= "table" or not tpl.pieces then error("prompt.build: tpl must come from prompt.template", 2) end
  if type(demos) ~= "table" or type(query) ~= "table" then error("prompt.build: demos and query must be tables", 2) end
  opts = opts or {}
  local st = {tok = tokenizer(tok), tokens = {}, text = {}, cache = opts.cache or {}}
  local bos = opts.bos
  if bos == nil and type(tok) ~= "function" then bos = vocab_bos(tok) end
  if bos == true then bos = type(tok) ~= "function" and tok.bos >= 0 and tok.bos or nil end
  if bos == false then bos = nil end
  local offset = 0
  if bos then st.tokens[1] = bos; offset = 1 end
  local out = {demos = {}}
  for i, d in ipairs(demos) do
    local b, err = add_block(st, tpl, d, #tpl.pieces, "demonstration " .. i)
    if not b then return nil, err end
    out.demos[i] = b
  end
  local q, err = add_block(st, tpl, query, tpl.label_index - 1, "query")
  if not q then return nil, err end
  out.query = q
  out.text = table.concat(st.text)
  local whole = st.tok(out.text)
  local piecewise = table.move(st.tokens, offset + 1, #st.tokens, 1, {})
  local at = first_diff(whole, piecewise)
  if at then
    return nil, ("prompt.build: piecewise tokens differ from the whole text's at token %d (%s vs %s) in %q"):format(
      at + offset, tostring(piecewise[at]), tostring(whole[at]), out.text)
  end
  out.tokens, out.n = st.tokens, #st.tokens
  return out
end

-- The label ids of a list of label strings (each one token, with the template's whitespace before the slot).
function M.label_ids(tok, tpl, labels)
  local t, pre = tokenizer(tok), tpl.pieces[tpl.label_index].pre
  local ids = {}
  for i, l in ipairs(labels) do
    local r = t(pre .. l)
    if #r ~= 1 then error(("prompt.label_ids: label %q is %d tokens, not one"):format(pre .. l, #r), 2) end
    ids[i] = r[1]
  end
  return ids
end

-- Logits of these token ids only: logits [rows, vocab] (or [vocab]) -> [rows, #ids] (or [#ids]).
function M.label_logits(logits, ids)
  if not icl.tensor.is(logits) then error("prompt.label_logits: logits must be a tensor", 2) end
  local idx = {}
  local nv = logits:shape()[logits.ndim]
  for i, id in ipairs(ids) do
    if math.type(id) ~= "integer" or id < 0 or id >= nv then
      error(("prompt.label_logits: ids[%d] = %s is not a token id in [0, %d)"):format(i, tostring(id), nv), 2)
    end
    idx[i] = id + 1
  end
  return logits:index_select(logits.ndim, idx)
end

-- The 1-based index into ids of the largest logit in the last row, and the label logits of that row (a list).
function M.predict(logits, ids)
  local s = M.label_logits(logits, ids)
  if s.ndim == 2 then s = s[#s] end
  local v = s:totable()
  local best = 1
  for i = 2, #v do if v[i] > v[best] then best = i end end
  return best, v
end

return M
