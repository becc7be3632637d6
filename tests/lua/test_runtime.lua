-- The Lua runtime: the icl table and its modules, embedded pure-Lua modules, `arg`, error tiers of the model
-- binding that need no model file, and interrupting runaway code with a count hook.
-- the icl table ----------------------------------------------------------------------------------------------
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, errs, raises = tl.check, tl.errs, tl.raises
check(type(icl) == "table" and icl.version:match("^%d+%.%d+%.%d+$"), "icl.version")
check(require("icl") == icl, "require 'icl' is the global table")
check(require("icl.tensor") == icl.tensor, "require 'icl.tensor'")
check(type(icl.load) == "function" and type(icl.devices) == "function", "icl.load and icl.devices")
for _, name in ipairs{"rng", "linalg", "plot", "json", "progress"} do
  -- library modules are registered when their C files are linked; the runtime must not depend on them
  if icl[name] ~= nil then check(type(icl[name]) == "table", "icl." .. name .. " is a table") end
end

-- embedded pure-Lua modules: require and lazy icl.<name> give the same table, without the source tree
local embedded = {}
for name in pairs(package.preload) do
  if name:match("^icl%.") then embedded[#embedded + 1] = name end
end
table.sort(embedded)
for _, full in ipairs(embedded) do
  local short = full:sub(5)
  local ok, mod = pcall(require, full)
  check(ok, "require '" .. full .. "': " .. tostring(mod))
  if ok then check(icl[short] == mod, "icl." .. short .. " is require '" .. full .. "'") end
end
check(icl.no_such_module == nil, "unknown icl fields are nil")

-- icl.clock: monotonic seconds with sub-second resolution (os.time counts whole seconds)
do
  local a, b = icl.clock(), icl.clock()
  check(math.type(a) == "float" and b >= a and b - a < 0.5, "icl.clock: two readings in a row")
  -- one whole second of os.time, from tick to tick, measured on icl.clock
  local s = os.time()
  while os.time() == s do end
  local w0, s0 = icl.clock(), os.time()
  while os.time() == s0 do end
  local dw = icl.clock() - w0
  check(dw > 0.9 and dw < 1.5, "icl.clock keeps time with os.time: one second read as " .. dw)
end

-- arg as the stock interpreter sets it --------------------------------------------------------------------
check(type(arg) == "table" and arg[0]:match("test_runtime%.lua$"), "arg[0] is the script")
check(arg[-1] == "script" and type(arg[-2]) == "string", "negative arg indices hold the interpreter words")
check(select("#", ...) == #arg, "script arguments are also passed as ...")

-- model binding: what can be checked without a model --------------------------------------------------------
local m, msg = icl.load("models/no-such-model.gguf")
check(m == nil and type(msg) == "string" and msg:find("no-such-model.gguf", 1, true), "icl.load of a missing file: nil, msg naming it")
raises(function() icl.load() end, "bad argument #1 to 'load'", "icl.load without a path")
raises(function() icl.load("x.gguf", 5) end, "table expected", "icl.load with non-table options")
raises(function() icl.load("x.gguf", {threads = "many"}) end, "threads: expected an integer", "icl.load threads type")
raises(function() icl.load("x.gguf", {n_ctx = -1}) end, "n_ctx: expected an integer in 0..", "icl.load n_ctx range")
raises(function() icl.load("x.gguf", {thread = 2}) end, "unknown option 'thread'", "icl.load catches misspelt options")
raises(function() icl.load("x.gguf", {backend = {}}) end, "backend: expected", "icl.load backend type")
local devs, dmsg = icl.devices()
check((type(devs) == "table") or (devs == nil and type(dmsg) == "string"), "icl.devices: a list, or nil and a message")
if type(devs) == "table" then
  for i, d in ipairs(devs) do
    check(type(d.name) == "string" and d.index == i - 1 and type(d.usable) == "boolean", "device " .. i .. " fields")
  end
end

-- interrupting runaway code: the same count-hook mechanism SIGINT uses --------------------------------------
local co = coroutine.create(function() while true do end end)
debug.sethook(co, function() error("interrupted") end, "", 1000)
local ok, err = coroutine.resume(co)
check(not ok and tostring(err):find("interrupted", 1, true), "a count hook stops a runaway loop")

-- SIGINT through the real handler: the process signals itself while a loop runs (Linux /proc gives our pid)
local pidf = io.open("/proc/self/stat")
local pid = pidf and pidf:read("*l"):match("^(%d+)")
if pidf then pidf:close() end
if pid and os.execute("command -v kill >/dev/null 2>&1") then
  -- a background kill lands while the loop spins; the loop must end with "interrupted", not kill the process
  -- (only the icl process has the handler: `sh` runs kill in the background and returns at once)
  os.execute("(sleep 0.3; kill -INT " .. pid .. ") &")
  local ok2, err2 = pcall(function() local t0 = os.time(); while os.time() - t0 < 20 do end end)
  check(not ok2 and tostring(err2):find("interrupted", 1, true), "SIGINT interrupts a loop: " .. tostring(err2))
end

tl.done()
