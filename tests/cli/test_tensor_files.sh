#!/usr/bin/env bash
# Tensor files written by icl, read by an independent reader: Python's standard library (struct + json) parses
# the .npy and safetensors layouts by their specifications; numpy, when installed, loads them too.
# Prints "N passed, N failed".
set -u
ICL=${ICL:-build/icl}
pass=0
fail=0
check() {
  local what=$1
  shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what" >&2; fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/write.lua" <<'EOF'
local T, dir = icl.tensor, arg[1]
local a = T.arange(24):reshape(2, 3, 4) / 8 - 1
assert(a:save(dir .. "/a.npy"))
assert(T.from{1.5, -2, 3}:save(dir .. "/v.npy"))
assert(T.save_safetensors(dir .. "/s.safetensors", {a = a, ["blocks.0.hook_z"] = T.eye(2)}))
EOF
"$ICL" script "$tmp/write.lua" "$tmp"
check "icl writes the files" [ -s "$tmp/a.npy" -a -s "$tmp/s.safetensors" ]

if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIPPED: python3 not installed (independent reader checks)"
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ] && exit 77 || exit 1
fi

cat >"$tmp/read.py" <<'EOF'
import ast, json, struct, sys
d = sys.argv[1]

def npy(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY" and b[6:8] == b"\x01\x00", "magic/version"
    hl = struct.unpack("<H", b[8:10])[0]
    assert (10 + hl) % 64 == 0 and b[10 + hl - 1:10 + hl] == b"\n", "alignment"
    h = ast.literal_eval(b[10:10 + hl].decode("latin1"))
    assert h["descr"] == "<f4" and h["fortran_order"] is False, h
    n = 1
    for s in h["shape"]:
        n *= s
    data = b[10 + hl:]
    assert len(data) == 4 * n, "data length"
    return h["shape"], struct.unpack("<%df" % n, data)

shape, vals = npy(d + "/a.npy")
assert shape == (2, 3, 4), shape
assert vals == tuple(i / 8 - 1 for i in range(24)), vals
shape, vals = npy(d + "/v.npy")
assert shape == (3,) and vals == (1.5, -2.0, 3.0), (shape, vals)

b = open(d + "/s.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
assert set(h) == {"a", "blocks.0.hook_z"}, h
for name, shape, want in (("a", [2, 3, 4], [i / 8 - 1 for i in range(24)]), ("blocks.0.hook_z", [2, 2], [1, 0, 0, 1])):
    e = h[name]
    assert e["dtype"] == "F32" and e["shape"] == shape, e
    b0, b1 = e["data_offsets"]
    got = struct.unpack("<%df" % (len(want)), data[b0:b1])
    assert list(got) == [float(x) for x in want], (name, got)
assert max(e["data_offsets"][1] for e in h.values()) == len(data), "data section length"
print("stdlib reader ok")
try:
    import numpy as np
except ImportError:
    sys.exit(0)
assert np.load(d + "/a.npy").shape == (2, 3, 4)
assert float(np.load(d + "/v.npy")[1]) == -2.0
print("numpy reader ok")
EOF
out=$(python3 "$tmp/read.py" "$tmp" 2>&1)
rc=$?
check "an independent reader agrees ($out)" [ "$rc" -eq 0 ]

# and the other way: files written by the reader's side load in icl
python3 - "$tmp" <<'EOF'
import json, struct, sys
d = sys.argv[1]
h = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }"
h = h + b" " * (64 - 10 - len(h) - 1) + b"\n"
open(d + "/p.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + struct.pack("<4d", 1, 2, 3, 4.5))
j = json.dumps({"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}).encode()
open(d + "/p.safetensors", "wb").write(struct.pack("<Q", len(j)) + j + struct.pack("<3f", 0.5, 1, -1))
EOF
cat >"$tmp/read.lua" <<'EOF'
local T, dir = icl.tensor, arg[1]
local p = assert(T.load(dir .. "/p.npy"))
assert(p:get(2, 2) == 4.5 and p:shape()[1] == 2, tostring(p))
local s = assert(T.load_safetensors(dir .. "/p.safetensors"))
assert(s.w and s.w[1] == 0.5 and s.w[3] == -1, "safetensors from python")
print("icl reads them")
EOF
out=$("$ICL" script "$tmp/read.lua" "$tmp" 2>&1)
check "icl reads files written by python ($out)" [ "$out" = "icl reads them" ]

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
