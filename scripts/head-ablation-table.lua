-- The markdown tables of docs/results.md from a head_ablation summary.json: late accuracy (mean ± SE over walks)
-- for every mode side by side, then the capability check (loss in nats, mean ± SE over sequences, and its paired
-- change from the unablated model) per set.
--   icl script scripts/head-ablation-table.lua out/head_ablation/summary.json
local path = arg[1]
if not path then error("usage: icl script scripts/head-ablation-table.lua SUMMARY.json", 0) end
local j, err = icl.json.read(path)
if not j then error(("%s: %s"):format(path, tostring(err)), 0) end
if j.experiment ~= "head_ablation" or type(j.by_mode) ~= "table" then
  error(("%s: not a head_ablation summary with by_mode (run it with --ablation)"):format(path), 0)
end
local modes = j.ablation
local null = icl.json.null
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
for _, set in ipairs(j.capability_sets or {}) do
  print()
  print(("Loss on %s (nats; %s): mean ± SE over n = %d sequences, and the paired change from the unablated model")
        :format(set.name, set.about, set.sequences))
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
