#!/usr/bin/env bash
# Installs every Debian package that icl's build, tests and experiments need.
# Idempotent: when all packages are present it only checks and returns.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git ca-certificates python3 python3-pip
  libvulkan-dev vulkan-tools mesa-vulkan-drivers vulkan-validationlayers
  glslang-tools
  liblua5.4-dev lua5.4
  libcjson-dev
  libpcre2-dev
  liblapacke-dev liblapack-dev libopenblas-dev
  libcairo2-dev
  libreadline-dev
  clang libclang-rt-14-dev
  tmux
  chromium fonts-dejavu-core   # icl.html views: tests/cli/test_html.sh opens them in headless Chromium
  patchelf debootstrap liblapack3 libblas3   # scripts/device-kit.sh, scripts/test-device-kit.sh
  libglvnd0 libglx0 libegl1 libgl1 libgles2 libopengl0   # glvnd for the kit: NVIDIA's Vulkan driver needs it
  slurmctld slurmd slurm-client munge   # icl sweep --run slurm: scripts/slurm-local.sh, ctest label slurm
)
# The PyTorch CPU peer of scripts/bench-train-peers.sh (large: only with ICL_SETUP_TORCH=1; /usr/bin/python3).
if [ "${ICL_SETUP_TORCH:-0}" = 1 ]; then PKGS+=(python3-torch); fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
