#!/usr/bin/env bash
# Runs the device kit in a bare Debian root, so a library the kit fails to carry shows up here and not on a
# lent GPU. The root holds the base system plus Mesa's lavapipe (mesa-vulkan-drivers) with the Vulkan loader
# (libvulkan1) removed again: the kit must bring its own. Not part of CI (debootstrap takes minutes).
# Usage: scripts/test-device-kit.sh [--root DIR] [--suite SUITE] [device-check.sh args...]   (default: --quick)
# Needs root, debootstrap, network to the Debian mirror (once), and a kit built by scripts/device-kit.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=/var/tmp/icl-kit-root
suite=trixie
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- --quick
kit=${ICL_KIT_DIR:-kit}
[ -x "$kit/device-check.sh" ] || { echo "test-device-kit: no kit in $kit/ (run scripts/device-kit.sh)" >&2; exit 2; }
mirror=${ICL_DEBIAN_MIRROR:-http://deb.debian.org/debian}

make_root() {
  echo "== debootstrap $suite into $root ($mirror)"
  debootstrap --variant=minbase "$suite" "$root.tmp" "$mirror"
  chroot "$root.tmp" apt-get install -y --no-install-recommends mesa-vulkan-drivers
  # mesa-vulkan-drivers depends on the loader; remove it so only the kit's loader can be found
  chroot "$root.tmp" dpkg --purge --force-depends libvulkan1
  chroot "$root.tmp" apt-get clean
  mv "$root.tmp" "$root"
}
[ -d "$root" ] || { rm -rf "$root.tmp"; make_root; }
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
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root OUT=/out /kit/device-check.sh "$@"
rc=$?
set -e
echo "== test-device-kit: device-check.sh exited $rc after $(( $(date +%s) - start )) s; files in $root/out"
exit $rc
