-- icl.runs: the summaries of repeated runs of one protocol (other --seed values), read and checked before they are
-- pooled into one table (scripts/head-ablation-table.lua, scripts/knockout-table.lua).
local runs = {}

-- read(paths, {experiment =, has =, hint =, same = {keys}}): the summary.json of every path, in order. Raises,
-- naming the file, when one cannot be read, is not `experiment`'s summary with a table at `has` (`hint` says how to
-- get one), differs from the first in any of the `same` keys, or repeats an earlier run's seed.
function runs.read(paths, spec)
  if type(paths) ~= "table" or #paths == 0 then error("icl.runs.read: expected a non-empty list of paths", 2) end
  local out = {}
  for i, path in ipairs(paths) do
    local j, err = icl.json.read(path)
    if not j then error(("%s: %s"):format(path, tostring(err)), 0) end
    if j.experiment ~= spec.experiment or type(j[spec.has]) ~= "table" then
      error(("%s: not a %s summary with %s (%s)"):format(path, spec.experiment, spec.has, spec.hint), 0)
    end
    if i > 1 then
      for _, key in ipairs(spec.same or {}) do
        local a, b = icl.json.encode(j[key]), icl.json.encode(out[1][key])
        if a ~= b then
          error(("%s: %s is %s, but %s has %s (pool only runs that differ in --seed)"):format(path, key, a,
                paths[1], b), 0)
        end
      end
    end
    for k = 1, i - 1 do
      if j.seed == out[k].seed then error(("%s: seed %s already given (%s)"):format(path, j.seed, paths[k]), 0) end
    end
    out[i] = j
  end
  return out
end

return runs
