-- icl.fs (issue 44): folders without a shell. make_dirs, list, remove and is_dir on paths holding a quote, spaces
-- and "$(...)" (nothing runs, nothing else is touched); remove never follows a symbolic link (the target of a link
-- inside the removed tree, or the tree given as a link, survives); refusals of "", "/", "." and "..". And the
-- temporary files of atomic saves (issue 44): a symbolic link planted at "<target>.tmp.<pid>" is replaced, never
-- written through (json, .npy, plot, GGUF writers), and a stale file of our own pid is replaced too.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check, raises = tl.check, tl.raises
local fs = icl.fs

local function read(p)
  local f = io.open(p, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end
local function write(p, s)
  local f = assert(io.open(p, "wb"))
  f:write(s)
  f:close()
end

local base = os.tmpname() -- a plain /tmp/lua_XXXXXX name: safe to hand to the shell in this test only
os.remove(base)
assert(fs.make_dirs(base))
-- symbolic links can be made only through the shell from Lua; the paths here are the test's own, quoted safely
local function symlink(target, at)
  local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
  assert(os.execute("ln -s " .. q(target) .. " " .. q(at)), "ln -s " .. at)
end

-- make_dirs / is_dir / list on a hostile name ------------------------------------------------------------------
local hostile = base .. "/it's a $(touch pwned) `touch pwned2` dir"
check(fs.make_dirs(hostile .. "/sub/deeper") == true, "make_dirs creates the hostile path and those above")
check(fs.is_dir(hostile .. "/sub/deeper"), "is_dir of the new folder")
check(not fs.is_dir(hostile .. "/none"), "is_dir of an absent path is false")
write(hostile .. "/b.txt", "b")
write(hostile .. "/a.txt", "a")
local names = fs.list(hostile)
check(tl.same(names, {"a.txt", "b.txt", "sub"}), "list: sorted names without . and .. (" .. table.concat(names or {}, ",") .. ")")
check(not fs.is_dir(hostile .. "/a.txt"), "is_dir of a file is false")
local none, msg = fs.list(base .. "/absent")
check(none == nil and tostring(msg):find("absent: cannot list the folder", 1, true), "list of an absent folder: nil, message")
local ok, err = fs.make_dirs(hostile .. "/a.txt/x")
check(ok == nil and tostring(err):find("a.txt", 1, true), "make_dirs through a file: nil, message naming it (" .. tostring(err) .. ")")
check(read("pwned") == nil and read(base .. "/pwned") == nil and read(hostile .. "/pwned") == nil, "nothing ran")

-- remove: a tree holding links to folders and files outside it; the targets survive -------------------------------
local keep = base .. "/keep"
assert(fs.make_dirs(keep .. "/inner"))
write(keep .. "/precious.txt", "precious")
write(keep .. "/inner/deep.txt", "deep")
symlink(keep, hostile .. "/sub/link-to-keep")
symlink(keep .. "/precious.txt", hostile .. "/sub/deeper/link-to-file")
local r, removed = fs.remove(hostile)
check(r == true and removed == true, "remove of the hostile tree: true, true")
check(not fs.is_dir(hostile) and read(hostile .. "/a.txt") == nil, "the tree is gone")
check(read(keep .. "/precious.txt") == "precious" and read(keep .. "/inner/deep.txt") == "deep",
  "the targets of links inside the tree survive")
r, removed = fs.remove(hostile)
check(r == true and removed == false, "remove of an absent path: true, false")

-- remove of a link to a folder removes the link only, also with a trailing slash
symlink(keep, base .. "/alias")
check(fs.remove(base .. "/alias/") == true, "remove of a link given with a trailing slash")
check(fs.list(base .. "/alias") == nil and read(keep .. "/precious.txt") == "precious", "link gone, its folder kept")
write(base .. "/f", "x")
check(fs.remove(base .. "/f") == true and read(base .. "/f") == nil, "remove of a plain file")

-- refusals: a wrong call raises, naming it
raises(function() fs.remove("") end, "path is empty", "remove of an empty path")
raises(function() fs.remove("/") end, "refusing", "remove of /")
raises(function() fs.remove(base .. "/keep/..") end, "refusing", "remove of ..")
raises(function() fs.remove(base .. "/.") end, "refusing", "remove of .")
raises(function() fs.remove("a\0b") end, "NUL", "a path holding a NUL")
raises(function() fs.list(nil) end, "string expected", "list of nil")
check(fs.is_dir(keep), "nothing outside the removed trees was touched")

-- temporary files of atomic saves: a link planted at "<target>.tmp.<pid>" is not followed ------------------------
local pid = read("/proc/self/stat")
pid = pid and pid:match("^(%d+)")
if pid then
  local victim = base .. "/victim"
  local function planted(target, save, what)
    write(victim, "untouched")
    os.remove(target .. ".tmp." .. pid)
    symlink(victim, target .. ".tmp." .. pid)
    local ok2, e = save(target)
    check(ok2, what .. ": the save succeeds (" .. tostring(e) .. ")")
    check(read(victim) == "untouched", what .. ": the link's target is untouched")
    check(read(target) and read(target) ~= "untouched", what .. ": the target holds the new content")
    check(read(target .. ".tmp." .. pid) == nil, what .. ": no temporary file left")
  end
  planted(base .. "/s.json", function(p) return icl.json.write(p, {a = 1}) end, "json.write")
  planted(base .. "/t.npy", function(p) return icl.tensor.ones(3):save(p) end, "tensor:save")
  planted(base .. "/p.svg", function(p) return icl.plot.line{y = {1, 2, 3}}:save(p) end, "figure:save")
  planted(base .. "/m.gguf", function(p)
    local net = icl.nn.attn_only{layers = 1, heads = 1, d_model = 8, vocab = 8, ctx = 4, seed = 1}
    return net:save(p)
  end, "net:save (GGUF)")
  -- the trainer's optimizer sidecar goes through the same temporary files ("<m>.optim.next", then renamed)
  write(victim, "untouched")
  local side_tmp = base .. "/m2.gguf.optim.next.tmp." .. pid
  symlink(victim, side_tmp)
  local net2 = icl.nn.attn_only{layers = 1, heads = 1, d_model = 8, vocab = 8, ctx = 4, seed = 1}
  check(net2:save(base .. "/m2.gguf"), "net:save with a link at the sidecar's temporary name")
  check(read(victim) == "untouched" and read(side_tmp) == nil, "the sidecar's planted link was not followed")
  -- a stale file of our own pid (a save of this process that died half-way) is replaced
  write(base .. "/own.json.tmp." .. pid, "stale")
  check(icl.json.write(base .. "/own.json", {b = 2}) and icl.json.read(base .. "/own.json").b == 2,
    "a stale temporary file of our own pid is replaced")
else
  print("(no /proc/self/stat: the planted-link cases are left out)")
end

check(fs.remove(base) == true and not fs.is_dir(base), "the test folder removed")
tl.done()
