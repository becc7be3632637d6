#!/usr/bin/env bash
# Smoke tests of the experiment scripts: each of experiments/{park_grid,head_scores,head_ablation,neighbor_mixing,
# bigram_pca}.lua runs with --quick and --out under a temporary directory; summary.json must parse and hold the
# expected keys with sane values, the PNG and SVG figures must exist (checked by signature); the same seed must give
# a byte-identical summary.json (park_grid, head_scores, neighbor_mixing run twice), and each experiment's
# index.html must link what it wrote (check_index of lib.sh, issue 42). park_grid also runs on the
# ring and the hexagonal lattice, with --seed 1 (classes absent from the window: named, left out) and with an
# unwritable --out (refused before any run).
# Env: ICL (the binary), ICL_SOURCE_DIR (the source tree). Prints "N passed, N failed"; exit 77 (skipped) when the
# model file is absent and nothing failed.
set -u
ICL=${ICL:?set ICL to the icl binary}
SRC=${ICL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
MODEL=$SRC/models/SmolLM2-135M-Instruct-Q4_1.gguf
. "$SRC/tests/cli/lib.sh" # TMP, check, finish, check_index
cd "$SRC" || exit 1
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# run NAME ARGS...: runs experiments/NAME.lua --quick --out $TMP/NAME ARGS; output in $TMP/NAME.log
run() {
  local name=$1 out=$TMP/$1
  shift
  local t0=$SECONDS
  if ICL_PROGRESS= "$ICL" script "experiments/$name.lua" --quick --out "$out" "$@" >"$TMP/$name.log" 2>&1; then
    ok
    echo "$name --quick: $((SECONDS - t0)) s"
  else
    bad "$name --quick exited with an error:"
    sed 's/^/    /' "$TMP/$name.log" >&2
    return 1
  fi
}

# figures DIR NAME...: NAME.png starts with the PNG signature, NAME.svg holds an <svg element
figures() {
  local dir=$1 f
  shift
  for f in "$@"; do
    check "$dir/$f.png is a PNG" \
      bash -c "head -c 8 '$dir/$f.png' 2>/dev/null | od -An -tx1 | tr -d ' \n' | grep -q '^89504e470d0a1a0a$'"
    check "$dir/$f.svg is an SVG" grep -q "<svg" "$dir/$f.svg"
  done
}

# The summary checks, in Lua through icl itself: one line per check, PASS or FAIL.
cat >"$TMP/check.lua" <<'EOF'
local name, path = arg[1], arg[2]
local j, err = icl.json.read(path)
local function t(what, cond) print((cond and "PASS " or "FAIL ") .. name .. ": " .. what) end
t("summary.json parses (" .. tostring(err) .. ")", j ~= nil)
if not j then return end
local function num(v) return type(v) == "number" and v == v end
local function in01(v) return num(v) and v >= 0 and v <= 1 end
local function all(list, f) if type(list) ~= "table" or #list == 0 then return false end
  for _, v in ipairs(list) do if not f(v) then return false end end return true end
local function ratio2(r) return type(r) == "table" and #r == 2 and in01(r[1]) and in01(r[2]) and r[1] >= r[2]
  and r[1] + r[2] <= 1 + 1e-9 end
t("experiment name", j.experiment == name)
if name == "park_grid" then
  t("accuracy_mean has one value per word, in [0, 1]", #j.accuracy_mean == j.length and all(j.accuracy_mean, in01))
  t("accuracy_by_range", all(j.accuracy_by_range, function(r) return in01(r.mean) end))
  -- each range: its walks' means, their mean and standard error (sample sd / sqrt(n))
  t("accuracy_by_range: mean and SE of the walks' means", all(j.accuracy_by_range, function(r)
    if r.n ~= j.walks or #r.walks ~= j.walks or j.walks < 2 then return false end
    local s, s2 = 0, 0
    for _, v in ipairs(r.walks) do s = s + v end
    local mu = s / r.n
    for _, v in ipairs(r.walks) do s2 = s2 + (v - mu) ^ 2 end
    return math.abs(mu - r.mean) < 1e-9 and math.abs(r.se - math.sqrt(s2 / (r.n - 1) / r.n)) < 1e-9
  end))
  local r = j.pca_explained_ratio
  if j.graph == "ring" then -- three components (the ring is drawn on PC2 and PC3)
    t("pca_explained_ratio (3)", #r == 3 and ratio2({r[1], r[2]}) and in01(r[3]) and r[3] <= r[2]
      and r[1] + r[2] + r[3] <= 1 + 1e-9)
  else
    t("pca_explained_ratio", ratio2(r))
  end
  t("dirichlet_energy_final >= 0", num(j.dirichlet_energy_final) and j.dirichlet_energy_final >= 0)
  t("layer 24 of 30 (80% depth)", j.layer == 24 and j.hook == "blocks.24.hook_resid_pre")
  t("words of the graph", #j.words == ({grid = 16, ring = 10, hex = 30})[j.graph])
  local f = j.energy_final_null
  t("final energy beside its shuffle null", f and in01(f.null_below) and num(f.null_mean) and num(f.raw) and f.raw >= 0)
  local gf = j.grid_fit
  t("grid fit: rho in [-1, 1] beside its label-shuffle null", gf and num(gf.rho) and math.abs(gf.rho) <= 1
    and num(gf.null_mean) and in01(gf.null_above) and gf.shuffles == j.shuffles)
  t("energy curve: raw, null and fraction below, or the missing words",
    all(j.energy_curve, function(r) return (num(r.raw) and in01(r.null_below)) or #r.missing > 0 end))
elseif name == "head_scores" then
  for _, k in ipairs({"induction", "previous_token", "duplicate_token", "prefix_matching"}) do
    local mat = j.scores[k]
    t(k .. " scores: 30 x 9 in [0, 1]", #mat == 30 and all(mat, function(row) return #row == 9 and all(row, in01) end))
  end
  for _, k in ipairs({"induction", "previous_token"}) do
    local top, sorted = j.top[k], true
    for i = 2, #top do if top[i].score > top[i - 1].score then sorted = false end end
    t(k .. ": top 32 ranked, best first", #top == 32 and sorted)
    t(k .. ": ranked scores match the matrix", j.scores[k][top[1].layer + 1][top[1].head + 1] == top[1].score)
  end
  t("the best induction head scores above 0.3", j.top.induction[1].score > 0.3)
  t("the best previous-token head scores above 0.3", j.top.previous_token[1].score > 0.3)
elseif name == "head_ablation" then
  t("ks are 2, 8 and k_pca 8", #j.ks == 2 and j.ks[1] == 2 and j.ks[2] == 8 and j.k_pca == 8)
  t("baseline late accuracy in [0, 1]", in01(j.late_accuracy.baseline))
  for _, k in ipairs({"induction", "previous_token", "random"}) do
    t(k .. ": late accuracy per k", #j.late_accuracy[k] == 2 and all(j.late_accuracy[k], in01))
    t(k .. ": one curve per k over the walk", #j.curves[k] == 2 and #j.curves[k][1] == j.length)
  end
  t("table: baseline + 3 conditions x 2 ks", #j.table == 7)
  t("8 induction and previous-token heads listed", #j.heads.induction == 8 and #j.heads.previous_token == 8)
  local union = {}
  for _, k in ipairs({"induction", "previous_token"}) do
    for _, e in ipairs(j.heads[k]) do union[e.layer * 100 + e.head] = true end
  end
  local disjoint = true
  for _, rs in ipairs(j.random_sets) do
    for _, set in ipairs(rs.sets) do
      for _, e in ipairs(set) do if union[e.layer * 100 + e.head] then disjoint = false end end
    end
  end
  t("random heads avoid the top heads", disjoint and #j.random_sets[1].sets == 2)
  local fits = true
  for _, kind in ipairs({"baseline", "induction", "previous_token", "random"}) do
    local f = j.pca[kind] and j.pca[kind].grid_fit
    fits = fits and type(f) == "table" and num(f.rho) and math.abs(f.rho) <= 1 and num(f.null_mean)
      and in01(f.null_above) and f.shuffles == 200
  end
  t("each PCA's grid fit beside its label-shuffle null", fits)
  for _, k in ipairs({"baseline", "induction", "previous_token", "random"}) do
    t("pca " .. k, j.pca[k] and ratio2(j.pca[k].explained_ratio))
  end
elseif name == "neighbor_mixing" then
  t("dimension 64 in quick mode", j.dim == 64)
  t("explained ratios", ratio2(j.before.explained_ratio) and ratio2(j.after.explained_ratio))
  t("mixing lowers the Dirichlet energy", j.after.dirichlet_energy < j.before.dirichlet_energy and j.energy_ratio < 1)
  t("mixing makes the grid readable in 2 PCs", j.after.grid_fit_r2 > j.before.grid_fit_r2)
  t("energy curve from step 0", #j.curve >= 2 and j.curve[1].step == 0)
elseif name == "bigram_pca" then
  t("positions = walks x window", j.positions == j.walks * j.window)
  t("pca_explained_ratio", ratio2(j.pca_explained_ratio))
  for _, k in ipairs({"current", "previous", "bigram"}) do
    local r = j.variance_ratio[k]
    t(k .. ": variance ratios in [0, 1]", r and in01(r.full) and in01(r.pca2) and in01(r.chance))
  end
  t("the pair explains at least as much as the current word",
    j.variance_ratio.bigram.full >= j.variance_ratio.current.full - 1e-9)
  t("the current word explains more than chance", j.variance_ratio.current.full > j.variance_ratio.current.chance)
end
EOF

summary() { # name: the summary checks of $TMP/name/summary.json
  local line
  while IFS= read -r line; do
    case $line in
      PASS*) ok ;;
      FAIL*) bad "${line#FAIL }" ;;
      *) bad "checker: $line" ;;
    esac
  done < <("$ICL" script "$TMP/check.lua" "$1" "$TMP/$1/summary.json" 2>&1)
}

# ---- neighbor_mixing needs no model ----
if run neighbor_mixing --dim 64; then
  summary neighbor_mixing
  figures "$TMP/neighbor_mixing" pca_before pca_after energy
  check_index neighbor_mixing "$TMP/neighbor_mixing"
  cp "$TMP/neighbor_mixing/summary.json" "$TMP/nm1.json"
  run neighbor_mixing --dim 64 && check "neighbor_mixing: same seed, identical summary.json" \
    cmp -s "$TMP/nm1.json" "$TMP/neighbor_mixing/summary.json"
fi
check "a misspelt option is refused" bash -c "! '$ICL' script experiments/neighbor_mixing.lua --quik >'$TMP/err' 2>&1"
check "the error names the option" grep -q "unknown option --quik" "$TMP/err"

if [ ! -f "$MODEL" ]; then
  echo "SKIPPED: $MODEL not present (park_grid, head_scores, head_ablation, bigram_pca;" \
    "scripts/fetch-models.sh fetches it)"
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ] && exit 77
  exit 1
fi

# ---- park_grid: twice with the same seed ----
if run park_grid; then
  summary park_grid
  figures "$TMP/park_grid" accuracy pca energy
  check_index park_grid "$TMP/park_grid"
  cp "$TMP/park_grid/summary.json" "$TMP/pg1.json"
  run park_grid && check "park_grid: same seed, byte-identical summary.json" \
    cmp -s "$TMP/pg1.json" "$TMP/park_grid/summary.json"
fi

# variant DIR ARGS...: park_grid --quick --out $TMP/DIR ARGS, then its summary checks
variant() {
  local dir=$1
  shift
  if ICL_PROGRESS= "$ICL" script experiments/park_grid.lua --quick --out "$TMP/$dir" "$@" >"$TMP/$dir.log" 2>&1; then
    ok
    "$ICL" script "$TMP/check.lua" park_grid "$TMP/$dir/summary.json" 2>&1 | while IFS= read -r line; do
      case $line in PASS*) ;; *) echo "FAIL: park_grid $*: $line" >&2; echo x ;; esac
    done | grep -q x && bad "park_grid $* summary checks" || ok
  else
    bad "park_grid $* exited with an error:"
    sed 's/^/    /' "$TMP/$dir.log" >&2
    return 1
  fi
}
variant pg_ring --graph ring && figures "$TMP/pg_ring" accuracy pca energy
variant pg_hex --graph hex && figures "$TMP/pg_hex" accuracy pca energy
# seed 1: classes absent from the quick window are named and left out (issue 16, item 10)
variant pg_seed1 --seed 1 && check "park_grid --seed 1 names the absent class" \
  grep -q "class 'rock' (node 13) does not occur" "$TMP/pg_seed1.log"
check "park_grid: an unwritable --out fails before the runs" \
  bash -c "! '$ICL' script experiments/park_grid.lua --quick --out /proc/icl-none >'$TMP/err' 2>&1 &&
           grep -q 'out /proc/icl-none: cannot write there' '$TMP/err' && ! grep -q accuracy '$TMP/err'"

# ---- head_scores: twice, the second in two groups of layers (same numbers) ----
if run head_scores; then
  summary head_scores
  figures "$TMP/head_scores" induction previous_token scatter
  check_index head_scores "$TMP/head_scores"
  cp "$TMP/head_scores/summary.json" "$TMP/hs1.json"
  run head_scores --max-capture-mb 0.6 && check "head_scores: same seed, identical summary.json (in layer groups)" \
    cmp -s "$TMP/hs1.json" "$TMP/head_scores/summary.json"
fi

# ---- head_ablation, ranking the heads from the head_scores summary ----
if run head_ablation --scores "$TMP/hs1.json"; then
  summary head_ablation
  figures "$TMP/head_ablation" accuracy_induction accuracy_previous_token accuracy_random late_accuracy \
    pca_baseline pca_induction pca_previous_token pca_random
  check_index head_ablation "$TMP/head_ablation"
  check "head_ablation: the scores file is recorded" \
    grep -q "\"scores_source\": \"$TMP/hs1.json\"" "$TMP/head_ablation/summary.json"
  # every random set's grid fit, set 1's equal to the full PCA entry's, and their mean and sd
  check "head_ablation: the random control's grid fit over its 2 sets" "$ICL" script - <<EOF
local r = assert(icl.json.read("$TMP/head_ablation/summary.json")).pca.random
local gs = r.grid_fit_sets
local a, b = gs.rho[1], gs.rho[2]
if not (gs.n == 2 and #gs.rho == 2 and a == r.grid_fit.rho and a ~= b) then os.exit(1) end
if math.abs(gs.mean - (a + b) / 2) > 1e-12 or math.abs(gs.sd - math.abs(a - b) / math.sqrt(2)) > 1e-12 then
  os.exit(1)
end
EOF
  # its own summary as --scores: the same ranking, so the same heads, random sets and accuracies
  cp "$TMP/head_ablation/summary.json" "$TMP/ha1.json"
  if run head_ablation --scores "$TMP/ha1.json"; then
    check "head_ablation: its summary as --scores gives the same heads, random sets and table" "$ICL" script - <<EOF
local a, b = icl.json.read("$TMP/ha1.json"), icl.json.read("$TMP/head_ablation/summary.json")
local e = icl.json.encode
if e({a.heads, a.random_sets, a.table, a.top}) ~= e({b.heads, b.random_sets, b.table, b.top}) then os.exit(1) end
if #a.top.induction < 8 or #a.top.previous_token < 8 then os.exit(1) end
EOF
  fi
fi

# ---- head_ablation --random-layers below-pca: random heads only where they can act on the PCA's point ----
if run head_ablation --scores "$TMP/hs1.json" --ks 2 --random-sets 3 --random-layers below-pca --text none \
  --rep-seqs 0; then
  check "head_ablation --random-layers below-pca: every random head below the PCA's layer" "$ICL" script - <<EOF
local j = assert(icl.json.read("$TMP/head_ablation/summary.json"))
if j.random_layers ~= "below-pca" or j.hook ~= ("blocks.%d.hook_resid_pre"):format(j.layer) then os.exit(1) end
local rs = j.random_sets[1]
if #rs.sets ~= 3 or not rs.pool:find(("layers 0%%-%d "):format(j.layer - 1)) then os.exit(1) end
for _, set in ipairs(rs.sets) do
  for _, e in ipairs(set) do if e.layer >= j.layer then os.exit(1) end end
end
EOF
fi
check "head_ablation --random-layers: a bad value is refused by name" bash -c \
  "! '$ICL' script experiments/head_ablation.lua --random-layers above --out '$TMP/ha_bad' 2>'$TMP/err' &&
   grep -q \"random-layers 'above': expected all or below-pca\" '$TMP/err'"

# ---- head_ablation: zero, mean and resample ablation with the capability check (issue 40) ----
# 2 walks (mean and resample take the other walk's activations), k = 8 only; the capability check's text is a
# file written here, so the test does not need data/.
for i in $(seq 1 300); do
  echo "Line $i: the walkers crossed the river at dawn, counted $((i * 7 % 13)) boats and wrote the number down."
  echo "Nobody in the village believed that the bridge would hold, yet it stood for $((i % 40 + 3)) more years."
done >"$TMP/text.txt"
if run head_ablation --scores "$TMP/hs1.json" --walks 2 --ks 8 --ablation zero,mean,resample --text "$TMP/text.txt"; then
  figures "$TMP/head_ablation" accuracy_induction_mean late_accuracy_resample pca_induction_resample
  check "head_ablation --ablation zero,mean,resample: the modes, SEs, ns and capability losses" "$ICL" script - <<EOF
local j = assert(icl.json.read("$TMP/head_ablation/summary.json"))
local function num(v) return type(v) == "number" and v == v end
local function fail(why) io.stderr:write("FAIL: " .. why .. "\n"); os.exit(1) end
if #j.ablation ~= 3 or j.ablation[2] ~= "mean" or j.ablated_point ~= "hook_z (zero, all positions)" then fail("modes") end
if icl.json.encode(j.table) ~= icl.json.encode(j.by_mode.zero.table) then fail("top-level table = zero's") end
for _, mode in ipairs({"zero", "mean", "resample"}) do
  local bm = j.by_mode[mode]
  if not bm then fail("by_mode." .. mode) end
  -- every late-accuracy cell keeps its per-walk values, whose mean is the cell's
  for _, kind in ipairs({"induction", "previous_token", "random"}) do
    local c = bm.late_cells[kind][1]
    local v = c.values or {}
    if #v ~= 2 or not (num(v[1]) and num(v[2])) or math.abs((v[1] + v[2]) / 2 - c.mean) > 1e-12 then
      fail(mode .. ": " .. kind .. " late cell lacks its 2 per-walk values")
    end
  end
  for _, row in ipairs(bm.table) do
    if not (num(row.late_accuracy) and num(row.se) and row.se >= 0 and row.n == 2) then
      fail(mode .. ": row " .. row.condition .. " k " .. row.k .. " lacks accuracy, SE or n = 2")
    end
    for _, set in ipairs({"text", "repeated_tokens"}) do
      local c = row.loss[set]
      if not (c and num(c.mean) and c.mean > 0 and num(c.se) and c.n == 2) then
        fail(mode .. ": row " .. row.condition .. " k " .. row.k .. " lacks the " .. set .. " loss")
      end
    end
  end
  -- the 8 best induction heads removed: the loss on the repeated copy rises by more than a nat, and by more than
  -- a nat beyond the random control's change
  local ind, rnd = bm.capability.induction[1].repeated_tokens, bm.capability.random[1].repeated_tokens
  if not (ind.delta > 1 and ind.delta > rnd.delta + 1) then
    fail(("%s: repeated-token loss change %.2f (induction) vs %.2f (random)"):format(mode, ind.delta, rnd.delta))
  end
end
if j.capability_sets[1].name ~= "text" or j.capability_sets[2].name ~= "repeated_tokens" then fail("capability sets") end
EOF
  # the results.md table maker pools runs of other walk seeds: a copy with another seed and ks is pooled or refused
  "$ICL" script - >/dev/null 2>&1 <<EOF
local j = assert(icl.json.read("$TMP/head_ablation/summary.json"))
j.seed = j.seed + 1000
assert(icl.json.write("$TMP/ha_seed2.json", j))
j.ks = {4}
assert(icl.json.write("$TMP/ha_ks4.json", j))
EOF
  check "head-ablation-table.lua: two seeds' runs pooled over 4 walks, the same means" bash -c "
    '$ICL' script scripts/head-ablation-table.lua '$TMP/head_ablation/summary.json' >'$TMP/t1' &&
    '$ICL' script scripts/head-ablation-table.lua '$TMP/head_ablation/summary.json' '$TMP/ha_seed2.json' >'$TMP/t2' &&
    grep -q 'n = 2 walks' '$TMP/t1' && grep -q 'n = 4 walks' '$TMP/t2' && grep -q 'Pooled over 2 runs' '$TMP/t2' &&
    [ \"\$(grep '^| 8 |' '$TMP/t1' | grep -o '0\.[0-9]* ±')\" = \"\$(grep '^| 8 |' '$TMP/t2' | grep -o '0\.[0-9]* ±')\" ]"
  check "head-ablation-table.lua --per-walk: each cell's walks listed, their mean the table's cell" bash -c "
    '$ICL' script scripts/head-ablation-table.lua --per-walk '$TMP/head_ablation/summary.json' >'$TMP/t3' &&
    want=\$(grep '^| 8 |' '$TMP/t3' | cut -d'|' -f5 | grep -o '0\.[0-9]*' | head -1) &&
    got=\$(grep -E '^seed [0-9]+, zero rnd k = 8: ' '$TMP/t3' | sed 's/.*: //' | awk '{ if (NF != 2) exit 1; printf \"%.4f\", (\$1 + \$2) / 2 }') &&
    [ -n \"\$want\" ] && awk -v a=\"\$want\" -v b=\"\$got\" 'BEGIN { d = a - b; exit !(d < 0.0011 && d > -0.0011) }' &&
    ! '$ICL' script scripts/head-ablation-table.lua --per-wlak '$TMP/head_ablation/summary.json' 2>'$TMP/err' &&
    grep -q 'unknown option' '$TMP/err'"
  # 2 walks on the 4 x 4 grid start at nodes 1 and 2 (other colours), each the other's donor: the colour split has
  # no same-colour walk and puts both in the other column, whose mean is the table's resample cell
  check "head-ablation-table.lua --per-walk: resample split by the donor's colour (2 walks: both other-colour)" bash -c "
    cell=\$(grep '^| 8 |' '$TMP/t3' | head -1 | cut -d'|' -f9 | grep -o '0\.[0-9]*' | head -1) &&
    split=\$(grep -A 6 'split by the donor' '$TMP/t3' | grep '^| 8 |') &&
    [ \"\$(echo \"\$split\" | cut -d'|' -f3)\" = ' — ' ] &&
    [ \"\$(echo \"\$split\" | cut -d'|' -f4 | grep -o '0\.[0-9]* ±' | grep -o '0\.[0-9]*')\" = \"\$cell\" ] &&
    echo \"\$split\" | cut -d'|' -f4 | grep -q '(2)'"
  check "head-ablation-table.lua: runs of one seed, or of other ks, are refused" bash -c "
    ! '$ICL' script scripts/head-ablation-table.lua '$TMP/head_ablation/summary.json' '$TMP/head_ablation/summary.json' 2>'$TMP/err' &&
    grep -q 'already given' '$TMP/err' &&
    ! '$ICL' script scripts/head-ablation-table.lua '$TMP/head_ablation/summary.json' '$TMP/ha_ks4.json' 2>'$TMP/err' &&
    grep -q 'ks or ablation modes differ' '$TMP/err'"
  # resample donors: the default rule (next) is recorded; --donor colour on 4 walks (starts 1-4, colours 0 1 0 1 on the
  # bipartite grid) takes the walk two on; the table maker refuses to pool runs of the two rules
  if ICL_PROGRESS= "$ICL" script experiments/head_ablation.lua --quick --scores "$TMP/hs1.json" --walks 4 --ks 2 \
       --ablation resample --donor colour --text none --rep-seqs 0 --out "$TMP/ha_colour" >"$TMP/ha_colour.log" 2>&1; then
    ok
    check "head_ablation --donor: next records donors 2 1 (2 walks); colour on 4 walks records 3 4 1 2" "$ICL" script - <<EOF
local a = assert(icl.json.read("$TMP/head_ablation/summary.json"))
local b = assert(icl.json.read("$TMP/ha_colour/summary.json"))
if a.donor_rule ~= "next" or table.concat(a.donors, " ") ~= "2 1" then error("next: " .. icl.json.encode(a.donors)) end
if b.donor_rule ~= "colour" or table.concat(b.donors, " ") ~= "3 4 1 2" then error("colour: " .. icl.json.encode(b.donors)) end
EOF
    "$ICL" script - >/dev/null 2>&1 <<EOF
local j = assert(icl.json.read("$TMP/head_ablation/summary.json"))
j.seed, j.donor_rule = j.seed + 2000, "colour"
assert(icl.json.write("$TMP/ha_rule.json", j))
EOF
    check "head-ablation-table.lua: runs with other resample donor rules are refused" bash -c "
      ! '$ICL' script scripts/head-ablation-table.lua '$TMP/head_ablation/summary.json' '$TMP/ha_rule.json' 2>'$TMP/err' &&
      grep -q 'resample donors by rule colour' '$TMP/err'"
  else
    bad "head_ablation --donor colour exited with an error:"
    sed 's/^/    /' "$TMP/ha_colour.log" >&2
  fi
fi
check "head_ablation: an unknown --donor is refused, naming the flag" \
  bash -c "! '$ICL' script experiments/head_ablation.lua --quick --donor blue --out '$TMP/ha_bad' >'$TMP/err' 2>&1 &&
           grep -q \"donor 'blue': expected next or colour\" '$TMP/err'"
check "head_ablation: --donor colour without a same-colour walk for each is refused before any run" \
  bash -c "! '$ICL' script experiments/head_ablation.lua --quick --walks 2 --ablation resample --donor colour --out '$TMP/ha_bad' >'$TMP/err' 2>&1 &&
           grep -q 'walk 1 (starting at word 1) has no other walk starting on its colour' '$TMP/err' && [ ! -e '$TMP/ha_bad/summary.json' ]"
check "head_ablation: an unknown --ablation is refused, naming the flag" \
  bash -c "! '$ICL' script experiments/head_ablation.lua --quick --ablation median --out '$TMP/ha_bad' >'$TMP/err' 2>&1 &&
           grep -q \"ablation 'median': expected zero, mean or resample\" '$TMP/err'"
check "head_ablation: --ablation mean with one walk is refused before any run" \
  bash -c "! '$ICL' script experiments/head_ablation.lua --quick --ablation mean --walks 1 --out '$TMP/ha_bad' >'$TMP/err' 2>&1 &&
           grep -q 'needs --walks >= 2' '$TMP/err'"
check "head_ablation: a missing --text file is refused, naming it" \
  bash -c "! '$ICL' script experiments/head_ablation.lua --quick --text '$TMP/none.txt' --out '$TMP/ha_bad' >'$TMP/err' 2>&1 &&
           grep -q 'cannot open $TMP/none.txt' '$TMP/err'"

# ---- bigram_pca ----
if run bigram_pca; then
  summary bigram_pca
  figures "$TMP/bigram_pca" positions bigram_means
  check_index bigram_pca "$TMP/bigram_pca"
fi

finish
