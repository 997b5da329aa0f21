#!/bin/sh
# install-deps.sh: install the Debian packages the tests need: the emulated cluster (chaos/cluster),
# MPICH for the PMI tests and comparisons, Open MPI, OpenPMIx and NetPIPE for the PMIx tests,
# and Slurm for the Slurm cluster. Idempotent: when every package is already installed and
# MPICH is the default MPI it makes no apt call at all and prints nothing. Runs as root with no
# stdin on a fresh Debian 12.
#
# Installing Open MPI takes over the mpicc/mpirun alternatives from MPICH (priority 50 > 40):
# keep_mpich sets them back, so that an unsuffixed mpicc or mpirun still means MPICH. The
# project's tests and scripts name the compiler they mean (mpicc.mpich, mpicc.openmpi).
set -eu

PKGS="iproute2 iptables openssh-server openssh-client util-linux mpich libmpich-dev slurmctld slurmd slurm-client munge
libpmix-dev openmpi-bin libopenmpi-dev netpipe-openmpi"

# keep_mpich points each MPI alternative at MPICH when MPICH provides it and it points elsewhere.
keep_mpich() {
	for alt in mpi:/usr/bin/mpicc.mpich mpirun:/usr/bin/mpirun.mpich \
		mpi-x86_64-linux-gnu:/usr/include/x86_64-linux-gnu/mpich; do
		name=${alt%%:*}
		want=${alt#*:}
		[ -e "$want" ] || continue
		cur=$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Value: //p')
		[ "$cur" = "$want" ] && continue
		if [ "$(id -u)" -ne 0 ]; then
			echo "install-deps.sh: alternative $name is $cur, not MPICH's $want; run as root to set it" >&2
			exit 1
		fi
		update-alternatives --set "$name" "$want" >/dev/null
	done
}

# One dpkg-query for all packages; a package it does not know is missing.
# shellcheck disable=SC2086 # word splitting of the package list is intended
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' $PKGS 2>/dev/null || true)
missing=""
for p in $PKGS; do
	if ! printf '%s\n' "$installed" | grep -qx "$p installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	keep_mpich
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps.sh: missing packages:$missing; run as root to install them" >&2
	exit 1
fi

echo "install-deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! apt-get -o DPkg::Lock::Timeout=600 update >"$log" 2>&1; then
	cat "$log" >&2
	echo "install-deps.sh: apt-get update failed" >&2
	exit 1
fi
# shellcheck disable=SC2086 # word splitting of the package list is intended
if ! apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 $missing </dev/null >"$log" 2>&1; then
	cat "$log" >&2
	echo "install-deps.sh: apt-get install failed" >&2
	exit 1
fi
keep_mpich
