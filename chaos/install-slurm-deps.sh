#!/bin/sh
# install-slurm-deps.sh: install the Debian packages of the real Slurm test
# cluster (chaos/slurm): slurmctld, slurmd, the Slurm clients and munge.
# Idempotent and quiet: when all of them are installed it makes no apt call and
# prints nothing; otherwise one apt-get update and one apt-get install, without
# a terminal. No service is started (the cluster starts its own daemons).
# The emulated cluster underneath needs chaos/install-deps.sh as well.
set -eu

PKGS="slurmctld slurmd slurm-client munge"

# Ask dpkg once about all of them; a package it does not know counts as missing.
# shellcheck disable=SC2086 # the package list is split on purpose
status=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' $PKGS 2>/dev/null || true)
need=""
for pkg in $PKGS; do
	printf '%s\n' "$status" | grep -qx "$pkg installed" || need="$need $pkg"
done
[ -n "$need" ] || exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-slurm-deps.sh: not installed:$need (run as root to install)" >&2
	exit 1
fi

echo "install-slurm-deps.sh: installing$need" >&2
export DEBIAN_FRONTEND=noninteractive
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! apt-get -q -o DPkg::Lock::Timeout=600 update >"$out" 2>&1; then
	cat "$out" >&2
	echo "install-slurm-deps.sh: apt-get update failed" >&2
	exit 1
fi
# shellcheck disable=SC2086 # the package list is split on purpose
if ! apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 $need </dev/null >"$out" 2>&1; then
	cat "$out" >&2
	echo "install-slurm-deps.sh: apt-get install failed" >&2
	exit 1
fi
