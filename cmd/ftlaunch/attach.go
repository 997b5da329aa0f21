package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/jobctl"
	"github.com/ftlaunch/ftlaunch/launch/jobstate"
)

const attachUsage = `Usage: ftlaunch attach [--state-dir DIR] [--verbose] [JOB]

Follows a job whose front-end was lost (a job run with --replicas 3 or 5)
as its front-end would have shown it: the output its new root writes to the
job's state directory (output/rank.R.out on stdout, output/rank.R.err on
stderr, each line labeled "[R] ") and the root's own lines (a takeover, a
rank restarted, a recovery) on stderr, until the job ends; then exits with
the job's exit code, after the lines that said why if it failed. JOB is a
job id or directory (default: the latest job).

Ctrl-C ends the job as Ctrl-C at its front-end does (SIGINT to every rank,
then SIGTERM, SIGKILL after --kill-after; nothing is restarted); Ctrl-C
again kills every rank at once. Ctrl-Z detaches: the job goes on.

On a job whose front-end is alive (it prints the output), or that has
ended, attach says so in one line first.

  --state-dir DIR   the state directory (default $XDG_STATE_HOME/ftlaunch/jobs)
  --verbose         also the new root's timestamped log lines
`

// attachPoll is how often attach looks for new output and the job's end.
const attachPoll = 200 * time.Millisecond

func attachCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch attach", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	verbose := fs.Bool("verbose", false, "")
	pos, err := parseArgs(fs, args)
	if done, code := usageError("attach", attachUsage, err, pos, 0, 1, stdout, stderr); done {
		return code
	}
	jobDir, _, err := jobstate.Resolve(*stateDir, strings.Join(pos, ""))
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch attach: %v\n", err)
		return 1
	}
	f := &jobctl.Follower{Dir: jobDir, Stdout: stdout, Stderr: stderr, Verbose: *verbose}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTSTP)
	defer signal.Stop(sigs)
	tick := time.NewTicker(attachPoll)
	defer tick.Stop()
	for first := true; ; first = false {
		// Read the status first: output written before the job's end is
		// then read below, before attach returns.
		st, err := jobstate.ReadStatus(*stateDir, jobDir)
		if err != nil {
			fmt.Fprintf(stderr, "ftlaunch attach: %v\n", err)
			return 1
		}
		if first {
			attachFirstLine(stderr, st, jobDir)
		}
		f.Poll()
		if st.State != "running" {
			f.Flush()
			if st.ExitCode == nil {
				fmt.Fprintf(stderr, "ftlaunch attach: job %s ended without a final status (its roots were lost)\n", st.Job)
				return 1
			}
			if *st.ExitCode != 0 && st.UserSignal == "" {
				writeFailure(stderr, st) // (the user's signal is no failure)
			}
			return *st.ExitCode
		}
		select {
		case <-tick.C: // polling files another process writes
		case sig := <-sigs:
			if sig == syscall.SIGTSTP {
				fmt.Fprintf(stderr, "ftlaunch attach: detached; job %s goes on (follow it again: ftlaunch attach %s; end it: ftlaunch cancel %s)\n", st.Job, st.Job, st.Job)
				return 0
			}
			fmt.Fprintf(stderr, "ftlaunch attach: SIGINT: ending job %s (SIGINT to every rank, then SIGTERM, SIGKILL; Ctrl-C again kills at once)\n", st.Job)
			o := jobctl.Options{Reach: 5 * time.Second, From: jobctl.Caller("ftlaunch attach (Ctrl-C)")}
			if _, _, err := jobctl.Kill(context.Background(), "", jobDir, syscall.SIGINT, o); err != nil {
				fmt.Fprintf(stderr, "ftlaunch attach: %v\n", err)
			}
		}
	}
}

// attachFirstLine says, in one line, that the job has ended or that its
// front-end is alive (it prints the output, not attach).
func attachFirstLine(w io.Writer, st *jobstate.Status, jobDir string) {
	switch {
	case st.State == "finished":
		fmt.Fprintf(w, "ftlaunch attach: job %s has ended: %s, exit code %d\n", st.Job, st.Word(), *st.ExitCode)
	case st.State != "running":
		fmt.Fprintf(w, "ftlaunch attach: job %s has ended without a final status (%s)\n", st.Job, st.State)
	default:
		if host, pid, ok := jobctl.FrontEnd(jobDir); ok {
			fmt.Fprintf(w, "ftlaunch attach: job %s: its front-end (pid %d on %s) is alive and prints its output; attach shows it once the front-end is gone\n", st.Job, pid, host)
		}
	}
}

// writeFailure prints why a failed job failed, as its root said it.
func writeFailure(w io.Writer, st *jobstate.Status) {
	for _, f := range st.Failures {
		fmt.Fprintf(w, "ftlaunch: %s\n", f)
	}
	if len(st.Failures) == 0 {
		fmt.Fprintf(w, "ftlaunch: job %s ended with exit code %d: %s\n", st.Job, *st.ExitCode, st.Message)
	}
}
