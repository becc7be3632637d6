#!/usr/bin/env bash
# icl info: a real vocabulary file, a generated model with tensors, malformed and missing files.
# Env: ICL (the icl binary), ICL_SOURCE_DIR (the source tree). Prints "N passed, N failed".
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ICL=${ICL:?set ICL to the icl binary}
SRC=${ICL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}

run() { # run ARGS...: sets rc, output in $TMP/out and $TMP/err
  "$ICL" info "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
}

has() { grep -Eq -- "$1" "$TMP/out"; }
one_line_err() { [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "^icl info: $1" "$TMP/err"; }

# A bad file: exit 2 (not a signal), exactly one line on stderr naming the file.
expect_bad() { # expect_bad FILE DESCRIPTION
  run "$1"
  check "$2: exit 2 (got $rc)" [ "$rc" -eq 2 ]
  check "$2: one line on stderr naming the file: $(head -c 300 "$TMP/err")" one_line_err "$1: "
  check "$2: nothing on stdout" [ ! -s "$TMP/out" ]
}

# ---- usage ----
run --help
check "--help exits 0" [ "$rc" -eq 0 ]
check "--help prints usage" has "^usage: icl info"
run
check "no file: exit 2" [ "$rc" -eq 2 ]
check "no file: one line" one_line_err "missing"
run --bogus x.gguf
check "unknown option: exit 2" [ "$rc" -eq 2 ]

# ---- the SentencePiece vocabulary file ----
VOCAB="$SRC/tests/fixtures/tokenizer/ggml-vocab-llama-spm.gguf"
if [ -f "$VOCAB" ]; then
  run "$VOCAB"
  check "vocab: exit 0" [ "$rc" -eq 0 ]
  check "vocab: architecture llama" has "^architecture: +llama$"
  check "vocab: 32000 tokens" has "^vocabulary: +32000 tokens$"
  check "vocab: tokenizer" has "^tokenizer: +llama \(pre: default\)$"
  check "vocab: block_count 32" has "^  block_count: +32$"
  check "vocab: rms epsilon" has "^  attention.layer_norm_rms_epsilon: +1e-05$"
  check "vocab: gguf version 3" has "^gguf version: +3 "
  run --json "$VOCAB"
  check "vocab --json: exit 0" [ "$rc" -eq 0 ]
  check "vocab --json: values" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["architecture"] == "llama" and j["tokenizer"]["vocab_size"] == 32000, j
assert j["hparams"]["feed_forward_length"] == 11008 and j["n_tensors"] == 0, j
' "$TMP/out"
  head -c 5000 "$VOCAB" >"$TMP/truncated.gguf"
  expect_bad "$TMP/truncated.gguf" "truncated vocab"
else
  check "vocab: $VOCAB is carried in the repository" false
fi

# ---- a generated model with tensors (F32 [4, 3] and Q8_0 [32, 2]) ----
python3 - "$TMP/tiny.gguf" <<'PY'
import struct, sys
def s(x): b = x.encode(); return struct.pack("<Q", len(b)) + b
kv = [s("general.architecture") + struct.pack("<I", 8) + s("llama"),
      s("llama.block_count") + struct.pack("<II", 4, 2),
      s("llama.embedding_length") + struct.pack("<II", 4, 4),
      s("llama.rope.freq_base") + struct.pack("<If", 6, 10000.0),
      s("tokenizer.ggml.model") + struct.pack("<I", 8) + s("gpt2"),
      s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + s("a") + s("b") + s("c")]
ti = [s("tok.weight") + struct.pack("<IQQIQ", 2, 4, 3, 0, 0),
      s("blk.0.w") + struct.pack("<IQQIQ", 2, 32, 2, 8, 64)]
head = struct.pack("<IIQQ", 0x46554747, 3, len(ti), len(kv)) + b"".join(kv) + b"".join(ti)
head += b"\0" * (-len(head) % 32)
data = bytes(48) + bytes(16) + bytes(68) + bytes(28)
open(sys.argv[1], "wb").write(head + data)
PY
run --tensors "$TMP/tiny.gguf"
check "tiny: exit 0" [ "$rc" -eq 0 ]
check "tiny: hparams" has "^  block_count: +2$"
check "tiny: rope.freq_base" has "^  rope.freq_base: +10000$"
check "tiny: 3 tokens" has "^vocabulary: +3 tokens$"
check "tiny: totals" has "^tensors: +2 \(0.00 MiB, 116 bytes\)$"
check "tiny: Q8_0 line" has "^  Q8_0 +1 tensors +0.00 MiB +68 bytes$"
check "tiny: table row 0" has "^ +0  tok.weight +F32 +4 x 3 +48 +0$"
check "tiny: table row 1" has "^ +1  blk.0.w +Q8_0 +32 x 2 +68 +64$"
run --json --tensors "$TMP/tiny.gguf"
check "tiny --json: values" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["types"]["F32"] == {"count": 1, "bytes": 48} and j["tensor_bytes"] == 116, j
assert j["tensors"][1] == {"name": "blk.0.w", "type": "Q8_0", "shape": [32, 2], "bytes": 68, "offset": 64}, j
assert j["hparams"]["rope.freq_base"] == 10000 and j["tokenizer"]["model"] == "gpt2", j
' "$TMP/out"

# ---- malformed and missing files ----
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\377\377\377\377\377\377\377\177' >"$TMP/huge.gguf"
expect_bad "$TMP/huge.gguf" "huge kv_count"
printf 'hello world, not gguf' >"$TMP/text.gguf"
expect_bad "$TMP/text.gguf" "not gguf"
: >"$TMP/empty.gguf"
expect_bad "$TMP/empty.gguf" "empty file"
head -c 200 "$TMP/tiny.gguf" >"$TMP/tiny-cut.gguf"
expect_bad "$TMP/tiny-cut.gguf" "truncated tiny"
expect_bad "$TMP/missing.gguf" "missing file"
check "missing file: reason" grep -q "No such file" "$TMP/err"

# ---- SmolLM2, when another step has fetched it ----
SMOL="$SRC/models/SmolLM2-135M-Instruct-Q4_1.gguf"
if [ -f "$SMOL" ]; then
  run "$SMOL"
  check "smollm2: exit 0" [ "$rc" -eq 0 ]
  check "smollm2: block_count 30" has "^  block_count: +30$"
  check "smollm2: embedding_length 576" has "^  embedding_length: +576$"
  check "smollm2: head_count 9" has "^  attention.head_count: +9$"
  check "smollm2: head_count_kv 3" has "^  attention.head_count_kv: +3$"
  check "smollm2: 49152 tokens" has "^vocabulary: +49152 tokens$"
else
  echo "SKIP: $SMOL not present (SmolLM2 checks skipped)"
fi

finish
