#!/bin/sh
# wharf-install HOST_ROOT: what the DaemonSet's init container puts on its node (HOST_ROOT is
# where the node's / is mounted):
#   HOST_ROOT/opt/wharf/lib   our libibverbs.so.1 and librdmacm.so.1, which the device plugin
#                             binds into pods;
#   HOST_ROOT/opt/wharf/cni   wharf-cni with every library it loads, its own loader included,
#                             so that it runs whatever the node's distribution has;
#   HOST_ROOT/opt/cni/bin/wharf-cni  a script that starts it so;
#   HOST_ROOT/opt/wharf/oci-hook  wharf-oci-hook, bundled the same way, and
#   HOST_ROOT/usr/share/containers/oci/hooks.d/wharf.json  the hook's definition, in the
#                             directory CRI-O and podman read by default: the sysfs view in pods.
# Every file is written beside its final name and renamed into place: a running process
# keeps the file it mapped (a library rewritten in place would crash the pods using it), and
# a runtime never runs half a plugin.
set -eu
root=${1:?usage: wharf-install HOST_ROOT}
mkdir -p "$root/opt/wharf/lib" "$root/opt/cni/bin"
for lib in libibverbs.so.1 librdmacm.so.1; do
  cp /opt/wharf/lib/$lib "$root/opt/wharf/lib/.$lib.new"
  mv -f "$root/opt/wharf/lib/.$lib.new" "$root/opt/wharf/lib/$lib"
done
# replace_dir NAME: /opt/wharf/NAME of the image replaces the node's, by renames.
replace_dir() {
  rm -rf "$root/opt/wharf/.$1.new" "$root/opt/wharf/.$1.old"
  cp -r "/opt/wharf/$1" "$root/opt/wharf/.$1.new"
  if [ -d "$root/opt/wharf/$1" ]; then mv "$root/opt/wharf/$1" "$root/opt/wharf/.$1.old"; fi
  mv "$root/opt/wharf/.$1.new" "$root/opt/wharf/$1"
  rm -rf "$root/opt/wharf/.$1.old"
}
replace_dir cni
replace_dir oci-hook
cp /opt/wharf/cni/wharf-cni.sh "$root/opt/cni/bin/.wharf-cni.new"
mv -f "$root/opt/cni/bin/.wharf-cni.new" "$root/opt/cni/bin/wharf-cni"
hooks=$root/usr/share/containers/oci/hooks.d
mkdir -p "$hooks"
printf '%s\n' '{"version": "1.0.0",' \
  ' "hook": {"path": "/opt/wharf/oci-hook/wharf-oci-hook.sh",' \
  '          "args": ["wharf-oci-hook", "--router", "/run/wharf/wharfd.sock", "--lib-dir", "/opt/wharf/lib"],' \
  '          "timeout": 10},' \
  ' "when": {"annotations": {"^io\\.wharf\\.device-view$": "^true$"}},' \
  ' "stages": ["createContainer"]}' >"$hooks/.wharf.json.new"
mv -f "$hooks/.wharf.json.new" "$hooks/wharf.json"
echo "wharf-install: wharf-cni, wharf-oci-hook and the libraries installed under $root"
