-- icl.prompt: template parsing, piecewise tokenization with role positions, the boundary check, label ids and
-- the label-logit read-out; icl.knockout: edge sets from role positions, random edges, layer ranges.
local prompt, knockout = require "icl.prompt", require "icl.knockout"
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs = tl.check, tl.errs
local same = tl.same

-- a word-level tokenizer: " word", "word", single punctuation and "\n" are tokens; ids in order of first use
local vocab, names = {}, {}
local function tok(s)
  local out, i = {}, 1
  while i <= #s do
    local w = s:match("^ ?%w+", i) or s:match("^ ?[^%w%s]", i) or s:match("^%s", i)
    if not vocab[w] then names[#names + 1] = w; vocab[w] = #names + 99 end
    out[#out + 1] = vocab[w]
    i = i + #w
  end
  return out
end

local tpl = prompt.template("sentence: {x} sentiment: {y}\n")
check(#tpl.pieces == 5 and tpl.pieces[1].lit == "sentence:" and tpl.pieces[2].slot == "x" and
      tpl.pieces[2].pre == " " and tpl.pieces[3].lit == " sentiment:" and tpl.pieces[4].slot == "y" and
      tpl.pieces[5].lit == "\n" and tpl.label == "y", "template pieces, whitespace moved into the slots")
check(errs(function() prompt.template("no slot here") end, "has no {slot}"), "template without a slot")
check(errs(function() prompt.template("{y} tail") end, "needs literal text before it"), "label slot first")

-- BOS 7, then "sentence" ":" " good" " fun" " sentiment" ":" " pos" "\n" | "sentence" ":" " dull" " sentiment" ":"
local p = assert(prompt.build(tok, tpl, {{x = "good fun", y = "pos"}}, {x = "dull"}, {bos = 7}))
check(p.n == 14 and p.tokens[1] == 7 and #p.tokens == 14, "token count with BOS")
check(p.text == "sentence: good fun sentiment: pos\nsentence: dull sentiment:", "prompt text")
local d, q = p.demos[1], p.query
check(d.start == 2 and same(d.x, {4, 5}) and d.s == 7 and same(d.y, {8, 8}) and d.stop == 9, "demo roles")
check(q.start == 10 and same(q.x, {12, 12}) and q.s == 14 and q.stop == 14 and q.y == nil, "query roles")
check(p.tokens[d.s] == p.tokens[q.s] and names[p.tokens[d.s] - 99] == ":", "forerunners are the ':' tokens")
check(same(tok(p.text), table.move(p.tokens, 2, 14, 1, {})), "piecewise tokens equal the whole text's")

-- BOS of a model-like tokenizer: as its vocabulary prepends it by default (add_bos_token), true forces it
local function fake_model(adds) -- tokenize(s) prepends bos 5 unless opts.bos == false or the vocabulary says no
  return {bos = 5, tokenize = function(_, s, o)
    local ids = tok(s)
    local want = adds
    if o and o.bos ~= nil then want = o.bos end
    if want then table.insert(ids, 1, 5) end
    return ids
  end}
end
local pb = assert(prompt.build(fake_model(true), tpl, {{x = "good", y = "pos"}}, {x = "dull"}))
local pn = assert(prompt.build(fake_model(false), tpl, {{x = "good", y = "pos"}}, {x = "dull"}))
local pf = assert(prompt.build(fake_model(false), tpl, {{x = "good", y = "pos"}}, {x = "dull"}, {bos = true}))
check(pb.tokens[1] == 5 and pb.n == pn.n + 1 and pn.tokens[1] == vocab["sentence"] and pn.demos[1].s == 5 and pb.demos[1].s == 6,
      "BOS as the vocabulary says: " .. pb.n .. " tokens with, " .. pn.n .. " without")
check(pf.tokens[1] == 5 and same(pf.tokens, pb.tokens), "bos = true forces the model's BOS")
local pz = assert(prompt.build(fake_model(true), tpl, {{x = "good", y = "pos"}}, {x = "dull"}, {bos = false}))
check(same(pz.tokens, pn.tokens), "bos = false: none")

-- a label of two tokens, a slot left out, a merge across a boundary: clear failures
local r, err = prompt.build(tok, tpl, {{x = "a", y = "very good"}}, {x = "b"})
check(r == nil and err:find("{y} = \" very good\" must be one token, it is 2", 1, true), "multi-token label")
check(errs(function() prompt.build(tok, tpl, {{x = "a"}}, {x = "b"}) end, "demonstration 1 has no string for {y}"),
      "missing slot value")
local function merging(s) -- like tok, but "::" becomes one token (so ": :" across pieces differs)
  return tok((s:gsub("::", "#")))
end
r, err = prompt.build(merging, prompt.template("a: {x}:{y}\n"), {{x = "b:", y = "c"}}, {x = "d"})
check(r == nil and err:find("piecewise tokens differ", 1, true), "boundary merge detected: " .. tostring(err))

-- label ids and the read-out of a few logits
local ids = prompt.label_ids(tok, tpl, {"neg", "pos"})
check(ids[1] == vocab[" neg"] and ids[2] == vocab[" pos"], "label ids carry the slot's leading space")
check(errs(function() prompt.label_ids(tok, tpl, {"very good"}) end, "is 2 tokens"), "multi-token label id")
local logits = icl.tensor.from{{0, 1, 2, 3, 4}, {9, 8, 7, 6, 5}}
local s = prompt.label_logits(logits, {4, 0, 2})
check(s:shape()[1] == 2 and s:shape()[2] == 3 and same(s:totable()[1], {4, 0, 2}) and same(s:totable()[2], {5, 9, 7}),
      "label_logits picks the columns of the ids")
local best, v = prompt.predict(logits, {4, 0, 2})
check(best == 2 and same(v, {5, 9, 7}), "predict uses the last row")
check(prompt.predict(icl.tensor.from{1, 3, 2}, {0, 2}) == 2, "predict on a 1-d row")
check(errs(function() prompt.label_logits(logits, {5}) end, "not a token id in [0, 5)"), "id out of range")

-- knockout edges on a two-demonstration prompt:
-- 1 BOS | 2 sentence 3 : 4 good 5 sentiment 6 : 7 pos 8 \n | 9 sentence 10 : 11 bad 12 sentiment 13 : 14 neg 15 \n
-- | 16 sentence 17 : 18 dull 19 sentiment 20 :
local p2 = assert(prompt.build(tok, tpl, {{x = "good", y = "pos"}, {x = "bad", y = "neg"}}, {x = "dull"}, {bos = 1}))
check(p2.demos[1].s == 6 and p2.demos[2].s == 13 and p2.query.s == 20 and p2.demos[2].y[1] == 14, "positions")
check(same(knockout.edges(p2, "s->y"), {{7, 6}, {14, 13}}), "s->y: y_i no longer sees s_i")
check(same(knockout.edges(p2, "y->sq"), {{20, 7}, {20, 14}}), "y->sq: s_q no longer sees the labels")
check(same(knockout.edges(p2, "s->s"), {{6, 6}, {13, 6}, {13, 13}, {20, 6}, {20, 13}, {20, 20}}), "s->s")
check(same(knockout.edges(p2, "x->s"), {{6, 2}, {6, 3}, {6, 4}, {6, 5}, {13, 8}, {13, 9}, {13, 10}, {13, 11},
                                       {13, 12}}), "x->s: each demonstration's text, BOS left out")
check(same(knockout.edges(p2, "xq->sq"), {{20, 15}, {20, 16}, {20, 17}, {20, 18}, {20, 19}}), "xq->sq")
check(errs(function() knockout.edges(p2, "q->k") end, "unknown kind 'q->k'"), "unknown kind")

local e1 = knockout.random_edges(20, 30, icl.rng.new(3), knockout.edges(p2, "s->s"))
local e2 = knockout.random_edges(20, 30, icl.rng.new(3), knockout.edges(p2, "s->s"))
local seen, ok = {}, #e1 == 30 and same(e1, e2)
for _, e in ipairs(e1) do
  local key = e[1] * 100 + e[2]
  ok = ok and e[2] >= 2 and e[2] <= e[1] and e[1] <= 20 and not seen[key] and key ~= 2020 and key ~= 1306
  seen[key] = true
end
check(ok, "random edges: 30 distinct causal pairs, no BOS, none of the avoided, same for the same seed")
check(#knockout.random_edges(3, 3, icl.rng.new(1)) == 3, "every free pair of 3 positions")
check(errs(function() knockout.random_edges(3, 4, icl.rng.new(1)) end, "4 edges asked, 3 free"), "too many edges")

local spec = knockout.spec({{3, 2}}, {4, 5}, {0})
check(#spec == 2 and spec[2].layer == 5 and same(spec[2].edges, {{3, 2}}) and spec[1].heads[1] == 0, "spec")
local rg = knockout.ranges(30, 4)
check(#rg == 4 and rg[1].first == 0 and rg[1].last == 6 and rg[2].first == 7 and rg[2].last == 14 and
      rg[3].last == 21 and rg[4].first == 22 and rg[4].last == 29 and #rg[4].layers == 8, "quarters of 30 layers")
local rg18 = knockout.ranges(18, 4)
check(rg18[1].last == 3 and rg18[2].last == 8 and rg18[3].last == 12 and rg18[4].last == 17, "quarters of 18 layers")

tl.done()
