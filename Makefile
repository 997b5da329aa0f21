# ftlaunch — a fault-tolerant parallel job launcher.
#
#   make demo     build, then run the demo job on this machine (8 ranks)
#   make test     install what the tests need, then vet and run the tests (race detector on)
#   make help     list every target

GO ?= $(or $(shell command -v go 2>/dev/null),/usr/local/go/bin/go)
BIN := $(CURDIR)/bin
N ?= 8
# Default test packages and flags; the long suites have targets of their own.
TEST_FLAGS ?= -race -count=1 -timeout 40m

.PHONY: help build deps test test-e2e test-mpi-large test-recovery test-failover test-failover-cluster test-cluster-large test-short lint fuzz demo bench bench-go bench-launch bench-cluster bench-slurm bench-replicas bench-recovery bench-detect bench-mpi bench-coll validate-model clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build bin/ftlaunch and bin/ftdemo
	$(GO) build -o $(BIN)/ftlaunch ./cmd/ftlaunch
	$(GO) build -o $(BIN)/ftdemo ./cmd/ftdemo

deps: ## install the Debian packages the tests need (as root; no-op when present)
	@sh chaos/install-deps.sh

demo: build ## run the demo: N ranks (default 8) pass a token around a ring of direct TCP connections
	$(BIN)/ftlaunch run -l -n $(N) $(BIN)/ftdemo

test: deps ## vet, then run every package's tests with the race detector
	$(GO) vet ./...
	$(GO) test $(TEST_FLAGS) ./...
	$(GO) test -count=1 -run 'TestCluster100' ./membership # skipped under -race (golang/go#78156)

test-e2e: deps ## every end-to-end case of cmd/ftlaunch: the default suite's and those it leaves here (e2eOnly names each one's guard)
	FTLAUNCH_E2E=1 $(GO) test $(TEST_FLAGS) -timeout 60m ./cmd/ftlaunch/

test-mpi-large: deps ## MPICH runs of 64 ranks (minutes on two cores)
	FTLAUNCH_MPI_LARGE=1 $(GO) test -count=1 -timeout 40m -run MPICHLarge -v ./cmd/ftlaunch

test-failover: deps ## #14 items 5/6: a stalled successor, double root losses (--replicas 3 and 5), a successor using a spare, a successor refilling the group, acceptance run 1 (five losses on one job); #27: a front-end stalled 1, 2, 4, 8 s or cut from its raft group; 20 runs each
	FTLAUNCH_FAILOVER_LONG=1 $(GO) test -count=20 -timeout 120m -run 'TestStalledSuccessor|TestDoubleRootLoss|TestSuccessorUsesSpare|TestSuccessorRefillsGroup|TestAcceptanceLosses|TestStalledFrontEnd|TestRaftCutFrontEnd' ./cmd/ftlaunch/

test-failover-cluster: deps ## #27's acceptance on 10 emulated hosts over SSH (16 ranks, kary:2, 2 spares, --replicas 3): the front-end stalled 1, 2, 4, 8 s or cut from its raft group, then a rank killed; RUNS each (default 10; root)
	FTLAUNCH_FAILOVER_LONG=1 $(GO) test -count=$(or $(RUNS),10) -timeout 120m -run 'TestClusterStalledFrontEnd|TestClusterRaftCutFrontEnd' -v ./cmd/ftlaunch/

test-recovery: deps ## #14's node losses on the emulated SSH cluster: partition + spare host + fencing, interior crash, slow interior, a survivor's free slots, MPICH under --restart job with an interior host crashed and a spare, an interior node crashed under Slurm (root)
	FTLAUNCH_RECOVERY_LONG=1 $(GO) test -count=1 -timeout 25m -run 'TestClusterPartitionSpare|TestClusterInteriorCrash|TestClusterSlowInterior|TestReplicaHostReplaced|TestSurvivorSlotsFree|TestClusterSurvivorSlots|TestClusterMPICHInteriorCrashSpare' -v ./cmd/ftlaunch/
	FTLAUNCH_RECOVERY_LONG=1 $(GO) test -count=1 -timeout 10m -run 'TestSlurmLauncher/interior' -v ./cmd/ftlaunch/

test-cluster-large: deps ## issue #4's acceptance: 16 emulated hosts x 64 ranks, every tree kind (root)
	FTLAUNCH_CLUSTER_LARGE=1 $(GO) test -count=1 -timeout 20m -run 'TestClusterLarge' -v ./cmd/ftlaunch/

test-short: ## the tests without the race detector and the slow cases
	$(GO) test -short -count=1 ./...

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

FUZZTIME ?= 20s
fuzz: ## run every fuzz target of the repository for FUZZTIME each (default 20s; docs/design.md gives the time to 10M executions)
	$(GO) test -run XXX -fuzz '^FuzzExpandHostlist$$' -fuzztime $(FUZZTIME) ./launch/alloc
	$(GO) test -run XXX -fuzz '^FuzzParseHostfile$$' -fuzztime $(FUZZTIME) ./launch/alloc
	$(GO) test -run XXX -fuzz '^FuzzParseTasksPerNode$$' -fuzztime $(FUZZTIME) ./launch/alloc
	$(GO) test -run XXX -fuzz '^FuzzParseLine$$' -fuzztime $(FUZZTIME) ./launch/pmi
	$(GO) test -run XXX -fuzz '^FuzzServe$$' -fuzztime $(FUZZTIME) ./launch/pmi
	$(GO) test -run XXX -fuzz '^FuzzDecoders$$' -fuzztime $(FUZZTIME) ./launch/proto
	$(GO) test -run XXX -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./launch/rankproto
	$(GO) test -run XXX -fuzz '^FuzzDecodeLeaveNotice$$' -fuzztime $(FUZZTIME) ./membership
	$(GO) test -run XXX -fuzz '^FuzzDecodeMeta$$' -fuzztime $(FUZZTIME) ./membership
	$(GO) test -run XXX -fuzz '^FuzzUnmarshalCredentials$$' -fuzztime $(FUZZTIME) ./overlay/secure
	$(GO) test -run XXX -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) ./overlay/wire
	$(GO) test -run XXX -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./raftstore

bench: bench-go bench-launch bench-replicas bench-recovery bench-coll bench-cluster bench-slurm ## every benchmark (Go benchmarks and launcher comparisons)

bench-go: ## Go benchmarks of plans, collectives, codecs
	$(GO) test -run XXX -bench . -benchmem ./topology/... ./launch/...

bench-launch: deps build ## ftlaunch against MPICH's mpiexec, interleaved, N = 1..256, and with --replicas 3 (BENCH_FLAGS="-baseline OLD -agent-process"); see docs/benchmarks.md
	$(GO) build -o $(BIN)/ftbench ./cmd/ftbench
	$(BIN)/ftbench -ftlaunch $(BIN)/ftlaunch -ftdemo $(BIN)/ftdemo $(BENCH_FLAGS)

BENCH_HOSTS ?= 32
bench-cluster: deps build ftcluster-bin ## ftlaunch against Hydra's ssh launcher on BENCH_HOSTS emulated hosts x 4 ranks (root)
	$(GO) build -o $(BIN)/ftbench ./cmd/ftbench
	@set -e; C="$(FTCLUSTER_BIN) -name ftbench -prefix 10.78.0.0/16"; \
	$$C up -n $(BENCH_HOSTS) >/dev/null; trap '$$C down >/dev/null' EXIT; \
	for i in $$(seq -f %03g 1 $(BENCH_HOSTS)); do echo node$$i:4; done > $(BIN)/hosts.bench; \
	$(BIN)/ftbench -ftlaunch $(BIN)/ftlaunch -hostfile $(BIN)/hosts.bench \
		-ssh-config /run/ftcluster/ftbench/ssh/config -iface ftbenchbr -ppn 4 $(BENCH_FLAGS)

bench-slurm: deps build ftslurm-bin ## ftlaunch --launcher slurm against srun and Hydra's slurm bootstrap in one salloc -N 8 -n 16 (root)
	@set -e; S="$(FTSLURM_BIN) -name ftbs -prefix 10.79.0.0/24"; \
	$$S up -n 8 >/dev/null; trap '$$S down >/dev/null' EXIT; \
	$$S run salloc -N 8 -n 16 sh $(CURDIR)/chaos/bench-slurm.sh $(BIN)/ftlaunch auto $(or $(RUNS),9)

bench-recovery: deps build ftcluster-bin ## the restart protocol: failure to every rank resumed (--restart rank, 16 ranks), and --restart job against a fresh launch (TRIALS, default 20; CASES: any of rank agents second mpi hostcrash)
	CASES="$(CASES)" sh chaos/bench-recovery.sh $(BIN)/ftlaunch $(or $(TRIALS),20)

bench-detect: build ftcluster-bin ## detection below the root's children on 8 emulated hosts: crash, cut, blackhole (TRIALS each, default 10), and no false loss under a slow or lossy interior host (root)
	sh chaos/bench-detect.sh $(BIN)/ftlaunch $(or $(TRIALS),10)

bench-mpi: deps build ## an MPI job's start (MPI_Init + barrier + finalize, BENCH_N ranks, default 16): Open MPI under ftlaunch and mpirun, MPICH under ftlaunch and Hydra, interleaved (RUNS, default 9)
	sh chaos/bench-mpi.sh $(BIN)/ftlaunch $(or $(BENCH_N),16) $(or $(RUNS),9)

bench-coll: build ## collectives combined in the tree against the root merging them all (hidden FTLAUNCH_COLL_ROOT_MERGE=1): BENCH_NODES test nodes (default "64 128") x 2 ranks, BENCH_TREES (default "kary:4 auto"), 20 allgathers of 1 KiB per rank, 20 barriers, 20 rings; RUNS each (default 3); see docs/benchmarks.md
	sh chaos/bench-coll.sh $(BIN)/ftlaunch $(BIN)/ftdemo

bench-replicas: build ## the state log's cost: the demo with --replicas 1 and 3, interleaved (OLD=path: an older ftlaunch beside them)
	sh chaos/bench-replicas.sh $(BIN)/ftlaunch $(BIN)/ftdemo $(or $(RUNS),15) $(OLD)

validate-model: deps build ftcluster-bin ## the launch model against measured launches on emulated hosts: HOSTS x PPN x TREES, RUNS each, after a calibration run of its own (root; chaos/validate-model.sh)
	sh chaos/validate-model.sh $(BIN)/ftlaunch $(FTCLUSTER_BIN)

clean: ## remove built binaries
	rm -rf $(BIN) chaos/.bin

-include chaos/*.mk
