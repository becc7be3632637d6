-- The knockout tables of docs/results.md from icl_circuit summaries: accuracy under each edge kind's knockout per
-- layer range (random-edge control in brackets) and the paired difference knockout − control, mean ± SE over
-- prompts, for each run; with several runs (the same protocol at other --seed values: other prompts), a last
-- table pools every difference over all their prompts, exactly as one run over those prompts would give.
--   icl script scripts/knockout-table.lua A/summary.json [B/summary.json ...]
if not arg[1] then error("usage: icl script scripts/knockout-table.lua SUMMARY.json [SUMMARY.json ...]", 0) end
local null = icl.json.null
local metrics = require("icl.metrics")
local runs = require("icl.runs").read(arg, {experiment = "icl_circuit", has = "knockout",
  hint = "run it with --n-knockout >= 1", same = {"model_name", "task", "k", "edges", "template", "n_layers"}})
for i = 2, #runs do
  if icl.json.encode(runs[i].knockout.ranges) ~= icl.json.encode(runs[1].knockout.ranges) then
    error(("%s: knockout layer ranges differ from %s"):format(arg[i], arg[1]), 0)
  end
end

local j = runs[1]
local kinds, ranges = j.knockout.kinds, j.knockout.ranges
local function cell(c) return ("%+.3f ± %.3f"):format(c.mean, c.se) end
local function header(title)
  local h, s = {("| %s |"):format(title)}, {"|---|"}
  for _, r in ipairs(ranges) do
    h[#h + 1] = (" L%d-%d |"):format(r.first, r.last)
    s[#s + 1] = "---|"
  end
  print(table.concat(h))
  print(table.concat(s))
end

for _, r in ipairs(runs) do
  local ko = r.knockout
  local n = ko.differences.minus_control[kinds[1]][1].n
  print(("%s, task %s, seed %s: %d knockout prompts (no knockout %.3f)"):format(r.model_name, r.task,
    tostring(r.seed), n, ko.none))
  print()
  header("seed " .. tostring(r.seed))
  for _, kind in ipairs(kinds) do
    local row = {("| %s: accuracy [control] |"):format(kind)}
    for q = 1, #ranges do
      row[#row + 1] = (" %.3f [%.3f] |"):format(ko.accuracy[kind][q], ko.random[kind][q])
    end
    print(table.concat(row))
    row = {("| %s: knockout − control |"):format(kind)}
    for q = 1, #ranges do row[#row + 1] = (" %s |"):format(cell(ko.differences.minus_control[kind][q])) end
    print(table.concat(row))
  end
  print()
end

if #runs > 1 then
  local seeds, N = {}, 0
  for i, r in ipairs(runs) do
    seeds[i] = tostring(r.seed)
    N = N + r.knockout.differences.minus_control[kinds[1]][1].n
  end
  print(("Pooled over %d runs (seeds %s), n = %d prompts: knockout − control and knockout − none, mean ± SE"):format(
    #runs, table.concat(seeds, ", "), N))
  print()
  header("pooled")
  for _, which in ipairs({{"minus_control", "knockout − control"}, {"minus_none", "knockout − none"}}) do
    for _, kind in ipairs(kinds) do
      local row = {("| %s: %s |"):format(kind, which[2])}
      for q = 1, #ranges do
        local cells = {}
        for i, r in ipairs(runs) do
          local c = r.knockout.differences[which[1]][kind][q]
          if c == nil or c == null then error(("%s: no %s cell for %s, range %d"):format(arg[i], which[1], kind, q), 0) end
          cells[i] = c
        end
        row[#row + 1] = (" %s |"):format(cell(metrics.pool(cells)))
      end
      print(table.concat(row))
    end
  end
end
