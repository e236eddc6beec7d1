#!/usr/bin/env bash
# Installs what Wharf needs to build and test on Debian 12 (bookworm), from Debian's archive.
# Idempotent: when every package is already installed it changes nothing and runs no apt-get
# at all; otherwise it runs `apt-get update` at most once, and only if the package lists are
# missing or do not offer a needed package (or an install from them fails).
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential g++ cmake ninja-build pkg-config git
  clang clang-format clang-tidy libclang-rt-14-dev
  # RDMA: headers we build the library against, and real applications to run on it
  libibverbs-dev librdmacm-dev ibverbs-utils rdmacm-utils perftest
  # middleware and tools that run unmodified on wharf0 (UCX, Open MPI, libfabric, sysfs readers)
  ucx-utils openmpi-bin libopenmpi-dev libfabric-bin infiniband-diags python3-pyverbs qperf
  # an unmodified TCP program run over rsockets by rdma-core's librspreload
  iperf3
  # libraries
  libspdlog-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libsqlite3-dev libssl-dev
  prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # wharf-scala: GSL fits its performance model, gnuplot draws its heatmaps
  libgsl-dev gnuplot-nox
  # test harnesses: network namespaces and veth, ABI check (readelf, python3), e2e helpers
  iproute2 procps util-linux binutils python3 python3-cryptography perl
  # promtool checks what /metrics serves
  prometheus
  # the dashboard's test drives headless Chromium with Selenium
  chromium chromium-driver python3-selenium
  # the host-to-host tests look at the DSCP of the routers' packets, and cut paths with
  # nftables rules (a switch that drops everything, a loopback that drops a port)
  tcpdump nftables
  # wharf-lab certs: the CA and host certificates the routers authenticate their links with
  openssl
  # the orchestrator's cluster store (tests start a real etcd on loopback), and the HTTP
  # client its end-to-end test talks to the orchestrator with
  etcd-server curl
  # Kubernetes: Debian's CNI plugins (bridge, host-local) that wharf-cni is chained after, and
  # gRPC for the kubelet's device-plugin API (protobuf-compiler-grpc also completes gRPC's
  # CMake package, which checks for its code generators)
  containernetworking-plugins protobuf-compiler libprotobuf-dev protobuf-compiler-grpc
  libgrpc++-dev
  # a real runtime for the end-to-end test of the CNI chain (runc: crun refuses hybrid
  # cgroups), yamllint for deploy/'s manifests and systemd's systemd-analyze for its unit
  podman runc yamllint systemd
)

# (Output is captured before matching: `cmd | grep -q` can fail under pipefail by SIGPIPE.)
installed() {
  local status
  status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
  [[ $status == *"ok installed"* ]]
}
has_candidate() {
  local policy
  policy=$(apt-cache policy "$1" 2>/dev/null) || return 1
  [[ $policy =~ Candidate:\ [^\(] ]]
}

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
APT=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -qq -y -o Dpkg::Use-Pty=0
     -o APT::Install-Recommends=false)
log=$(mktemp /tmp/wharf-install-deps.XXXXXX)
trap 'rm -f "$log"' EXIT

updated=0
update_once() {
  ((updated)) && return 0
  updated=1
  echo "install-deps: apt-get update"
  if ! "${APT[@]}" update >"$log" 2>&1; then
    cat "$log" >&2
    return 1
  fi
}

# Lists are needed if any missing package has no install candidate in them.
for p in "${missing[@]}"; do
  if ! has_candidate "$p"; then
    update_once
    break
  fi
done

echo "install-deps: installing ${missing[*]}"
if ! "${APT[@]}" install "${missing[@]}" >"$log" 2>&1; then
  # Stale lists (a package version no longer on the mirror): refresh once and retry.
  if ((updated)); then
    cat "$log" >&2
    exit 1
  fi
  update_once
  if ! "${APT[@]}" install "${missing[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    exit 1
  fi
fi

still=()
for p in "${missing[@]}"; do
  installed "$p" || still+=("$p")
done
if ((${#still[@]} > 0)); then
  echo "install-deps: not installed: ${still[*]}" >&2
  exit 1
fi
echo "install-deps: installed ${#missing[@]} packages"
