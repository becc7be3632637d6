#!/usr/bin/env bash
# Runs the device kit in a bare Debian root, so a library the kit fails to carry shows up here and not on a
# lent GPU. The root holds the base system plus Mesa's lavapipe (mesa-vulkan-drivers) with the Vulkan loader
# (libvulkan1) removed again: the kit must bring its own. Not part of CI (debootstrap takes minutes).
# Suites: trixie (Debian 13, Mesa 25.0: lavapipe has integer dot products, so ICL_VK_MATMUL=intdot runs there) and
# sid (Mesa 26: VK_KHR_cooperative_matrix too). The sid reachable here is a snapshot whose Release file has
# expired, so the root's apt is told not to check Valid-Until (it still checks the signatures).
# Usage: scripts/test-device-kit.sh [--root DIR] [--suite SUITE] [device-check.sh args...]   (default: --quick)
#   default root /var/tmp/icl-kit-root (trixie), /var/tmp/icl-kit-root-SUITE for another suite
# Needs root, debootstrap, network to the Debian mirror (once), and a kit built by scripts/device-kit.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=
suite=trixie
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    *) break ;;
  esac
done
[ -n "$root" ] || { [ "$suite" = trixie ] && root=/var/tmp/icl-kit-root || root=/var/tmp/icl-kit-root-$suite; }
[ $# -gt 0 ] || set -- --quick
mirror=${ICL_DEBIAN_MIRROR:-http://deb.debian.org/debian}

make_root() {
  echo "== debootstrap $suite into $root ($mirror)"
  debootstrap --variant=minbase "$suite" "$root.tmp" "$mirror"
  echo 'Acquire::Check-Valid-Until "false";' > "$root.tmp/etc/apt/apt.conf.d/99icl-snapshot"
  chroot "$root.tmp" apt-get update
  chroot "$root.tmp" apt-get install -y --no-install-recommends mesa-vulkan-drivers
  # mesa-vulkan-drivers depends on the loader; remove it so only the kit's loader can be found
  chroot "$root.tmp" dpkg --purge --force-depends libvulkan1
  chroot "$root.tmp" apt-get clean
  mv "$root.tmp" "$root"
}
[ -d "$root" ] || { rm -rf "$root.tmp"; make_root; }
# The suite's own validation layer, unpacked beside (not installed): the kit's (Debian 12, 1.3.239) predates
# VK_KHR_cooperative_matrix, so device-check.sh validates the cooperative-matrix steps with this one
# (ICL_COOPMAT_LAYER_PATH); the manifest's library path is made absolute so the kit's RPATH cannot shadow it.
vvl=/opt/icl-vvl
if [ ! -f "$root$vvl/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" ]; then
  chroot "$root" sh -c "mkdir -p $vvl/deb && cd $vvl/deb && apt-get download vulkan-validationlayers && \
                        dpkg -x vulkan-validationlayers_*.deb $vvl"
  so=$vvl/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so
  sed -i -E "s#\"library_path\"[[:space:]]*:[[:space:]]*\"[^\"]*\"#\"library_path\": \"$so\"#" \
    "$root$vvl/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"
fi
kit=${ICL_KIT_DIR:-kit}
[ -x "$kit/device-check.sh" ] || { echo "test-device-kit: no kit in $kit/ (run scripts/device-kit.sh)" >&2; exit 2; }
if chroot "$root" sh -c 'ls /usr/lib/*/libvulkan.so* 2>/dev/null' | grep -q .; then
  echo "test-device-kit: $root has a Vulkan loader; remove it (dpkg --purge --force-depends libvulkan1)" >&2
  exit 2
fi

rm -rf "$root/kit" "$root/out"
cp -a "$kit" "$root/kit"
mkdir -p "$root/out"
cleanup() { for m in dev/shm dev proc sys; do umount "$root/$m" 2>/dev/null || true; done; }
trap cleanup EXIT
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
echo "== kit: $(du -sh "$kit" | cut -f1); chroot: $root ($(chroot "$root" sh -c '. /etc/os-release; echo $PRETTY_NAME'))"
start=$(date +%s)
set +e
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root OUT=/out \
  ICL_COOPMAT_LAYER_PATH=$vvl/usr/share/vulkan/explicit_layer.d /kit/device-check.sh "$@"
rc=$?
set -e
echo "== test-device-kit: device-check.sh exited $rc after $(( $(date +%s) - start )) s; files in $root/out"
exit $rc
