#!/usr/bin/env bash
# icl.train and Ctrl-C: SIGINT stops training after the current step with a checkpoint; loading that
# checkpoint and training on (same schedule: decay_steps fixed) reaches the same final loss curve and weights as an uninterrupted run.
set -u
cd "${ICL_SOURCE_DIR:-.}"
ICL=${ICL:-build/icl}
pass=0 fail=0
check() { local what=$1; shift; if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; fi; }
tmp=$(mktemp -d)
cat > "$tmp/train.lua" <<'LUA'
-- arg[1] = checkpoint dir, arg[2] = steps, arg[3] = checkpoint to resume from (optional)
local net = arg[3] and assert(icl.nn.load(arg[3], 1)) or
  icl.nn.attn_only{layers = 2, heads = 2, d_model = 32, vocab = 16, ctx = 16, seed = 3, threads = 1}
local data = icl.data.repeated_segments{vocab = 16, seq = 16, segment = 4, seed = 8}
local r = icl.train{model = net, data = data, steps = tonumber(arg[2]), batch = 8, progress = false,
                    optim = icl.optim.adamw{lr = 5e-3, warmup = 10, decay_steps = 300000},
                    checkpoints = arg[1], every = 50}
print("step", r.step, "interrupted", tostring(r.interrupted), "checkpoint", r.checkpoint)
local p = net:params()
local f = assert(io.open(arg[1] .. "/final-weights.txt", "w"))
for _, name in ipairs{"blk.0.attn_q.weight", "blk.1.attn_k.weight", "output.weight"} do
  for i = 1, 16 do f:write(string.format("%.9g\n", p[name][i])) end
end
f:close()
LUA
"$ICL" script "$tmp/train.lua" "$tmp/a" 300000 > "$tmp/a.out" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -e "$tmp/a/step-0000050.gguf" ] && break; sleep 0.1; done # at least 50 steps done
kill -INT "$pid"
wait "$pid"; rc=$?
check "interrupted run exits 0" [ "$rc" -eq 0 ]
check "reports interrupted" grep -q "interrupted	true" "$tmp/a.out"
step=$(awk '{print $2}' "$tmp/a.out")
ckpt=$(awk '{print $6}' "$tmp/a.out")
check "stopped early (step $step)" [ "${step:-0}" -gt 0 ] && [ "${step:-0}" -lt 300000 ]
check "checkpoint and sidecar written" [ -s "$ckpt" ] && [ -s "$ckpt.optim" ]
n=$((step + 20))
"$ICL" script "$tmp/train.lua" "$tmp/b" "$n" "$ckpt" > "$tmp/b.out" 2>&1
"$ICL" script "$tmp/train.lua" "$tmp/c" "$n" > "$tmp/c.out" 2>&1
check "resumed run reaches step $n" grep -q "step	$n	interrupted	false" "$tmp/b.out"
check "resumed weights == uninterrupted weights" cmp -s "$tmp/b/final-weights.txt" "$tmp/c/final-weights.txt"
rm -rf "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
