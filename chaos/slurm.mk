# Slurm test cluster targets (chaos/slurm), for inclusion by the main Makefile:
#
#   make slurm-up N=8        N compute nodes (default 8) plus a controller/login node, with
#                            munge, slurmctld and one slurmd per node; waits until all are idle
#   make slurm-status        show the nodes, the daemons and sinfo
#   make slurm-down          stop and remove everything, also what a crashed run left behind
#   make slurm-run CMD='srun -N 8 hostname'   run a Slurm client in the login node
#
# Variables: FTSLURM_NAME (default fts), FTSLURM_FLAGS (more global flags of ftslurm,
# e.g. -prefix 10.75.0.0/16), SLURMD_TIMEOUT (e.g. 10s; default Slurm's 300s).
# Needs root. slurm-up first runs chaos/install-deps.sh and chaos/install-slurm-deps.sh.

FTSLURM_CHAOS := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
FTSLURM_ROOT := $(abspath $(FTSLURM_CHAOS)/..)
FTSLURM_GO ?= $(or $(shell command -v go 2>/dev/null),/usr/local/go/bin/go)
FTSLURM_BIN ?= $(FTSLURM_CHAOS)/.bin/ftslurm
FTSLURM_NAME ?= fts
FTSLURM_FLAGS ?=
FTSLURM := $(FTSLURM_BIN) -name $(FTSLURM_NAME) $(FTSLURM_FLAGS)

.PHONY: slurm-deps ftslurm-bin slurm-up slurm-down slurm-status slurm-run

slurm-deps:
	@sh $(FTSLURM_CHAOS)/install-deps.sh
	@sh $(FTSLURM_CHAOS)/install-slurm-deps.sh

# Always rebuilt: go build is incremental and knows the dependencies.
ftslurm-bin:
	@cd $(FTSLURM_ROOT) && $(FTSLURM_GO) build -o $(FTSLURM_BIN) ./chaos/cmd/ftslurm

slurm-up: slurm-deps ftslurm-bin
	$(FTSLURM) up -n $(or $(N),8) $(if $(SLURMD_TIMEOUT),-slurmd-timeout $(SLURMD_TIMEOUT))

slurm-down: ftslurm-bin
	$(FTSLURM) down

slurm-status: ftslurm-bin
	$(FTSLURM) status

slurm-run: ftslurm-bin
	$(FTSLURM) run $(CMD)
