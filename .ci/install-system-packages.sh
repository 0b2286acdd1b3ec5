#!/usr/bin/env bash
# Install the system packages the test tiers need, once: Slurm (controller, node daemon,
# clients, REST API with JWT), munge, and Chromium for the browser tier. Idempotent: it
# asks apt only for what dpkg does not already have, so a second run does nothing.
# Kubernetes needs no system package: the tests run the official Python client against a
# local HTTP server (no kube-apiserver can run on these machines).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(
  munge                 # authentication between Slurm daemons and clients
  slurmctld             # Slurm controller
  slurmd                # Slurm node daemon (Debian's build runs several: slurmd -N name)
  slurm-client          # scontrol, sinfo, sbatch, squeue, scancel
  slurmrestd            # Slurm REST API (openapi/v0.0.38 in Debian 12's 22.05)
  slurm-wlm-jwt-plugin  # auth/jwt and rest_auth/jwt for slurmrestd tokens
  chromium              # headless browser for the Playwright tier
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-system-packages: all present (${packages[*]})"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-system-packages: missing ${missing[*]}; run as root to install" >&2
  exit 1
fi

echo "install-system-packages: installing ${missing[*]}"
timeout 600 apt-get update -q
timeout 1200 apt-get install -y -q --no-install-recommends "${missing[@]}"

# The harness starts its own munged and Slurm daemons (no systemd here); check they exist.
for program in munged slurmctld slurmd slurmrestd scontrol sinfo; do
  if ! command -v "$program" >/dev/null && [[ ! -x "/usr/sbin/$program" ]]; then
    echo "install-system-packages: $program is missing after the install" >&2
    exit 1
  fi
done
echo "install-system-packages: done"
