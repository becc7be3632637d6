-- icl.ablation: removing attention heads from a run at blocks.L.attn.hook_z, three ways, and the next-token loss
-- that checks what else an ablation broke.
--
--   zero      hook_z of each ablated head set to 0 at every position.
--   mean      hook_z of each ablated head replaced at every position by one row: the head's mean hook_z over
--             every position (BOS included) of the OTHER sequences of a reference set (leave-one-out: sequence b
--             never sees its own activations). The sequences of a set have equal lengths, so this is the mean
--             of the other sequences' per-sequence position means.
--   resample  hook_z of each ablated head replaced at every position by its value at the same position in the
--             unablated run of another sequence of the set (the donor: sequence b % n + 1, the next one).
--
-- A reference set records the unablated runs it needs (ref:capture() in the run's captures, ref:record(b, r) after
-- it); ref:interventions(mode, heads, b) then gives the run options {ablate = ...} or {patch = ...}.
--
--   local ref = icl.ablation.reference{n = #seqs, layers = {0, 5}, keep_z = true}
--   for b, s in ipairs(seqs) do ref:record(b, m:run(s, {logits = "none", capture = ref:capture()})) end
--   local iv = ref:interventions("mean", {{layer = 5, head = 1}}, 2)   -- {ablate = {{layer = 5, ...}}}
--   local r = m:run(seqs[2], icl.ablation.merge({logits = "last"}, iv))
local M = {}

M.MODES = {"zero", "mean", "resample"}
M.ABOUT = {
  zero = "hook_z of the ablated heads set to 0 at every position",
  mean = "hook_z of the ablated heads replaced at every position by its mean over every position of the other "
    .. "sequences' unablated runs (leave-one-out)",
  resample = "hook_z of the ablated heads replaced by its value at the same positions in the unablated run of "
    .. "another sequence (sequence b takes sequence b % n + 1's)",
}

-- check_mode(mode, flag): the mode, or an error naming the flag and the accepted values.
function M.check_mode(mode, flag)
  for _, v in ipairs(M.MODES) do if v == mode then return mode end end
  error(("%s '%s': expected zero, mean or resample"):format(flag or "ablation mode", tostring(mode)), 0)
end

-- by_layer(heads): the heads {{layer =, head =}, ...} grouped per layer, layers ascending, heads sorted:
-- {{layer = l, heads = {h, ...}}, ...}.
function M.by_layer(hl)
  local by, out = {}, {}
  for _, e in ipairs(hl) do
    by[e.layer] = by[e.layer] or {}
    table.insert(by[e.layer], e.head)
  end
  local ls = {}
  for l in pairs(by) do ls[#ls + 1] = l end
  table.sort(ls)
  for _, l in ipairs(ls) do
    table.sort(by[l])
    out[#out + 1] = {layer = l, heads = by[l]}
  end
  return out
end

local function zname(l) return ("blocks.%d.attn.hook_z"):format(l) end
M.z_name = zname

-- merge(a, b, ...): a new table with the fields of each in turn (later ones win).
function M.merge(...)
  local t = {}
  for i = 1, select("#", ...) do
    for k, v in pairs(select(i, ...) or {}) do t[k] = v end
  end
  return t
end

local Ref = {}
Ref.__index = Ref

-- reference{n =, layers = {l, ...}, keep_z = false}: a reference set of n equal-length sequences whose unablated
-- runs capture hook_z at the given layers. keep_z keeps every sequence's whole hook_z (resample needs it:
-- n x #layers x [pos, nh, hd] floats); without it only the position means are kept (mean and zero need no more).
function M.reference(spec)
  if type(spec) ~= "table" or math.type(spec.n) ~= "integer" or spec.n < 1 or type(spec.layers) ~= "table" then
    error("ablation.reference: expected {n = sequences >= 1, layers = {...}}", 2)
  end
  local r = setmetatable({n = spec.n, layers = {}, keep_z = spec.keep_z and true or false, means = {}, z = {},
                          len = nil}, Ref)
  local seen = {}
  for _, l in ipairs(spec.layers) do
    if not seen[l] then r.layers[#r.layers + 1], seen[l] = l, true end
  end
  table.sort(r.layers)
  return r
end

-- ref:capture(): the capture entries an unablated run must include (every head of each layer, every position).
function Ref:capture()
  local c = {}
  for i, l in ipairs(self.layers) do c[i] = zname(l) end
  return c
end

-- ref:record(b, result): stores sequence b's captures from its unablated run (result of m:run with ref:capture()).
function Ref:record(b, res)
  if math.type(b) ~= "integer" or b < 1 or b > self.n then
    error(("ablation: sequence %s is outside 1..%d"):format(tostring(b), self.n), 2)
  end
  self.means[b], self.z[b] = {}, self.keep_z and {} or nil
  for _, l in ipairs(self.layers) do
    local z = res[zname(l)]
    if not z then error(("ablation: the run of sequence %d has no capture %s"):format(b, zname(l)), 2) end
    local len = z:shape()[1]
    if self.len and self.len ~= len then
      error(("ablation: sequence %d has %d positions, the set's others %d (a reference set needs equal lengths)")
            :format(b, len, self.len), 2)
    end
    self.len = len
    self.means[b][l] = z:mean(1) -- [nh, hd]
    if self.keep_z then self.z[b][l] = z end
  end
end

-- ref:loo_mean(b, l): [nh, hd], the mean of layer l's hook_z over every position of every sequence but b.
function Ref:loo_mean(b, l)
  if self.n < 2 then error("ablation: mean ablation needs a reference set of at least 2 sequences", 2) end
  local s, k = nil, 0
  for c = 1, self.n do
    if c ~= b then
      local mu = self.means[c] and self.means[c][l]
      if not mu then error(("ablation: sequence %d of the reference set was not recorded (layer %d)"):format(c, l), 2) end
      s, k = s and s + mu or mu:clone(), k + 1
    end
  end
  return s / k
end

-- ref:donor(b): the sequence whose activations resample ablation patches into sequence b.
function Ref:donor(b) return b % self.n + 1 end

-- ref:interventions(mode, heads, b [, donor]): the run options that ablate the heads {{layer =, head =}, ...} in
-- the run of sequence b: {ablate = {...}} (zero, mean) or {patch = {...}} (resample, from ref:donor(b) unless a
-- donor is given); {} for no heads.
function Ref:interventions(mode, hl, b, donor)
  M.check_mode(mode)
  local groups, out = M.by_layer(hl), {}
  if #groups == 0 then return {} end
  if mode == "resample" then
    if not self.keep_z then error("ablation: resample ablation needs a reference set with keep_z", 2) end
    if not donor and self.n < 2 then
      error("ablation: resample ablation needs a reference set of at least 2 sequences", 2)
    end
    donor = donor or self:donor(b)
    local zd = self.z[donor]
    if not zd then error(("ablation: donor sequence %d was not recorded"):format(donor), 2) end
    for i, g in ipairs(groups) do
      local z = zd[g.layer]
      if not z then error(("ablation: layer %d is not in the reference set"):format(g.layer), 2) end
      out[i] = {layer = g.layer, hook = "z", heads = g.heads, value = z}
    end
    return {patch = out}
  end
  for i, g in ipairs(groups) do
    out[i] = {layer = g.layer, heads = g.heads, mode = mode}
    if mode == "mean" then out[i].value = self:loo_mean(b, g.layer) end
  end
  return {ablate = out}
end

-- next_token_nll(m, toks, opts): the losses -log p(toks[i + 1] | toks[1..i]) for i = 1..#toks - 1, from one run
-- with reduced logits (the selected ids are the sequence's distinct tokens, so [n, vocab] never reaches the host).
-- opts: run options merged in (ablate, patch, capture, ...). Returns the losses and the run's result.
function M.next_token_nll(m, toks, opts)
  local ids, col = {}, {}
  for i = 2, #toks do
    local t = toks[i]
    if not col[t] then ids[#ids + 1] = t; col[t] = #ids end
  end
  local r = assert(m:run(toks, M.merge(opts, {logits = {select = ids, lse = true}})))
  local pick = {}
  for i = 1, #toks - 1 do pick[i] = col[toks[i + 1]] end
  pick[#toks] = 1
  local sel, lse = r.logits:gather(2, pick):totable(), r.lse:totable()
  local out = {}
  for i = 1, #toks - 1 do out[i] = lse[i] - sel[i] end
  return out, r
end

-- mean_of(xs, from, to): the mean of xs[from..to].
function M.mean_of(xs, from, to)
  from, to = from or 1, to or #xs
  local s = 0
  for i = from, to do s = s + xs[i] end
  return s / (to - from + 1)
end

return M
