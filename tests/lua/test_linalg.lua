-- icl.pca / icl.linalg: PCA of known matrices (components, projections, variances, sign convention), input
-- forms and errors, and the low-level helpers used by icl.metrics and icl.heads.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-5) end
check(icl.pca == icl.linalg.pca and icl.class_means == icl.linalg.class_means, "icl.pca and icl.class_means")

-- Points mean + a u + b v, u = (0.6, 0.8, 0), v = (-0.8, 0.6, 0), (a, b) in {(3,0), (-3,0), (0,1), (0,-1)}.
-- The second component comes out as -v = (0.8, -0.6, 0): its largest-magnitude entry is made positive.
local ab, mean = { { 3, 0 }, { -3, 0 }, { 0, 1 }, { 0, -1 } }, { 1, 2, 3 }
local rows = {}
for i, c in ipairs(ab) do
  rows[i] = { mean[1] + 0.6 * c[1] - 0.8 * c[2], mean[2] + 0.8 * c[1] + 0.6 * c[2], mean[3] }
end
local p = icl.pca(icl.tensor.from(rows), 2)
local C, P = p.components, p.projections
check(C:shape()[1] == 2 and C:shape()[2] == 3 and P:shape()[1] == 4 and P:shape()[2] == 2, "shapes")
check(near(C:get(1, 1), 0.6) and near(C:get(1, 2), 0.8) and near(C:get(1, 3), 0), "first component")
check(near(C:get(2, 1), 0.8) and near(C:get(2, 2), -0.6), "second component, sign convention")
check(near(P:get(1, 1), 3) and near(P:get(2, 1), -3) and near(P:get(3, 2), -1) and near(P:get(4, 2), 1), "projections")
check(near(p.mean:get(1), 1) and near(p.mean:get(2), 2) and near(p.mean:get(3), 3), "mean")
check(near(p.explained_variance[1], 6) and near(p.explained_variance[2], 2 / 3), "explained variance (n - 1)")
check(near(p.explained_ratio[1], 0.9) and near(p.explained_ratio[2], 0.1), "explained ratio")

-- a table of rows works too, and k defaults to 2
local q = icl.pca(rows)
check(near(q.projections:get(1, 1), 3) and #q.explained_ratio == 2, "table input, default k")

-- axis-aligned data: identity components
local a = icl.pca(icl.tensor.from({ { 2, 0 }, { 0, 1 }, { -2, 0 }, { 0, -1 } }), 1)
check(near(a.components:get(1, 1), 1) and near(a.explained_ratio[1], 0.8), "axis-aligned, k = 1")

-- projections reconstruct the centred data: X - mean = P C
local r = icl.rng.new(3):normal_tensor({ 20, 5 })
local full = icl.pca(r, 5)
local maxerr = 0
for i = 1, 20 do
  for j = 1, 5 do
    local s = full.mean:get(j)
    for k = 1, 5 do s = s + full.projections:get(i, k) * full.components:get(k, j) end
    maxerr = math.max(maxerr, math.abs(s - r:get(i, j)))
  end
end
local tot = 0
for k = 1, 5 do tot = tot + full.explained_ratio[k] end
check(maxerr < 1e-4 and near(tot, 1), "full-rank PCA reconstructs, ratios sum to 1")
local desc = true
for k = 2, 5 do desc = desc and full.explained_variance[k] <= full.explained_variance[k - 1] end
check(desc, "variances descending")

-- errors
check(errs(function() icl.pca(r, 6) end, "k must be in [1, min(rows, cols)]"), "k too large")
check(errs(function() icl.pca(icl.tensor.from({ 1, 2, 3 })) end, "2-d tensor"), "1-d tensor rejected")
check(errs(function() icl.pca({ { 1, 2 }, { 3 } }) end, "equal length"), "ragged rows")
check(errs(function() icl.pca(icl.tensor.from({ { 0 / 0, 1 }, { 2, 3 } }), 1) end, "NaN"), "NaN rejected")
check(errs(function() icl.pca("x") end, "2-d tensor or table of rows"), "bad type")

-- helpers behind icl.metrics and icl.heads
local lg = icl.tensor.from({ { 0, math.log(2), math.log(3), math.log(4) } })
local m = icl.linalg.softmax_mass(lg, { 1 }, { { 1, 3 } })
check(near(m[1], 0.6), "softmax_mass")
check(near(icl.linalg.softmax_mass(lg, { 1 }, { { 2 } }, { 0, 1, 2 })[1], 0.5), "softmax_mass with support")
check(near(icl.linalg.token_nll(lg, { 1 }, { 3 })[1], -math.log(0.4)), "token_nll")
check(errs(function() icl.linalg.token_nll(lg, { 1 }, { 4 }) end, "out of range"), "token id range")
check(errs(function() icl.linalg.softmax_mass(lg, { 2 }, { { 1 } }) end, "rows must be integers in [1, rows"),
  "row range")

tl.done()
