# Chaos runs (ftlaunch chaos), for inclusion by the main Makefile:
#
#   make chaos           the long run: on test nodes, CHAOS_TRIALS single-fault trials with one
#                        root replica, as many with three, and CHAOS_DOUBLE double-fault trials;
#                        then, as root, on the emulated cluster (hosts with sshd in network
#                        namespaces): CHAOS_EMU_TRIALS single-fault trials under --restart none,
#                        as many under --restart rank, and CHAOS_EMU_DOUBLE double-fault trials
#                        on 6 hosts (not root: that part is skipped, said so); then the
#                        spare-node runs: a flat tree with one spare node under --restart
#                        rank, job, and rank with three replicas, CHAOS_SPARE_TRIALS each,
#                        on test nodes (and --restart rank --when recovery: faults timed
#                        into a recovery) and (root) on 6 emulated hosts + 1 spare
#   make chaos-spare     only the spare-node runs
#   make chaos-interior  interior agents and backup parents: kary:2, 8 nodes + 2 spares,
#                        --restart rank (1 and 3 replicas, double faults; emulated as root,
#                        with the front-end's stall and raft-only cut too)
#   make chaos-mpi       MPI under --restart job with a spare (issue #26): MPICH's checkpoint
#                        program (--app-kind mpi) on 6 emulated hosts + 1 spare, kary:2, every
#                        fault, CHAOS_MPI_TRIALS trials (root; not root: skipped, said so)
#   make chaos-tests     the long tests of the chaos harness (stopped agents, a broken fence:
#                        6-16 s a trial), FTLAUNCH_CHAOS_LONG=1
#   make chaos-short     the acceptance of issue #15's first part: 20 trials, --restart none
#   make chaos-emulated  a short run by hand on 4 emulated hosts (root): CHAOS_EMU_SHORT (10)
#                        trials of every fault under --restart none
#
# Variables: CHAOS_TRIALS (default 100), CHAOS_DOUBLE (default 50), CHAOS_EMU_TRIALS
# (default 100), CHAOS_EMU_DOUBLE (default 50), CHAOS_EMU_SHORT (default 10),
# CHAOS_SPARE_TRIALS (default 20), CHAOS_MPI_TRIALS (default 50), CHAOS_SEED
# (default: the clock; each run prints its seed), CHAOS_FLAGS (more flags for every run, e.g.
# --steps 10), CHAOS_OUT (where failing trials keep their directories; default a temporary
# directory). Every run prints a trial report, a summary table and "N passed, M failed"; the
# target fails when a trial failed. The emulated runs bring their cluster (ftchaos,
# 10.79.0.0/24) up and down themselves. See docs/chaos.md.

CHAOS_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
CHAOS_TRIALS ?= 100
CHAOS_DOUBLE ?= 50
CHAOS_EMU_TRIALS ?= 100
CHAOS_EMU_DOUBLE ?= 50
CHAOS_EMU_SHORT ?= 10
CHAOS_SPARE_TRIALS ?= 20
CHAOS_MPI_TRIALS ?= 50
CHAOS_FTLAUNCH := $(CHAOS_ROOT)/bin/ftlaunch
CHAOS_COMMON = $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) $(if $(CHAOS_OUT),--out $(CHAOS_OUT)) $(CHAOS_FLAGS)
CHAOS_RUN = $(CHAOS_FTLAUNCH) chaos --cluster test-nodes --restart none $(CHAOS_COMMON)
CHAOS_EMU = $(CHAOS_FTLAUNCH) chaos --cluster emulated $(CHAOS_COMMON)
# The spare-node runs: a flat tree (every agent a leaf of the root, which
# the planner starts again: on the spare when its node went silent).
CHAOS_SPARE = --nodes 6 --spare-nodes 1 --tree flat --trials $(CHAOS_SPARE_TRIALS)
# Interior agents and backup parents (chaos-interior): kary:2 over 8 nodes
# and 2 spares, faults timed into the run.
CHAOS_INTERIOR = --nodes 8 --spare-nodes 2 --tree kary:2 --restart rank --when run --trials $(CHAOS_SPARE_TRIALS)
# A cluster of their own beside the other emulated runs' (ftchaos, 10.79.0.0/24).
CHAOS_SPARE_EMU = $(CHAOS_EMU) --cluster-name ftspare --cluster-prefix 10.81.0.0/24

# MPI under --restart job with a spare (chaos-mpi): 12 MPICH ranks whose
# MPI_Init alone takes seconds on two busy cores, so a trial gets 4 min.
CHAOS_MPI = --app-kind mpi --restart job --nodes 6 --spare-nodes 1 --tree kary:2 --trial-timeout 4m --trials $(CHAOS_MPI_TRIALS)

.PHONY: chaos chaos-short chaos-emulated chaos-spare chaos-interior chaos-mpi chaos-tests

chaos: build ## the long chaos run: test nodes (1 and 3 replicas, double faults), the emulated cluster (root), spare nodes
	@set -e; fail=0; \
	$(CHAOS_RUN) --trials $(CHAOS_TRIALS) --replicas 1 || fail=1; \
	$(CHAOS_RUN) --trials $(CHAOS_TRIALS) --replicas 3 || fail=1; \
	$(CHAOS_RUN) --trials $(CHAOS_DOUBLE) --concurrent 2 || fail=1; \
	if [ "$$(id -u)" = 0 ]; then \
		$(CHAOS_EMU) --nodes 4 --trials $(CHAOS_EMU_TRIALS) --restart none || fail=1; \
		$(CHAOS_EMU) --nodes 4 --trials $(CHAOS_EMU_TRIALS) --restart rank || fail=1; \
		$(CHAOS_EMU) --nodes 6 --trials $(CHAOS_EMU_DOUBLE) --restart none --concurrent 2 || fail=1; \
	else \
		echo "chaos: not root: the emulated-cluster part (node, partition, host-wide checks) is skipped"; \
	fi; \
	$(MAKE) --no-print-directory chaos-spare || fail=1; \
	$(MAKE) --no-print-directory chaos-interior || fail=1; \
	$(MAKE) --no-print-directory chaos-mpi || fail=1; \
	exit $$fail

chaos-mpi: build ## MPI under --restart job with a spare: MPICH's checkpoint program on 6 emulated hosts + 1 spare, every fault (root)
	@if [ "$$(id -u)" = 0 ]; then \
		$(CHAOS_EMU) --cluster-name ftmpi --cluster-prefix 10.83.0.0/24 $(CHAOS_MPI); \
	else \
		echo "chaos-mpi: not root: skipped (the emulated cluster needs root)"; \
	fi

chaos-interior: build ## interior agents and backup parents: kary:2, 10 nodes of which 2 spares, --restart rank (1 and 3 replicas, double faults); emulated 8+2 hosts (root)
	@set -e; fail=0; \
	$(CHAOS_FTLAUNCH) chaos --cluster test-nodes $(CHAOS_COMMON) $(CHAOS_INTERIOR) --faults leaf,interior,agent,stop,rank || fail=1; \
	$(CHAOS_FTLAUNCH) chaos --cluster test-nodes $(CHAOS_COMMON) $(CHAOS_INTERIOR) --faults leaf,interior,agent,stop,rank,replica --replicas 3 || fail=1; \
	$(CHAOS_FTLAUNCH) chaos --cluster test-nodes $(CHAOS_COMMON) $(CHAOS_INTERIOR) --faults leaf,interior,agent,stop,rank --concurrent 2 || fail=1; \
	if [ "$$(id -u)" = 0 ]; then \
		$(CHAOS_EMU) --cluster-name ftint --cluster-prefix 10.87.0.0/24 $(CHAOS_INTERIOR) --faults interior,leaf,node,partition,stop,stall,raftcut --replicas 3 || fail=1; \
	else \
		echo "chaos-interior: not root: the emulated-cluster part is skipped"; \
	fi; \
	exit $$fail

chaos-spare: build ## spare-node chaos runs: flat tree + 1 spare, --restart rank/job, 3 replicas; test nodes, then emulated (root)
	@set -e; fail=0; \
	$(CHAOS_FTLAUNCH) chaos --cluster test-nodes $(CHAOS_COMMON) $(CHAOS_SPARE) --restart rank || fail=1; \
	$(CHAOS_FTLAUNCH) chaos --cluster test-nodes $(CHAOS_COMMON) $(CHAOS_SPARE) --restart job || fail=1; \
	$(CHAOS_FTLAUNCH) chaos --cluster test-nodes $(CHAOS_COMMON) $(CHAOS_SPARE) --restart rank --replicas 3 || fail=1; \
	$(CHAOS_FTLAUNCH) chaos --cluster test-nodes $(CHAOS_COMMON) $(CHAOS_SPARE) --restart rank --when recovery || fail=1; \
	if [ "$$(id -u)" = 0 ]; then \
		$(CHAOS_SPARE_EMU) $(CHAOS_SPARE) --restart rank || fail=1; \
		$(CHAOS_SPARE_EMU) $(CHAOS_SPARE) --restart job || fail=1; \
		$(CHAOS_SPARE_EMU) $(CHAOS_SPARE) --restart rank --replicas 3 || fail=1; \
	else \
		echo "chaos-spare: not root: the emulated-cluster part is skipped"; \
	fi; \
	exit $$fail

chaos-tests: ## the chaos harness's long tests (stopped agents, the broken fence; FTLAUNCH_CHAOS_LONG=1)
	FTLAUNCH_CHAOS_LONG=1 $(GO) test -count=1 -timeout 20m -run 'TestChaosBrokenFence|TestChaosSpareEmulated' -v ./cmd/ftlaunch/

chaos-emulated: build ## a short chaos run on 4 emulated hosts, every fault, --restart none (root)
	$(CHAOS_EMU) --nodes 4 --trials $(CHAOS_EMU_SHORT) --restart none

chaos-short: build ## 20 chaos trials on test nodes with --restart none (issue #15's first acceptance)
	$(CHAOS_RUN) --trials 20
