# Emulated-cluster targets (chaos/cluster), for inclusion by the main Makefile:
#
#   make cluster-up N=16      bring up 16 nodes (default 16), removing a stale cluster first
#   make cluster-status       show the nodes
#   make cluster-down         remove the cluster, also what a crashed run left behind
#
# Variables: FTCLUSTER_NAME (default ftc), FTCLUSTER_FLAGS (more global flags of
# ftcluster, e.g. -prefix 10.78.0.0/16), MAX_STARTUPS (sshd MaxStartups).
# Needs root. cluster-up first runs chaos/install-deps.sh.

FTCLUSTER_CHAOS := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
FTCLUSTER_ROOT := $(abspath $(FTCLUSTER_CHAOS)/..)
FTCLUSTER_GO ?= $(or $(shell command -v go 2>/dev/null),/usr/local/go/bin/go)
FTCLUSTER_BIN ?= $(FTCLUSTER_CHAOS)/.bin/ftcluster
FTCLUSTER_NAME ?= ftc
FTCLUSTER_FLAGS ?=
FTCLUSTER := $(FTCLUSTER_BIN) -name $(FTCLUSTER_NAME) $(FTCLUSTER_FLAGS)

.PHONY: cluster-deps ftcluster-bin cluster-up cluster-down cluster-status

cluster-deps:
	@sh $(FTCLUSTER_CHAOS)/install-deps.sh

# Always rebuilt: go build is incremental and knows the dependencies.
ftcluster-bin:
	@cd $(FTCLUSTER_ROOT) && $(FTCLUSTER_GO) build -o $(FTCLUSTER_BIN) ./chaos/cmd/ftcluster

cluster-up: cluster-deps ftcluster-bin
	$(FTCLUSTER) up -n $(or $(N),16) $(if $(MAX_STARTUPS),-max-startups $(MAX_STARTUPS))

cluster-down: ftcluster-bin
	$(FTCLUSTER) down

cluster-status: ftcluster-bin
	$(FTCLUSTER) status
