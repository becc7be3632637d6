-- icl.data.meta_learning: shapes, layout, labels against the info table, streams, determinism, errors.
local tl = dofile((os.getenv("ICL_SOURCE_DIR") or ".") .. "/tests/lua/testlib.lua")
local check = tl.check

local data, info = icl.data.meta_learning{K = 16, T = 3, seed = 4}
check(info.K == 16 and info.T == 3 and info.N == 4 and info.L == 32 and info.seq == 9 and info.width == 128, "info")
check(info.labels:shape()[1] == 3 and info.labels:shape()[2] == 16, "labels table [T, K]")
local b = data(7, 8)
local s = b.inputs:shape()
check(s[1] == 8 and s[2] == 9 and s[3] == 128, "inputs [B, 9, 128]")
check(b.tokens:shape()[2] == 9 and b.targets:shape()[1] == 8 and b.classes:shape()[2] == 5, "shapes")
check(data(0).targets:shape()[1] == 128, "default batch 128")
local ok_lab, ok_tgt, ok_pos = true, true, true
for i = 1, 8 do
  local t, tk, tg, cl = b.tasks[i], b.tokens[i], b.targets[i], b.classes[i]
  for k = 1, 4 do
    ok_lab = ok_lab and tk[2 * k] == info.labels:get(t + 1, cl[k] + 1) and tk[2 * k - 1] == -1
    ok_pos = ok_pos and b.inputs:get(i, 2 * k - 1, 63 + k) == 1 and b.inputs:get(i, 2 * k, 63 + k) == 0
  end
  ok_tgt = ok_tgt and tg[9] == info.labels:get(t + 1, cl[5] + 1) and tg[1] == -1 and tg[8] == -1 and tk[9] == -1
  ok_pos = ok_pos and b.inputs:get(i, 9, 63 + 5) == 1
end
check(ok_lab, "context labels = labels[task][class], items have token -1")
check(ok_tgt, "only the query is scored, with its class's label under the task")
check(ok_pos, "one-hot pair index at D + i")
-- offsets o_{t,k} = t (the paper's code)
local ok_off = true
for k = 1, 16 do
  for t = 2, 3 do ok_off = ok_off and info.labels:get(t, k) == (info.labels:get(1, k) + t - 1) % 32 end
end
check(ok_off, "labels shift by the task index")
local again = icl.data.meta_learning{K = 16, T = 3, seed = 4}
check((again(7, 8).inputs - b.inputs):abs():max() == 0, "same seed, same batch")
check((data(8, 8).inputs - b.inputs):abs():max() > 0, "another step, another batch")
check((data(7, 8, {stream = 1}).inputs - b.inputs):abs():max() > 0, "another stream, another batch")
local r = data(7, 64, {random_labels = true})
local agree = 0
for i = 1, 64 do
  for k = 1, 4 do
    agree = agree + (r.tokens:get(i, 2 * k) == info.labels:get(r.tasks[i] + 1, r.classes:get(i, k) + 1) and 1 or 0)
  end
end
check(agree < 40, "random labels rarely match the task (" .. agree .. " of 256)")
check(not pcall(icl.data.meta_learning, {K = 3}), "N > K raises")
check(select(2, pcall(icl.data.meta_learning, {offsets = "x"})):find("offsets") ~= nil, "bad offsets named")
check(not pcall(data, 0, 0), "batch 0 raises")

tl.done()
