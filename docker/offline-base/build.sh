#!/usr/bin/env bash
# Builds the offline base image (no container registry needed): debootstrap a Debian root file
# system from Debian's package archive, then `docker import` it. The image carries Python with the
# controller's dependencies and the ROCm user-space tools Debian ships (rocminfo, rocm-smi), so
# building docker/Dockerfile on top of it needs no network at all.
#
# usage: docker/offline-base/build.sh [TAG]        (default tag: profilectl-base:bookworm)
set -euo pipefail
tag="${1:-profilectl-base:bookworm}"
suite="${SUITE:-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages="python3,python3-yaml,python3-rich,python3-numpy,libopenblas0-pthread,procps,ca-certificates,rocminfo,rocm-smi,libcap2-bin"

if docker image inspect "$tag" >/dev/null 2>&1 && [ "${REBUILD:-0}" != 1 ]; then
  echo "offline base $tag already exists (REBUILD=1 to rebuild)"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install -y debootstrap" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "debootstrap needs root" >&2; exit 2; }

work=$(mktemp -d /tmp/profilectl-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror"
# Keep the image small: package lists, caches and docs are not needed at run time.
rm -rf "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/cache/apt/*.bin \
       "$work/rootfs"/usr/share/doc/* "$work/rootfs"/usr/share/man/*
tar -C "$work/rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' - "$tag"
echo "built offline base $tag"
