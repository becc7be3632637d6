-- The markdown tables of docs/results.md from a head_ablation summary.json: late accuracy (mean ± SE over walks)
-- for every mode side by side, then the capability check (loss in nats, mean ± SE over sequences, and its paired
-- change from the unablated model) per set.
--   icl script scripts/head-ablation-table.lua out/head_ablation/summary.json
-- Several summaries (runs of the same protocol with other --seed values) are pooled: every cell becomes the
-- mean ± SE over all their walks (or text windows, sequences), exactly as one run over those samples would give.
--   icl script scripts/head-ablation-table.lua A/summary.json [B/summary.json ...]
-- --per-walk also lists every walk's late accuracy for each ablated cell (each run's walks in order), so a cell with a
-- large SE can be traced to its walks, and splits the resample cells by the donor's colour (below).
--   icl script scripts/head-ablation-table.lua --per-walk A/summary.json [B/summary.json ...]
local USAGE = "usage: icl script scripts/head-ablation-table.lua [--per-walk] SUMMARY.json [SUMMARY.json ...]"
local files, per_walk = {}, false
for _, a in ipairs(arg) do
  if a == "--per-walk" then per_walk = true
  elseif a:sub(1, 2) == "--" then error(("%s: unknown option (%s)"):format(a, USAGE), 0)
  else files[#files + 1] = a end
end
if not files[1] then error(USAGE, 0) end
local null = icl.json.null
local metrics = require("icl.metrics")
local runs = require("icl.runs").read(files, {experiment = "head_ablation", has = "by_mode",
  hint = "run it with --ablation", same = {"model_name", "precision", "length", "walks", "random_sets", "late_from",
                                           "late_to"}})
for i = 2, #runs do
  if (runs[i].donor_rule or "next") ~= (runs[1].donor_rule or "next") then
    error(("%s: resample donors by rule %s, but %s by %s"):format(files[i], runs[i].donor_rule or "next", files[1],
          runs[1].donor_rule or "next"), 0)
  end
  if table.concat(runs[i].ks, ",") ~= table.concat(runs[1].ks, ",")
     or table.concat(runs[i].ablation, ",") ~= table.concat(runs[1].ablation, ",") then
    error(("%s: ks or ablation modes differ from %s"):format(files[i], files[1]), 0)
  end
end

-- pools the cells found at the same place in every run (nil or null anywhere: null)
local function pool_at(get)
  local cells = {}
  for i, r in ipairs(runs) do
    local c = get(r)
    if c == nil or c == null then return null end
    cells[i] = c
  end
  if #cells == 1 then return cells[1] end
  local c = metrics.pool(cells)
  if cells[1].delta ~= nil then
    local d = metrics.pool(cells, "delta", "delta_se")
    c.delta, c.delta_se = d.mean, d.se
  end
  return c
end
local function idx(t, i) return (t ~= nil and t ~= null) and t[i] or nil end

local j = runs[1]
local seeds = {}
for i, r in ipairs(runs) do seeds[i] = tostring(r.seed) end
local pooled = {}
for _, mode in ipairs(j.ablation) do
  local m = {late_cells = {}, capability = {}}
  m.late_cells.baseline = pool_at(function(r) return r.by_mode[mode].late_cells.baseline end)
  m.capability.baseline = {}
  for _, set in ipairs(j.capability_sets or {}) do
    m.capability.baseline[set.name] = pool_at(function(r) return r.by_mode[mode].capability.baseline[set.name] end)
  end
  for _, kind in ipairs({"induction", "previous_token", "random"}) do
    m.late_cells[kind], m.capability[kind] = {}, {}
    for i = 1, #j.ks do
      m.late_cells[kind][i] = pool_at(function(r) return r.by_mode[mode].late_cells[kind][i] end)
      local caps = {}
      for _, set in ipairs(j.capability_sets or {}) do
        caps[set.name] = pool_at(function(r) return idx(idx(r.by_mode[mode].capability[kind], i), set.name) end)
      end
      m.capability[kind][i] = caps
    end
  end
  pooled[mode] = m
end
local walks_total, seqs = 0, {}
for _, r in ipairs(runs) do walks_total = walks_total + r.walks end
for s_i, set in ipairs(j.capability_sets or {}) do
  local n = 0
  for _, r in ipairs(runs) do n = n + r.capability_sets[s_i].sequences end
  seqs[s_i] = n
end
j = setmetatable({by_mode = pooled, walks = walks_total}, {__index = runs[1]})
if #runs > 1 then
  print(("Pooled over %d runs (walk seeds %s; %d walks each)."):format(#runs, table.concat(seeds, ", "),
    runs[1].walks))
  print("Per run, unablated late accuracy: ")
  for i, r in ipairs(runs) do
    local b = r.by_mode[r.ablation[1]].late_cells.baseline
    print(("  seed %s: %.3f ± %.3f (n = %d)"):format(seeds[i], b.mean, b.se, b.n))
  end
  print()
end
local modes = j.ablation
local function acc(c) return (c == nil or c == null) and "—" or ("%.3f ± %.3f"):format(c.mean, c.se) end
local function loss(c) return (c == nil or c == null) and "—" or ("%.2f ± %.2f"):format(c.mean, c.se) end
local function delta(c)
  return (c == nil or c == null) and "—" or ("%+.2f ± %.2f"):format(c.delta, c.delta_se)
end
local KINDS = {"induction", "previous_token", "random"}
local SHORT = {induction = "ind", previous_token = "prev", random = "rnd"}

print(("Late accuracy (words %d–%d), mean ± SE over walks, n = %d walks; %s, %s precision"):format(j.late_from,
  j.late_to, j.walks, j.model_name, j.precision or "exact"))
print()
local head = {"| k |"}
local sep = {"|---|"}
for _, mode in ipairs(modes) do
  for _, kind in ipairs(KINDS) do
    head[#head + 1] = (" %s %s |"):format(mode, SHORT[kind])
    sep[#sep + 1] = "---|"
  end
end
print(table.concat(head))
print(table.concat(sep))
local base = j.by_mode[modes[1]].late_cells.baseline
print(("| 0 | %s |%s"):format(acc(base), string.rep(" |", #modes * 3 - 1)))
for i, k in ipairs(j.ks) do
  local row = {("| %d |"):format(k)}
  for _, mode in ipairs(modes) do
    for _, kind in ipairs(KINDS) do row[#row + 1] = (" %s |"):format(acc(j.by_mode[mode].late_cells[kind][i])) end
  end
  print(table.concat(row))
end
for s_i, set in ipairs(j.capability_sets or {}) do
  print()
  local about = #runs > 1 and ("per run, with its own seed: " .. set.about:gsub(", seed %d+", "")) or set.about
  print(("Loss on %s (nats; %s): mean ± SE over n = %d sequences, and the paired change from the unablated model")
        :format(set.name, about, seqs[s_i]))
  print()
  local b = j.by_mode[modes[1]].capability.baseline[set.name]
  print(("unablated: %s"):format(loss(b)))
  print()
  local h, s = {"| k |"}, {"|---|"}
  for _, mode in ipairs(modes) do
    for _, kind in ipairs(KINDS) do
      h[#h + 1] = (" %s %s |"):format(mode, SHORT[kind])
      s[#s + 1] = "---|"
    end
  end
  print(table.concat(h))
  print(table.concat(s))
  for i, k in ipairs(j.ks) do
    local row = {("| %d |"):format(k)}
    for _, mode in ipairs(modes) do
      for _, kind in ipairs(KINDS) do
        local c = j.by_mode[mode].capability[kind][i]
        c = c ~= null and c[set.name] or nil
        row[#row + 1] = (" %s (%s) |"):format(loss(c), delta(c))
      end
    end
    print(table.concat(row))
  end
end
print()
for i, rs in ipairs(j.random_sets) do
  print(("random, k = %d: %d sets, pool %s"):format(rs.k, #rs.sets, rs.pool))
end

if per_walk then
  print()
  print("Late accuracy per walk (each run's walks 1.. in order; — where the summary keeps no per-walk values)")
  local function walks_of(c)
    if c == nil or c == null or type(c.values) ~= "table" then return "—" end
    local t = {}
    for b, v in ipairs(c.values) do t[b] = ("%.3f"):format(v) end
    return table.concat(t, " ")
  end
  for r_i, r in ipairs(runs) do
    print()
    print(("seed %s, unablated: %s"):format(seeds[r_i], walks_of(r.by_mode[modes[1]].late_cells.baseline)))
    for _, mode in ipairs(modes) do
      for _, kind in ipairs(KINDS) do
        for i, k in ipairs(r.ks) do
          print(("seed %s, %s %s k = %d: %s"):format(seeds[r_i], mode, SHORT[kind], k,
            walks_of(r.by_mode[mode].late_cells[kind][i])))
        end
      end
    end
  end

  -- head_ablation's walk b starts at node (b - 1) % 16 + 1 of its 4 x 4 grid and takes its resample donor's hook_z
  -- from the walk the summary names (donors; older summaries: walk b % walks + 1). Every step of a walk changes its
  -- colour on the bipartite grid, so a walk whose start has its donor's colour is on the donor's colour at every
  -- position, and any other walk never is: then the donor's next word is never a valid next word for it.
  local colour = assert(icl.graph.grid(4, 4):colours())
  local function same_colour(r, b)
    local d = type(r.donors) == "table" and r.donors[b] or b % r.walks + 1
    return colour[(b - 1) % 16 + 1] == colour[(d - 1) % 16 + 1]
  end
  local ok_grid = true
  for _, r in ipairs(runs) do ok_grid = ok_grid and type(r.words) == "table" and #r.words == 16 end
  if ok_grid and pooled.resample then
    print()
    print("Resample, late accuracy split by the donor walk's colour on the bipartite 4 x 4 grid (mean ± SE, n walks,"
      .. " all runs together): donor on the walk's colour | on the other colour")
    print()
    print("| k | ind, same colour | ind, other colour | prev, same colour | prev, other colour | rnd, same colour | rnd, other colour |")
    print("|---|---|---|---|---|---|---|")
    for i, k in ipairs(j.ks) do
      local row = {("| %d |"):format(k)}
      for _, kind in ipairs(KINDS) do
        local same, other, missing = {}, {}, false
        for _, r in ipairs(runs) do
          local c = r.by_mode.resample.late_cells[kind][i]
          if c == nil or c == null or type(c.values) ~= "table" then missing = true break end
          for b, v in ipairs(c.values) do
            local t = same_colour(r, b) and same or other
            t[#t + 1] = v
          end
        end
        for _, t in ipairs({same, other}) do
          if missing or #t == 0 then row[#row + 1] = " — |"
          else
            local mu, se = metrics.mean_se(t)
            row[#row + 1] = (" %.3f ± %.3f (%d) |"):format(mu, se or 0, #t)
          end
        end
      end
      print(table.concat(row))
    end
  end
end
