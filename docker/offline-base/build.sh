#!/usr/bin/env bash
# Builds the offline base image (no container registry needed): a Debian root file system from
# Debian's package archive, then `docker import`. The image carries Python with the controller's
# dependencies and the ROCm user-space tools Debian ships (rocminfo, rocm-smi), so building
# docker/Dockerfile on top of it needs no network at all. Where a registry is reachable, the
# normal base is a pulled ROCm/PyTorch image instead (docs/containers.md: "Images").
#
# The first way this machine allows, said in one line and kept in the image's label
# profilectl.builder:
#   as root            debootstrap                    (Debian package debootstrap)
#   as a normal user   mmdebstrap --mode=unshare      (mmdebstrap, uidmap; a subordinate id range of
#                                                      the user in /etc/subuid and /etc/subgid)
#                      mmdebstrap --mode=fakechroot   (mmdebstrap, fakechroot, fakeroot)
#                      sudo -n debootstrap            (where sudo works without a password)
# Otherwise it names in one line the command root must run, and exits 3. PROFILECTL_BASE_BUILDER=
# unshare|fakechroot|debootstrap picks one way (its tools still have to be there).
#
# usage: docker/offline-base/build.sh [TAG]          build TAG (default profilectl-base:bookworm)
#        docker/offline-base/build.sh --torch [TAG]  the same with Debian's PyTorch (python3-torch 1.13,
#                                                    CPU only), so `trace` runs a PyTorch script under
#                                                    torch.profiler (default profilectl-base:bookworm-torch)
#        docker/offline-base/build.sh --check [TAG]  exit 0 when TAG is up to date, 1 when it would be built
#        docker/offline-base/build.sh --needs        print the Debian packages this user lacks to build
#                                                    (nothing when none), exit 0
set -euo pipefail
mode=build
torch=0
while [ $# -gt 0 ]; do
  case "$1" in --check) mode=check; shift ;; --needs) mode=needs; shift ;; --torch) torch=1; shift ;; *) break ;; esac
done
default_tag=profilectl-base:bookworm; [ "$torch" = 1 ] && default_tag=profilectl-base:bookworm-torch
tag="${1:-$default_tag}"
suite="${SUITE:-bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The controller's dependencies (profilectl's floors are these Debian versions: rich 13.3.1,
# PyYAML 6.0, dacite 1.8.0), NumPy for the CPU workload, and Debian's ROCm user-space tools.
packages="python3,python3-yaml,python3-rich,python3-dacite,python3-numpy,libopenblas0-pthread,procps,ca-certificates,rocminfo,rocm-smi,libcap2-bin"
[ "$torch" = 0 ] || packages="$packages,python3-torch"
say() { echo "build.sh: $*" >&2; }

# Debian puts debootstrap and friends in /usr/sbin, which is not on a normal user's PATH.
find_prog() {
  command -v "$1" 2>/dev/null && return 0
  local dir
  for dir in /usr/sbin /sbin /usr/local/sbin; do [ -x "$dir/$1" ] && { echo "$dir/$1"; return 0; }; done
  return 1
}
has_subids() {  # a subordinate id range of this user, by name or uid, for uid and gid maps alike
  local user uid f
  user=$(id -un); uid=$(id -u)
  for f in /etc/subuid /etc/subgid; do
    grep -Eq "^($user|$uid):[0-9]+:[0-9]+$" "$f" 2>/dev/null || return 1
  done
}
userns_ok() { unshare --user --map-root-user true 2>/dev/null; }

# How this user would build, and which Debian packages are missing for it (none when it can).
builder=""; missing=()
forced=${PROFILECTL_BASE_BUILDER:-}
case "$forced" in ""|unshare|fakechroot|debootstrap) ;; *) say "PROFILECTL_BASE_BUILDER=$forced: use unshare, fakechroot or debootstrap"; exit 2 ;; esac
if [ -n "$forced" ]; then
  builder=$forced
  [ "$forced" != debootstrap ] || [ "$(id -u)" = 0 ] || builder=sudo
elif [ "$(id -u)" = 0 ]; then
  find_prog debootstrap >/dev/null && builder=debootstrap || missing=(debootstrap)
elif find_prog mmdebstrap >/dev/null && find_prog newuidmap >/dev/null && has_subids && userns_ok; then
  builder=unshare
elif find_prog mmdebstrap >/dev/null && find_prog fakechroot >/dev/null && find_prog fakeroot >/dev/null; then
  builder=fakechroot
elif find_prog debootstrap >/dev/null && sudo -n true 2>/dev/null; then
  builder=sudo
else  # the smallest root step that lets this user build without root from now on
  for p in mmdebstrap fakechroot fakeroot; do find_prog "$p" >/dev/null || missing+=("$p"); done
fi

if [ "$mode" = needs ]; then echo "${missing[*]}"; exit 0; fi

# The image is labelled with its package list: a base built from an older list is rebuilt.
built_with=$(docker image inspect -f '{{ index .Config.Labels "profilectl.packages" }}' "$tag" 2>/dev/null || true)
if [ "$built_with" = "$packages" ] && [ "${REBUILD:-0}" != 1 ]; then
  [ "$mode" = check ] || echo "offline base $tag already exists (REBUILD=1 to rebuild)"
  exit 0
fi
[ "$mode" = build ] || exit 1

if [ -z "$builder" ]; then
  if [ "$(id -u)" = 0 ]; then
    say "debootstrap is missing: run apt-get install -y debootstrap, then run this again"
  else
    say "building $tag as $(id -un) without root needs ${missing[*]}: as root run apt-get install -y ${missing[*]}, then run this again as $(id -un)"
  fi
  exit 3
fi

image_args=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
            --change "LABEL profilectl.packages=$packages"
            --change 'CMD ["/bin/bash"]')
start=$SECONDS
case "$builder" in
  unshare|fakechroot)
    how="mmdebstrap --mode=$builder as $(id -un)"
    say "building $tag with $how (no root)"
    # A tar on stdout (ownership recorded as root inside it) straight into docker import. Package
    # lists, caches, docs and man pages are not needed at run time.
    # fakechroot mode also needs fakechroot and fakeroot: mmdebstrap finds them on PATH.
    PATH="$PATH:/usr/sbin:/sbin" "$(find_prog mmdebstrap)" --mode="$builder" --variant=minbase --include="$packages" \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --format=tar --quiet "$suite" - "$mirror" \
      | docker import "${image_args[@]}" --change "LABEL profilectl.builder=mmdebstrap-$builder" - "$tag" >/dev/null ;;
  debootstrap|sudo)
    SUDO=(); [ "$builder" = sudo ] && SUDO=(sudo -n)
    how="debootstrap as root${SUDO:+ (sudo -n)}"
    say "building $tag with $how"
    work=$(mktemp -d /tmp/profilectl-rootfs.XXXXXX)
    trap '"${SUDO[@]}" rm -rf "$work"' EXIT
    "${SUDO[@]}" "$(find_prog debootstrap)" --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror"
    "${SUDO[@]}" rm -rf "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/cache/apt/*.bin \
           "$work/rootfs"/usr/share/doc/* "$work/rootfs"/usr/share/man/*
    "${SUDO[@]}" tar -C "$work/rootfs" -c . \
      | docker import "${image_args[@]}" --change "LABEL profilectl.builder=debootstrap" - "$tag" >/dev/null ;;
esac
echo "built offline base $tag with $how in $((SECONDS - start)) s"
