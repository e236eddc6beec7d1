#!/usr/bin/env bash
# Builds Wharf's image (Containerfile beside this file) from a build tree, offline:
#   deploy/image/build.sh BUILD_DIR [TAG]      (TAG default localhost/wharf:dev)
# It copies each program and every shared library it loads (ldd) into a root file system and
# runs `podman build` (or `buildah bud`) on it. Extra arguments for podman (e.g. --root DIR)
# come from WHARF_PODMAN_ARGS.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: build.sh BUILD_DIR [TAG]}" && pwd)
TAG=${2:-localhost/wharf:dev}
CONTEXT=$(mktemp -d /tmp/wharf-image.XXXXXX)
trap 'rm -rf "$CONTEXT"' EXIT
ROOTFS=$CONTEXT/rootfs

# add FILE DEST_DIR: FILE into DEST_DIR of the image, with the libraries it loads.
add() {
  local file=$1 dest=$2 lib
  mkdir -p "$ROOTFS$dest"
  cp -L "$file" "$ROOTFS$dest/"
  for lib in $(ldd "$file" 2>/dev/null | grep -o '/[^ ]*' || true); do
    [[ -e $ROOTFS$lib ]] && continue
    mkdir -p "$ROOTFS$(dirname "$lib")"
    cp -L "$lib" "$ROOTFS$lib"
  done
}

for p in wharfd wharf-cni wharf-device-plugin wharf-orchestrator wharfctl; do
  [[ -x $BUILD/bin/$p ]] || { echo "build.sh: $BUILD/bin/$p is missing" >&2; exit 1; }
  add "$BUILD/bin/$p" /usr/local/bin
done
for l in libibverbs.so.1 librdmacm.so.1; do add "$BUILD/lib/$l" /opt/wharf/lib; done
# bundle PROGRAM DIR [PATH]: PROGRAM for the nodes (install.sh) in /opt/wharf/DIR, with every
# library it loads and its loader, started through that loader by DIR/PROGRAM.sh, so that it
# does not depend on the node's libraries; PATH (ending in ':') is searched before them.
bundle() {
  local prog=$1 dir=$ROOTFS/opt/wharf/$2 first=${3:-} lib loader
  mkdir -p "$dir/lib"
  cp -L "$BUILD/bin/$prog" "$dir/"
  for lib in $(ldd "$BUILD/bin/$prog" | grep -o '/[^ ]*'); do cp -L "$lib" "$dir/lib/"; done
  loader=$(basename "$(readelf -l "$BUILD/bin/$prog" | sed -n 's/.*interpreter: \(.*\)]/\1/p')")
  [[ -f $dir/lib/$loader ]] || { echo "build.sh: $prog's loader $loader was not bundled" >&2; exit 1; }
  printf '#!/bin/sh\nexec /opt/wharf/%s/lib/%s --library-path %s/opt/wharf/%s/lib /opt/wharf/%s/%s "$@"\n' \
    "$2" "$loader" "$first" "$2" "$2" "$prog" >"$dir/$prog.sh"
  chmod 755 "$dir/$prog.sh"
}
bundle wharf-cni cni
# The hook calls the verbs API through our libibverbs, never the system's it was linked with.
bundle wharf-oci-hook oci-hook /opt/wharf/lib:
rm "$ROOTFS/opt/wharf/oci-hook/lib/libibverbs.so.1"
install -m 755 "$HERE/install.sh" "$ROOTFS/usr/local/bin/wharf-install"
# Tools: a shell and cp for the CNI installer, etcd for the orchestrator's store, and
# unmodified RDMA programs for the examples.
for p in sh cp mv rm mkdir etcd ib_write_bw ib_send_lat rping ibv_devinfo; do
  path=$(command -v "$p") || { echo "build.sh: $p is not installed" >&2; exit 1; }
  add "$path" /usr/bin
done
ln -s usr/bin "$ROOTFS/bin"  # /bin/sh for scripts, as Debian's merged /usr has it
mkdir -p "$ROOTFS/tmp" "$ROOTFS/run/wharf" "$ROOTFS/var/lib/wharf"
chmod 1777 "$ROOTFS/tmp"
cp "$HERE/Containerfile" "$CONTEXT/"

if command -v podman >/dev/null; then
  # shellcheck disable=SC2086  # WHARF_PODMAN_ARGS is a list of arguments
  podman ${WHARF_PODMAN_ARGS:-} build -q -t "$TAG" "$CONTEXT"
elif command -v buildah >/dev/null; then
  buildah bud --isolation chroot -q -t "$TAG" "$CONTEXT"
else
  echo "build.sh: neither podman nor buildah is installed" >&2
  exit 1
fi
echo "built $TAG"
