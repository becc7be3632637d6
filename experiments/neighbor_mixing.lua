-- Neighbour mixing, a toy model of why in-context representations take the shape of the graph: 16 random
-- Gaussian vectors, one per word of the 4x4 grid, each replaced by itself plus the mean of its grid neighbours
-- (x_i' = x_i + mean_{j ~ i} x_j). PCA and Dirichlet energy before and after; no model run is needed.
--   icl script experiments/neighbor_mixing.lua --help   lists the options and their defaults
local graph, metrics, plot = icl.graph, icl.metrics, icl.plot

local ex = icl.experiment{name = "neighbor_mixing",
  about = "toy model: Gaussian vectors on the 4x4 grid mixed with their neighbours;\n"
          .. "--quick: dimension 64, no model read",
  options = {{"dim", -1, "dimension of the vectors (-1: d_model of --model when the file exists, else 576)", int = {-1, 1 << 20}},
             {"layer", -1, "accepted for uniformity with the other experiments; unused", int = {-1, 1 << 16}},
             {"steps", 1, "mixing steps for the \"after\" picture", int = {1, 1 << 20}}, {"curve_steps", 10, "steps of the energy curve", int = {1, 1 << 20}}}}
local o = ex.o
for _, k in ipairs({"dim", "seed", "steps", "curve_steps"}) do
  if math.type(o[k]) ~= "integer" then error(("--%s must be an integer"):format(k:gsub("_", "-")), 0) end
end
if o.steps < 1 or o.curve_steps < 1 then error("--steps and --curve-steps must be >= 1", 0) end

local WORDS = icl.experiment.words(16)
local PALETTE16 = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf", "#393b79", "#ad494a", "#8ca252", "#e7ba52", "#7b4173", "#fb9a99"}

-- the dimension: --dim, else the model's d_model when the file exists, else 576 (SmolLM2-135M)
local dim, dim_source = o.dim, "--dim"
if dim < 1 then
  dim, dim_source = 576, "default"
  if o.quick then
    dim, dim_source = 64, "--quick"
  else
    local f = io.open(o.model, "rb")
    if f then
      f:close()
      local m <close> = assert(icl.load(o.model, {backend = "cpu", n_ctx = 16}))
      dim, dim_source = m.d_model, o.model
    end
  end
end
if dim < 2 then error("--dim must be at least 2", 0) end

local g = graph.grid(4, 4, WORDS)
local A = g:adjacency()                                   -- [16, 16] 0/1
local M = A / A:sum(2, true)                              -- row i: 1/deg_i on the neighbours of i
local X0 = icl.rng.new(o.seed):normal_tensor({g.n, dim})  -- [16, dim], N(0, 1)
local function mix(X) return X + M:matmul(X) end          -- x_i + mean of the neighbours of i

-- how much of the grid layout a 2-D picture carries: R^2 of the least-squares fit of each grid coordinate
-- (column, row) from [1, pc1, pc2], averaged over the two coordinates
local function grid_fit_r2(P)
  local n = #g.coords
  local XtX, Xty = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, {{0, 0, 0}, {0, 0, 0}}
  for i = 1, n do
    local x = {1, P:get(i, 1), P:get(i, 2)}
    for a = 1, 3 do
      for b = 1, 3 do XtX[a][b] = XtX[a][b] + x[a] * x[b] end
      for c = 1, 2 do Xty[c][a] = Xty[c][a] + x[a] * g.coords[i][c] end
    end
  end
  local r2 = 0
  for c = 1, 2 do
    -- solve XtX beta = Xty[c] by Cramer's rule (3 x 3)
    local function det(m3)
      return m3[1][1] * (m3[2][2] * m3[3][3] - m3[2][3] * m3[3][2])
           - m3[1][2] * (m3[2][1] * m3[3][3] - m3[2][3] * m3[3][1])
           + m3[1][3] * (m3[2][1] * m3[3][2] - m3[2][2] * m3[3][1])
    end
    local D, beta = det(XtX), {}
    for a = 1, 3 do
      local m3 = {{}, {}, {}}
      for r = 1, 3 do for s = 1, 3 do m3[r][s] = s == a and Xty[c][r] or XtX[r][s] end end
      beta[a] = det(m3) / D
    end
    local mean, ss_tot, ss_res = 0, 0, 0
    for i = 1, n do mean = mean + g.coords[i][c] / n end
    for i = 1, n do
      local y = g.coords[i][c]
      local f = beta[1] + beta[2] * P:get(i, 1) + beta[3] * P:get(i, 2)
      ss_tot, ss_res = ss_tot + (y - mean) ^ 2, ss_res + (y - f) ^ 2
    end
    r2 = r2 + (1 - ss_res / ss_tot) / 2
  end
  return r2
end

local function describe(X)
  local p = icl.pca(X, 2)
  return {pca = p, explained_ratio = p.explained_ratio, projections = p.projections,
          dirichlet_energy = metrics.dirichlet_energy(X, g, {normalized = true}),
          dirichlet_energy_raw = metrics.dirichlet_energy(X, g), grid_fit_r2 = grid_fit_r2(p.projections)}
end

-- energy curve over mixing steps, and the before / after pictures
local curve, X = {}, X0
local before, after = describe(X0), nil
curve[1] = {step = 0, energy = before.dirichlet_energy, grid_fit_r2 = before.grid_fit_r2}
local n_steps = math.max(o.steps, o.curve_steps)
local bar = icl.progress.new{total = n_steps, label = "neighbor_mixing steps"}
for s = 1, n_steps do
  X = mix(X)
  local d = describe(X)
  curve[#curve + 1] = {step = s, energy = d.dirichlet_energy, grid_fit_r2 = d.grid_fit_r2}
  if s == o.steps then after = d end
  bar:update(1)
end
bar:done()

local fill = {}
for i = 1, g.n do fill[i] = PALETTE16[i] end
do
  for _, pic in ipairs({{"before", before, "random Gaussian vectors"},
                        {"after", after, ("after %d mixing step%s"):format(o.steps, o.steps > 1 and "s" or "")}}) do
    local d = pic[2]
    ex:figure(plot.scatter{points = d.pca, labels = g.words, edges = g.edges, dashed = true, equal = true,
                           fill = fill, title = ("PCA, %s (d = %d)"):format(pic[3], dim),
                           xlabel = ("PC1 (%.1f%%)"):format(100 * d.explained_ratio[1]),
                           ylabel = ("PC2 (%.1f%%); Dirichlet energy %.4f"):format(100 * d.explained_ratio[2],
                                                                                d.dirichlet_energy)}, "pca_" .. pic[1])
  end
  local xs, ys, rs = {}, {}, {}
  for i, c in ipairs(curve) do xs[i], ys[i], rs[i] = c.step, c.energy / curve[1].energy, c.grid_fit_r2 end
  ex:figure(plot.line{series = {{x = xs, y = ys, label = "Dirichlet energy (normalized), relative to step 0"},
                                {x = xs, y = rs, label = "R^2 of the grid layout from PC1, PC2"}},
                      title = "Repeated neighbour mixing", xlabel = "mixing steps", ylim = {0, 1.05}}, "energy")
end

local function pick(d) return {explained_ratio = d.explained_ratio, projections = d.projections,
  dirichlet_energy = d.dirichlet_energy, dirichlet_energy_raw = d.dirichlet_energy_raw, grid_fit_r2 = d.grid_fit_r2} end
local summary = {
  model = false, -- no model field: the model is only read for its d_model when --dim is not given
  dim = dim, dim_source = dim_source, seed = o.seed, steps = o.steps,
  words = WORDS, rule = "x_i' = x_i + mean of the grid neighbours of i", before = pick(before), after = pick(after),
  energy_ratio = after.dirichlet_energy / before.dirichlet_energy, curve = curve,
}
local lines = {}
lines[#lines + 1] = (("neighbor_mixing: 16 Gaussian vectors of dimension %d (%s), seed %d, %d mixing step%s"):format(
  dim, dim_source, o.seed, o.steps, o.steps > 1 and "s" or ""))
for _, row in ipairs({{"before", before}, {"after", after}}) do
  local d = row[2]
  local fmt = "  %-6s PCA explained %5.1f%% + %5.1f%%, Dirichlet energy %.4f (raw %.1f), grid R^2 from 2 PCs %.3f"
  lines[#lines + 1] = fmt:format(row[1], 100 * d.explained_ratio[1], 100 * d.explained_ratio[2], d.dirichlet_energy,
    d.dirichlet_energy_raw,
    d.grid_fit_r2)
end
lines[#lines + 1] = (("  energy after / before %.3f; after %d steps %.3f"):format(summary.energy_ratio, n_steps,
  curve[#curve].energy / curve[1].energy))
ex:report(summary, lines)
