#!/usr/bin/env bash
# Checks that the images are reproducible: builds them again from the same commit and compares
# the image IDs with those of the build already there (make image first). Without --base the
# Debian base is reused (its ID is checked as the input of the others); with --base it is
# rebuilt from the mirror too. Exits 1, naming the image, when an ID differs.
# Usage: deploy/images/reproduce.sh [--base]   (make image-reproducible: without --base)
set -euo pipefail
cd "$(dirname "$0")/../.."

podman_() { podman --runtime runc "$@"; }

version="${ATLAS_IMAGE_VERSION:-$(sed -n 's/^__version__ = "\(.*\)"/\1/p' agent/__init__.py)-g$(git rev-parse --short=12 HEAD)}"
base="localhost/cluster-atlas-base:$(git log -1 --format=%ct HEAD -- deploy/images/build.sh)"
images=("localhost/cluster-atlas:$version" "localhost/cluster-atlas-agent:$version")
[[ ${1:-} == --base ]] && images=("$base" "${images[@]}")

declare -A first
for image in "${images[@]}"; do
  first[$image]="$(podman_ image inspect --format '{{.Id}}' "$image" 2>/dev/null)" || {
    echo "reproduce: $image is not built: run make image first" >&2
    exit 2
  }
done

if [[ ${1:-} == --base ]]; then
  ATLAS_IMAGE_REBUILD_BASE=1 deploy/images/build.sh all >/dev/null
else
  deploy/images/build.sh backend >/dev/null
  deploy/images/build.sh agent >/dev/null
fi

status=0
for image in "${images[@]}"; do
  again="$(podman_ image inspect --format '{{.Id}}' "$image")"
  if [[ $again == "${first[$image]}" ]]; then
    echo "reproduce: $image ${again:0:12} twice"
  else
    echo "reproduce: $image differs: ${first[$image]:0:12} then ${again:0:12}" >&2
    status=1
  fi
done
exit "$status"
