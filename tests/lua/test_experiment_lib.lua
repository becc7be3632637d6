-- The experiment library: icl.experiment (options, --quick, usage, output folder, layer check, checked figure
-- saves, report, e:add and e:index), graph.hex_lattice against networkx, metrics.by_range / present /
-- energy_with_null / energy_curve on hand-computed values, and plot saves in several formats with sanitised titles.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises
local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-9) end
local function exists(p) local f = io.open(p, "rb") if f then f:close() return true end return false end
local tmp = os.tmpname()
os.remove(tmp)

-- graph.hex_lattice(3, 3): networkx 3.6.1 hexagonal_lattice_graph(3, 3), nodes in its order, 1-based
local NX = {{1, 2}, {1, 8}, {2, 3}, {3, 4}, {3, 10}, {4, 5}, {5, 6}, {5, 12}, {6, 7}, {7, 14}, {8, 9}, {9, 10},
            {9, 17}, {10, 11}, {11, 12}, {11, 19}, {12, 13}, {13, 14}, {13, 21}, {14, 15}, {15, 23}, {16, 17},
            {16, 24}, {17, 18}, {18, 19}, {18, 26}, {19, 20}, {20, 21}, {20, 28}, {21, 22}, {22, 23}, {22, 30},
            {24, 25}, {25, 26}, {26, 27}, {27, 28}, {28, 29}, {29, 30}}
local hx = icl.graph.hex_lattice(3, 3, icl.experiment.words(30))
local got = {}
for _, e in ipairs(hx.edges) do got[#got + 1] = math.min(e[1], e[2]) * 100 + math.max(e[1], e[2]) end
table.sort(got)
local same = #got == #NX
for i, e in ipairs(NX) do same = same and got[i] == e[1] * 100 + e[2] end
check(hx.n == 30 and same, "hex_lattice(3, 3) has networkx's 30 nodes and 38 edges")
local maxdeg = 0
for i = 1, hx.n do maxdeg = math.max(maxdeg, hx:degree(i)) end
check(maxdeg == 3 and hx.words[30] == "ball", "hex_lattice degree <= 3, words in order")
check(#icl.experiment.WORDS == 30 and icl.experiment.words(10)[10] == "sand", "one word list")

-- metrics
local M = icl.metrics
local br = M.by_range({1, 2, 3, 4, 5}, {{0, 2}, {4, 9}, {7, 9}})
check(#br == 2 and br[1].from == 0 and near(br[1].mean, 1.5) and near(br[2].mean, 4.5), "by_range clips and drops")
raises(function() M.by_range({1}, {{1, "x"}}) end, "ranges[1]", "by_range names the bad range")
local X = icl.tensor.from({{0}, {1}, {2}})
local path = icl.graph.from_edges({"a", "b", "c"}, {{1, 2}, {2, 3}})
local en = M.energy_with_null(X, path.edges, 3000, icl.rng.new(5))
-- raw energy 1; the six orderings of 0, 1, 2 on a path give 1, 1 and four times 2.5: null mean 2, none below 1
check(near(en.raw, 1) and near(en.energy, 0.4), "true energy: raw 1, normalized 2/5")
check(math.abs(en.null_raw_mean - 2) < 0.05 and en.null_below == 0,
      ("null mean %.3f ~ 2, none below"):format(en.null_raw_mean))
local cm = icl.tensor.from({{0, 1}, {0 / 0, 0 / 0}, {2, 2}})
local seen, absent = M.present(cm)
check(#seen == 2 and seen[2] == 3 and absent[1] == 2, "present / absent classes")
local acts = icl.tensor.from({{0}, {1}, {2}, {0}, {1}, {2}})
local curve = M.energy_curve({acts}, {{1, 2, 3, 1, 2, 3}}, path, {ts = {2, 6, 9}, window = 3, shuffles = 10})
check(#curve == 2 and curve[1].energy == icl.json.null and curve[1].missing[1] == "c", "energy_curve names missing")
check(near(curve[2].raw, 1) and curve[2].null_below == 0 and curve[2].null_mean ~= nil, "energy_curve with null")

-- icl.experiment
local X_ = icl.experiment
local spec = {name = "t", options = {{"walks", 16, "walks"}, {"layer", -1, "layer"}}, quick = {walks = 2}}
spec.argv = {"--quick", "--out", tmp}
local e = X_(spec)
check(e.o.walks == 2 and e.o.out == tmp and e.o.seed == 42 and e.o.model:find("SmolLM2") and e.o.precision == "exact",
      "options, quick, common")
spec.argv = {"--precision", "fst", "--out", tmp}
raises(function() X_(spec) end, "--precision fst: expected exact or fast", "unknown precision before any work")
spec.argv = {"--quick", "--walks", "5", "--out", tmp}
check(X_(spec).o.walks == 5, "--quick keeps sizes given")
spec.argv = {"--bogus", "1"}
raises(function() X_(spec) end, "unknown option --bogus", "unknown option")
spec.argv = {"--out", "/proc/icl-no/such"}
raises(function() X_(spec) end, "--out /proc/icl-no/such: cannot write there", "unwritable out before work")
e.m = {n_layers = 30}
check(e:layer() == 24, "default layer 80% of the depth")
e.o.layer = 30
raises(function() e:layer() end, "--layer 30: the model has layers 0..29", "layer range")
local fig = icl.plot.line{series = {{y = {1, 2, 3}}}, title = "bad \xff\xfe utf-8 \1 title"}
e:figure(fig, "curve")
check(exists(tmp .. "/curve.png") and exists(tmp .. "/curve.svg"), "figure writes every format (title sanitised)")
e.o.out = "/proc/icl-no"
raises(function() e:figure(fig, "curve") end, "saving figure /proc/icl-no/curve", "failed save raises")
raises(function() fig:save(tmp .. "/x", {"png", "jpg"}) end, "formats[2]", "bad format")
e.o.out = tmp
e:report({n = 1}, {})
local j = icl.json.read(tmp .. "/summary.json")
check(j and j.n == 1 and j.experiment == "t" and j.seed == 42 and j.precision == nil, "report writes summary.json")
e.o.precision = "fast"
e:report({n = 2}, {})
j = icl.json.read(tmp .. "/summary.json")
check(j and j.n == 2 and j.precision == "fast", "a fast run says so in summary.json")
local function read(p) local f = io.open(p, "rb") if not f then return "" end local s = f:read("a") f:close() return s end
local index = read(tmp .. "/index.html")
check(index:find('href="summary.json"', 1, true) and index:find('<img src="curve.png"', 1, true) and
      index:find('href="curve.svg"', 1, true), "report: index.html links summary.json and shows the figure")
-- e:add and e:index (issue 42): files the script wrote itself, an index without a summary of icl.experiment's
raises(function() e:add("") end, "e:add: expected a file name", "e:add of nothing")
e:add("theory.json")
e:add("sweep_stages.{png,svg}")
os.remove(tmp .. "/summary.json")
e:index({"a <line>"})
index = read(tmp .. "/index.html")
check(not index:find("summary.json", 1, true), "e:index: no summary.json, no link to it")
check(index:find('<p><a href="theory.json">theory.json</a></p>', 1, true) and
      index:find('<img src="sweep_stages.png"', 1, true) and index:find('href="sweep_stages.svg"', 1, true),
      "e:index: a JSON file linked by name, a figure shown")
check(index:find("a &lt;line&gt;", 1, true), "e:index: the lines, escaped")
for _, f in ipairs({"curve.png", "curve.svg", "summary.json", "index.html"}) do os.remove(tmp .. "/" .. f) end
os.remove(tmp)

tl.done()
