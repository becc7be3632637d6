-- icl.plot: scatter, line and heatmap figures written as PNG and SVG (signatures, pixel sizes, non-trivial
-- content), option handling and errors. Set ICL_KEEP=1 to keep the files and print where they are.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
local dir = os.tmpname()
os.remove(dir)
local written = {}

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function be32(s, i) return ((s:byte(i) * 256 + s:byte(i + 1)) * 256 + s:byte(i + 2)) * 256 + s:byte(i + 3) end

-- Saves fig as name.png and name.svg and checks both files.
local function save_both(fig, name, w, h)
  for _, ext in ipairs({ "png", "svg" }) do
    local path = dir .. "/" .. name .. "." .. ext
    local ok, msg = fig:save(path)
    check(ok == true, name .. "." .. ext .. " saved " .. tostring(msg))
    written[#written + 1] = path
    local s = read(path) or ""
    if ext == "png" then
      check(s:sub(1, 8) == "\137PNG\r\n\26\n" and s:sub(13, 16) == "IHDR", name .. ".png signature")
      check(be32(s, 17) == w and be32(s, 21) == h, name .. ".png is " .. w .. "x" .. h)
      check(#s > 2000, name .. ".png has content (" .. #s .. " bytes)")
    else
      check(s:sub(1, 5) == "<?xml" and s:find("<svg", 1, true) and s:find('width="' .. w, 1, true),
        name .. ".svg header")
      check(#s > 3000, name .. ".svg has content (" .. #s .. " bytes)")
    end
  end
end

-- scatter of a 4x4 grid's true layout and a PCA of it, edges dashed, labels, per-point colours
local words = { "apple", "bird", "car", "egg", "house", "milk", "plane", "opera",
                "box", "sand", "sun", "mango", "rock", "math", "code", "phone" }
local g = icl.graph.grid(4, 4, words)
local fills = {}
for i = 1, 16 do fills[i] = (i - 1) // 4 + 1 end -- palette colour per row
local sc = icl.plot.scatter { points = g.coords, labels = g.words, fill = fills, border = "black", edges = g.edges,
  dashed = true, title = "4x4 grid", xlabel = "column", ylabel = "row" }
check(tostring(sc):find("scatter, 800x600", 1, true) ~= nil, "figure tostring")
save_both(sc, "scatter", 800, 600)

local rows = {}
for i, c in ipairs(g.coords) do rows[i] = { c[1], c[2], 0.1 * c[1] * c[2] } end
local pcs = icl.pca(icl.tensor.from(rows), 2)
local sp = icl.plot.scatter { points = pcs, labels = words, edges = g.edges, fill = { r = 0.9, g = 0.5, b = 0.1 },
  title = "PCA", xlabel = "PC 1", ylabel = "PC 2", width = 640, height = 480, size = 8, equal = true }
save_both(sp, "pca", 640, 480)

-- line with a band and a legend; a second figure from the single-series shorthand
local x, y, sd, y2 = {}, {}, {}, {}
for i = 1, 200 do
  x[i], y[i], sd[i], y2[i] = i * 7, 1 - math.exp(-i / 40), 0.1 * math.exp(-i / 80), 0.5 + 0.3 * math.sin(i / 15)
end
local ln = icl.plot.line { series = { { x = x, y = y, std = sd, label = "accuracy" },
  { x = x, y = icl.tensor.from(y2), label = "baseline", color = "#d62728" } },
  title = "rule following", xlabel = "context length", ylabel = "accuracy", ylim = { 0, 1.2 } }
save_both(ln, "line", 800, 600)
save_both(icl.plot.line { y = y, title = "one series" }, "line1", 800, 600)

-- heatmap of a layer x head grid with a NaN cell
local data = {}
for l = 1, 12 do
  data[l] = {}
  for h = 1, 9 do data[l][h] = math.sin(l * 0.5) * math.cos(h * 0.7) end
end
data[3][4] = 0 / 0
local hm = icl.plot.heatmap { data = icl.tensor.from(data), title = "induction scores", xlabel = "head",
  ylabel = "layer", height = 500 }
save_both(hm, "heatmap", 800, 500)
local hl = icl.plot.heatmap { data = { { 1, 2 }, { 3, 4 } }, row_labels = { "a", "b" }, col_labels = { "x", "y" },
  vmin = 0, vmax = 5, colorbar = false }
save_both(hl, "heatmap_small", 800, 600)

-- expected failures return nil and a message; bad calls raise errors naming the option
local nope, msg = sc:save("/proc/icl-no-such-dir/x.png")
check(nope == nil and type(msg) == "string", "unwritable path: nil, message")
check(errs(function() sc:save(dir .. "/x.jpg") end, "must end in .png or .svg"), "extension")
check(errs(function() icl.plot.scatter { points = { { 0, 0 } }, fill = "mauve" } end, "unknown colour 'mauve'"),
  "bad colour")
check(errs(function() icl.plot.scatter { points = { { 0, 0 }, { 1, 1 } }, edges = { { 1, 3 } } } end, "edges[1]"),
  "bad edge")
check(errs(function() icl.plot.scatter { points = icl.tensor.zeros({ 3 }) } end, "tensor [n, 2]"), "bad points")
check(errs(function() icl.plot.line { series = { { x = { 1, 2 }, y = { 1 } } } } end, "x has 2 values, y has 1"),
  "x/y lengths")
check(errs(function() icl.plot.heatmap { data = { { 1, 2 }, { 3 } } } end, "equal lengths"), "ragged heatmap")
check(errs(function() icl.plot.heatmap { data = { { 1 } }, vmin = 0 } end, "vmin and vmax"), "vmin alone")
check(errs(function() icl.plot.line { y = { 1 }, title = {} } end, "'title' must be a string"), "title type")
check(errs(function() icl.plot.line { y = { 1 }, width = 10 } end, "width and height"), "size range")

if os.getenv("ICL_KEEP") then
  print("figures in " .. dir)
else
  for _, p in ipairs(written) do os.remove(p) end
  os.remove(dir)
end
tl.done()
