package harness

// Usage is the help of `ftlaunch chaos`, whose flags set Options.
const Usage = `Usage: ftlaunch chaos --cluster test-nodes|emulated [flags] [-- APP-ARGS...]

Runs a job K times (trials) under a seeded schedule of faults applied from
outside (signals; on the emulated cluster also host crashes, link cuts and
slow links), then checks that each job ended as promised: with no
restart, any failure ends the job cleanly naming the fault; with --restart
rank or job, a rank's loss is recovered and the job completes with the
right result, and so is a lost agent wherever it is in the tree (the
agents below it move to their backup parents): a SIGKILLed one on its
node, a stopped, crashed or cut-off one on a spare node (--spare-nodes)
while one is left (else the job ends naming it); a lost front-end with
one replica leaves no process and the status "unfinished", and with
--replicas 3 a lost front-end's job goes on and completes. After every
trial it checks the invariants: the final status, no process of the job
left (on every emulated host too), nothing of a lost agent incarnation
left once the job ended or once it ran again, every failure in the state log paired
with the job's end (and under a restart policy, with a recovery that ran
to its end), equal digests on the replicas that stayed up, monotonic
epochs and node-table versions, the state log's own invariants, no output
line written twice, and the application's result. The last line is "N
passed, M failed"; the exit status is 1 when a trial failed. A failing
trial keeps its directory (state log, the front-end's output) and prints
the command that replays it.

  --cluster test-nodes|emulated
                           where the trials run (required): test-nodes (local agents),
                           or emulated: N hosts in network namespaces with a real sshd
                           each, brought up for the run and down at its end (needs root);
                           the jobs run over SSH from this machine
  --cluster-name NAME, --cluster-prefix NET
                           the emulated cluster's name and network (default ftchaos,
                           10.79.0.0/24); a cluster of that name left by a crashed run
                           is removed first
  --nodes N                agents (test nodes, or emulated hosts) per job (default 6)
  --ppn N                  ranks per node (default 2)
  --trials K               trials (default 10)
  --seed S                 the first trial's seed (default: from the clock, printed);
                           --seed S --trials 1 replays a trial printed with seed S
  --faults LIST            any of rank,agent,leaf,interior,root,replica,node,partition,
                           stop,slow,stall,raftcut (default: every fault with a target
                           in the plan); stall stops the front-end for 2 s (SIGSTOP, then
                           SIGCONT), as a long GC pause or VM steal would; raftcut
                           (--replicas 3 or 5) cuts only the front-end's raft traffic
                           with the replica agents for 2 s, its tree links untouched;
                           node (a host crashes: link down, every process killed) and
                           partition (its link cut until the trial is over; under a
                           restart policy healed 3x its detection time after the cut)
                           need the emulated cluster, where slow is a slow link (150 ms
                           on every packet into the host for 1.5 s); stop continues the
                           agent 3x its detection time after the SIGSTOP
  --when launch|run|recovery|any
                           when faults fall (default any: launch or run, chosen per
                           trial); recovery: a rank is killed in the run, and the faults
                           fall once the job's live report shows the recovery under way
                           (needs --restart rank or job)
  --concurrent 1|2         faults per trial (default 1)
  --restart none|rank|job  the job's restart policy (default none); under rank and job the
                           default application is the recovery application
                           ("ftlaunch ringapp", about 2 s) and run-phase faults fall
                           after the first node table (--app-kind mpi: after every
                           rank's first checkpoint; shell: once every rank runs); under
                           job a lost agent is recovered also during the launch
  --replicas R             root replicas: 1, 3 or 5 (default 1)
  --spare-nodes K          K spare nodes beside the --nodes (test nodes, or emulated hosts
                           brought up with the others), passed to the job: a silent
                           node's agent starts on the next (needs --restart rank or job)
  --tree KIND              the launch tree (default kary:2, so there are interior agents;
                           any kind but auto)
  --app PATH               the application (default: ftlaunch's own, "ftlaunch chaos app",
                           or "ftlaunch ringapp" under a restart policy); arguments after
                           -- are its own
  --app-kind ring|mpi|shell
                           the application by kind instead of --app: ring, the recovery
                           application under every policy (checksum checked); mpi, MPICH's
                           checkpoint program (mpi_ckpt, built with mpicc.mpich into the
                           run's directory; restarts from its checkpoints; its checksum
                           checked; not with --restart rank, which refuses MPI); shell, a
                           plain shell loop of --steps x --interval that never speaks to
                           ftlaunch (every rank's "done R I" line checked: once under none
                           and rank, once per incarnation under job)
  --steps S, --interval D  the default application's length: S steps of D (default 20 x 100ms;
                           the ring application takes 10 steps of D/10 for each)
  --out DIR                where the run makes its directory (ftlaunch-chaos-*) for its trials
                           (default: the temporary directory)
  --keep                   keep every trial's directory, not only the failing ones'
  --strict                 fail the trials that pass only by a known limit (docs/chaos.md)
  --trial-timeout D        give up on a trial after D (default 2m)
`
