#!/usr/bin/env bash
# device-check.sh's peer step (issue 37 item 1), on a fake kit whose icl and llama-bench are stubs printing
# fixed output, so it needs no device: llama-bench gets icl's device index in GGML_VK_VISIBLE_DEVICES and the
# same GGUF file; the side-by-side table pairs ppN/tgN with icl's prefill/decode rates and divides them; a kit
# without llama-bench reports the step OFF and passes; a llama-bench that cannot load the file fails the step
# with its own error line; one whose table names no Vulkan backend fails it.
# Env: ICL_SOURCE_DIR (the source tree). Prints "N passed, N failed".
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SRC=${ICL_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

kit=$TMP/kit
mkdir -p "$kit/bin" "$kit/lib"
cp "$SRC/scripts/device-check.sh" "$kit/"
echo "sdist: llama-cpp-python 0.0.0 sha256 0" > "$kit/PEER-VERSION"
cat > "$kit/bin/icl" <<'EOF'
#!/usr/bin/env bash
case "$1 ${2:-}" in
  "devices ") echo "vulkan device: [2] stubpipe" ;;
  "testmodel --like") echo "GGUF $3" > "$5" ;;
  "bench model") echo "prefill 32                               0.100        320.0"
                 echo "decode 8 (after 8 tokens)                0.100         80.0" ;;
  *) echo "stub icl: $*" >&2; exit 2 ;;
esac
EOF
fake_peer() { # backend column, exit status
  cat > "$kit/bin/llama-bench" <<EOF
#!/usr/bin/env bash
echo "\$GGML_VK_VISIBLE_DEVICES \$*" >> "$TMP/peer-args"
[ $2 = 0 ] || { echo "llama_model_load: error loading model: stub refuses \$2"; echo "error: failed to load model '\$2'"; exit $2; }
echo "| model | size | params | backend | ngl | test | t/s |"
echo "| ----- | ---: | -----: | ------- | --: | ---: | --: |"
echo "| llama ?B Q4_1 | 1 MiB | 1 M | $1 | 99 | pp32 | 160.00 ± 1.00 |"
echo "| llama ?B Q4_1 | 1 MiB | 1 M | $1 | 99 | tg8 | 40.00 ± 0.50 |"
EOF
  chmod +x "$kit/bin/llama-bench"
}
chmod +x "$kit/bin/icl"
only='devices|write_|bench_smollm2_vulkan$|peer_'

fake_peer Vulkan 0
bash "$kit/device-check.sh" --quick --only "$only" --out "$TMP/o1" > "$TMP/run1" 2>&1
check "a run with the peer exits 0: $(tail -c 400 "$TMP/run1")" [ $? -eq 0 ]
row() { awk -v m="$1" -v t="$2" '$1 == m && $2 == t' "$TMP/o1/summary.txt"; }
check "smollm2 pp32: llama.cpp 160.00, icl 320.0, ratio 2.00: '$(row smollm2 pp32)'" \
  [ "$(row smollm2 pp32 | awk '{print $3, $4, $5}')" = "160.00 320.0 2.00" ]
check "smollm2 tg8: llama.cpp 40.00, icl 80.0, ratio 2.00: '$(row smollm2 tg8)'" \
  [ "$(row smollm2 tg8 | awk '{print $3, $4, $5}')" = "40.00 80.0 2.00" ]
check "gemma3 (no icl bench selected) has llama.cpp's rate and no ratio: '$(row gemma3 pp32)'" \
  [ "$(row gemma3 pp32 | awk '{print $3, $4, $5}')" = "160.00 - -" ]
check "the table's heading names the peer" grep -q 'llama.cpp: llama-cpp-python 0.0.0' "$TMP/o1/summary.txt"
check "llama-bench got icl's device index 2 and the quick sizes: $(head -1 "$TMP/peer-args")" \
  grep -q "^2 -m .*/smollm2.gguf -ngl 99 -p 32 -n 8 -r 1 -o md$" "$TMP/peer-args"
check "both models went to llama-bench" [ "$(wc -l < "$TMP/peer-args")" -eq 2 ]
check "both peer steps passed" [ "$(grep -c '^peer_.*_vulkan  *PASS' "$TMP/o1/summary.txt")" -eq 2 ]

rm "$kit/bin/llama-bench"
bash "$kit/device-check.sh" --quick --only "$only" --out "$TMP/o2" > "$TMP/run2" 2>&1
check "a kit without the peer still exits 0: $(tail -c 400 "$TMP/run2")" [ $? -eq 0 ]
check "its peer steps are OFF and say why" \
  [ "$(grep -c '^peer_.*_vulkan  *OFF .*no llama-bench in the kit' "$TMP/o2/summary.txt")" -eq 2 ]
check "and no side-by-side table is printed" bash -c "! grep -q 'llama.cpp Vulkan beside' '$TMP/o2/summary.txt'"

fake_peer Vulkan 1
bash "$kit/device-check.sh" --quick --only "$only" --out "$TMP/o3" > "$TMP/run3" 2>&1
check "a peer that refuses the file fails the run" [ $? -ne 0 ]
check "the step says llama.cpp's reason: $(grep '^peer_smollm2' "$TMP/o3/summary.txt")" \
  grep -q '^peer_smollm2_vulkan  *FAIL .*exit 1: llama_model_load: error loading model: stub refuses' "$TMP/o3/summary.txt"
check "the table marks the model failed" grep -q '^smollm2  *- *failed' "$TMP/o3/summary.txt"

fake_peer CPU 0
bash "$kit/device-check.sh" --quick --only "$only" --out "$TMP/o4" > "$TMP/run4" 2>&1
check "a peer that ran on the CPU fails the step" \
  grep -q "^peer_smollm2_vulkan  *FAIL .*names no Vulkan backend" "$TMP/o4/summary.txt"
finish
