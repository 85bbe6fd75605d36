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
# The controller's dependencies (profilectl's floors are these Debian versions: rich 13.3.1,
# PyYAML 6.0, dacite 1.8.0), NumPy for the CPU workload, and Debian's ROCm user-space tools.
packages="python3,python3-yaml,python3-rich,python3-dacite,python3-numpy,libopenblas0-pthread,procps,ca-certificates,rocminfo,rocm-smi,libcap2-bin"

# The image is labelled with its package list: a base built from an older list is rebuilt.
built_with=$(docker image inspect -f '{{ index .Config.Labels "profilectl.packages" }}' "$tag" 2>/dev/null || true)
if [ "$built_with" = "$packages" ] && [ "${REBUILD:-0}" != 1 ]; then
  echo "offline base $tag already exists (REBUILD=1 to rebuild)"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: run tools/install-host-deps (or apt-get install debootstrap)" >&2; exit 2; }
SUDO=()
if [ "$(id -u)" != 0 ]; then
  sudo -n true 2>/dev/null || { echo "debootstrap needs root: run this script as root or with sudo" >&2; exit 3; }
  SUDO=(sudo -n)
fi

work=$(mktemp -d /tmp/profilectl-rootfs.XXXXXX)
trap '"${SUDO[@]}" rm -rf "$work"' EXIT
"${SUDO[@]}" debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror"
# Keep the image small: package lists, caches and docs are not needed at run time.
"${SUDO[@]}" rm -rf "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/cache/apt/*.bin \
       "$work/rootfs"/usr/share/doc/* "$work/rootfs"/usr/share/man/*
"${SUDO[@]}" tar -C "$work/rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "LABEL profilectl.packages=$packages" \
  --change 'CMD ["/bin/bash"]' - "$tag"
echo "built offline base $tag"
