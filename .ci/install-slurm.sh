#!/usr/bin/env bash
# Install a single-node Slurm (slurmctld, slurmd, client tools) and munge from
# Debian's packages, non-interactively. Idempotent: exits 0 straight away when
# everything is already there. Needs root (or sudo) for apt-get.
#
# The packages' own init scripts / systemd units are NOT used: tests start
# their own daemons with a generated slurm.conf (tests/slurm_cluster.py).
set -euo pipefail

need=(slurmctld slurmd sbatch squeue sinfo scancel munged mungekey)
missing=0
for b in "${need[@]}"; do
    if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$b" ]; then
        missing=1
    fi
done
if [ "$missing" -eq 0 ]; then
    echo "install-slurm: slurm and munge already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo -n"
    else
        echo "install-slurm: not root and no sudo; cannot install slurm" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# Don't let the packages try to start services (no init system in containers).
policy_rc=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy_rc" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy_rc" >/dev/null
    $SUDO chmod +x "$policy_rc"
    created_policy=1
fi
cleanup() { if [ "$created_policy" -eq 1 ]; then $SUDO rm -f "$policy_rc"; fi; }
trap cleanup EXIT

$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    slurm-wlm slurmctld slurmd slurm-client munge
echo "install-slurm: installed $(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || echo '?')"
