package harness

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/trial"
	"github.com/ftlaunch/ftlaunch/launch/client"
)

// AppDone starts rank 0's last line when the result was verified.
const AppDone = "chaos app: verified"

// App is the application chaos runs by default (`ftlaunch chaos app`):
// every rank publishes its rank, then for each of steps steps writes one
// line of its own ("step S rank R", never twice), works for interval and
// joins an allgather whose every value it checks; rank 0 then prints
// AppDone. It lasts about steps x interval, through the launcher's
// collectives all along, so that a fault anywhere stops it.
func App(steps int, interval time.Duration, stdout io.Writer) error {
	c, err := client.Init()
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer c.Close()
	rank, size := c.Rank(), c.Size()
	table, err := c.Publish([]byte(strconv.Itoa(rank)))
	if err != nil {
		return fmt.Errorf("rank %d: publish: %w", rank, err)
	}
	for r, v := range table {
		if string(v) != strconv.Itoa(r) {
			return fmt.Errorf("rank %d: node table[%d] = %q", rank, r, v)
		}
	}
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for s := 1; s <= steps; s++ {
		if _, err := fmt.Fprintf(stdout, "step %d rank %d\n", s, rank); err != nil {
			return fmt.Errorf("rank %d: write: %w", rank, err)
		}
		timer.Reset(interval)
		<-timer.C // the step's work
		all, err := c.Allgather([]byte(strconv.Itoa(s*size + rank)))
		if err != nil {
			return fmt.Errorf("rank %d: step %d: allgather: %w", rank, s, err)
		}
		if len(all) != size {
			return fmt.Errorf("rank %d: step %d: allgather of %d values, want %d", rank, s, len(all), size)
		}
		for r, v := range all {
			if string(v) != strconv.Itoa(s*size+r) {
				return fmt.Errorf("rank %d: step %d: value of rank %d is %q", rank, s, r, v)
			}
		}
	}
	if err := c.Barrier(); err != nil {
		return fmt.Errorf("rank %d: barrier: %w", rank, err)
	}
	if rank == 0 {
		if _, err := fmt.Fprintf(stdout, "%s: %d ranks, %d steps\n", AppDone, size, steps); err != nil {
			return errors.Join(errors.New("rank 0: write the result"), err)
		}
	}
	return nil
}

// AppMain is `ftlaunch chaos app ARGS...` (not in the help): it parses the
// application's flags (--steps, --interval), runs App as one rank and
// returns its exit status.
func AppMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch chaos app", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	steps := fs.Int("steps", 20, "")
	interval := fs.Duration("interval", 100*time.Millisecond, "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos app: %v\n", err)
		return 2
	}
	if err := App(*steps, *interval, stdout); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos app: %v\n", err)
		return 1
	}
	return 0
}

// AppKind is the application a chaos run's jobs run (--app-kind); each
// kind states its promise per policy (trial.ExpectFor, by its Program)
// and how its result is checked (appResult).
type AppKind string

// The kinds.
const (
	// KindDefault: "ftlaunch chaos app" with no restart policy, the ring
	// application under rank and job.
	KindDefault AppKind = ""
	// KindRing: the ring application (ftlaunch ringapp, the client
	// library) under every policy; rank 0 checks the checksum.
	KindRing AppKind = "ring"
	// KindMPI: MPICH's checkpoint program of the tests (mpi_ckpt.c,
	// built with mpicc.mpich into the run's directory): it restarts from
	// its own checkpoints, and rank 0's checkpointed checksum is the
	// result. --restart rank refuses MPI.
	KindMPI AppKind = "mpi"
	// KindShell: a plain shell loop that never speaks to ftlaunch; each
	// rank prints "done RANK INCARNATION" at its end.
	KindShell AppKind = "shell"
)

// ParseAppKind reads --app-kind.
func ParseAppKind(s string) (AppKind, error) {
	switch k := AppKind(s); k {
	case KindRing, KindMPI, KindShell:
		return k, nil
	}
	return "", fmt.Errorf("--app-kind %q: want ring, mpi or shell", s)
}

// Program is what the kind is to the restart policies.
func (k AppKind) Program() trial.Program {
	switch k {
	case KindMPI:
		return trial.MPI
	case KindShell:
		return trial.Plain
	}
	return trial.Library
}

// MPIProgram is the name of the MPI kind's program (and of its source
// with ".c") in the run's directory.
const MPIProgram = "mpi_ckpt"

// mpiCompiler is MPICH's compiler wrapper (make deps installs it).
const mpiCompiler = "mpicc.mpich"

// buildMPI compiles src (mpi_ckpt.c) with mpicc.mpich into dir and
// returns the program's path.
func buildMPI(dir string, src []byte) (string, error) {
	if len(src) == 0 {
		return "", errors.New("--app-kind mpi: no source for " + MPIProgram + ".c")
	}
	cc, err := exec.LookPath(mpiCompiler)
	if err != nil {
		return "", fmt.Errorf("--app-kind mpi needs %s (make deps installs MPICH): %w", mpiCompiler, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--app-kind mpi: %w", err)
	}
	c, bin := filepath.Join(dir, MPIProgram+".c"), filepath.Join(dir, MPIProgram)
	if err := os.WriteFile(c, src, 0o644); err != nil {
		return "", fmt.Errorf("--app-kind mpi: %w", err)
	}
	if out, err := exec.Command(cc, "-O1", "-o", bin, c).CombinedOutput(); err != nil {
		return "", fmt.Errorf("--app-kind mpi: %s %s: %w\n%s", mpiCompiler, c, err, out)
	}
	return bin, nil
}

// appSteps is the steps of the ring and MPI kinds, and their work per step:
// 10 per step of --steps, each a tenth of --interval, as long as the
// chaos application.
func appSteps(o *Options) (int, time.Duration) { return 10 * o.Steps, o.Interval / 10 }

// appCommand is the command line of a trial's ranks; work is the trial's
// directory (checkpoints go under it), self the ftlaunch binary.
func appCommand(o *Options, self, work string) []string {
	steps, step := appSteps(o)
	ring := []string{self, "ringapp", "--steps", strconv.Itoa(steps), "--step-time", step.String(),
		"--dir", filepath.Join(work, "ckpt"), "--recovery-wait", "20s"}
	switch {
	case o.App != "":
		return append([]string{o.App}, o.AppArgs...)
	case o.AppKind == KindRing, o.AppKind == KindDefault && o.Policy != trial.NoRestart:
		return ring
	case o.AppKind == KindMPI:
		return []string{o.MPIBin, filepath.Join(work, "ckpt"), strconv.Itoa(steps), strconv.FormatInt(step.Milliseconds(), 10)}
	case o.AppKind == KindShell:
		return []string{"sh", "-c", fmt.Sprintf(`for i in $(seq 1 %d); do sleep %.3f; done; echo done $FTLAUNCH_RANK $FTLAUNCH_INCARNATION`,
			o.Steps, o.Interval.Seconds())}
	}
	return []string{self, "chaos", "app", "--steps", strconv.Itoa(o.Steps), "--interval", o.Interval.String()}
}

// appResult checks a completed job's output (labeled "[R] ") for the
// kind's result: checked says whether the kind has one (not --app's),
// unique whether every line of it is written once.
//
//   - default under none: rank 0's AppDone line;
//   - ring (and default under rank and job): rank 0's "checksum C
//     expected E" with C = E;
//   - mpi: rank 0's "steps S checksum C expected E" with S the trial's
//     steps and C = E (from its checkpoints after a restart);
//   - shell: every rank's "done R I" line, once per incarnation I (no line
//     twice); under none and rank once per rank (rank starts only a failed
//     rank again, whose incarnation had not printed it), under job at
//     least once (a restart starts again ranks that had ended).
func appResult(o *Options, ranks int, lines []string) (ok, checked, unique bool) {
	if o.App != "" {
		return false, false, false
	}
	rank0 := func(f func(fields []string) bool) bool {
		for _, l := range lines {
			if rest, found := strings.CutPrefix(l, "[0] "); found && f(strings.Fields(rest)) {
				return true
			}
		}
		return false
	}
	steps, _ := appSteps(o)
	switch {
	case o.AppKind == KindMPI:
		return rank0(func(f []string) bool {
			return len(f) == 6 && f[0] == "steps" && f[1] == strconv.Itoa(steps) && f[2] == "checksum" && f[4] == "expected" && f[3] == f[5]
		}), true, true
	case o.AppKind == KindShell:
		done := make([]int, ranks)
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 4 || f[1] != "done" || f[0] != "["+f[2]+"]" {
				continue
			}
			if r, err := strconv.Atoi(f[2]); err == nil && r >= 0 && r < ranks {
				done[r]++
			}
		}
		for _, n := range done {
			if n == 0 || n > 1 && o.Policy != trial.RestartJob {
				return false, true, true
			}
		}
		return true, true, true
	case o.AppKind == KindDefault && o.Policy == trial.NoRestart:
		return rank0(func(f []string) bool { return strings.HasPrefix(strings.Join(f, " "), AppDone) }), true, true
	}
	return rank0(func(f []string) bool { return len(f) == 4 && f[0] == "checksum" && f[2] == "expected" && f[1] == f[3] }), true, true
}
