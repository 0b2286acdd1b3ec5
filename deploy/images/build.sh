#!/usr/bin/env bash
# Builds the container images from Debian and PyPI alone (no registry is needed):
#   1. a Debian root file system with Python (mmdebstrap --variant=minbase), imported as
#      localhost/cluster-atlas-base:<epoch> (FROM scratch + ADD, committed with --timestamp);
#   2. localhost/cluster-atlas:<version> and :latest (the backend: web, worker, beat, commands);
#   3. localhost/cluster-atlas-agent:<version> and :latest (the agent alone).
# What is built is the commit (git archive HEAD), never the working tree, and every time in
# the images is the commit's time (SOURCE_DATE_EPOCH): two builds of one commit give the same
# image IDs. Usage: deploy/images/build.sh [all|base|backend|agent]   (make image: all)
# Environment: ATLAS_IMAGE_REBUILD_BASE=1 rebuilds the base even when one is cached;
# ATLAS_IMAGE_VERSION overrides the version tag; ATLAS_DEBIAN_MIRROR the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=deploy/images
what="${1:-all}"

podman_() { podman --runtime runc "$@"; }

revision="$(git rev-parse HEAD)"
SOURCE_DATE_EPOCH="$(git log -1 --format=%ct HEAD)"
export SOURCE_DATE_EPOCH
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
agent_version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' agent/__init__.py)"
version="${ATLAS_IMAGE_VERSION:-$agent_version-g$(git rev-parse --short=12 HEAD)}"
source_url="${ATLAS_IMAGE_SOURCE:-https://github.com/cluster-atlas/cluster-atlas}"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "build: warning: uncommitted changes are not in the images (they are built from $revision)" >&2
fi

# Debian's mirror lines: the host's Debian mirror (deb822 or one-line sources), else deb.debian.org.
debian_mirror() {
  local uri
  uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -oE '(https?://[^ ]+/debian)/?( |$)' | head -n1 | tr -d ' ' || true)"
  echo "${ATLAS_DEBIAN_MIRROR:-${uri%/}}"
}
mirror="$(debian_mirror)"
mirror="${mirror:-http://deb.debian.org/debian}"
security="${ATLAS_DEBIAN_SECURITY_MIRROR:-${mirror%/debian}/debian-security}"
suite=bookworm
# The base changes only with this script: its time is that of the last commit that changed it,
# so that other commits reuse it (ATLAS_IMAGE_REBUILD_BASE=1 rebuilds it all the same).
base_epoch="$(git log -1 --format=%ct HEAD -- "$here/build.sh")"
base_epoch="${base_epoch:-$SOURCE_DATE_EPOCH}"
base="localhost/cluster-atlas-base:$base_epoch"

work="$(mktemp -d "${TMPDIR:-/tmp}/atlas-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# pip inside the build reaches the package index through the host's settings: its CA bundle,
# its pip configuration and any local package directories they name, all mounted read-only.
build_volumes=()
ca=/etc/ssl/certs/ca-certificates.crt
[[ -f $ca ]] && build_volumes+=(--volume "$ca:/etc/atlas-build/ca.crt:ro")
for f in /etc/pip.conf /etc/xdg/pip "$HOME/.config/pip"; do
  [[ -e $f ]] || continue
  target="$f"
  [[ $f == "$HOME/.config/pip" ]] && target=/root/.config/pip
  build_volumes+=(--volume "$f:$target:ro")
done
while read -r d; do
  [[ $d == /etc/* || $d == "$HOME"/* ]] && continue
  dir="$d"
  while [[ $dir != / && ! -d $dir ]]; do dir="$(dirname "$dir")"; done
  [[ $dir == / ]] && continue
  # the top directory under / (e.g. /opt/pypi for /opt/pypi/simple)
  top="$(echo "$dir" | cut -d/ -f1-3)"
  [[ " ${build_volumes[*]} " == *" $top:$top:ro "* ]] || build_volumes+=(--volume "$top:$top:ro")
done < <(cat /etc/pip.conf /etc/xdg/pip/*.conf "$HOME/.config/pip/"*.conf 2>/dev/null |
  grep -oE '(file://)?/[^ ]+' | sed 's|^file://||' | sort -u)

build_args=(
  --timestamp "$SOURCE_DATE_EPOCH"
  --build-arg "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"
  --build-arg "VERSION=$version"
  --build-arg "REVISION=$revision"
  --build-arg "CREATED=$created"
  --build-arg "SOURCE=$source_url"
  --build-arg "BASE=$base"
  --layers=false
  --pull=never
)

build_base() {
  if [[ ${ATLAS_IMAGE_REBUILD_BASE:-0} != 1 ]] && podman_ image exists "$base"; then
    echo "build: $base exists (ATLAS_IMAGE_REBUILD_BASE=1 rebuilds it)"
    return
  fi
  echo "build: Debian $suite root file system from $mirror"
  local SOURCE_DATE_EPOCH="$base_epoch"
  export SOURCE_DATE_EPOCH
  mkdir -p "$work/base"
  # No documentation, manual pages or translations: they are a third of minbase.
  # shellcheck disable=SC2016 # the hooks' "$1" is mmdebstrap's, expanded by its shell
  mmdebstrap --variant=minbase --mode=root --quiet \
    --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/* "$1"/etc/machine-id "$1"/var/cache/ldconfig/aux-cache' \
    --customize-hook='touch "$1"/etc/machine-id' \
    "$suite" "$work/base/rootfs.tar" \
    "deb $mirror $suite main" "deb $mirror $suite-updates main" "deb $security $suite-security main"
  printf 'FROM scratch\nADD rootfs.tar /\nCMD ["/bin/bash"]\n' >"$work/base/Containerfile"
  podman_ build --quiet --timestamp "$SOURCE_DATE_EPOCH" --layers=false \
    -t "$base" -f "$work/base/Containerfile" "$work/base" >/dev/null
  rm -f "$work/base/rootfs.tar"
}

context() {
  if [[ ! -d $work/src ]]; then
    mkdir -p "$work/src"
    git archive --format=tar HEAD | tar -x -C "$work/src"
  fi
  echo "$work/src"
}

build_image() {
  local name="$1" src
  src="$(context)"
  echo "build: localhost/$name:$version"
  podman_ build "${build_args[@]}" "${build_volumes[@]}" \
    -f "$src/$here/$name.Containerfile" \
    -t "localhost/$name:$version" -t "localhost/$name:latest" "$src"
  podman_ image inspect --format "build: localhost/$name:$version {{.Id}} {{.Size}} bytes" \
    "localhost/$name:$version"
}

case "$what" in
  base) build_base ;;
  backend) build_base && build_image cluster-atlas ;;
  agent) build_base && build_image cluster-atlas-agent ;;
  all) build_base && build_image cluster-atlas && build_image cluster-atlas-agent ;;
  *) echo "usage: $0 [all|base|backend|agent]" >&2 && exit 2 ;;
esac
