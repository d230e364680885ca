#!/usr/bin/env bash
# Builds the base image localhost/debian:bookworm with debootstrap when it is
# missing: these machines cannot pull from a registry, only reach Debian's
# archive. Elsewhere the Containerfile's default, debian:bookworm-slim from
# a registry, needs none of this.
#   scripts/container-base.sh [IMAGE]   (default localhost/debian:bookworm)
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${1:-localhost/debian:bookworm}
source scripts/podman-env.sh
if podman image exists "$IMAGE"; then
  echo "container-base: $IMAGE exists"
  exit 0
fi
MIRROR=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[[ -n $MIRROR ]] || MIRROR=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
DIR=$(mktemp -d /tmp/hotrow-base.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
echo "container-base: debootstrap bookworm from $MIRROR (a few minutes)"
debootstrap --variant=minbase bookworm "$DIR" "$MIRROR" >"$DIR.log" 2>&1 || { tail -20 "$DIR.log"; exit 1; }
rm -f "$DIR.log"
# The image's apt sees the same mirror.
echo "deb $MIRROR bookworm main" >"$DIR/etc/apt/sources.list"
tar -C "$DIR" -c . | podman import - "$IMAGE" >/dev/null
echo "container-base: imported $IMAGE"
