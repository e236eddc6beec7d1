#!/bin/sh
# wharf-install HOST_ROOT: what the DaemonSet's init container puts on its node (HOST_ROOT is
# where the node's / is mounted):
#   HOST_ROOT/opt/wharf/lib   our libibverbs.so.1 and librdmacm.so.1, which the device plugin
#                             binds into pods;
#   HOST_ROOT/opt/wharf/cni   wharf-cni with every library it loads, its own loader included,
#                             so that it runs whatever the node's distribution has;
#   HOST_ROOT/opt/cni/bin/wharf-cni  a script that starts it so.
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
rm -rf "$root/opt/wharf/.cni.new" "$root/opt/wharf/.cni.old"
cp -r /opt/wharf/cni "$root/opt/wharf/.cni.new"
if [ -d "$root/opt/wharf/cni" ]; then mv "$root/opt/wharf/cni" "$root/opt/wharf/.cni.old"; fi
mv "$root/opt/wharf/.cni.new" "$root/opt/wharf/cni"
rm -rf "$root/opt/wharf/.cni.old"
cp /opt/wharf/cni/wharf-cni.sh "$root/opt/cni/bin/.wharf-cni.new"
mv -f "$root/opt/cni/bin/.wharf-cni.new" "$root/opt/cni/bin/wharf-cni"
echo "wharf-install: wharf-cni and the libraries installed under $root"
