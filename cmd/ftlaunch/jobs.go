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

const cancelUsage = `Usage: ftlaunch cancel [--state-dir DIR] [--ssh-config FILE] JOB

Ends a running job as the user's SIGTERM would at its front-end: SIGTERM to
every rank, SIGKILL after the job's --kill-after; nothing is restarted, and
the job is listed as cancelled. The request reaches the job's root wherever
it runs now (its front-end, or the replica agent that took over), over the
job's own mutual TLS.

A job none of whose roots answers (its front-end is gone, and its root
replicas if it had any: its end was never recorded) has every node of its
recorded node table fenced, as a root fences a lost agent's: its agents and
ranks there are killed (over SSH for hosts, as the job's agents were
started), and each node's line says what was. Its end is recorded as
cancelled when its state log can be written (a job without replicas).

Exits 0 once nothing of the job runs; 1 if the job is unknown or has
ended, or a node could not be fenced.

  --state-dir DIR     the state directory (default $XDG_STATE_HOME/ftlaunch/jobs)
  --ssh-config FILE   OpenSSH client config to reach a fenced job's hosts
                      (default ~/.ssh/config)
`

const killUsage = `Usage: ftlaunch kill [--signal SIG] [--state-dir DIR] [--ssh-config FILE] JOB

Sends a signal to every rank of a running job (default SIGTERM), through
its root wherever it runs now. A rank that dies of it was ended by the
user: the job ends as the user's signal, and nothing is restarted. SIGINT,
SIGTERM, SIGHUP, SIGQUIT and SIGKILL end the job. A job none of whose roots
answers gets those as cancel does: its nodes are fenced (see ftlaunch
cancel --help); another signal cannot reach its ranks.

  --signal SIG        a name (USR1, SIGUSR1) or a number
  --state-dir DIR     the state directory (default $XDG_STATE_HOME/ftlaunch/jobs)
  --ssh-config FILE   OpenSSH client config to reach a fenced job's hosts
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
	sshConfig := fs.String("ssh-config", "", "")
	pos, err := parseArgs(fs, args)
	if done, code := usageError("cancel", cancelUsage, err, pos, 1, 1, stdout, stderr); done {
		return code
	}
	o := jobctl.Options{Fencing: jobctl.Fencing{SSHConfig: *sshConfig}}
	e, err := jobctl.Cancel(context.Background(), *stateDir, pos[0], o)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch cancel: %v\n", err)
		return 1
	}
	return writeEnded("cancel", e, stdout, stderr)
}

// writeEnded prints how a job was ended: its final status's line, after
// each node's fence when none of its roots answered. A node that could
// not be fenced is the command's failure.
func writeEnded(cmd string, e *jobctl.Ended, stdout, stderr io.Writer) int {
	code := 0
	if f := e.Fenced; f != nil {
		fmt.Fprintf(stderr, "ftlaunch %s: job %s: no root answers (its end was never recorded): fencing its %d node(s) (%s)\n", cmd, f.Job, len(f.Nodes), f.StartedBy)
		for _, n := range f.Nodes {
			if n.Err != "" {
				fmt.Fprintf(stderr, "ftlaunch %s: node %s: not fenced: %s\n", cmd, n.Node, n.Err)
				code = 1
				continue
			}
			fmt.Fprintf(stdout, "node %s: %s\n", n.Node, n.Killed)
		}
		if !f.Recorded {
			fmt.Fprintf(stderr, "ftlaunch %s: job %s: its end could not be recorded: %s\n", cmd, f.Job, f.RecordErr)
			return code
		}
	}
	st := e.Status
	exit := "no exit code"
	if st.ExitCode != nil {
		exit = fmt.Sprintf("exit code %d", *st.ExitCode)
	}
	fmt.Fprintf(stdout, "job %s: %s, %s\n", st.Job, st.Word(), exit)
	return code
}

func killCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch kill", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	sigName := fs.String("signal", "TERM", "")
	sshConfig := fs.String("ssh-config", "", "")
	pos, err := parseArgs(fs, args)
	if done, code := usageError("kill", killUsage, err, pos, 1, 1, stdout, stderr); done {
		return code
	}
	sig, err := jobctl.ParseSignal(*sigName)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch kill: --signal: %v\n", err)
		return 2
	}
	o := jobctl.Options{Fencing: jobctl.Fencing{SSHConfig: *sshConfig}}
	root, e, err := jobctl.Kill(context.Background(), *stateDir, pos[0], sig, o)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch kill: %v\n", err)
		return 1
	}
	if e != nil {
		return writeEnded("kill", e, stdout, stderr)
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
