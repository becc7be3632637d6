-- A tiny experiment for icl sweep's tests (tests/cli/test_sweep*.sh): loads --model (the tiny test model), then
-- draws --n numbers from icl.rng seeded by --seed (scaled by their index with --shape steep) and reports them and
-- their mean. --fail-if PATH fails while PATH exists (a task that fails, then succeeds on resume); --hold PATH
-- busy-waits after the load while PATH exists, 60 s at most (a task long enough to interrupt). It declares one
-- figure for the merge (sweep_figures).
local e = icl.experiment{name = "sweep_tiny", model = "none", seed = 1,
  options = {{"n", 8, "numbers drawn", int = {1, 64}}, {"shape", "flat", "flat or steep"},
             {"fail_if", "", "fail while this file exists"}, {"hold", "", "wait while this file exists"}},
  quick = {n = 4}}
local o = e.o
if o.shape ~= "flat" and o.shape ~= "steep" then error(("--shape %s: expected flat or steep"):format(o.shape), 0) end
local m = e:load{n_ctx = 16}
local function exists(path)
  local f = path ~= "" and io.open(path)
  if f then f:close() end
  return f and true or false
end
local t0 = icl.clock()
while exists(o.hold) and icl.clock() - t0 < 60 do end
if exists(o.fail_if) then
  error("sweep_tiny: failing while " .. o.fail_if .. " exists", 0)
end
local r = icl.rng.new(o.seed)
local xs, s = {}, 0
for i = 1, o.n do
  xs[i] = r:uniform() * (o.shape == "steep" and i or 1)
  s = s + xs[i]
end
-- sweep_figures: icl sweep merge draws the values as a curve per condition, mean ± SE over the seeds
e:report({n = o.n, shape = o.shape, values = xs, mean = s / o.n, layers = m.n_layers, model = false,
          sweep_figures = {{field = "values", title = "sweep_tiny values", xlabel = "draw", ylabel = "value"}}}, {})
