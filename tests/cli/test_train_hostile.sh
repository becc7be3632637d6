#!/usr/bin/env bash
# issue 44: Ctrl-C stops icl.train wherever its Lua code is. An endless loop inside the data callback or inside
# on_eval used to survive Ctrl-C twice; now the first Ctrl-C interrupts the callback's Lua code and the run ends
# cleanly (exit 0, interrupted = true, a checkpoint at the step reached). Each case waits for a marker file the
# callback writes before it loops, never a fixed sleep.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ICL_SOURCE_DIR:-.}"
ICL=${ICL:-build/icl}
cat > "$TMP/loop.lua" <<'LUA'
-- arg[1] = checkpoint dir, arg[2] = marker file, arg[3] = "data" or "eval": where the endless loop is
local net = icl.nn.attn_only{layers = 1, heads = 1, d_model = 8, vocab = 8, ctx = 8, seed = 1, threads = 1}
local gen = icl.data.repeated_segments{vocab = 8, seq = 8, segment = 3, seed = 1}
local function hang()
  local f = assert(io.open(arg[2], "w")); f:write("looping\n"); f:close()
  local x = 0
  while true do x = x + 1 end
end
local r = icl.train{model = net, data = function(s, b) if arg[3] == "data" and s == 3 then hang() end return gen(s, b) end,
                    steps = 1000, batch = 2, every = 2, checkpoints = arg[1], progress = false,
                    on_eval = function(s) if arg[3] == "eval" and s == 4 then hang() end end}
print("step", r.step, "interrupted", tostring(r.interrupted), "checkpoint", r.checkpoint)
LUA
for where in data eval; do
  rm -f "$TMP/marker"
  "$ICL" script "$TMP/loop.lua" "$TMP/ck-$where" "$TMP/marker" "$where" > "$TMP/$where.out" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do [ -e "$TMP/marker" ] && break; sleep 0.05; done # the callback is in its loop
  check "$where: the callback reached its loop" [ -e "$TMP/marker" ]
  kill -INT "$pid"
  for _ in $(seq 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done # up to 20 s to stop
  if kill -0 "$pid" 2>/dev/null; then
    check "$where: one Ctrl-C stops the run" false
    kill -9 "$pid"
  fi
  wait "$pid"; rc=$?
  check "$where: exits 0 (rc $rc: $(head -c 300 "$TMP/$where.out"))" [ "$rc" -eq 0 ]
  step=$( [ "$where" = data ] && echo 3 || echo 4)
  check "$where: reports interrupted at step $step" grep -q "^step	$step	interrupted	true	checkpoint	$TMP/ck-$where/step-000000$step.gguf" "$TMP/$where.out"
  echo "assert(icl.nn.load(arg[1]))" > "$TMP/load.lua"
  check "$where: the checkpoint loads" "$ICL" script "$TMP/load.lua" "$TMP/ck-$where/step-000000$step.gguf"
done
finish
