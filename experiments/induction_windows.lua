-- The phase windows of induction_phase runs across seeds and schedules (Olsson et al. 2022; issue 41): reads the
-- summary.json of every task of one or more `icl sweep` folders of experiments/induction_phase.lua (or plain
-- output folders) and tabulates, per model and run, the ICL score's and the best prefix-matching score's windows
-- (the steepest stretch and the 10-90% window of the change), the overlap of the two 10-90% windows, and where the
-- ICL window sits in steps, in tokens seen and in cumulative learning rate (the sum of the schedule's learning rate
-- over the steps before it, the quantity a schedule-driven transition would follow). Mean +- SE over the runs of
-- each model and schedule. Where the checkpoints carry the papers' copying measures (copying_olsson, copying_eigen),
-- a second table gives them per head role at step 0, at the last checkpoint before the ICL window and at the end:
-- induction head (final prefix matching >= --induction), previous-token head (final previous-token score >= 0.3),
-- other; mean +- SE over the runs of each model.
--   icl script experiments/induction_windows.lua --dirs out/olsson-seeds[,out/olsson-warmup,...]
local X, json = icl.experiment, icl.json
local ex = X{name = "induction_windows", model = "none",
  about = "phase windows of induction_phase runs over seeds and schedules: tables with mean +- SE",
  options = {{"dirs", "out/olsson-seeds", "comma-separated sweep folders (tasks/NNNN/summary.json) or run folders"},
             {"by", "schedule", "group runs by: schedule (warmup, lr) or none"},
             {"induction", 0.3, "final prefix matching from which a head counts as an induction head", num = {0, 1}}}}
local o = ex.o
if o.by ~= "schedule" and o.by ~= "none" then error("--by: schedule or none, not " .. o.by, 0) end

-- the learning rate of step s (0-based) under the trainer's schedule (src/train/train_optim.c: linear warmup to
-- lr, cosine to min_lr * lr at decay_steps = steps), and its sum over steps 0 .. n - 1
local function cum_lr(opt, n)
  local lr, W, D, mn = opt.lr, opt.warmup, opt.steps, 0.1
  local acc = 0
  for s = 0, n - 1 do
    local v
    if W > 0 and s < W then
      v = lr * (s + 1) / W
    elseif D <= W then
      v = lr
    else
      local t = math.min(1, (s - W) / (D - W))
      v = lr * (mn + (1 - mn) * 0.5 * (1 + math.cos(math.pi * t)))
    end
    acc = acc + v
  end
  return acc
end

local function exists(path)
  local fh = io.open(path, "rb")
  if fh then fh:close() end
  return fh ~= nil
end
local files = {}
for dir in o.dirs:gmatch("[^,]+") do
  if exists(dir .. "/summary.json") then
    files[#files + 1] = dir .. "/summary.json"
  else
    local list = icl.fs.list(dir .. "/tasks")
    if not list then error(("--dirs %s: neither summary.json nor tasks/ there"):format(dir), 0) end
    table.sort(list)
    for _, t in ipairs(list) do
      local f = ("%s/tasks/%s/summary.json"):format(dir, t)
      if not t:match("%.tmp$") and exists(f) then files[#files + 1] = f end
    end
  end
end
if #files == 0 then error("--dirs " .. o.dirs .. ": no summary.json found", 0) end

local function win(w) return (w ~= nil and w ~= json.null and w.from and w.to) and w or nil end
local function overlap(a, b)
  if not a or not b then return nil end
  return math.max(0, math.min(a.to, b.to) - math.max(a.from, b.from))
end

local rows, groups, order = {}, {}, {}
local roles, role_order = {}, {} -- [model .. role .. when .. measure] = list of values
for _, f in ipairs(files) do
  local s = assert(json.read(f))
  local op = s.options
  for _, r in ipairs(s.runs) do
    local last = r.checkpoints[#r.checkpoints]
    local iw, pw = win(r.icl_window), win(r.pm_window)
    local i9, p9 = win(r.icl_window_10_90), win(r.pm_window_10_90)
    local ov = overlap(i9, p9)
    local row = {file = f, model = r.name, seed = op.seed, warmup = op.warmup, lr = op.lr,
                 icl_final = last.icl_score, pm_final = last.max_prefix_matching,
                 icl_from = iw and iw.from, icl_to = iw and iw.to, icl_share = iw and iw.share,
                 pm_from = pw and pw.from, pm_to = pw and pw.to,
                 icl9_from = i9 and i9.from, icl9_to = i9 and i9.to, pm9_from = p9 and p9.from, pm9_to = p9 and p9.to,
                 overlap_10_90 = ov, overlap_frac = ov and i9 and (i9.to > i9.from) and ov / (i9.to - i9.from) or nil,
                 steepest_overlap = overlap(iw, pw),
                 tokens_at_icl = iw and iw.from * op.batch * op.ctx,
                 cum_lr_at_icl = iw and cum_lr(op, iw.from), cum_lr_at_icl_end = iw and cum_lr(op, iw.to)}
    rows[#rows + 1] = row
    if last.copying_olsson then
      local before = r.checkpoints[1]
      for _, c in ipairs(r.checkpoints) do if iw and c.step < iw.from then before = c end end
      for l = 1, #last.prefix_matching do
        for h = 1, #last.prefix_matching[l] do
          local role = last.prefix_matching[l][h] >= o.induction and "induction" or
                       (last.previous_token[l][h] >= 0.3 and "previous token" or "other")
          for _, w in ipairs({{"step 0", r.checkpoints[1]}, {"before the ICL window", before}, {"end", last}}) do
            for _, k in ipairs({"copying_olsson", "copying_olsson_repeated", "copying_eigen", "copying"}) do
              if not w[2][k] then goto skip end
              local key = ("%s|%s|%s|%s"):format(r.name, role, w[1], k)
              if not roles[key] then roles[key] = {}; role_order[#role_order + 1] = key end
              table.insert(roles[key], w[2][k][l][h])
              ::skip::
            end
          end
        end
      end
    end
    local key = o.by == "schedule" and ("%s warmup %d lr %g"):format(r.name, op.warmup, op.lr) or r.name
    if not groups[key] then groups[key] = {}; order[#order + 1] = key end
    table.insert(groups[key], row)
  end
end

local function f0(v) return v and ("%d"):format(v) or "–" end
local function f3(v) return v and ("%.3f"):format(v) or "–" end
local lines = {"| model | seed | warmup | lr | ICL score at the end | best prefix matching at the end | ICL window (steepest, share) | " ..
               "PM window (steepest) | ICL 10–90 % | PM 10–90 % | overlap of the 10–90 % windows (steps, share of ICL's) | " ..
               "steepest windows overlap (steps) | cumulative lr at the ICL window |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|"}
for _, r in ipairs(rows) do
  lines[#lines + 1] = ("| %s | %d | %d | %g | %.3f | %.3f | %s..%s (%s) | %s..%s | %s..%s | %s..%s | %s (%s) | %s | %s..%s |")
    :format(r.model, r.seed, r.warmup, r.lr, r.icl_final, r.pm_final, f0(r.icl_from), f0(r.icl_to),
            r.icl_share and ("%.0f %%"):format(100 * r.icl_share) or "–", f0(r.pm_from), f0(r.pm_to), f0(r.icl9_from),
            f0(r.icl9_to), f0(r.pm9_from), f0(r.pm9_to), f0(r.overlap_10_90), r.overlap_frac and ("%.0f %%"):format(100 * r.overlap_frac) or "–",
            f0(r.steepest_overlap), f3(r.cum_lr_at_icl), f3(r.cum_lr_at_icl_end))
end
lines[#lines + 1] = ""
local KEYS = {"icl_final", "pm_final", "icl_from", "icl_to", "pm_from", "pm_to", "icl9_from", "icl9_to", "pm9_from", "pm9_to",
              "overlap_10_90", "overlap_frac", "steepest_overlap", "cum_lr_at_icl", "cum_lr_at_icl_end"}
lines[#lines + 1] = "| group | runs | " .. table.concat(KEYS, " | ") .. " |"
lines[#lines + 1] = "|---|---|" .. ("---|"):rep(#KEYS)
local stats = {}
for _, g in ipairs(order) do
  local cells, st = {}, {runs = #groups[g]}
  for _, k in ipairs(KEYS) do
    local v = {}
    for _, r in ipairs(groups[g]) do if r[k] then v[#v + 1] = r[k] end end
    if #v > 0 then
      local m, se = icl.metrics.mean_se(v)
      st[k] = {mean = m, se = se, n = #v}
      local fmt = (k:match("final") or k:match("frac") or k:match("lr")) and "%.3f ± %.3f" or "%.0f ± %.0f"
      cells[#cells + 1] = (fmt .. " (%d)"):format(m, se, #v)
    else
      cells[#cells + 1] = "–"
    end
  end
  stats[g] = st
  lines[#lines + 1] = ("| %s | %d | %s |"):format(g, #groups[g], table.concat(cells, " | "))
end
local role_stats = {}
if #role_order > 0 then
  lines[#lines + 1] = ""
  lines[#lines + 1] = "| model | head role | checkpoint | measure | mean ± SE (heads over runs) |"
  lines[#lines + 1] = "|---|---|---|---|---|"
  for _, key in ipairs(role_order) do
    local m, se = icl.metrics.mean_se(roles[key])
    local a, b, c, d = key:match("([^|]*)|([^|]*)|([^|]*)|([^|]*)")
    role_stats[#role_stats + 1] = {model = a, role = b, checkpoint = c, measure = d, mean = m, se = se, n = #roles[key]}
    lines[#lines + 1] = ("| %s | %s | %s | %s | %.3f ± %.3f (%d) |"):format(a, b, c, d, m, se, #roles[key])
  end
end
ex:report({dirs = o.dirs, rows = rows, groups = stats, order = order, roles = role_stats}, lines)
