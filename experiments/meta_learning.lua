-- In-context meta-learning (Minegishi et al., ICML 2025): a 2-layer attention-only transformer trained on
-- few-shot sequences x1 y1 .. x4 y4 xq whose query label depends on a task inferred from the context.
-- Trains through icl.train, and at checkpoints measures accuracy, random-label accuracy, the Bigram /
-- Label Attention / Chunk Example attention metrics per layer, and accuracy under three attention-mask
-- interventions; finds the phase boundaries by the paper's rule and names the phases by their metrics.
--   icl script experiments/meta_learning.lua [--K 64] [--T 3] [--steps S] [--out DIR] [--quick] [--sweep]
--   icl script experiments/meta_learning.lua --analyze DIR   (checkpoints step-*.gguf written by any trainer)
local tensor, plot, json = icl.tensor, icl.plot, icl.json
local BIG = 1 << 30 -- sizes and steps beyond this are typos, not runs

local ex = icl.experiment{name = "meta_learning", model = "none", seed = 1,
  about = "2-layer attention-only transformer on few-shot sequences x1 y1 .. x4 y4 xq (Minegishi et al. 2025):\n" ..
          "phases, attention metrics and mask interventions across training (--analyze DIR: checkpoints of any trainer)",
  options = {{"K", 64, "classes", int = {1, 1 << 20}}, {"T", 3, "tasks", int = {1, 1 << 16}},
             {"N", 4, "context pairs", int = {1, 1 << 12}}, {"L", 32, "labels", int = {2, 1 << 16}},
             {"eps", 0.1, "item noise", num = {0, 1e6}}, {"alpha", 0, "Zipf exponent of task frequencies", num = {0, 100}},
             {"heads", 1, "attention heads (d_head = 128 / H)", int = {1, 128}},
             {"p_in_context", 0, "probability p_B that the query's class is one of the context classes (1 with " ..
                                 "--T 1: the induction case)", num = {0, 1}},
             {"steps", 20000, "SGD steps", int = {1, BIG}}, {"batch", 128, "batch", int = {1, 1 << 16}},
             {"lr", 0.01, "learning rate", num = {0, 1e3, open = true}},
             {"init_std", 0.0884, "std of every initial weight (1/sqrt(128), docs/results.md)", num = {0, 1e3, open = true}},
             {"cls_hidden", 2, "Linear+ReLU layers of the classifier head", int = {0, 64}},
             {"acc_every", 100, "steps between accuracy evaluations (the resolution of the phase rule)", int = {1, BIG}},
             {"metric_every", 500, "steps between attention metrics and interventions", int = {1, BIG}},
             {"eval_n", 512, "held-out sequences per evaluation (a multiple of 16)", int = {16, 1 << 20}},
             {"threads", 1, "trainer threads", int = {1, 1024}},
             {"analyze", "", "measure the checkpoints DIR/step-*.gguf instead of training"},
             {"analyze_every", 0, "only the checkpoints at multiples of S steps (0 = all)", int = {0, BIG}},
             {"reduced", false, "the time-compressed run: lr 0.1, 9000 steps (sweep 2500), eval_n 256, else the " ..
                                "protocol; lr 0.01 needs ~10x the steps for the same stages (docs/results.md)"},
             {"sweep", false, "also train T in {1,2}, K in {16,256}, eps 0.5 and 4 heads"},
             {"theory", false, "only the label-set theory (SCC formula and Bayes accuracy, K = 8, 16, 32 and --K, " ..
                               "T = 2, 3) on --eval_n held-out sequences; no training"},
             {"sweep_steps", 0, "steps of each sweep run (0 = --steps)", int = {0, BIG}},
             {"sweep_dir", "", "where the sweep runs go (OUT/sweep)"},
             {"variants", "", "only these sweep runs (1-based, e.g. \"1,2,3\"); a run whose summary.json exists with " ..
                              "the same configuration is read, not trained again (split a sweep over processes)"}},
  quick = {K = 16, steps = 300, batch = 32, acc_every = 50, metric_every = 100, eval_n = 64}}
local o, given = ex.o, ex.given
if o.reduced then
  for k, v in pairs({lr = 0.1, steps = 9000, sweep_steps = 2500, eval_n = 256}) do
    if not given[k] then o[k] = v end
  end
end
ex:need(o.eval_n % 16 == 0, "eval_n", "must be a multiple of 16")
if o.analyze ~= "" and not icl.fs.is_dir(o.analyze) then
  error(("--analyze %s: not a folder"):format(o.analyze), 0)
end
if o.sweep then ex:check_out(o.sweep_dir ~= "" and o.sweep_dir or o.out .. "/sweep", "sweep-dir") end
local wall0 = os.time()
local D_MODEL = 128
-- what the script prints also goes to out/index.html (e:index), with the main run's figures (listed(dir, base))
local lines = {}
local function say(line) print(line); lines[#lines + 1] = line end
local function listed(dir, base) if dir == o.out then ex:add(base .. ".{png,svg}") end end

-- ---- the model and its data ------------------------------------------------------------------------

local D_ITEM = 63 -- item features before the pair one-hot (icl.data.meta_learning's D)

-- Items of each class in a batch: by_class[k] = list of {sequence, pair} (1-based; pair N + 1 is the query).
local function items_by_class(batch, by_class)
  for b, row in ipairs(batch.classes:totable()) do
    for i, k in ipairs(row) do
      local l = by_class[k] or {}
      l[#l + 1] = {batch = batch, b = b, pair = i}
      by_class[k] = l
    end
  end
  return by_class
end

-- The query moved into the context with probability c.p_in_context (the paper's p_B; the generator draws it
-- from all K classes, so otherwise it is there only by chance, N/K): in such a sequence one context pair j is
-- drawn, the query becomes a fresh item of pair j's class (another item of that class, taken from an
-- auxiliary batch of the same generator, so its noise is drawn independently, as the code's non-bursty
-- branch `query_class = np.random.choice(classes, 1)` + `add_noise`) and its target that class's label under
-- the sequence's task. The query keeps its own pair one-hot. Deterministic in (seed, stream, step).
local function with_query_in_context(base, info, c)
  if c.p_in_context <= 0 then return base end
  local N, n = c.N, 2 * c.N + 1
  local labels = info.labels:totable() -- [T][K] label ids
  return function(step, B, opts)
    local batch = base(step, B, opts)
    B = batch.tokens:shape()[1]
    local stream = opts and opts.stream or 0
    local rng = icl.rng.new(((c.seed * 1000003 + stream) * 1000003 + step) & ((1 << 53) - 1))
    local moves = {}
    for b = 1, B do
      if rng:uniform() < c.p_in_context then moves[#moves + 1] = {b = b, j = rng:int(1, N)} end
    end
    if #moves == 0 then return batch end
    local cls, tasks = batch.classes:totable(), batch.tasks:totable()
    local by_class, tries = {}, 0
    local function item_of(k) -- an item of class k from an auxiliary batch (drawn until one holds k)
      while not by_class[k] or #by_class[k] == 0 do
        tries = tries + 1
        if tries > 64 then error(("meta_learning: no item of class %d in 64 auxiliary batches"):format(k - 1), 0) end
        items_by_class(base(step, B, {stream = 1000 + 64 * stream + tries}), by_class)
      end
      return table.remove(by_class[k])
    end
    local X = batch.inputs:reshape(B * n, -1)
    local tg, cl = batch.targets:clone(), batch.classes:clone()
    for _, m in ipairs(moves) do
      local k = cls[m.b][m.j] -- 0-based class id
      local it = item_of(k)
      local src = it.batch.inputs[it.b][2 * it.pair - 1]
      local q = (m.b - 1) * n + n
      X[q] = tensor.cat({src:slice(1, 1, D_ITEM), X[q]:slice(1, D_ITEM + 1)})
      tg:set(labels[tasks[m.b] + 1][k + 1], m.b, n)
      cl:set(k, m.b, N + 1)
    end
    batch.inputs, batch.targets, batch.classes = X:reshape(B, n, -1), tg, cl
    return batch
  end
end

-- What the held-out set holds: the fraction of sequences whose query class is one of its context classes
-- (p_B + (1 - p_B) N/K expected) and whose target is that class's label under the sequence's task (1).
local function data_check(ev, info, c)
  local cls, tg, tasks, labels = ev.classes:totable(), ev.targets:totable(), ev.tasks:totable(), info.labels:totable()
  local inside, right = 0, 0
  for b, row in ipairs(cls) do
    local q = row[c.N + 1]
    for i = 1, c.N do if row[i] == q then inside = inside + 1; break end end
    if tg[b][2 * c.N + 1] == labels[tasks[b] + 1][q + 1] then right = right + 1 end
  end
  return {query_in_context = inside / #cls, target_is_query_label = right / #cls,
          expected_query_in_context = c.p_in_context + (1 - c.p_in_context) * c.N / c.K}
end

-- The best accuracy of a reader of the context's label set that knows every class's labels (in its weights)
-- and the query's class but not which example each label belongs to: the posterior of each task t given the
-- labels is proportional to P(t) * prod_l n_t(l)(n_t(l)-1)..(n_t(l)-m_l+1), n_t(l) the number of classes with
-- label l under t and m_l the label's count in the context (context classes are distinct and uniform; the
-- query is drawn independently), and the reader answers the query class's label under the most probable
-- task (ties: the expected accuracy of a uniform choice among them). On the held-out set, the shuffled set
-- (same label sets) and the random-label set (uniform labels: 1/T).
local function label_set_bayes(batch, info, c)
  local labels, T = info.labels:totable(), c.T
  local count = {}
  for t = 1, T do
    count[t] = {}
    for _, l in ipairs(labels[t]) do count[t][l] = (count[t][l] or 0) + 1 end
  end
  local tok, tg, cls = batch.tokens:totable(), batch.targets:totable(), batch.classes:totable()
  local hit = 0
  for b, row in ipairs(tok) do
    local m = {}
    for i = 1, c.N do local l = row[2 * i]; m[l] = (m[l] or 0) + 1 end
    local best, ties = -1, {}
    for t = 1, T do
      local w = 1 / T -- uniform tasks (alpha = 0)
      for l, k in pairs(m) do
        local nl = count[t][l] or 0
        for j = 0, k - 1 do w = w * math.max(nl - j, 0) end
      end
      if w > best then best, ties = w, {t} elseif w == best then ties[#ties + 1] = t end
    end
    local q, target, ok = cls[b][c.N + 1], tg[b][2 * c.N + 1], 0
    for _, t in ipairs(ties) do if labels[t][q + 1] == target then ok = ok + 1 end end
    hit = hit + ok / #ties
  end
  return hit / #tok
end

local function make_data(c)
  local data, info = icl.data.meta_learning{K = c.K, T = c.T, N = c.N, L = c.L, eps = c.eps, alpha = c.alpha,
                                            seed = c.seed}
  return with_query_in_context(data, info, c), info
end

-- The held-out set with each context label moved to another example of the same sequence (a cyclic shift of
-- the N labels by r in 1..N-1, r drawn per sequence): the set of labels, hence the task they signal, is kept,
-- and every label is bound to a wrong example. A model that reads the labels without binding them (SCC)
-- answers as on the held-out set; one that binds them (FCC) loses. Targets unchanged.
local function shuffled_labels(ev, c)
  local N, tok = c.N, ev.tokens:totable()
  local rng = icl.rng.new(c.seed * 7919 + 3)
  for _, row in ipairs(tok) do
    local r, old = rng:int(1, N - 1), {}
    for i = 1, N do old[i] = row[2 * i] end
    for i = 1, N do row[2 * i] = old[(i - 1 + r) % N + 1] end
  end
  return {tokens = tensor.from(tok), inputs = ev.inputs, targets = ev.targets, classes = ev.classes, tasks = ev.tasks}
end

local function make_net(c, n)
  return icl.nn.attn_only{layers = 2, heads = c.heads, d_model = D_MODEL, d_head = D_MODEL // c.heads, vocab = c.L,
                          ctx = n, inputs = D_MODEL, input_proj = false, position = "none", norm = "none",
                          scale = false, w_o = false, output = "classifier", classes = c.L,
                          cls_hidden = c.cls_hidden, out_bias = true, init_std = c.init_std, seed = c.seed,
                          threads = c.threads}
end

-- ---- measuring through net:run ---------------------------------------------------------------------
-- Every measurement runs the net's current weights through the forward and hooks of a loaded model (net:run):
-- query logits, attention patterns, and the interventions as attention masks (allowed-edge sets).

-- The interventions, each in the layers where the paper places the circuit it tests (0-based layers):
-- the query seeing only itself in both layers is the NCC circuit (context-free); the query reading only the
-- labels is FCC's layer-2 Label Attention, so it is applied in layer 2 (the `_all_layers` variant, both
-- layers, is this script's earlier definition, kept for comparison; `_or_self` lets the query keep its own
-- position); the label masks act on Chunk Example, a layer-1 pattern (in layer 2 the label rows cannot
-- reach the query, so layer 1 is the only place they matter). The public code has no mask interventions,
-- so these follow the circuit diagrams of the paper (its Figure 1 / Section 4), stated in docs/results.md.
-- allow(i, j): 0-based positions inside one sequence, j <= i.
local function interventions(n)
  local q = n - 1
  local all = function() return true end
  local q_labels = function(i, j) return i ~= q or j % 2 == 1 end
  return {
    {name = "none", allow = all, layers = {}},
    {name = "query_to_self", allow = function(i, j) return i ~= q or j == q end, layers = {0, 1}},
    {name = "query_to_labels", allow = q_labels, layers = {1}},
    {name = "query_to_labels_or_self", allow = function(i, j) return q_labels(i, j) or j == q end, layers = {1}},
    {name = "query_to_labels_all_layers", allow = q_labels, layers = {0, 1}},
    {name = "label_to_own_example", allow = function(i, j) return i % 2 == 0 or j == i - 1 end, layers = {0}},
    {name = "label_cut_from_example", allow = function(i, j) return i % 2 == 0 or j ~= i - 1 end, layers = {0}},
  }
end

-- The edges {q, k} (1-based, k <= q) of n positions for which keep(i, j) holds (0-based).
local function edges(n, keep)
  local e = {}
  for i = 0, n - 1 do
    for j = 0, i do if keep(i, j) then e[#e + 1] = {i + 1, j + 1} end end
  end
  return e
end

-- net:run's masks for an intervention (nil for none).
local function masks_of(iv, n)
  if #iv.layers == 0 then return nil end
  local allow, m = edges(n, iv.allow), {}
  for _, l in ipairs(iv.layers) do m[#m + 1] = {layer = l, allow = allow} end
  return m
end

-- Query logits [B, L] of a batch under masks, one run per sequence; with pat, adds each layer's pattern
-- (averaged over heads, [n, n]) of every sequence into pat[l].
local function run_queries(net, batch, masks, pat)
  local rows, cap = {}, pat and "blocks.*.attn.hook_pattern" or nil
  for b = 1, batch.tokens:shape()[1] do
    local r = net:run(batch.tokens[b], {inputs = batch.inputs[b], logits = "last", masks = masks, capture = cap})
    rows[b] = r.logits
    for l = 0, pat and 1 or -1 do
      local P = r[("blocks.%d.attn.hook_pattern"):format(l)]:mean(1)
      pat[l] = pat[l] and pat[l] + P or P
    end
  end
  return tensor.cat(rows)
end

local function accuracy(logits, batch)
  local n, pred, ok = batch.targets:shape()[2], logits:argmax(2):totable(), 0
  local tg = batch.targets:slice(2, n, n):reshape(-1):totable()
  for b = 1, #tg do ok = ok + ((pred[b] - 1 == tg[b]) and 1 or 0) end
  return ok / #tg
end

-- Query rows of net:forward's logits [B, n, L] -> [B, L].
local function query_logits(net, batch)
  local _, lg = net:forward(batch)
  local B, n = lg:shape()[1], lg:shape()[2]
  local qi = {}
  for b = 1, B do qi[b] = b * n end
  return lg:reshape(B * n, -1):index_select(1, qi)
end

-- The attention metrics of one layer from its pattern summed over B sequences: the query's attention to itself
-- (Bigram) and to the labels (Label Attention), each label's attention to its example (Chunk Example), and
-- the mean pattern as nested tables.
local function layer_metrics(Psum, n, B, N)
  local q, la, ce, mean = n, 0, 0, {}
  for j = 2, n - 1, 2 do la = la + Psum:get(q, j) end
  for i = 2, n - 1, 2 do ce = ce + Psum:get(i, i - 1) end
  for i = 1, n do
    mean[i] = {}
    for j = 1, n do mean[i][j] = Psum:get(i, j) / B end
  end
  return {bigram = Psum:get(q, q) / B, label_attention = la / B, chunk_example = ce / (B * N), pattern = mean}
end

-- All measurements at one checkpoint.
local function measure(net, c, ev, rl, M, sl)
  local B, pat = ev.tokens:shape()[1], {}
  local lg = run_queries(net, ev, nil, pat)
  local r = {interventions = {}, layers = {}}
  r.check = (lg - query_logits(net, ev)):abs():max() -- the inference forward vs the trainer's own
  r.acc = accuracy(lg, ev)
  r.random_label_acc = accuracy(query_logits(net, rl), rl)
  r.shuffled_label_acc = sl and accuracy(query_logits(net, sl), sl) or nil
  for l = 0, 1 do r.layers[l + 1] = layer_metrics(pat[l], M.n, B, c.N) end
  for i = 2, #M.iv do r.interventions[M.iv[i].name] = accuracy(run_queries(net, ev, M.masks[i]), ev) end
  return r
end

local function prepare(c, data, n)
  local M = {n = n, iv = interventions(n), masks = {}}
  for i, iv in ipairs(M.iv) do M.masks[i] = masks_of(iv, n) end
  local ev = data(0, c.eval_n, {stream = 1})
  return M, ev, data(0, c.eval_n, {stream = 2, random_labels = true}), c.N > 1 and shuffled_labels(ev, c) or nil
end

-- The interventions through the inference side as any model sees them: icl.load of the checkpoint, each
-- intervention as the knockout of its complement; returns the largest logit difference from net:run with the
-- masks over the first sequences of the held-out set (0: the same forward, the same masks).
local function check_with_icl_load(path, net, ev, M, nseq)
  local m, n, worst = assert(icl.load(path, {backend = "cpu"})), M.n, 0
  for k, iv in ipairs(M.iv) do
    local cut, ko = edges(n, function(i, j) return not iv.allow(i, j) end), {}
    for _, l in ipairs(iv.layers) do ko[#ko + 1] = {layer = l, edges = cut} end
    if #cut == 0 or #ko == 0 then ko = nil end
    for b = 1, nseq do
      local r = m:run(ev.tokens[b], {inputs = ev.inputs[b], logits = "last", knockout = ko})
      local ref = net:run(ev.tokens[b], {inputs = ev.inputs[b], logits = "last", masks = M.masks[k]})
      worst = math.max(worst, (r.logits - ref.logits):abs():max())
    end
  end
  m:close()
  return worst
end

-- ---- phases ------------------------------------------------------------------------------------------

-- The paper's rule: a boundary where accuracy rises by more than 0.025 within 100 steps (as a rate when
-- evaluations are further apart); consecutive boundary intervals form one transition.
local function find_phases(steps, accs)
  local trans = {}
  for i = 2, #steps do
    local rate = (accs[i] - accs[i - 1]) / (steps[i] - steps[i - 1]) * 100
    if rate > 0.025 then
      local last = trans[#trans]
      if last and last.to == steps[i - 1] then last.to = steps[i] else trans[#trans + 1] = {from = steps[i - 1], to = steps[i]} end
    end
  end
  local plateaus, start = {}, steps[1]
  for _, t in ipairs(trans) do
    plateaus[#plateaus + 1] = {from = start, to = t.from}
    start = t.to
  end
  plateaus[#plateaus + 1] = {from = start, to = steps[#steps]}
  return trans, plateaus
end

-- Names a plateau by what the model uses: "init" near chance (< 3/L); NCC (non-context) when the context
-- does not help (accuracy within 0.1 of the random-label accuracy); SCC (semi-context) when it helps but the
-- labels are not bound to their examples; FCC (full context) when they are, read causally: cutting each
-- label from its example in layer 1 costs more than 0.1 of accuracy. (The attention average of Chunk Example
-- stays near uniform in these runs even when the binding is used, so it is reported beside, not used.)
local function name_phase(r, c)
  if r.acc < 3 / c.L then return "init" end
  if r.acc - r.random_label_acc < 0.1 then return "NCC" end
  if r.acc - r.interventions.label_cut_from_example > 0.1 then return "FCC" end
  return "SCC"
end

local STAGE = {init = 0, NCC = 1, SCC = 2, FCC = 3}

-- The third phase's attention signature by the paper's metric definitions (Bigram A[q,q], Label Attention
-- sum_k A[q,y_k], Chunk Example mean_k A[y_k,x_k], as the authors' slides define them, and the authors'
-- causal-mask code `chunk_example,label_attention` for the full-context circuit; docs/results.md cites both): Chunk Example in layer 1 and Label Attention
-- in layer 2, each beside its value under uniform causal attention (a label at 0-based position 2i+1 sees
-- 2i+2 positions, the query all n). `present` = both more than SIGNATURE_MARGIN above uniform: the attention
-- prefers the example in layer 1 and the labels in layer 2 (random initial weights give Chunk Example 0.264
-- against 0.260, so a zero margin would call that present). The stage names (name_phase) stay causal; this
-- is reported beside them.
local SIGNATURE_MARGIN = 0.05
local function signature(layers, N)
  local n, u_ce = 2 * N + 1, 0
  for i = 0, N - 1 do u_ce = u_ce + 1 / (2 * i + 2) end
  u_ce = u_ce / N
  local ce, la = layers[1].chunk_example, layers[2].label_attention
  return {l1_chunk_example = ce, l2_label_attention = la, uniform_chunk_example = u_ce,
          uniform_label_attention = N / n, l1_ce_over_uniform = ce - u_ce, l2_la_over_uniform = la - N / n,
          l2_la_over_bigram = la - layers[2].bigram,
          present = ce > u_ce + SIGNATURE_MARGIN and la > N / n + SIGNATURE_MARGIN}
end

-- The stages a run passes through: the names of its checkpoints with repeats collapsed.
local function stages(records, c)
  local seq = {}
  for _, r in ipairs(records) do
    local name = name_phase(r, c)
    if seq[#seq] ~= name then seq[#seq + 1] = name end
  end
  return seq
end

-- Runs of consecutive checkpoints with the same stage name: {name, first, last} (indices into records).
local function stage_runs(records, c)
  local runs = {}
  for i, r in ipairs(records) do
    local name, last = name_phase(r, c), runs[#runs]
    if last and last.name == name then last.last = i else runs[#runs + 1] = {name = name, first = i, last = i} end
  end
  return runs
end

local function nearest(records, step)
  local best
  for _, r in ipairs(records) do
    if not best or math.abs(r.step - step) < math.abs(best.step - step) then best = r end
  end
  return best
end

-- ---- figures --------------------------------------------------------------------------------------

local COLORS = {init = "purple", NCC = "grey", SCC = "orange", FCC = "green"}

local function fig_accuracy(res, dir, title)
  local series = {{x = res.acc_steps, y = res.accs, color = "lightgrey", label = "accuracy"}}
  -- coloured by stage: each evaluation takes the stage of the measured checkpoint at or before it
  for _, st in ipairs(stage_runs(res.records, res.config)) do
    local from = res.records[st.first].step
    local to = st.last < #res.records and res.records[st.last + 1].step - 1 or math.huge
    local xs, ys = {}, {}
    for i, s in ipairs(res.acc_steps) do
      if s >= from and s <= to then xs[#xs + 1], ys[#ys + 1] = s, res.accs[i] end
    end
    series[#series + 1] = {x = xs, y = ys, color = COLORS[st.name],
                           label = ("%s  from step %d"):format(st.name, from)}
  end
  local rs, ry = {}, {}
  for _, r in ipairs(res.records) do rs[#rs + 1], ry[#ry + 1] = r.step, r.random_label_acc end
  series[#series + 1] = {x = rs, y = ry, color = "black", label = "random labels in context"}
  for _, t in ipairs(res.transitions) do
    series[#series + 1] = {x = {t.from, t.to}, y = {0.01, 0.01}, color = "red"}
  end
  for _, ext in ipairs({"png", "svg"}) do
    assert(plot.line{series = series, title = title, xlabel = "step", ylabel = "held-out accuracy",
                     ylim = {0, 1}}:save(("%s/accuracy.%s"):format(dir, ext)))
  end
  listed(dir, "accuracy")
end

local function fig_metrics(res, dir, title)
  local series = {}
  for l = 1, 2 do
    for _, m in ipairs({"bigram", "label_attention", "chunk_example"}) do
      local xs, ys = {}, {}
      for _, r in ipairs(res.records) do xs[#xs + 1], ys[#ys + 1] = r.step, r.layers[l][m] end
      series[#series + 1] = {x = xs, y = ys, label = ("layer %d %s"):format(l, m)}
    end
  end
  for _, ext in ipairs({"png", "svg"}) do
    assert(plot.line{series = series, title = title, xlabel = "step", ylabel = "attention",
                     ylim = {0, 1}}:save(("%s/metrics.%s"):format(dir, ext)))
  end
  listed(dir, "metrics")
end

local POS = {"x1", "y1", "x2", "y2", "x3", "y3", "x4", "y4", "xq"}

-- Mean attention maps at the middle checkpoint of each stage (init, NCC, SCC, FCC as the data name them).
local function fig_maps(res, dir, n)
  local lab = {}
  for i = 1, n do lab[i] = POS[i] or tostring(i) end
  for k, st in ipairs(stage_runs(res.records, res.config)) do
    local r = res.records[(st.first + st.last) // 2]
    for l = 1, 2 do
      for _, ext in ipairs({"png", "svg"}) do
        assert(plot.heatmap{data = r.layers[l].pattern, row_labels = lab, col_labels = lab, vmin = 0, vmax = 1,
                            title = ("stage %d (%s), step %d, layer %d"):format(k, st.name, r.step, l),
                            width = 480, height = 400}:save(("%s/attention_phase%d_layer%d.%s"):format(dir, k, l, ext)))
      end
      listed(dir, ("attention_phase%d_layer%d"):format(k, l))
    end
  end
end

-- ---- one run ----------------------------------------------------------------------------------------

local function summarize(res, c)
  res.transitions, res.plateaus = find_phases(res.acc_steps, res.accs)
  for _, p in ipairs(res.plateaus) do
    local r = nearest(res.records, (p.from + p.to) // 2)
    p.name, p.at = name_phase(r, c), r.step
    p.acc = r.acc
  end
  res.final = res.records[#res.records]
end

-- Creates a run's folder (a sweep's runs have their own), or raises naming it.
local function make_dir(dir)
  local ok, err = icl.fs.make_dirs(dir)
  if not ok then error(("meta_learning: %s"):format(err), 0) end
end

local function run_one(c, dir)
  make_dir(dir)
  local data, info = make_data(c)
  local n = 2 * c.N + 1
  local M, ev, rl, sl = prepare(c, data, n)
  local net = make_net(c, n)
  local res = {config = c, acc_steps = {}, accs = {}, records = {}, max_check = 0, data_check = data_check(ev, info, c)}
  local function eval(step)
    res.acc_steps[#res.acc_steps + 1] = step
    res.accs[#res.accs + 1] = accuracy(query_logits(net, ev), ev)
    if step % c.metric_every == 0 or step == c.steps then
      local r = measure(net, c, ev, rl, M, sl)
      r.step = step
      res.records[#res.records + 1] = r
      res.max_check = math.max(res.max_check, r.check)
      assert(r.check < 1e-3, ("net:run differs from net:forward by %g at step %d"):format(r.check, step))
    end
  end
  eval(0)
  local t0 = os.time()
  local out = icl.train{model = net, data = function(step, B) return data(step, B) end, steps = c.steps,
                        batch = c.batch, every = c.acc_every, on_eval = function(step) eval(step) end,
                        optim = icl.optim.sgd{lr = c.lr, momentum = 0, clip = 0, cosine = false}}
  if res.acc_steps[#res.acc_steps] ~= out.step then eval(out.step) end
  res.seconds, res.steps_done = out.seconds, out.step
  res.wall_s = os.time() - t0
  assert(net:save(dir .. "/final.gguf"))
  res.icl_load_check = check_with_icl_load(dir .. "/final.gguf", net, ev, M, 4)
  assert(res.icl_load_check < 1e-3, "icl.load + knockouts differ from net:run + masks by " .. res.icl_load_check)
  summarize(res, c)
  return res
end

-- Measures checkpoints DIR/step-*.gguf (any trainer's, same model and data options).
local function analyze(c, dir, outdir)
  make_dir(outdir)
  local data, info = make_data(c)
  local n = 2 * c.N + 1
  local M, ev, rl, sl = prepare(c, data, n)
  local files = {}
  local names, err = icl.fs.list(dir)
  if not names then error(("--analyze %s"):format(err), 0) end
  for _, f in ipairs(names) do
    local st = f:match("^step%-(%d+)%.gguf$")
    st = st and math.tointeger(tonumber(st))
    if st and (o.analyze_every <= 0 or st % o.analyze_every == 0) then files[#files + 1] = f end
  end
  table.sort(files)
  if #files == 0 then error(("--analyze %s: no step-*.gguf there"):format(dir), 0) end
  local res = {config = c, acc_steps = {}, accs = {}, records = {}, max_check = 0, analyzed = dir,
               data_check = data_check(ev, info, c)}
  local bar = icl.progress.new{total = #files, label = "checkpoints"}
  for _, f in ipairs(files) do
    local net = assert(icl.nn.load(dir .. "/" .. f, c.threads))
    local r = measure(net, c, ev, rl, M, sl)
    r.step = net:step()
    res.records[#res.records + 1] = r
    res.acc_steps[#res.acc_steps + 1], res.accs[#res.accs + 1] = r.step, r.acc
    res.max_check = math.max(res.max_check, r.check)
    net:close()
    bar:update()
  end
  bar:done()
  summarize(res, c)
  return res
end

local function write_run(res, dir, title)
  fig_accuracy(res, dir, title)
  fig_metrics(res, dir, title)
  fig_maps(res, dir, 2 * res.config.N + 1)
  local slim = {config = res.config, transitions = res.transitions, plateaus = res.plateaus, steps = res.steps_done,
                stages = stages(res.records, res.config), max_logit_check = res.max_check,
                icl_load_check = res.icl_load_check, analyzed = res.analyzed, data_check = res.data_check,
                accuracy = {steps = res.acc_steps, values = res.accs}, checkpoints = {}}
  for _, r in ipairs(res.records) do
    local layers = {}
    for l = 1, 2 do
      layers[l] = {bigram = r.layers[l].bigram, label_attention = r.layers[l].label_attention,
                   chunk_example = r.layers[l].chunk_example}
    end
    slim.checkpoints[#slim.checkpoints + 1] = {step = r.step, acc = r.acc, random_label_acc = r.random_label_acc,
                                                shuffled_label_acc = r.shuffled_label_acc,
                                                stage = name_phase(r, res.config), layers = layers,
                                                signature = signature(layers, res.config.N),
                                                interventions = r.interventions}
  end
  -- the first checkpoint at which each half of the signature, and both, are above uniform by the margin (nil: never)
  local first = {}
  for _, cp in ipairs(slim.checkpoints) do
    local g = cp.signature
    if not first.l1_chunk_example and g.l1_ce_over_uniform > SIGNATURE_MARGIN then first.l1_chunk_example = cp.step end
    if not first.l2_label_attention and g.l2_la_over_uniform > SIGNATURE_MARGIN then first.l2_label_attention = cp.step end
    if not first.both and g.present then first.both = cp.step end
  end
  slim.signature_first_step, slim.signature_margin = first, SIGNATURE_MARGIN
  assert(json.write(dir .. "/summary.json", slim)) -- no timings: the same options give the same bytes
  return slim
end

local function report(res, title)
  local how = res.analyzed and ("checkpoints of " .. res.analyzed) or ("%.0f s of training"):format(res.seconds)
  say(("%s: %d steps (%s), final acc %.3f (random labels %.3f), %d transitions, stages %s"):format(title,
    res.steps_done or res.final.step, how, res.final.acc, res.final.random_label_acc, #res.transitions,
    table.concat(stages(res.records, res.config), " > ")))
  for k, p in ipairs(res.plateaus) do
    local r = nearest(res.records, (p.from + p.to) // 2)
    say(("  phase %d %-3s steps %6d-%-6d acc %.3f | L1 bg %.2f la %.2f ce %.2f | L2 bg %.2f la %.2f ce %.2f"):format(
      k, p.name, p.from, p.to, r.acc, r.layers[1].bigram, r.layers[1].label_attention, r.layers[1].chunk_example,
      r.layers[2].bigram, r.layers[2].label_attention, r.layers[2].chunk_example))
    local iv = {}
    for _, x in ipairs(interventions(9)) do
      if r.interventions[x.name] then iv[#iv + 1] = ("%s %.3f"):format(x.name, r.interventions[x.name]) end
    end
    say("           interventions: " .. table.concat(iv, ", "))
  end
  say("  step    acc   rand  shuf | FCC signature: L1 chunk ex (uniform) L2 label att (uniform) present | stage")
  for _, r in ipairs(res.records) do
    local g = signature(r.layers, res.config.N)
    say(("  %6d %.3f %.3f %s |   %.3f (%.3f)   %.3f (%.3f)   %-5s | %s"):format(r.step, r.acc, r.random_label_acc,
      r.shuffled_label_acc and ("%.3f"):format(r.shuffled_label_acc) or "  -  ", g.l1_chunk_example,
      g.uniform_chunk_example, g.l2_label_attention, g.uniform_label_attention, tostring(g.present),
      name_phase(r, res.config)))
  end
end

local function config_of(over)
  local c = {}
  for _, k in ipairs({"K", "T", "N", "L", "eps", "alpha", "heads", "p_in_context", "steps", "batch", "lr", "init_std",
                      "cls_hidden", "acc_every", "metric_every", "eval_n", "seed", "threads"}) do c[k] = o[k] end
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

local CONFIG_KEYS = {"K", "T", "N", "L", "eps", "alpha", "heads", "p_in_context", "steps", "batch", "lr", "init_std",
                     "cls_hidden", "acc_every", "metric_every", "eval_n", "seed"}
local CONFIG_ABSENT = {p_in_context = 0} -- keys older summaries lack, read as their default

-- Whether a summary's configuration is the one asked (threads aside: results do not depend on them).
local function same_config(a, b)
  for _, k in ipairs(CONFIG_KEYS) do
    if ("%.6g"):format(a[k] or CONFIG_ABSENT[k] or -1) ~= ("%.6g"):format(b[k] or -1) then return false end
  end
  return true
end

-- The label-set reader in the setting the formula p = 1 - C(K-2,4)/C(K-1,4) describes (as reconstructed in
-- docs/results.md): K classes whose labels are a permutation of K labels, task t shifts them by t (mod K), the
-- N context classes distinct and never the query's (drawn from the other K - 1). Simulated on n sequences:
-- the posterior of t is proportional to prod_l of the falling factorial of the classes other than the query
-- with label l under t, and the answer is the query's label under the most probable task (ties shared).
local function ideal_label_set_bayes(K, T, N, n, seed)
  local rng = icl.rng.new(seed)
  local base = rng:shuffle((function() local t = {} for k = 1, K do t[k] = k - 1 end return t end)())
  local hit = 0
  for _ = 1, n do
    local t0, q = rng:int(1, T), rng:int(1, K)
    local others = {}
    for k = 1, K do if k ~= q then others[#others + 1] = k end end
    rng:shuffle(others)
    local m = {}
    for i = 1, N do local l = (base[others[i]] + t0 - 1) % K; m[l] = (m[l] or 0) + 1 end
    local best, ties = -1, {}
    for t = 1, T do
      local w = 1
      for l, k in pairs(m) do -- one class per label; the query's class cannot be in the context
        local nl = ((base[q] + t - 1) % K == l) and 0 or 1
        for j = 0, k - 1 do w = w * math.max(nl - j, 0) end
      end
      if w > best then best, ties = w, {t} elseif w == best then ties[#ties + 1] = t end
    end
    for _, t in ipairs(ties) do if t == t0 then hit = hit + 1 / #ties end end
  end
  return hit / n
end

-- The paper's SCC formula p = 1 - C(K-2,4)/C(K-1,4) (= 4/(K-1)) beside the label-set Bayes accuracy of this
-- generator, for K = 8, 16, 32 and --K and T = 2, 3, on --eval_n held-out sequences of each configuration.
local function theory(dir)
  local function choose(a, b) local r = 1; for i = 1, b do r = r * (a - b + i) / i end; return r end
  local rows, Ks = {}, {8, 16, 32}
  if o.K ~= 8 and o.K ~= 16 and o.K ~= 32 then Ks[#Ks + 1] = o.K end
  say("   K  T  p=1-C(K-2,4)/C(K-1,4)  (1+p)/2  Bayes label-set acc (held-out / shuffled / random labels)  " ..
        "query in ctx  permutation labels, query never in ctx")
  for _, K in ipairs(Ks) do
    for _, T in ipairs({2, 3}) do
      local c = {K = K, T = T, N = o.N, L = o.L, eps = o.eps, alpha = 0, seed = o.seed, p_in_context = o.p_in_context}
      local data, info = make_data(c)
      local ev = data(0, o.eval_n, {stream = 1})
      local rl = data(0, o.eval_n, {stream = 2, random_labels = true})
      local p = o.N == 4 and 1 - choose(K - 2, 4) / choose(K - 1, 4) or nil
      local r = {K = K, T = T, p_formula = p, bayes_label_set_acc = label_set_bayes(ev, info, c),
                 bayes_shuffled_acc = label_set_bayes(shuffled_labels(ev, c), info, c),
                 bayes_random_label_acc = label_set_bayes(rl, info, c), data_check = data_check(ev, info, c),
                 ideal_bayes_acc = ideal_label_set_bayes(K, T, o.N, o.eval_n, o.seed * 31 + K * 7 + T)}
      rows[#rows + 1] = r
      say(("%4d %2d  %21s  %7s  %.3f / %.3f / %.3f  %44.3f  %.3f"):format(K, T, p and ("%.4f"):format(p) or "-",
        p and ("%.4f"):format((1 + p) / 2) or "-", r.bayes_label_set_acc, r.bayes_shuffled_acc,
        r.bayes_random_label_acc, r.data_check.query_in_context, r.ideal_bayes_acc))
    end
  end
  make_dir(dir)
  assert(json.write(dir .. "/theory.json", {eval_n = o.eval_n, N = o.N, L = o.L, seed = o.seed, rows = rows}))
  if dir == o.out then ex:add("theory.json") end
  say(("wrote %s/theory.json"):format(dir))
end

if o.theory then
  theory(o.out)
  ex:index(lines)
  return
end

local main = config_of()
local title = ("K=%d T=%d eps=%g heads=%d"):format(main.K, main.T, main.eps, main.heads) ..
              (main.p_in_context > 0 and (" p_B=%g"):format(main.p_in_context) or "")
-- With --sweep, a main run already measured (same configuration, same checkpoints) is read back, so a sweep
-- split over processes by --variants can be put together at the end without measuring again.
local summary = o.sweep and json.read(o.out .. "/summary.json")
if summary and same_config(summary.config, main) and summary.analyzed == (o.analyze ~= "" and o.analyze or nil) then
  say(("main: read from %s/summary.json (stages %s)"):format(o.out, table.concat(summary.stages, " > ")))
  for _, f in ipairs(icl.fs.list(o.out) or {}) do -- its figures, written with it
    local base = f:match("^(accuracy)%.png$") or f:match("^(metrics)%.png$") or f:match("^(attention_phase%d+_layer%d+)%.png$")
    if base then ex:add(base .. ".{png,svg}") end
  end
else
  local res
  if o.analyze ~= "" then res = analyze(main, o.analyze, o.out) else res = run_one(main, o.out) end
  summary = write_run(res, o.out, title)
  report(res, title)
end

-- Stage (0 init, 1 NCC, 2 SCC, 3 FCC) of every checkpoint of every run: how many phases each passes through.
local function fig_stages(runs, dir)
  local series = {}
  for _, r in ipairs(runs) do
    local xs, ys = {}, {}
    for i, cp in ipairs(r.s.checkpoints) do xs[i], ys[i] = cp.step, STAGE[cp.stage] + (#series - 3) * 0.03 end
    series[#series + 1] = {x = xs, y = ys, label = ("%s: %s"):format(r.name, table.concat(r.s.stages, ">"))}
  end
  for _, ext in ipairs({"png", "svg"}) do
    assert(plot.line{series = series, title = "stage by step (0 init, 1 NCC, 2 SCC, 3 FCC; offset to separate)",
                     xlabel = "step", ylabel = "stage", ylim = {-0.3, 3.5}}:save(("%s/sweep_stages.%s"):format(dir, ext)))
  end
  listed(dir, "sweep_stages")
end

if o.sweep then
  local SWEEP_DIR = o.sweep_dir ~= "" and o.sweep_dir or o.out .. "/sweep"
  local sweep = {main = summary, runs = {}}
  local list = {{name = "main " .. title, s = summary}}
  local variants = {{T = 1}, {T = 2}, {K = main.K // 4}, {K = main.K * 4}, {eps = 0.5}, {heads = 4}}
  local wanted = {}
  for i in tostring(o.variants):gmatch("%d+") do wanted[tonumber(i)] = true end
  for i, v in ipairs(variants) do
    v.steps = o.sweep_steps > 0 and o.sweep_steps or o.steps
    local c = config_of(v)
    local name = ("K%d_T%d_eps%g_h%d"):format(c.K, c.T, c.eps, c.heads)
    local dir = SWEEP_DIR .. "/" .. name
    local old = json.read(dir .. "/summary.json")
    if old and same_config(old.config, c) then
      sweep.runs[name] = old
      say(("%s: read from %s/summary.json (stages %s)"):format(name, dir, table.concat(old.stages, " > ")))
    elseif o.variants == "" or wanted[i] then
      local r = run_one(c, dir)
      sweep.runs[name] = write_run(r, dir, name)
      report(r, name)
    end
  end
  for _, v in ipairs(variants) do -- again: runs another process finished meanwhile are read too
    local c = config_of(v)
    local name = ("K%d_T%d_eps%g_h%d"):format(c.K, c.T, c.eps, c.heads)
    local old = not sweep.runs[name] and json.read(SWEEP_DIR .. "/" .. name .. "/summary.json")
    if old and same_config(old.config, c) then sweep.runs[name] = old end
    if sweep.runs[name] then list[#list + 1] = {name = name, s = sweep.runs[name]} end
  end
  local series = {}
  for name, s in pairs(sweep.runs) do series[#series + 1] = {x = s.accuracy.steps, y = s.accuracy.values, label = name} end
  table.sort(series, function(a, b) return a.label < b.label end)
  series[#series + 1] = {x = summary.accuracy.steps, y = summary.accuracy.values, label = "main " .. title, color = "black"}
  for _, ext in ipairs({"png", "svg"}) do
    assert(plot.line{series = series, title = "sweep: accuracy", xlabel = "step", ylabel = "held-out accuracy",
                     ylim = {0, 1}}:save(("%s/sweep_accuracy.%s"):format(o.out, ext)))
  end
  listed(o.out, "sweep_accuracy")
  fig_stages(list, o.out)
  assert(json.write(o.out .. "/sweep.json", sweep))
  ex:add("sweep.json")
end
ex:index(lines)
print(("wrote %s/{summary.json,index.html,accuracy,metrics,attention_phase*}.{png,svg} in %d s (%.0f s of CPU)"):format(
  o.out, os.time() - wall0, os.clock()))
