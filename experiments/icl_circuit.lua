-- The ICL inference circuit of Cho et al. (ICLR 2025) on few-shot sentence classification: accuracy with true
-- and random demonstration labels, a per-layer nearest-class-mean probe of the input's class at x (its last
-- token), forerunner-token and induction head counts per layer with the paper's thresholds, and attention
-- knockouts of the circuit's edges over quarter-depth layer ranges beside random-edge controls.
--   icl script experiments/icl_circuit.lua --help   lists the options and their defaults
--   icl script experiments/icl_circuit.lua [--model M] [--task sentiment|domain] [--n N] [--n-knockout N]
--                                          [--k K] [--seed S] [--out DIR] [--skip probe,heads]
--                                          [--edges s->y,y->sq] [--quick]
-- Prompt "sentence: {x} sentiment: {y}\n" x k demonstrations, then the query up to its forerunner ':'; the
-- prediction is the argmax of the label tokens' logits at the query's forerunner. Data: scripts/fetch-data.sh
-- (docs/data.md); the sentiment task is a substitute for SST-2 (see there).
-- Also the zero-shot accuracy (k = 0, the query alone: the paper's Table 1 baseline) and the accuracy a pure copy of
-- the last demonstration's label would get with true and with random labels (small models copy it, and in a
-- sample of ~100 prompts that agreement is far enough from 1/2 to decide which of the two scores is higher).
-- Step 2 (semantics merge), after the code's Fig. 5 (right) protocol: a nearest-class-mean classifier of the
-- sentence's class trained on the forerunner tokens s_i (true-label runs) reads the label tokens y_i of the
-- random-label runs, apart for labels that happen to be right and labels that are wrong (cross-fitted over prompt
-- folds). Step 3's read-out: each layer's residual at s_q through the final norm and the label rows of the LM head
-- (logit lens; icl.readout), and each layer's attention output's direct logit attribution there.
-- Per-prompt outcomes go to summary.json, and paired differences (true - random labels, knockout - none,
-- knockout - random-edge control) come with their standard errors over prompts. Outputs (icl.experiment):
-- summary.json, probe/heads/knockout figures, patterns.html (the top induction and forerunner heads attending over
-- the first prompt) and index.html linking them.
-- Cost: 2 runs per prompt (true and random labels) + 1 short zero-shot run + 1 + 2 x kinds x ranges runs per
-- knockout prompt; --skip probe,heads drops the captures (not the runs), --edges the knockout kinds not named.
local prompt, knockout, readout = require("icl.prompt"), require("icl.knockout"), require("icl.readout")
local plot, json = icl.plot, icl.json

local ex = icl.experiment{name = "icl_circuit",
  about = "The ICL inference circuit of Cho et al. (ICLR 2025) on few-shot sentence classification: accuracy,\n" ..
          "the input's class probe, forerunner and induction heads, attention knockouts (docs/experiments.md)",
  options = {
    {"task", "sentiment", "sentiment (movie-review snippets, negative/positive) or domain (4 sources: movie, " ..
                          "product, news, tweet)"},
    {"data", "data/hutto2014", "the Hutto-Gilbert 2014 files (scripts/fetch-data.sh sentiment)"},
    {"threshold", 1.0, "sentiment: a sentence with |mean rating| >= this is labelled (ratings are in [-4, 4])", num = {0, 4}},
    {"max_tokens", 24, "longest sentence in tokens (longer ones are passed over)", int = {1, 1 << 16}},
    {"k", 4, "demonstrations per prompt", int = {1, 1 << 12}},
    {"n", 128, "prompts; sentences are drawn without replacement over all prompts", int = {1, 1 << 24}},
    {"n_knockout", 24, "prompts of the knockout table, from --knockout-from on", int = {0, 1 << 24}},
    {"knockout_from", 1, "the first knockout prompt; shards of one table split the prompts with it, as the " ..
                         "random edges of prompt i depend on (seed, i) only", int = {1, 1 << 24}},
    {"parts", 4, "layer ranges of the knockouts (quarters of the depth by default)", int = {1, 1 << 12}},
    {"edges", "all", "knockout edge kinds, comma-separated (all: x->s,xq->sq,s->y,y->sq,s->s); a subset draws " ..
                     "the same random edges as the full set"},
    {"skip", "", "parts left out, comma-separated: probe (the residual captures: the probe at x, the merge " ..
                 "probe at y and the LM-head read-out at s_q), heads (the attention " ..
                 "patterns, head counts and the view), accuracy (with probe,heads: no runs but the knockouts', " ..
                 "e.g. for a knockout shard)"},
    {"times", 5, "C of the head thresholds C / n_t (the paper's 5)", num = {0, 1e6, open = true}},
    {"folds", 5, "cross-validation folds of the probe", int = {2, 1 << 16}},
    {"recompute", false, "compute every run from its first token (default: a run takes the keys and values of " ..
                         "the positions it shares with the previous run, unchanged by any knockout, from the " ..
                         "cache; the results are the same, bit for bit)"},
    {"threads", 0, "CPU backend threads (0: the backend's choice)", int = {0, 1024}},
  },
  quick = {n = 8, n_knockout = 1, max_tokens = 16}}
local o = ex.o
local KO_LAST = o.knockout_from + o.n_knockout - 1
ex:need(KO_LAST <= o.n, "knockout_from", ("needs --knockout-from + --n-knockout - 1 <= --n (%d + %d - 1 > %d)")
        :format(o.knockout_from, o.n_knockout, o.n))
ex:need(o.folds <= o.n * (o.k + 1), "folds", ("must be at most the probe's (k + 1) n = %d samples")
        :format(o.n * (o.k + 1)))

-- comma-separated lists of names from a fixed set
local function name_set(text, allowed, what)
  local set = {}
  for w in tostring(text):gmatch("[^,%s]+") do
    local ok = false
    for _, a in ipairs(allowed) do ok = ok or a == w end
    if not ok then
      error(("--%s %s: unknown '%s' (use %s)"):format(what, tostring(text), w, table.concat(allowed, ",")), 0)
    end
    set[w] = true
  end
  return set
end
local KINDS = {}
do
  local want = o.edges == "all" and {} or name_set(o.edges, knockout.KINDS, "edges")
  for _, kind in ipairs(knockout.KINDS) do
    if o.edges == "all" or want[kind] then KINDS[#KINDS + 1] = kind end
  end
  if #KINDS == 0 then error(("--edges %s: name at least one kind"):format(o.edges), 0) end
end
local SKIP = name_set(o.skip, {"probe", "heads", "accuracy"}, "skip")
if SKIP.accuracy and not (SKIP.probe and SKIP.heads) then
  error(("--skip %s: accuracy needs probe,heads too (they share its runs); e.g. --skip accuracy,probe,heads")
        :format(o.skip), 0)
end

-- ---- data ----------------------------------------------------------------------------------------------------
local TASKS = {
  sentiment = {template = "sentence: {x} sentiment: {y}\n", labels = {"negative", "positive"},
               files = {"movieReviewSnippets_GroundTruth.txt"}},
  domain = {template = "sentence: {x} source: {y}\n", labels = {"movie", "product", "news", "tweet"},
            files = {"movieReviewSnippets_GroundTruth.txt", "amazonReviewSnippets_GroundTruth.txt",
                     "nytEditorialSnippets_GroundTruth.txt", "tweets_GroundTruth.txt"}},
}
local task = TASKS[o.task] or error(("--task %s: use sentiment or domain"):format(o.task), 0)
local LABELS = task.labels

-- rows {rating, text} of one file (id TAB rating TAB sentence, CRLF), whitespace collapsed
local function read_rows(path)
  local f = io.open(path, "rb")
  if not f then
    error(("--data %s: %s is missing: run scripts/fetch-data.sh sentiment (docs/data.md)"):format(o.data, path), 0)
  end
  local rows = {}
  for line in f:lines() do
    local _, r, text = line:match("^([^\t]*)\t([^\t]*)\t(.-)%s*$")
    if text and tonumber(r) then
      text = text:gsub("%s+", " "):gsub("^ ", "")
      if #text > 0 then rows[#rows + 1] = {rating = tonumber(r), text = text} end
    end
  end
  f:close()
  return rows
end

-- pools[c] = sentences of class c (file order)
local pools = {}
for c = 1, #LABELS do pools[c] = {} end
for fi, name in ipairs(task.files) do
  for _, r in ipairs(read_rows(o.data .. "/" .. name)) do
    if o.task == "domain" then
      table.insert(pools[fi], r.text)
    elseif r.rating >= o.threshold then
      table.insert(pools[2], r.text)
    elseif r.rating <= -o.threshold then
      table.insert(pools[1], r.text)
    end
  end
end
local pool_sizes = {}
for c = 1, #LABELS do pool_sizes[c] = #pools[c] end

local m = ex:load{n_ctx = (o.k + 1) * (o.max_tokens + 8) + 8, threads = o.threads > 0 and o.threads or nil}
local NL, NH = m.n_layers, m.n_heads
local tpl = prompt.template(task.template)
local label_ids = prompt.label_ids(m, tpl, LABELS)
local rng = icl.rng.new(o.seed)
for c = 1, #LABELS do rng:shuffle(pools[c]) end

-- draw(c): the next sentence of class c of at most max_tokens tokens (with its leading space)
local next_of, too_long = {}, 0
for c = 1, #LABELS do next_of[c] = 1 end
local function draw(c)
  while next_of[c] <= #pools[c] do
    local s = pools[c][next_of[c]]
    next_of[c] = next_of[c] + 1
    if #m:tokenize(" " .. s, {bos = false}) <= o.max_tokens then return s end
    too_long = too_long + 1
  end
  error(("class %s ran out of sentences (%d); lower --n or raise --max-tokens"):format(LABELS[c], #pools[c]), 0)
end

-- prompts: k demonstrations and a query, labels uniform; the random-label twin keeps the sentences
local cache, prompts, skipped, lengths = {}, {}, {}, 0
while #prompts < o.n do
  local items = {}
  for i = 1, o.k + 1 do
    local c = rng:int(1, #LABELS)
    items[i] = {c = c, x = draw(c)}
  end
  local demos, rdemos, rand = {}, {}, {}
  for i = 1, o.k do
    rand[i] = rng:int(1, #LABELS)
    demos[i] = {x = items[i].x, y = LABELS[items[i].c]}
    rdemos[i] = {x = items[i].x, y = LABELS[rand[i]]}
  end
  local q = items[o.k + 1]
  local p, err = prompt.build(m, tpl, demos, {x = q.x}, {cache = cache})
  local pr = p and prompt.build(m, tpl, rdemos, {x = q.x}, {cache = cache})
  local p0 = pr and prompt.build(m, tpl, {}, {x = q.x}, {cache = cache})
  if p and pr and p0 then
    prompts[#prompts + 1] = {p = p, pr = pr, p0 = p0, items = items, rand = rand}
    lengths = lengths + p.n
  else
    skipped[#skipped + 1] = err or "random-label or zero-shot twin failed"
  end
end

-- ---- runs ----------------------------------------------------------------------------------------------------
local ranges = knockout.ranges(NL, o.parts)
local n_runs = (SKIP.accuracy and 0 or 3 * o.n) + (1 + 2 * #KINDS * #ranges) * o.n_knockout
local bar = icl.progress.new{total = n_runs, label = "icl circuit"}

local captures = {}
for l = 0, NL - 1 do
  if not SKIP.heads then captures[#captures + 1] = ("blocks.%d.attn.hook_pattern"):format(l) end
  if not SKIP.probe then captures[#captures + 1] = ("blocks.%d.hook_resid_post"):format(l) end
end
-- the random-label runs' captures (merge probe at y) and the attention outputs at s_q (direct attribution)
local rcaptures = {}
for l = 0, SKIP.probe and -1 or NL - 1 do
  rcaptures[#rcaptures + 1] = ("blocks.%d.hook_resid_post"):format(l)
  captures[#captures + 1] = {name = ("blocks.%d.hook_attn_out"):format(l), pos = {-1, -1}}
end
local head = not SKIP.probe and readout.head(m, label_ids) or nil

local function zeros(n) local t = {} for i = 1, n do t[i] = 0 end return t end
local heads = {forerunner = zeros(NL), induction = zeros(NL), correct_induction = zeros(NL)}
-- per head, summed over prompts, for the view only (not in summary.json): the forerunner attention y_i -> s_i
-- (mean over demonstrations) and the induction attention s_q -> y (sum over demonstrations); head_mass.x[l][h]
local head_mass = {forerunner = {}, induction = {}}
for l = 1, NL do head_mass.forerunner[l], head_mass.induction[l] = zeros(NH), zeros(NH) end
local view_prompt -- {pr =, pats = {[layer] = pattern [head, q, k]}} of the first prompt, for the view
local feats, feat_labels = {}, {} -- feats[l + 1] = list of [k + 1, d] tensors (rows x_1..x_k, x_q)
for l = 1, NL do feats[l] = {} end
-- merge probe: s_i rows of the true-label runs (train) and y_i rows of the random-label runs (test), per layer,
-- with each row's sentence class, prompt fold and (y) random label
local sfeats, yfeats, srow, yrow = {}, {}, {}, {}
for l = 1, NL do sfeats[l], yfeats[l] = {}, {} end
-- LM-head read-out at s_q per layer: lens agreement counts and the attention's direct attribution (sums, squares)
local lens = {truth = zeros(NL), prediction = zeros(NL), last_label = zeros(NL), check = 0}
local dla = {truth = zeros(NL), truth2 = zeros(NL), last_label = zeros(NL), last_label2 = zeros(NL)}
local pred_counts = {true_labels = zeros(#LABELS), random_labels = zeros(#LABELS), zero_shot = zeros(#LABELS)}
-- predictions equal to the last demonstration's label (a recency copy)
local follows_last = {true_labels = 0, random_labels = 0}
-- per prompt, 1 when right: with true labels, random labels, zero-shot, and a pure copy of each last label
local per = {true_labels = {}, random_labels = {}, zero_shot = {}, copy_true = {}, copy_random = {}}

-- head counts of one prompt: forerunner (y_i -> s_i above C / y_i, mean over demonstrations), induction
-- (sum_i attention s_q -> y_i above C / s_q) and correct induction (same-label minus other-label above
-- C / (s_q |Y|)); n_t = tokens so far, i.e. the 1-based position of the attending token
local function count_heads(r, pr)
  local p, sq = pr.p, pr.p.query.s
  for l = 0, NL - 1 do
    local pat = r[("blocks.%d.attn.hook_pattern"):format(l)]
    local fr, ind, cor = 0, 0, 0
    for h = 1, NH do
      for _, d in ipairs(p.demos) do
        local a = pat:get(h, d.y[1], d.s)
        if a > o.times / d.y[1] then fr = fr + 1 end
        head_mass.forerunner[l + 1][h] = head_mass.forerunner[l + 1][h] + a / #p.demos
      end
      local tot, diff = 0, 0
      for i, d in ipairs(p.demos) do
        local a = pat:get(h, sq, d.y[1])
        tot = tot + a
        diff = diff + (pr.items[i].c == pr.items[o.k + 1].c and a or -a)
      end
      head_mass.induction[l + 1][h] = head_mass.induction[l + 1][h] + tot
      if tot > o.times / sq then ind = ind + 1 end
      if diff > o.times / (sq * #LABELS) then cor = cor + 1 end
    end
    heads.forerunner[l + 1] = heads.forerunner[l + 1] + fr / #p.demos
    heads.induction[l + 1] = heads.induction[l + 1] + ind
    heads.correct_induction[l + 1] = heads.correct_induction[l + 1] + cor
  end
end

local function x_positions(p)
  local xs = {}
  for i, d in ipairs(p.demos) do xs[i] = d.x[2] end
  xs[#xs + 1] = p.query.x[2]
  return xs
end

-- step 2's rows: the forerunners s_i of a true-label run, the labels y_i of a random-label run (prompt number pi)
local function collect_s(r, pr, pi)
  local pos = {}
  for i, d in ipairs(pr.p.demos) do
    pos[i] = d.s
    srow[#srow + 1] = {c = pr.items[i].c, fold = (pi - 1) % o.folds}
  end
  for l = 0, NL - 1 do table.insert(sfeats[l + 1], r[("blocks.%d.hook_resid_post"):format(l)]:index_select(1, pos)) end
end
local function collect_y(r, pr, pi)
  local pos = {}
  for i, d in ipairs(pr.pr.demos) do
    pos[i] = d.y[1]
    yrow[#yrow + 1] = {c = pr.items[i].c, label = pr.rand[i], fold = (pi - 1) % o.folds}
  end
  for l = 0, NL - 1 do table.insert(yfeats[l + 1], r[("blocks.%d.hook_resid_post"):format(l)]:index_select(1, pos)) end
end

-- step 3's read-out at s_q of a true-label run: which label each layer's residual gives through the final norm
-- and the LM head (beside the truth, the model's prediction and the last demonstration's label), and how much each
-- layer's attention output writes toward the truth and toward the last label (direct attribution, centred over
-- the labels). The last layer's lens is the model's own logits: its largest deviation is kept as a check.
local function read_out(r, pr, guess)
  local sq, truth, last = pr.p.query.s, pr.items[o.k + 1].c, pr.items[o.k].c
  local x = r[("blocks.%d.hook_resid_post"):format(NL - 1)][sq]
  for l = 1, NL do
    local v = readout.lens(head, r[("blocks.%d.hook_resid_post"):format(l - 1)][sq])
    local c = v:argmax()
    lens.truth[l] = lens.truth[l] + (c == truth and 1 or 0)
    lens.prediction[l] = lens.prediction[l] + (c == guess and 1 or 0)
    lens.last_label[l] = lens.last_label[l] + (c == last and 1 or 0)
    if l == NL then
      for j, id in ipairs(label_ids) do lens.check = math.max(lens.check, math.abs(v[j] - r.logits:get(1, id + 1))) end
    end
    local a = readout.direct(head, r[("blocks.%d.hook_attn_out"):format(l - 1)][1], x)
    local mean = a:mean()
    local t, u = a[truth] - mean, a[last] - mean
    dla.truth[l], dla.truth2[l] = dla.truth[l] + t, dla.truth2[l] + t * t
    dla.last_label[l], dla.last_label2[l] = dla.last_label[l] + u, dla.last_label2[l] + u * u
  end
end

-- reuse: the positions shared with the previous run come from the cache (m:run's reuse; same logits)
local REUSE = not o.recompute
local function predict(tokens, ko)
  local r = assert(m:run(tokens, {logits = "last", knockout = ko, reuse = REUSE}))
  bar:update(1)
  return (prompt.predict(r.logits, label_ids))
end

for _, pr in ipairs(SKIP.accuracy and {} or prompts) do
  local p = pr.p
  local r = assert(m:run(p.tokens, {logits = "last", capture = #captures > 0 and captures or nil}))
  bar:update(1)
  local truth = pr.items[o.k + 1].c
  local guess = prompt.predict(r.logits, label_ids)
  local pi = #per.true_labels + 1
  per.true_labels[pi] = guess == truth and 1 or 0
  per.copy_true[pi] = pr.items[o.k].c == truth and 1 or 0
  per.copy_random[pi] = pr.rand[o.k] == truth and 1 or 0
  pred_counts.true_labels[guess] = pred_counts.true_labels[guess] + 1
  if guess == pr.items[o.k].c then follows_last.true_labels = follows_last.true_labels + 1 end
  if not SKIP.heads then
    count_heads(r, pr)
    if pi == 1 then -- the first prompt's patterns, for the view
      view_prompt = {pr = pr, pats = {}}
      for l = 0, NL - 1 do view_prompt.pats[l] = r[("blocks.%d.attn.hook_pattern"):format(l)] end
    end
  end
  if not SKIP.probe then
    local xs = x_positions(p)
    for l = 0, NL - 1 do
      table.insert(feats[l + 1], r[("blocks.%d.hook_resid_post"):format(l)]:index_select(1, xs))
    end
    for i = 1, o.k + 1 do feat_labels[#feat_labels + 1] = pr.items[i].c end
    collect_s(r, pr, pi)
    read_out(r, pr, guess)
  end
  r = nil
  local rguess
  if SKIP.probe then
    rguess = predict(pr.pr.tokens)
  else -- the merge probe's y rows: a full run with captures (nothing is reused)
    local rr = assert(m:run(pr.pr.tokens, {logits = "last", capture = rcaptures}))
    bar:update(1)
    rguess = prompt.predict(rr.logits, label_ids)
    collect_y(rr, pr, pi)
  end
  pred_counts.random_labels[rguess] = pred_counts.random_labels[rguess] + 1
  per.random_labels[pi] = rguess == truth and 1 or 0
  if rguess == pr.rand[o.k] then follows_last.random_labels = follows_last.random_labels + 1 end
  local zguess = predict(pr.p0.tokens)
  pred_counts.zero_shot[zguess] = pred_counts.zero_shot[zguess] + 1
  per.zero_shot[pi] = zguess == truth and 1 or 0
  collectgarbage()
end

-- knockout table: accuracy on prompts knockout_from .. KO_LAST per (range, kind), and with as many random edges
-- per prompt (1 = right): ko_per.none[j], ko_per.accuracy[kind][range][j], ko_per.random[kind][range][j]
local ko_edges = {}
local ko_per = {none = {}, accuracy = {}, random = {}}
for _, kind in ipairs(KINDS) do
  ko_edges[kind] = 0
  ko_per.accuracy[kind], ko_per.random[kind] = {}, {}
  for ri = 1, #ranges do ko_per.accuracy[kind][ri], ko_per.random[kind][ri] = {}, {} end
end
for i = o.knockout_from, KO_LAST do
  local pr = prompts[i]
  local ko_rng = icl.rng.new(o.seed * 1000003 + i) -- per prompt, so that shards draw what one run would
  local truth = pr.items[o.k + 1].c
  local right0 = predict(pr.p.tokens) == truth and 1 or 0
  local j = #ko_per.none + 1
  ko_per.none[j] = right0
  -- the random edges of every kind are drawn in the fixed order of knockout.KINDS, so that --edges picks the
  -- same controls as the full set
  local sets = {}
  for _, kind in ipairs(knockout.KINDS) do
    local e = knockout.edges(pr.p, kind)
    sets[kind] = {e = e, re = knockout.random_edges(pr.p.n, #e, ko_rng, e)}
  end
  -- the runs of this prompt, latest first knocked-out query first: each then keeps every position before its
  -- own earliest knocked-out query from the cache (the previous run left them untouched)
  local jobs = {}
  for _, kind in ipairs(KINDS) do
    ko_edges[kind] = ko_edges[kind] + #sets[kind].e
    for ri in ipairs(ranges) do
      for _, which in ipairs({"accuracy", "random"}) do
        local e = which == "accuracy" and sets[kind].e or sets[kind].re
        local first = math.huge
        for _, ed in ipairs(e) do first = math.min(first, ed[1]) end
        jobs[#jobs + 1] = {kind = kind, ri = ri, which = which, edges = e, first = first, order = #jobs}
      end
    end
  end
  table.sort(jobs, function(a, b) if a.first ~= b.first then return a.first > b.first end return a.order < b.order end)
  for _, job in ipairs(jobs) do
    local ok = predict(pr.p.tokens, knockout.spec(job.edges, ranges[job.ri].layers)) == truth and 1 or 0
    ko_per[job.which][job.kind][job.ri][j] = ok
  end
end
bar:done()

-- ---- statistics ------------------------------------------------------------------------------------------------
local N, NK = #prompts, math.max(o.n_knockout, 1)
-- counts of right answers, from the per-prompt outcomes
local function total(list) local s = 0 for _, v in ipairs(list) do s = s + v end return s end
local right, right_rand, right_zero = total(per.true_labels), total(per.random_labels), total(per.zero_shot)
local copy_right = {true_labels = total(per.copy_true), random_labels = total(per.copy_random)}
local ko_none, ko_acc, ko_rand = total(ko_per.none), {}, {}
for _, key in ipairs({"forerunner", "induction", "correct_induction"}) do
  for l = 1, NL do heads[key][l] = heads[key][l] / N end
end
for _, kind in ipairs(KINDS) do
  ko_acc[kind], ko_rand[kind] = {}, {}
  for ri = 1, #ranges do
    ko_acc[kind][ri] = total(ko_per.accuracy[kind][ri]) / NK
    ko_rand[kind][ri] = total(ko_per.random[kind][ri]) / NK
  end
  ko_edges[kind] = ko_edges[kind] / NK
end

-- within- and between-class mean cosine similarity of the x representations, from the class sums of unit rows
local function similarity(X, labels)
  local U = X / X:norm(2, true)
  local n, total = #labels, U:sum(1)
  local by = {}
  for i, c in ipairs(labels) do by[c] = by[c] or {}; table.insert(by[c], i) end
  local within_sum, within_n, sq_sum, cnt_sq = 0, 0, 0, 0
  for _, rows in pairs(by) do
    local s = U:index_select(1, rows):sum(1)
    local ss = s:dot(s)
    within_sum, within_n = within_sum + ss - #rows, within_n + #rows * (#rows - 1)
    sq_sum, cnt_sq = sq_sum + ss, cnt_sq + #rows * #rows
  end
  local between = (total:dot(total) - sq_sum) / (n * n - cnt_sq)
  return within_sum / math.max(within_n, 1), between
end

local probe, within, between = {}, {}, {}
for l = 1, SKIP.probe and 0 or NL do
  local X = icl.tensor.cat(feats[l], 1)
  probe[l] = icl.linalg.ncm_probe(X, feat_labels, {folds = o.folds})
  within[l], between[l] = similarity(X, feat_labels)
  feats[l] = nil
end
collectgarbage()

-- step 2: the s-trained classifier on the y rows, cross-fitted (rows of prompt fold f read by means of the other
-- folds), scored against the sentence's class, apart for right and wrong random labels; also how often a wrong
-- label's row is read as its label
local merge = {right_label = {}, wrong_label = {}, wrong_read_as_label = {}, within_label = {}, n_right = 0,
               n_wrong = 0}
-- rows grouped by their label word: within a group the label says nothing about the sentence, so a classifier of
-- the sentence's class there (cross-validated) reads only what the label token took in from its sentence
local by_label = {}
for i, y in ipairs(yrow) do by_label[y.label] = by_label[y.label] or {}; table.insert(by_label[y.label], i) end
for _, y in ipairs(yrow) do
  if y.label == y.c then merge.n_right = merge.n_right + 1 else merge.n_wrong = merge.n_wrong + 1 end
end
for l = 1, SKIP.probe and 0 or NL do
  local S, Y = icl.tensor.cat(sfeats[l], 1), icl.tensor.cat(yfeats[l], 1)
  local pred = {}
  for f = 0, o.folds - 1 do
    local tr, lab, te = {}, {}, {}
    for i, sr in ipairs(srow) do if sr.fold ~= f then tr[#tr + 1], lab[#lab + 1] = i, sr.c end end
    for i, yr in ipairs(yrow) do if yr.fold == f then te[#te + 1] = i end end
    if #te > 0 then
      local got = icl.linalg.ncm_fit(S:index_select(1, tr), lab, Y:index_select(1, te))
      for j, i in ipairs(te) do pred[i] = got[j] end
    end
  end
  local ok_r, ok_w, as_label = 0, 0, 0
  for i, yr in ipairs(yrow) do
    if yr.label == yr.c then ok_r = ok_r + (pred[i] == yr.c and 1 or 0)
    else
      ok_w = ok_w + (pred[i] == yr.c and 1 or 0)
      as_label = as_label + (pred[i] == yr.label and 1 or 0)
    end
  end
  merge.right_label[l] = ok_r / math.max(merge.n_right, 1)
  merge.wrong_label[l] = ok_w / math.max(merge.n_wrong, 1)
  merge.wrong_read_as_label[l] = as_label / math.max(merge.n_wrong, 1)
  local right_w, n_w = 0, 0
  for _, rows in pairs(by_label) do
    if #rows >= 2 * o.folds then
      local lab = {}
      for j, i in ipairs(rows) do lab[j] = yrow[i].c end
      local acc = icl.linalg.ncm_probe(Y:index_select(1, rows), lab, {folds = o.folds})
      right_w, n_w = right_w + acc * #rows, n_w + #rows
    end
  end
  merge.within_label[l] = n_w > 0 and right_w / n_w or json.null
  sfeats[l], yfeats[l] = nil, nil
end
collectgarbage()
-- binomial standard error of an accuracy p over n rows
local function bse(p, n) return n > 0 and math.sqrt(p * (1 - p) / n) or 0 / 0 end
merge.wrong_label_se, merge.right_label_se = {}, {}
for l = 1, #merge.wrong_label do
  merge.wrong_label_se[l] = bse(merge.wrong_label[l], merge.n_wrong)
  merge.right_label_se[l] = bse(merge.right_label[l], merge.n_right)
end
-- step 3: per layer, fractions of prompts and mean ± SE of the attention's direct attribution
local lm_head = {lens_truth = {}, lens_prediction = {}, lens_last_label = {}, attn_toward_truth = {},
                 attn_toward_truth_se = {}, attn_toward_last_label = {}, attn_toward_last_label_se = {},
                 last_layer_lens_max_diff = lens.check}
local function mean_se(s1, s2, n)
  local mu = s1 / n
  return mu, n > 1 and math.sqrt(math.max(s2 / n - mu * mu, 0) * n / (n - 1) / n) or 0 / 0
end
for l = 1, SKIP.probe and 0 or NL do
  local N0 = #per.true_labels
  lm_head.lens_truth[l], lm_head.lens_prediction[l] = lens.truth[l] / N0, lens.prediction[l] / N0
  lm_head.lens_last_label[l] = lens.last_label[l] / N0
  lm_head.attn_toward_truth[l], lm_head.attn_toward_truth_se[l] = mean_se(dla.truth[l], dla.truth2[l], N0)
  lm_head.attn_toward_last_label[l], lm_head.attn_toward_last_label_se[l] =
    mean_se(dla.last_label[l], dla.last_label2[l], N0)
end

local paired = icl.metrics.paired -- a - b (- (c - d)) per prompt: mean, SE over prompts, 95% interval
local diffs = {
  true_minus_random = paired(per.true_labels, per.random_labels),
  true_minus_zero_shot = paired(per.true_labels, per.zero_shot),
  random_minus_zero_shot = paired(per.random_labels, per.zero_shot),
  copy_true_minus_copy_random = paired(per.copy_true, per.copy_random),
  -- true - random beyond what a pure copy of the last label would give on the same prompts
  true_minus_random_beyond_copy = paired(per.true_labels, per.random_labels, per.copy_true, per.copy_random),
}
local ko_diffs = {minus_none = {}, minus_control = {}, control_minus_none = {}}
for _, kind in ipairs(KINDS) do
  local a, b, c = {}, {}, {}
  for ri = 1, #ranges do
    a[ri] = paired(ko_per.accuracy[kind][ri], ko_per.none)
    b[ri] = paired(ko_per.accuracy[kind][ri], ko_per.random[kind][ri])
    c[ri] = paired(ko_per.random[kind][ri], ko_per.none)
  end
  ko_diffs.minus_none[kind], ko_diffs.minus_control[kind], ko_diffs.control_minus_none[kind] = a, b, c
end

-- ---- figures and summary -----------------------------------------------------------------------------------------
local name = m.name or o.model
local layers = {}
for l = 1, NL do layers[l] = l - 1 end
local function flat(v) local t = {} for l = 1, NL do t[l] = v end return t end
local range_x, range_names = {}, {}
for i, rg in ipairs(ranges) do range_x[i], range_names[i] = i, ("L%d-%d"):format(rg.first, rg.last) end
local mean_rand = zeros(#ranges)
for _, kind in ipairs(KINDS) do
  for ri = 1, #ranges do mean_rand[ri] = mean_rand[ri] + ko_rand[kind][ri] / #KINDS end
end
local ko_series = {}
for i, kind in ipairs(KINDS) do ko_series[i] = {x = range_x, y = ko_acc[kind], label = kind} end
ko_series[#ko_series + 1] = {x = range_x, y = mean_rand, label = "random edges (mean over kinds)", color = "grey"}
local none_y = {}
for ri = 1, #ranges do none_y[ri] = ko_none / NK end
ko_series[#ko_series + 1] = {x = range_x, y = none_y, label = "no knockout", color = "black"}
if not SKIP.probe then
  ex:figure(plot.line{series = {{x = layers, y = probe, label = "NCM probe at x (cross-validated)"},
                                {x = layers, y = flat(1 / #LABELS), label = "chance", color = "grey"}},
                      ylim = {0, 1}, xlabel = "layer", ylabel = "probe accuracy",
                      title = ("Class of the input at its last token, %s, %s"):format(name, o.task)}, "probe")
end
if not SKIP.probe then
  local ms = {{x = layers, y = merge.wrong_label, label = "wrong label: sentence's class"},
              {x = layers, y = merge.right_label, label = "right label: sentence's class"},
              {x = layers, y = flat(1 / #LABELS), label = "chance", color = "grey"}}
  if merge.within_label[1] ~= json.null then
    table.insert(ms, 3, {x = layers, y = merge.within_label, label = "within one label word (y-trained)"})
  end
  ex:figure(plot.line{series = ms,
                      ylim = {0, 1}, xlabel = "layer", ylabel = "accuracy of an s-trained NCM classifier at y",
                      title = ("Semantics merge: the sentence's class at its label token, %s"):format(name)}, "merge")
  ex:figure(plot.line{series = {{x = layers, y = lm_head.lens_truth, label = "lens = truth"},
                                {x = layers, y = lm_head.lens_prediction, label = "lens = the model's prediction"},
                                {x = layers, y = lm_head.lens_last_label, label = "lens = last demonstration's label"}},
                      ylim = {0, 1}, xlabel = "layer", ylabel = "fraction of prompts",
                      title = ("LM head on the residual at s_q (logit lens), %s"):format(name)}, "lens")
end
if not SKIP.heads then
  ex:figure(plot.line{series = {{x = layers, y = heads.forerunner, label = "forerunner (y_i -> s_i)"},
                                {x = layers, y = heads.induction, label = "induction (s_q -> y)"},
                                {x = layers, y = heads.correct_induction, label = "correct induction"}},
                      xlabel = "layer", ylabel = ("heads above %g / n_t (mean per prompt)"):format(o.times),
                      title = ("Forerunner and induction heads, %s"):format(name)}, "heads")
end
ex:figure(plot.line{series = ko_series, ylim = {0, 1.05},
                    xlabel = "layer range: " .. table.concat(range_names, ", "), ylabel = "accuracy",
                    title = ("Attention knockouts (%d prompts), %s"):format(o.n_knockout, name)}, "knockout")

-- interactive view: the two heads with the most induction attention (s_q -> y, summed over demonstrations) and
-- the two with the most forerunner attention (y_i -> s_i), both as means over the prompts, attending over the
-- first prompt (true labels); their names go to the printed summary, not to summary.json
local view_line
if view_prompt then
  local function top2(mass)
    local list = {}
    for l = 1, NL do
      for h = 1, NH do list[#list + 1] = {layer = l - 1, head = h - 1, v = mass[l][h] / N} end
    end
    table.sort(list, function(a, b)
      if a.v ~= b.v then return a.v > b.v end
      return a.layer < b.layer or (a.layer == b.layer and a.head < b.head)
    end)
    return {list[1], list[2]}
  end
  local per_layer, picked, said = {}, {}, {}
  for _, kind in ipairs({"induction", "forerunner"}) do
    local parts = {}
    for _, e in ipairs(top2(head_mass[kind])) do
      parts[#parts + 1] = ("L%d.H%d %.3f"):format(e.layer, e.head, e.v)
      if not picked[e.layer * NH + e.head] then
        picked[e.layer * NH + e.head] = true
        per_layer[e.layer] = per_layer[e.layer] or {}
        table.insert(per_layer[e.layer], e.head)
      end
    end
    said[#said + 1] = ("%s %s"):format(kind, table.concat(parts, ", "))
  end
  local p, pats, ids = view_prompt.pr.p, {}, {}
  for l, hs in pairs(per_layer) do
    table.sort(hs)
    local nm, sel = ("blocks.%d.attn.hook_pattern"):format(l), {}
    for i, h in ipairs(hs) do sel[i] = h + 1 end
    pats[nm], ids[nm] = view_prompt.pats[l]:index_select(1, sel), hs
  end
  local toks = {}
  for i, id in ipairs(p.tokens) do toks[i] = m:token_text(id) end
  ex:view("attention", {tokens = toks, patterns = pats, head_ids = ids, window = math.min(#toks, 160),
                        title = ("Top induction (s_q -> y) and forerunner (y_i -> s_i) heads of %s on prompt 1 "
                                 .. "(true labels; s_q = token %d)"):format(name, p.query.s)}, "patterns")
  view_line = "  view heads (mean attention per prompt): " .. table.concat(said, "; ")
end

local range_list = {}
for i, rg in ipairs(ranges) do range_list[i] = {first = rg.first, last = rg.last} end
local function acc(v) return SKIP.accuracy and json.null or v end
local summary = {
  experiment = "icl_circuit", model = o.model, model_name = name, arch = m.arch, backend = m.backend,
  n_layers = NL, n_heads = NH, task = o.task, template = task.template, labels = LABELS, label_ids = label_ids,
  data = o.data, threshold = o.task == "sentiment" and o.threshold or json.null, pool_sizes = pool_sizes,
  max_tokens = o.max_tokens, k = o.k, n = N, n_knockout = o.n_knockout, knockout_from = o.knockout_from,
  seed = o.seed, times = o.times, skip = o.skip, edges = o.edges,
  folds = o.folds, skipped_prompts = #skipped, too_long_sentences = too_long,
  mean_prompt_tokens = lengths / N,
  bos = prompts[1].p.tokens[1] == m.bos,
  accuracy = acc({true_labels = right / N, random_labels = right_rand / N, zero_shot = right_zero / N,
              chance = 1 / #LABELS}),
  predicted = acc(pred_counts),
  follows_last_label = acc({true_labels = follows_last.true_labels / N, random_labels = follows_last.random_labels / N}),
  copy_last_accuracy = acc({true_labels = copy_right.true_labels / N, random_labels = copy_right.random_labels / N}),
  differences = acc(diffs),
  per_prompt = acc(per),
  probe = SKIP.probe and json.null or {layers = layers, accuracy = probe, cos_within = within, cos_between = between,
           samples = #feat_labels},
  merge = SKIP.probe and json.null or merge,
  lm_head = SKIP.probe and json.null or lm_head,
  heads = SKIP.heads and json.null or heads,
  knockout = {ranges = range_list, none = ko_none / NK, kinds = KINDS, accuracy = ko_acc, random = ko_rand,
              mean_edges = ko_edges, differences = ko_diffs, per_prompt = ko_per},
}

-- ---- report --------------------------------------------------------------------------------------------------------
local lines = {}
local function say(line) lines[#lines + 1] = line end
local function row(t, fmt) local s = {} for i, v in ipairs(t) do s[i] = (fmt or "%.2f"):format(v) end return table.concat(s, " ") end
say(("icl_circuit: %s, task %s, %d prompts (k = %d, %.1f tokens on average), seed %d"):format(name, o.task, N,
      o.k, lengths / N, o.seed))
local function pm(d) return ("%+.3f ± %.3f [%+.3f, %+.3f]"):format(d.mean, d.se, d.lo, d.hi) end
if not SKIP.accuracy then
  say(("  accuracy %.3f with true labels, %.3f with random labels, %.3f zero-shot (chance %.3f); predicted labels %s / %s / %s"):format(
        right / N, right_rand / N, right_zero / N, 1 / #LABELS, table.concat(pred_counts.true_labels, ":"),
        table.concat(pred_counts.random_labels, ":"), table.concat(pred_counts.zero_shot, ":")))
  say(("  predictions equal to the last demonstration's label %.3f / %.3f; a pure copy of it would score %.3f / %.3f"):format(
        follows_last.true_labels / N, follows_last.random_labels / N, copy_right.true_labels / N,
        copy_right.random_labels / N))
  say(("  paired differences (± SE, 95%% interval): true - random %s; true - zero-shot %s;"):format(
        pm(diffs.true_minus_random), pm(diffs.true_minus_zero_shot)))
  say(("    copy of the last label, true - random %s; true - random beyond the copy's %s"):format(
        pm(diffs.copy_true_minus_copy_random), pm(diffs.true_minus_random_beyond_copy)))
end
if not SKIP.probe then
  say("  probe by layer   " .. row(probe))
  say(("  merge at y (s-trained NCM, sentence's class; wrong labels n = %d, right n = %d):"):format(merge.n_wrong,
        merge.n_right))
  say("    wrong labels   " .. row(merge.wrong_label))
  say("    right labels   " .. row(merge.right_label))
  say("    wrong read as its label " .. row(merge.wrong_read_as_label))
  if merge.within_label[1] ~= json.null then
    say("    within one label word (cross-validated, y rows only) " .. row(merge.within_label))
  end
  say(("  logit lens at s_q (last layer = logits within %.2g): = truth      %s"):format(lm_head.last_layer_lens_max_diff,
        row(lm_head.lens_truth)))
  say("    = prediction   " .. row(lm_head.lens_prediction))
  say("    = last label   " .. row(lm_head.lens_last_label))
  say("  attention's direct attribution at s_q toward the truth      " .. row(lm_head.attn_toward_truth, "%+.2f"))
  say("    toward the last demonstration's label                    " .. row(lm_head.attn_toward_last_label, "%+.2f"))
end
if not SKIP.heads then
  say("  forerunner heads " .. row(heads.forerunner, "%.1f"))
  say("  induction heads  " .. row(heads.induction, "%.1f"))
  say("  correct induct.  " .. row(heads.correct_induction, "%.1f"))
end
if o.n_knockout > 0 then
  say(("  knockouts on %d prompts (no knockout %.3f); accuracy per range %s, [random-edge control]"):format(
        o.n_knockout, ko_none / NK, table.concat(range_names, " ")))
end
for _, kind in ipairs(o.n_knockout > 0 and KINDS or {}) do
  say(("    %-7s (%5.1f edges) %s   [%s]"):format(kind, ko_edges[kind], row(ko_acc[kind], "%.3f"),
        row(ko_rand[kind], "%.3f")))
end
if o.n_knockout > 0 then say("  paired differences per range, mean ± SE: knockout - none | knockout - control") end
for _, kind in ipairs(o.n_knockout > 0 and KINDS or {}) do
  local a, b = {}, {}
  for ri = 1, #ranges do
    local x, y = ko_diffs.minus_none[kind][ri], ko_diffs.minus_control[kind][ri]
    a[ri], b[ri] = ("%+.3f±%.3f"):format(x.mean, x.se), ("%+.3f±%.3f"):format(y.mean, y.se)
  end
  say(("    %-7s %s | %s"):format(kind, table.concat(a, " "), table.concat(b, " ")))
end
if view_line then say(view_line) end
ex:report(summary, lines) -- summary.json (the keys above, nothing added), the lines, index.html
