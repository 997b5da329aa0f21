package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"syscall"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/jobctl"
)

const jobsUsage = `Usage: ftlaunch jobs [--state-dir DIR] [--json]

Lists the jobs of the state directory, newest first: id, state (running,
finished, failed, cancelled: ended by the user's signal, or unfinished: its
end was never recorded), ranks, nodes, start, duration, exit code, and how
many failures were recovered. A running job is read from its root's live
report; jobs never waits for a job's files.

  --state-dir DIR   the state directory (default $XDG_STATE_HOME/ftlaunch/jobs)
  --json            print a JSON array instead of a table
`

const cancelUsage = `Usage: ftlaunch cancel [--state-dir DIR] JOB

Ends a running job as the user's SIGTERM would at its front-end: SIGTERM to
every rank, SIGKILL after the job's --kill-after; nothing is restarted, and
the job is listed as cancelled. The request reaches the job's root wherever
it runs now (its front-end, or the replica agent that took over), over the
job's own mutual TLS. Exits 0 once the job has ended; 1 if the job is
unknown or not running.

  --state-dir DIR   the state directory (default $XDG_STATE_HOME/ftlaunch/jobs)
`

const killUsage = `Usage: ftlaunch kill [--signal SIG] [--state-dir DIR] JOB

Sends a signal to every rank of a running job (default SIGTERM), through
its root wherever it runs now. A rank that dies of it was ended by the
user: the job ends as the user's signal, and nothing is restarted. SIGINT,
SIGTERM, SIGHUP, SIGQUIT and SIGKILL end the job.

  --signal SIG      a name (USR1, SIGUSR1) or a number
  --state-dir DIR   the state directory (default $XDG_STATE_HOME/ftlaunch/jobs)
`

func jobsCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch jobs", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if done, code := usageError("jobs", jobsUsage, err, pos, 0, 0, stdout, stderr); done {
		return code
	}
	jobs, err := jobctl.List(*stateDir)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch jobs: %v\n", err)
		return 1
	}
	if jobs == nil {
		jobs = []jobctl.Job{} // [] in JSON
	}
	return printResult("jobs", *asJSON, jobs, func(w io.Writer) error { return writeJobs(w, jobs) }, stdout, stderr)
}

// printResult prints v as indented JSON, or as text writes it; a failed
// write is the command's failure.
func printResult(cmd string, asJSON bool, v any, text func(io.Writer) error, stdout, stderr io.Writer) int {
	var err error
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	} else {
		err = text(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch %s: write output: %v\n", cmd, err)
		return 1
	}
	return 0
}

func writeJobs(w io.Writer, jobs []jobctl.Job) error {
	bw := &errWriter{w: w}
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tRANKS\tNODES\tSTART\tDURATION\tEXIT\tRESTARTS\tPROGRAM")
	for _, j := range jobs {
		start, exit := "-", "-"
		if !j.Start.IsZero() {
			start = j.Start.Local().Format("2006-01-02 15:04:05")
		}
		if j.ExitCode != nil {
			exit = fmt.Sprint(*j.ExitCode)
		}
		prog := strings.Join(j.Argv, " ")
		if j.Error != "" {
			prog = j.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%.1fs\t%s\t%d\t%s\n", j.ID, j.State, j.Ranks, j.Nodes, start, j.Duration, exit, j.Restarts, prog)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.err
}

func cancelCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch cancel", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	pos, err := parseArgs(fs, args)
	if done, code := usageError("cancel", cancelUsage, err, pos, 1, 1, stdout, stderr); done {
		return code
	}
	st, err := jobctl.Cancel(context.Background(), *stateDir, pos[0], jobctl.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch cancel: %v\n", err)
		return 1
	}
	code := "no exit code"
	if st.ExitCode != nil {
		code = fmt.Sprintf("exit code %d", *st.ExitCode)
	}
	fmt.Fprintf(stdout, "job %s: %s, %s\n", st.Job, st.Word(), code)
	return 0
}

func killCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch kill", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	sigName := fs.String("signal", "TERM", "")
	pos, err := parseArgs(fs, args)
	if done, code := usageError("kill", killUsage, err, pos, 1, 1, stdout, stderr); done {
		return code
	}
	sig, err := jobctl.ParseSignal(*sigName)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch kill: --signal: %v\n", err)
		return 2
	}
	root, err := jobctl.Kill(context.Background(), *stateDir, pos[0], sig, jobctl.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch kill: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "job %s: %s sent to every rank by its root on %s\n", pos[0], signalName(sig), root)
	return 0
}

// usageError handles --help and wrong arguments (from min to max
// positional ones): done says the command is over, with code.
func usageError(cmd, usage string, err error, pos []string, min, max int, stdout, stderr io.Writer) (done bool, code int) {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return true, 0
	}
	switch {
	case err != nil:
	case len(pos) > max:
		err = fmt.Errorf("unexpected argument %q", pos[max])
	case len(pos) < min:
		err = errors.New("name the job (its id, as ftlaunch jobs lists it)")
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch %s: %v (see ftlaunch %s --help)\n", cmd, err, cmd)
		return true, 2
	}
	return false, 0
}

func signalName(s syscall.Signal) string { return fmt.Sprintf("%s (%d)", unix.SignalName(s), int(s)) }
