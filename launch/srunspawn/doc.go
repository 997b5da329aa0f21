// Package srunspawn starts ftlaunch agents inside a Slurm allocation with
// srun, as Slurm job steps, instead of over SSH (issue #7).
//
// Two modes:
//
//   - Start runs one agent on one node as its own step: srun --overlap
//     --nodes=1 --ntasks=1 --nodelist=HOST. The loss of a node can end only
//     that node's step, and each agent's session can be closed on its own.
//     This is the mode that matches spawn.Spawner and the default for
//     ftlaunch; see docs/slurm.md for the measurements behind the choice.
//   - StartGroup runs one agent on each of k nodes as a single step (srun
//     --nodes=k --ntasks=k --ntasks-per-node=1 --nodelist=h1,...,hk), every
//     agent getting the same stdin bytes. One srun and one step creation
//     instead of k, but the agents share one fate as far as Slurm goes:
//     one Close ends them all, and a node's loss is seen by one srun.
//
// Every step is started with these srun options:
//
//	--overlap           steps share the allocation's resources, so agent
//	                    steps neither wait for each other nor block the
//	                    job's own steps (without it a second step waits)
//	--mpi=none          no PMI server for the agent (sites may default to pmix)
//	--cpu-bind=none     the agent and the ranks it starts are not bound to
//	                    the one CPU a one-task step would get
//	--kill-on-bad-exit=0, --wait=0
//	                    one agent's exit does not end the others (group mode)
//	--no-kill           a node failure does not end the step on the other
//	                    nodes (group mode; needs a --no-kill allocation)
//	--input=all         srun's stdin goes to every task; EOF too
//	-v                  srun reports when the tasks started (see Timings)
//
// Hydra's Slurm bootstrap (MPICH) passes "--input none" because it
// talks to its proxies over its own sockets only; an ftlaunch agent reads
// its bootstrap frame from stdin and takes EOF as the end of its job, so
// srun's stdin is a pipe that the session keeps open and Close closes.
//
// # When a step "runs"
//
// srun has no callback, but with -v it prints "_task_start: Node N, K tasks
// started" when slurmd reports the tasks forked and exec'd on node N. Start
// returns once that line arrived for every node of the step; Timings.Total
// is the time from the call until then. srun's informational lines (the
// ones -v adds) go to Options.Logf, not to the session's Stderr; errors,
// warnings and the tasks' own stderr are passed through.
//
// # Closing
//
// Close closes srun's stdin (every task sees EOF), then, after
// Options.CloseGrace, sends SIGTERM to srun, which makes srun cancel the
// step: slurmstepd kills every task of it ("forcing job termination"), and
// srun exits 137 or 143. If srun is still there Options.KillTimeout later,
// it gets SIGKILL. srun runs in its own process group (a terminal's ^C does
// not reach it) and gets SIGTERM if the thread that started it dies
// (Pdeathsig), so a crashed launcher leaves no steps behind either; its
// stdin reaching EOF ends the agents in any case.
//
// # Node failures
//
// Slurm marks a silent node DOWN only after SlurmdTimeout (300 s by
// default). Then, in a --no-kill allocation, the steps on that node end
// and srun, which runs with --no-kill, exits 0 with only a "Node failure
// on NODE" line; Wait turns that into an *ExitError with Lost set. The
// launcher must still detect failures itself: Slurm tells late.
//
// Processes that leave their step (daemonized children) are not Slurm's to
// kill under proctrack/linuxproc; agents must not do that.
//
// Requirements: srun in PATH (or Options.Srun), and an allocation in the
// environment (SLURM_JOB_ID and SLURM_JOB_NODELIST, as salloc, sbatch and
// steps set them), with SLURM_CONF where the site needs it. Recovery from
// node loss needs the allocation to be made with --no-kill, else Slurm
// kills the whole job once it marks a node DOWN.
package srunspawn
