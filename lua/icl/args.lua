-- Command-line options for experiment scripts: `--name value`, `--flag`, and defaults with types.
--   local a = require("icl.args").parse(arg, {model = "models/x.gguf", layer = 0, quick = false},
--                                       "usage: icl script experiments/x.lua [--model M] ...")
-- Numbers are converted, booleans are flags; an unknown option or a bad value raises an error naming it.
-- A second result is the set of options given on the command line ({walks = true, ...}).
-- --check-args (every script that parses through here, so every experiment; `icl sweep` uses it): parse and check
-- the options, then exit 0 at the first icl.load, icl.train or icl.nn.load, before any work (icl.experiment also
-- stops at the first figure or report, for scripts that load nothing); M.check_only is set. Everything else runs as
-- usual, --out included.
local M = {}

-- The dry run's stop: the script got as far as its first piece of work, so its options were accepted.
local function stop_here()
  io.stdout:write("check-args: options accepted\n")
  io.stdout:flush()
  os.exit(0)
end

-- M.check_stop(): exits 0 as above under --check-args; nothing otherwise.
function M.check_stop()
  if M.check_only then stop_here() end
end

local function begin_check_only()
  M.check_only = true
  icl.load, icl.train = stop_here, stop_here
  if type(icl.nn) == "table" then icl.nn.load = stop_here end
end

function M.parse(argv, defaults, usage)
  local out, given = {}, {}
  for k, v in pairs(defaults) do out[k] = v end
  local i = 1
  while argv and argv[i] do
    local a = argv[i]
    if a == "-h" or a == "--help" then
      io.stdout:write((usage or "") .. "\n")
      os.exit(0)
    end
    if a == "--check-args" then
      begin_check_only()
      i = i + 1
      goto continue
    end
    local key = a:match("^%-%-([%w_%-]+)$")
    if not key then error(("unexpected argument '%s'\n%s"):format(a, usage or ""), 0) end
    key = key:gsub("-", "_")
    given[key] = true
    local def = defaults[key]
    if def == nil and defaults["_" .. key] == nil then
      error(("unknown option --%s\n%s"):format(key, usage or ""), 0)
    end
    if type(def) == "boolean" then
      out[key] = true
      i = i + 1
    else
      local v = argv[i + 1]
      if v == nil then error(("option --%s needs a value"):format(key), 0) end
      if type(def) == "number" then
        local n = tonumber(v)
        if not n then error(("option --%s: '%s' is not a number"):format(key, v), 0) end
        out[key] = n
      else
        out[key] = v
      end
      i = i + 2
    end
    ::continue::
  end
  return out, given
end

return M
