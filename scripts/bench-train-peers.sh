#!/usr/bin/env bash
# Training throughput of icl (icl bench train) and PyTorch CPU eager (scripts/bench_train_torch.py) on the same
# models, batches and data, one after the other on this machine, with the ratio icl / PyTorch in steps/s and
# both final losses (after the same steps; the inits differ, so they agree within noise, not exactly).
#   scripts/bench-train-peers.sh [STEPS (20)] [ICL binary (build/icl)]
# Needs a python3 with torch: $PYTHON, else python3, else /usr/bin/python3 (Debian's python3-torch;
# ICL_SETUP_TORCH=1 scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
icl=${2:-build/icl}
py=
for c in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$c" ] && "$c" -c "import torch" 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "bench-train-peers: no python3 with torch (ICL_SETUP_TORCH=1 scripts/setup.sh)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$icl" bench train --steps "$steps" | tee "$tmp/icl.txt"
"$py" scripts/bench_train_torch.py "$steps" | tee "$tmp/torch.txt"
echo
printf '%-22s %12s %12s %7s %12s %12s\n' case "icl steps/s" "torch st/s" ratio "icl loss" "torch loss"
awk 'FNR == NR && / steps\/s / { s[$1] = $4; l[$1] = $NF; next }
     / steps\/s / { printf "%-22s %12.2f %12.2f %6.2fx %12s %12s\n", $1, s[$1], $4, s[$1] / $4, l[$1], $NF }' \
  "$tmp/icl.txt" "$tmp/torch.txt"
