-- icl.experiment: what every experiment script needs besides its protocol: options with defaults (and their
-- --quick sizes), the usage text built from them, every numeric option range-checked up front, the model, the
-- layer choice with its range check, an output folder checked before any computation, checked figure saves and a
-- report that writes summary.json.
--
--   local e = icl.experiment{name = "park_grid", about = "In-context graph tracing ...",
--                            options = {{"walks", 16, "number of walks", int = {1, 4096}},
--                                       {"layer", -1, "layer (-1: 80% of depth)", int = {-1, 1 << 16}},
--                                       {"lr", 3e-3, "learning rate", num = {0, 10, open = true}}},
--                            quick = {walks = 2}}
--   local m = e:load{n_ctx = e.o.length + 16}
--   local layer = e:layer()                       -- --layer, or 80% of the depth when it is -1
--   ... e:figure(fig, "accuracy")                -- out/park_grid/accuracy.png and .svg, or an error
--   e:report(summary, {"a line", ...})           -- summary.json (atomic), the printed summary, index.html
--   e:view("attention", spec, "patterns")         -- out/park_grid/patterns.html (icl.html), listed in the index
--   e:add("sweep.json"); e:index(lines)          -- a file the script wrote; index.html without summary.json
--
-- Bounds: int = {lo, hi} takes an integer in lo..hi, num = {lo, hi} a finite number in [lo, hi] (open = true:
-- (lo, hi], lo excluded); a value outside fails before any work with an error naming the flag, the value and
-- the range ("--steps 0: expected an integer in 1..1000000000"). A numeric option without bounds must still be
-- finite. Common options added to every experiment: --model, --backend, --precision, --seed (an integer in
-- 0..2^31-1), --out (default out/<name>), --quick.
local args = require("icl.args")

local M = {}
local Exp = {}
Exp.__index = Exp

local DEFAULT_MODEL = "models/SmolLM2-135M-Instruct-Q4_1.gguf"
local SEED_MAX = 0x7fffffff -- seeds plus offsets (seed + 1000, seed + b) stay far inside every generator's range

local function common(spec)
  return {
    {"model", spec.model or DEFAULT_MODEL, "GGUF model"},
    {"backend", "auto", "auto, cpu, vulkan or ref"},
    {"precision", "exact", "exact, or fast: int8 matmul activations, bf16 attention, ~2x faster, results move (docs/cpu-backend.md)"},
    {"seed", spec.seed or 42, "seed of everything random", int = {0, SEED_MAX}},
    {"out", "out/" .. spec.name, "output directory"},
    {"quick", false, "smoke-test sizes"},
  }
end

local function show(v)
  if type(v) == "boolean" or v == "" then return nil end
  return tostring(v)
end

-- usage text: one line per option with its help and default; --quick lists the sizes it sets.
local function usage(spec, opts)
  local lines = {("usage: icl script experiments/%s.lua [options]"):format(spec.name)}
  if spec.about then lines[#lines + 1] = "  " .. spec.about:gsub("\n", "\n  ") end
  for _, op in ipairs(opts) do
    local name, def, help = op[1], op[2], op[3] or ""
    local d = show(def)
    if name == "quick" and spec.quick then
      local q = {}
      for k, v in pairs(spec.quick) do q[#q + 1] = ("--%s %s"):format((k:gsub("_", "-")), tostring(v)) end
      table.sort(q)
      help = help .. ": " .. table.concat(q, " ") .. " (unless given)"
    end
    local dashed = name:gsub("_", "-")
    local flag = "--" .. dashed
    if type(def) ~= "boolean" then flag = flag .. (type(def) == "number" and " N" or " S") end
    local b = op.int or op.num
    local range = b and ("%s%s..%s"):format(op.num and op.num.open and ">" or "", math.tointeger(b[1]) or b[1],
                                             math.tointeger(b[2]) or b[2])
    local paren = d and (range and (" (default %s; %s)"):format(d, range) or (" (default %s)"):format(d)) or ""
    lines[#lines + 1] = ("  %-18s %s%s"):format(flag, help, paren)
  end
  return table.concat(lines, "\n")
end

-- Checks up front that files can be written under dir (creating it), so a run never ends in a failed save; the
-- error names the flag.
local function check_out(dir, flag)
  local made, why = icl.fs.make_dirs(dir)
  local probe = dir .. "/.icl-write-test"
  local ok, err = made and icl.json.write(probe, {})
  if not ok then error(("--%s %s: cannot write there (%s)"):format(flag or "out", dir, tostring(err or why)), 0) end
  os.remove(probe)
end

local function flag_of(name) return "--" .. name:gsub("_", "-") end

-- The range text of a bound: "an integer in 1..100", "a number in (0, 10]".
local function range_text(op)
  if op.int then return ("an integer in %s..%s"):format(math.tointeger(op.int[1]) or op.int[1], math.tointeger(op.int[2]) or op.int[2]) end
  return ("a number in %s%s, %s]"):format(op.num.open and "(" or "[", op.num[1], op.num[2])
end

-- Checks one numeric option against its bound (int = {lo, hi} or num = {lo, hi}); every number must be finite.
local function check_bound(op, v)
  local name = op[1]
  if type(op[2]) ~= "number" then return v end
  local bad
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    bad = true
  elseif op.int then
    local i = math.tointeger(v)
    bad = not i or i < op.int[1] or i > op.int[2]
    v = i or v
  elseif op.num then
    bad = v > op.num[2] or (op.num.open and v <= op.num[1]) or (not op.num.open and v < op.num[1])
  end
  if bad then
    local expect = (op.int or op.num) and range_text(op) or "a finite number"
    error(("%s %s: expected %s"):format(flag_of(name), tostring(v), expect), 0)
  end
  return v
end

-- icl.experiment{name =, about =, options = {{name, default, help}, ...}, quick = {name = value}, model =,
-- seed =, argv = arg}: parses the command line (an error names an unknown option or a bad value) and checks the
-- output folder. Fields: o (the options), given (those given on the command line), name.
function M.new(spec)
  if type(spec) ~= "table" or type(spec.name) ~= "string" then
    error("icl.experiment: expected {name = \"...\", options = {...}}", 2)
  end
  local opts, defaults = {}, {}
  for _, op in ipairs(spec.options or {}) do opts[#opts + 1] = op end
  for _, op in ipairs(common(spec)) do opts[#opts + 1] = op end
  for _, op in ipairs(opts) do
    if type(op[1]) ~= "string" or op[2] == nil then
      error("icl.experiment: each option is {name, default, help}", 2)
    end
    if (op.int or op.num) and (type(op[2]) ~= "number" or type(op.int or op.num) ~= "table") then
      error(("icl.experiment: option %s: int = {lo, hi} and num = {lo, hi} bound numeric options"):format(op[1]), 2)
    end
    if defaults[op[1]] == nil then defaults[op[1]] = op[2] end
  end
  local o, given = args.parse(spec.argv or arg, defaults, usage(spec, opts))
  if o.quick then
    for k, v in pairs(spec.quick or {}) do
      if not given[k] then o[k] = v end
    end
  end
  if o.precision ~= "exact" and o.precision ~= "fast" then
    error(("--precision %s: expected exact or fast"):format(tostring(o.precision)), 0)
  end
  local seen = {}
  for _, op in ipairs(opts) do
    if not seen[op[1]] then o[op[1]] = check_bound(op, o[op[1]]) end
    seen[op[1]] = true
  end
  local e = setmetatable({name = spec.name, o = o, given = given, files = {}, t0 = os.clock(), wall0 = icl.clock(),
                          opts = opts}, Exp)
  check_out(o.out)
  return e
end

-- M.check_options(o, bounds): for scripts that parse their own options (icl.args): bounds is a list of
-- {name, int = {lo, hi}} or {name, num = {lo, hi}}; each o[name] is checked as icl.experiment checks its options
-- (integers converted), an error naming the flag, the value and the range.
function M.check_options(o, bounds)
  for _, b in ipairs(bounds) do o[b[1]] = check_bound({b[1], 0, int = b.int, num = b.num}, o[b[1]]) end
end

-- M.check_out(dir [, flag = "out"]): the up-front output folder check of icl.experiment, for such scripts.
M.check_out = check_out

-- e:check_out(dir, flag): another output folder (a sweep's, say) checked like --out before any work: created,
-- and a file written there; an error names the flag.
function Exp:check_out(dir, flag) check_out(dir, flag) end

-- e:need(cond, flag, msg): raises "--flag value: msg" unless cond (a constraint between options, checked up front).
function Exp:need(cond, name, msg)
  if not cond then error(("%s %s: %s"):format(flag_of(name), tostring(self.o[name]), msg), 0) end
end

-- e:load{n_ctx =, chunk =, threads =}: the model of --model on --backend in --precision (an error names the file
-- when it cannot load); threads: CPU backend threads (nil: the backend's choice).
function Exp:load(opts)
  opts = opts or {}
  local m, err = icl.load(self.o.model, {backend = self.o.backend, n_ctx = opts.n_ctx, chunk = opts.chunk,
                                         threads = opts.threads, precision = self.o.precision})
  if not m then error(("--model %s: %s"):format(self.o.model, tostring(err)), 0) end
  self.m = m
  return m
end

-- e:layer([key = "layer" [, fraction = 0.8]]): the option's layer, or round(fraction * n_layers) when it is
-- negative; an error names the option and the model's range when it is outside 0..n_layers-1.
function Exp:layer(key, fraction)
  key = key or "layer"
  local v = self.o[key]
  if math.type(v) ~= "integer" then error(("--%s %s: expected an integer"):format(key, tostring(v)), 0) end
  if v < 0 then v = math.floor((fraction or 0.8) * self.m.n_layers + 0.5) end
  if v >= self.m.n_layers then
    error(("--%s %d: the model has layers 0..%d"):format(key, v, self.m.n_layers - 1), 0)
  end
  return v
end

-- e:path(file): the file's path under the output folder.
function Exp:path(file) return self.o.out .. "/" .. file end

-- e:figure(fig, base [, formats = {"png", "svg"}]): saves the figure as out/base.<format> for every format; raises
-- naming the file when a save fails.
function Exp:figure(fig, base, formats)
  args.check_stop() -- --check-args: the experiment got as far as its results
  formats = formats or {"png", "svg"}
  local ok, err = fig:save(self:path(base), formats)
  if not ok then error(("%s: saving figure %s: %s"):format(self.name, self:path(base), tostring(err)), 0) end
  self.files[#self.files + 1] = base .. "." .. (#formats > 1 and "{" .. table.concat(formats, ",") .. "}" or formats[1])
end

-- e:view(kind, spec, base): writes the interactive view icl.html[kind](spec) (docs/views.md) as out/base.html,
-- listed in the index and the report.
function Exp:view(kind, spec, base)
  spec.out = self:path(base .. ".html")
  icl.html[kind](spec)
  self.files[#self.files + 1] = base .. ".html"
end

-- e:add(file): lists a file the script wrote itself under the output folder in the index, like e:figure's:
-- "base.{png,svg}" (a figure in two formats), "name.html" (a view), "name.json" (data).
function Exp:add(file)
  if type(file) ~= "string" or file == "" then error("e:add: expected a file name under the output folder", 2) end
  self.files[#self.files + 1] = file
end

local function esc(s) return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;")) end

-- out/index.html: the experiment's figures (PNG shown, other formats linked), views, other files listed by e:add
-- and summary.json (when it exists), and the lines it printed; one self-contained page, no network.
local function write_index(self, lines)
  local body = {("<h1>%s</h1>"):format(esc(self.name)), "<pre>" .. esc(table.concat(lines or {}, "\n")) .. "</pre>"}
  local summary = io.open(self:path("summary.json"), "rb")
  if summary then
    summary:close()
    body[#body + 1] = '<p><a href="summary.json">summary.json</a></p>'
  end
  for _, f in ipairs(self.files) do
    local base, fmts = f:match("^(.-)%.{(.*)}$")
    if not base then base, fmts = f:match("^(.*)%.([%w]+)$") end
    local links = {}
    for fmt in (fmts or ""):gmatch("[^,]+") do links[#links + 1] = ('<a href="%s.%s">%s</a>'):format(esc(base), fmt, fmt) end
    if fmts == "html" then
      body[#body + 1] = ('<p>interactive view: <a href="%s.html">%s</a></p>'):format(esc(base), esc(base))
    elseif fmts == "json" then
      body[#body + 1] = ('<p><a href="%s">%s</a></p>'):format(esc(f), esc(f))
    elseif (fmts or ""):find("png") then
      body[#body + 1] = ('<figure><img src="%s.png" alt="%s" style="max-width:100%%"><figcaption>%s: %s</figcaption></figure>')
        :format(esc(base), esc(base), esc(base), table.concat(links, " "))
    else
      body[#body + 1] = ("<p>%s: %s</p>"):format(esc(base), table.concat(links, " "))
    end
  end
  local page = ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>%s</title>\n'
    .. "<style>body{font:14px/1.4 system-ui,sans-serif;margin:16px}pre{background:#f6f6f6;padding:8px}</style>\n"
    .. "</head>\n<body>\n%s\n</body>\n</html>\n"):format(esc(self.name), table.concat(body, "\n"))
  local ok, err = icl.htmlcodec.write(self:path("index.html"), page)
  if not ok then error(("%s: writing %s: %s"):format(self.name, self:path("index.html"), tostring(err)), 0) end
end

-- e:index(lines): index.html alone, for a script that writes its own summaries (meta_learning: one per run, the
-- same bytes as before): the lines, summary.json when it exists, and what e:figure, e:view and e:add listed.
function Exp:index(lines)
  args.check_stop()
  write_index(self, lines)
end

-- e:elapsed(): wall seconds and CPU seconds since the experiment began.
function Exp:elapsed() return icl.clock() - self.wall0, os.clock() - self.t0 end

-- e:report(summary, lines): writes summary.json (through a temporary file renamed over it; experiment, model and
-- seed added when absent, precision when it is fast; model = false leaves the model out), prints the lines and
-- what was written, and writes index.html linking the figures, views and summary.json.
function Exp:report(summary, lines)
  args.check_stop()
  summary.experiment = summary.experiment or self.name
  if self.o.precision == "fast" then summary.precision = summary.precision or "fast" end
  if summary.model == false then summary.model = nil else summary.model = summary.model or self.o.model end
  summary.seed = summary.seed or self.o.seed
  local ok, err = icl.json.write(self:path("summary.json"), summary, {indent = true})
  if not ok then error(("%s: writing %s: %s"):format(self.name, self:path("summary.json"), tostring(err)), 0) end
  for _, l in ipairs(lines or {}) do print(l) end
  write_index(self, lines)
  local wall, cpu = self:elapsed()
  local files = {"summary.json", "index.html"}
  for _, f in ipairs(self.files) do files[#files + 1] = f end
  print(("  wrote %s/{%s} in %.0f s (%.0f s of CPU)"):format(self.o.out, table.concat(files, ", "), wall, cpu))
end

-- One word list for every graph experiment: the first 16 make the 4x4 grid, the first 10 the ring, all 30 the
-- hexagonal lattice (the words of Park et al.'s random_tokens.txt; each is one token with a leading space in
-- SmolLM2 and Gemma 3).
M.WORDS = {"apple", "bird", "car", "egg", "house", "milk", "plane", "opera", "box", "sand", "sun", "mango", "rock",
           "math", "code", "phone", "tree", "dog", "metal", "water", "fire", "boat", "mouse", "cup", "book", "paper",
           "key", "tea", "shoe", "ball"}

-- M.words(n): the first n words (a new list).
function M.words(n) return table.move(M.WORDS, 1, n, 1, {}) end

setmetatable(M, {__call = function(_, spec) return M.new(spec) end})
return M
