#!/usr/bin/env bash
# Installs every Debian package the build, the tests, the VM test bed and the demo need.
# Idempotent: does nothing when everything is already installed.
set -euo pipefail

packages=(
  # build
  # libclang-rt-14-dev: the sanitizer runtimes and headers (scripts/sanitize.sh, tests/fuzz)
  build-essential cmake ninja-build pkg-config clang-format clang clang-tidy libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  liburing-dev libspdlog-dev prometheus-cpp-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  libbpf-dev bpftool libsystemd-dev ccache
  # tests, demo, VM test bed
  fio curl nbdkit nbd-client nbd-server qemu-utils jq kmod xz-utils busybox-static qemu-system-x86 iproute2 procps nvme-cli strace
  # deploy/ tests: promtool, the dashboard and manifest checkers
  prometheus python3 python3-yaml
  # deploy/ tests: systemd-analyze verify and security of the unit
  systemd
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if ((EUID != 0)); then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
