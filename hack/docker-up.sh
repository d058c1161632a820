#!/usr/bin/env bash
# What `make image` and the real-kubelet e2e cluster need on a Debian machine, installed when
# absent and started: Docker (docker.io brings containerd and runc), the CNI plugins,
# debootstrap (the local Python base), iptables, gcc (the pod sandbox image). Root only;
# idempotent. CI runs it before `make e2e`; on a developer machine run it once with sudo.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "hack/docker-up.sh installs packages and starts dockerd: run it as root" >&2
  exit 1
fi
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
if [ "${#need[@]}" -gt 0 ]; then
  echo "==> apt-get install ${need[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  echo "==> starting dockerd (log: /var/log/berthmaster-dockerd.log)"
  nohup dockerd >/var/log/berthmaster-dockerd.log 2>&1 &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
fi
docker info --format 'Docker {{.ServerVersion}}: {{.Driver}}, cgroup v{{.CgroupVersion}}' \
  || { echo "dockerd did not start; see /var/log/berthmaster-dockerd.log" >&2; exit 1; }
